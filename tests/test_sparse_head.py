"""The sparse masked-LM head (mlm/sparse_head.py, mlm/prediction_slots.py) against the dense head, in process, on
real shards: the same masks, the same loss and hits, the same gradients, the same variables."""

import numpy as np
import pytest

from conftest import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "made-by-0.2"
ROWS, LENGTH = 16, 32  # the fixture's shards hold 32-token rows


@pytest.fixture(scope="module")
def tokenizer():
    from mlm_tpu.tokenizer.load import load_tokenizer

    return load_tokenizer(str(FIXTURES / "tokenizer"))


@pytest.fixture(scope="module")
def rows(tokenizer):
    """The first ROWS rows of the fixture's validation shards, unmasked."""
    from mlm_tpu.mlm.shard_kind import MASKED_LM
    from mlm_tpu.shards.pipeline import evaluation_batches
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import shard_kinds

    shards = find_shards(str(FIXTURES / "shards" / "validation"), shard_kinds(), MASKED_LM.name,
                         MASKED_LM.features(LENGTH))
    return next(iter(evaluation_batches(shards, ROWS, None, len(tokenizer))))


def masked(tokenizer, rows, probability, slots=None, batch_number=7):
    from mlm_tpu.mlm.masking import MlmMasker

    return MlmMasker(tokenizer, probability, seed=3, prediction_slots=slots)(batch_number, rows)


def tiny_model(tokenizer, seed=0):
    import tf_keras as keras
    from transformers import RobertaConfig, TFRobertaForMaskedLM

    keras.utils.set_random_seed(seed)
    model = TFRobertaForMaskedLM(RobertaConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        pad_token_id=tokenizer.pad_token_id, max_position_embeddings=LENGTH + tokenizer.pad_token_id + 1,
        type_vocab_size=1))
    model.build_in_name_scope()
    return model


def dense_labels(sparse):
    """The slot labels put back at their positions: [rows, length], -100 elsewhere."""
    from mlm_tpu.mlm.prediction_slots import MASKED_POSITIONS

    labels = np.full(sparse["input_ids"].shape, -100)
    for row, (positions, values) in enumerate(zip(sparse[MASKED_POSITIONS].numpy(), sparse["labels"].numpy())):
        labels[row, positions[values != -100]] = values[values != -100]
    return labels


def test_the_slots_hold_every_mask_and_the_loss_and_logits_are_the_dense_heads(tokenizer, rows):
    from mlm_tpu.mlm.prediction_slots import MASKED_POSITIONS, default_slots
    from mlm_tpu.mlm.sparse_head import sparse_outputs
    from mlm_tpu.training.task import TARGETS_LEFT_OUT

    slots = default_slots(0.15, LENGTH)
    dense, sparse = masked(tokenizer, rows, 0.15), masked(tokenizer, rows, 0.15, slots)
    assert sparse["labels"].shape == sparse[MASKED_POSITIONS].shape == (ROWS, slots)
    assert np.array_equal(sparse["input_ids"], dense["input_ids"])  # the masks of the dense head, none left out
    assert np.array_equal(dense_labels(sparse), dense["labels"]) and not np.any(sparse[TARGETS_LEFT_OUT])
    positions = sparse[MASKED_POSITIONS].numpy()
    empty = sparse["labels"].numpy() == -100
    assert np.all(positions[empty] == 0) and empty.any()  # padding slots point at position 0 and weigh nothing

    model = tiny_model(tokenizer)
    dense_out = model(**dense, training=False)
    sparse_out = sparse_outputs(model, sparse, training=False)
    assert abs(float(sparse_out.loss[0]) - float(dense_out.loss[0])) < 1e-6
    at_positions = np.take_along_axis(dense_out.logits.numpy(), positions[..., None], axis=1)
    np.testing.assert_allclose(sparse_out.logits.numpy()[~empty], at_positions[~empty], atol=1e-5)


def test_a_row_with_more_masks_than_slots_keeps_a_random_few_and_unmasks_the_others(tokenizer, rows):
    from mlm_tpu.mlm.prediction_slots import MASKED_POSITIONS
    from mlm_tpu.training.task import TARGETS_LEFT_OUT

    dense, sparse = masked(tokenizer, rows, 0.5), masked(tokenizer, rows, 0.5, slots=3)
    masks = (dense["labels"].numpy() != -100).sum(axis=1)
    kept = (sparse["labels"].numpy() != -100).sum(axis=1)
    assert np.array_equal(kept, np.minimum(masks, 3)) and masks.max() > 3
    assert np.array_equal(sparse[TARGETS_LEFT_OUT].numpy()[:, 0], masks - kept)
    labels = dense_labels(sparse)
    original, fed = rows["input_ids"].numpy(), sparse["input_ids"].numpy()
    assert np.all(fed[labels == -100] == original[labels == -100])  # no masked position goes unscored
    assert np.all(labels[labels != -100] == original[labels != -100])
    assert np.all(np.diff(sparse[MASKED_POSITIONS].numpy()[kept == 3], axis=1) > 0)  # in order
    first_three = [np.flatnonzero(row != -100)[:3] for row in dense["labels"].numpy()]
    assert any(not np.array_equal(np.flatnonzero(row != -100), first)  # chosen at random, not the row's first
               for row, first, count in zip(labels, first_three, masks) if count > 3)
    again = masked(tokenizer, rows, 0.5, slots=3)
    assert all(np.array_equal(again[name], sparse[name]) for name in sparse)  # drawn from (seed, batch number)


def train_one_step(model, batch, task):
    import tensorflow as tf
    import tf_keras as keras

    from mlm_tpu.shards.layout import BatchLayout
    from mlm_tpu.training.dropout import key_dropout_by_step
    from mlm_tpu.training.step import make_train_steps

    strategy = tf.distribute.get_strategy()
    steps = make_train_steps(strategy, model, keras.optimizers.SGD(0.5),
                             key_dropout_by_step(model, 0, BatchLayout(1, ROWS, 1, 1)), task=task)
    dataset = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(batch).repeat())
    return steps(iter(dataset), tf.constant(1)).numpy()[0]


def test_a_training_step_counts_the_same_loss_and_hits_and_trains_the_same_variables_as_dense(tokenizer, rows):
    from mlm_tpu.mlm.prediction_slots import default_slots
    from mlm_tpu.mlm.task import MaskedLmTask

    task = MaskedLmTask("mlm")
    dense_model, sparse_model = tiny_model(tokenizer), tiny_model(tokenizer)  # same seed: same weights, dropout on
    start = [variable.numpy() for variable in sparse_model.variables]
    dense_result = train_one_step(dense_model, masked(tokenizer, rows, 0.3), task)
    sparse_result = train_one_step(sparse_model, masked(tokenizer, rows, 0.3, default_slots(0.3, LENGTH)), task)
    np.testing.assert_allclose(sparse_result[0], dense_result[0], rtol=1e-6)  # loss
    assert list(sparse_result[1:]) == list(dense_result[1:]) and dense_result[2] > 0  # hits, scored, 0 left out

    def names(model):
        return [variable.name.split("/", 1)[1] for variable in model.variables]

    assert names(sparse_model) == names(dense_model)  # what the saved folder holds
    for trained, reference in zip(sparse_model.trainable_variables, dense_model.trainable_variables):
        np.testing.assert_allclose(trained.numpy(), reference.numpy(), atol=2e-6, err_msg=trained.name)
    moved = {name for name, trained, before in zip(names(sparse_model), sparse_model.variables, start)
             if not np.array_equal(trained.numpy(), before)}
    assert {"lm_head/dense/kernel:0", "lm_head/bias:0", "roberta/embeddings/word_embeddings/weight:0"} <= moved


TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
            max_position_embeddings=64, pad_token_id=1)
SHAPES = {"albert": dict(embedding_size=16), "electra": dict(embedding_size=16), "convbert": dict(embedding_size=16),
          "mobilebert": dict(embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16),
          "funnel": dict(block_sizes=[1, 1], num_hidden_layers=None)}  # beside TINY, where a family differs


def tiny_masked_lm(model_type: str):
    """A TF masked LM of `model_type`, random weights, of a tiny shape."""
    from transformers import AutoConfig, TFAutoModelForMaskedLM

    values = {name: value for name, value in {**TINY, **SHAPES.get(model_type, {})}.items() if value is not None}
    return TFAutoModelForMaskedLM.from_config(AutoConfig.for_model(model_type, **values))


def test_the_sparse_head_finds_the_head_of_every_family_transformers_tf_classes_train():
    """At any positions, the sparse head's logits are the dense model's, for every masked-LM family that computes a
    masked-LM loss in TensorFlow (XLM's and FlauBERT's take no labels: --task mlm refuses them)."""
    import tensorflow as tf
    from transformers.models.auto.modeling_tf_auto import TF_MODEL_FOR_MASKED_LM_MAPPING_NAMES

    from mlm_tpu.mlm.presets import WITHOUT_LOSS
    from mlm_tpu.mlm.sparse_head import logits_at

    input_ids = tf.constant(np.random.default_rng(0).integers(5, 99, (2, 16)), tf.int32)
    attention_mask = tf.constant([[1] * 16, [1] * 12 + [0] * 4])
    positions = tf.constant([[1, 3, 7], [0, 2, 11]])
    families = [name for name in TF_MODEL_FOR_MASKED_LM_MAPPING_NAMES if name not in WITHOUT_LOSS]
    assert {"bert", "roberta", "xlm-roberta", "distilbert", "albert", "deberta-v2", "electra"} <= set(families)
    for model_type in families:
        model = tiny_masked_lm(model_type)
        dense = model(input_ids=input_ids, attention_mask=attention_mask, training=False).logits
        sparse = logits_at(model, input_ids, attention_mask, positions, training=False)
        assert np.abs(sparse - tf.gather(dense, positions, batch_dims=1)).max() < 1e-5, model_type


def test_a_family_whose_head_is_unknown_trains_with_the_dense_head_said_in_one_line(monkeypatch, capsys, tokenizer,
                                                                                     rows):
    """Where the sparse head does not know a family's head, the run says so once and masks and runs as
    --dense-mlm-head does: labels at every position, the whole model."""
    from types import SimpleNamespace

    from mlm_tpu.mlm import sparse_head
    from mlm_tpu.mlm.prediction_slots import MASKED_POSITIONS
    from mlm_tpu.tasks import make_task
    from mlm_tpu.training.flops import masked_lm_cost

    task = make_task("mlm")
    task.prediction_slots = 9  # what prepare() planned
    monkeypatch.setattr(sparse_head, "HEADS", ())  # RoBERTa's lm_head unknown, as a future family's would be
    config = SimpleNamespace(model_name_or_path=None, model_config="tiny", config_overrides=None)
    model = task.build_model(config, tokenizer, SimpleNamespace(length=LENGTH))
    lines = [line for line in capsys.readouterr().err.splitlines() if "Masked-LM head" in line]
    assert lines == ["Masked-LM head: dense, at every position, after all: the sparse head does not know where the "
                     "head of a roberta model is"]
    assert task.prediction_slots is None
    assert task.example_cost(model, SimpleNamespace(length=LENGTH)) == masked_lm_cost(model.config, LENGTH, LENGTH)
    batch = task.make_transform(tokenizer)(3)(0, rows)
    assert MASKED_POSITIONS not in batch and batch["labels"].shape == (ROWS, LENGTH)
    assert task.training_outputs(model, batch, training=False).logits.shape == (ROWS, LENGTH, len(tokenizer))
