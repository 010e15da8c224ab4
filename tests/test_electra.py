"""`--task electra`: a generator and a discriminator pretrained together by replaced-token detection.

The quick tests build tiny models in this process: the embeddings are one set of variables, replacements follow the
generator's softmax from draws keyed like the masks, the generator's sparse head gives the dense head's samples and
loss, the loss of two halves of a batch weighted by their tokens is the whole batch's (what makes two replicas train as one: the masks and draws are the same on any replicas, as
tests/test_resume.py and test_evaluate.py show for the masks made beside them), both models are saved together or
not at all, and the encoder tasks start from the saved discriminator. The slow ones train for real, masking whole
words (--masking whole-word; token masking, the default, is the quick tests' and the masked LM's): a run killed
(SIGKILL) and started again ends bit-identical to the uninterrupted run; the discriminator beats calling every token
original, and the log counts tokens/s and both models' FLOPs; both folders load in transformers 5; inspect shows the
whole words masked and the replaced tokens, and export writes both folders."""

import contextlib
import io
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest

from conftest import MAX_LENGTH
from test_export import pytorch_python
from test_resume import resumed_at, step_losses, train_and_kill_after_backup, weights
from test_sparse_head import LENGTH as SPARSE_LENGTH, rows, tokenizer  # noqa: F401 (fixtures: rows of real shards)

ROBERTA_INPUT = "The game was released in Japan ."


def tiny_pretrainer(hidden_dropout_prob=0.1):
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    from transformers import ElectraConfig

    from mlm_tpu.electra.model import ElectraPretrainer
    from mlm_tpu.electra.presets import generator_config

    discriminator = ElectraConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                                  hidden_dropout_prob=hidden_dropout_prob)
    return ElectraPretrainer.from_configs(generator_config(discriminator, 0.5), discriminator, 50.0)


def test_the_presets_have_the_papers_shapes_and_the_generator_its_share():
    from mlm_tpu.electra.presets import GENERATOR_SIZE_RATIOS, PRESETS, generator_config, generator_size_ratio
    from transformers import ElectraConfig

    shapes = {name: (preset["hidden_size"], preset["num_hidden_layers"], preset["num_attention_heads"],
                     preset["embedding_size"]) for name, preset in PRESETS.items()}
    assert (shapes["electra-small"], shapes["electra-base"], shapes["electra-large"]) == (
        (256, 12, 4, 128), (768, 12, 12, 768), (1024, 24, 16, 1024))
    generators = {name: generator_config(ElectraConfig(**PRESETS[name]), GENERATOR_SIZE_RATIOS[name])
                  for name in ("electra-small", "electra-base", "electra-large")}
    # google-research/electra's: hidden x ratio, 4x that in the feed-forward, a head per 64, the same layers
    assert {name: (config.hidden_size, config.intermediate_size, config.num_attention_heads, config.num_hidden_layers,
                   config.embedding_size) for name, config in generators.items()} == {
        "electra-small": (64, 256, 1, 12, 128), "electra-base": (256, 1024, 4, 12, 768),
        "electra-large": (256, 1024, 4, 24, 1024)}
    assert generator_config(ElectraConfig(hidden_size=768), 200 / 768).num_attention_heads == 2  # divides 200 (not 3)
    assert generator_size_ratio("electra-base", 0.5) == 0.5 and generator_size_ratio("my/config.json", None) == 0.25


def test_the_generator_reads_and_predicts_through_the_discriminators_embeddings():
    model = tiny_pretrainer()
    generator, discriminator = model.generator, model.discriminator
    shared = {id(weight) for weight in discriminator.electra.embeddings.weights}
    assert generator.electra.embeddings is discriminator.electra.embeddings
    assert generator.generator_lm_head.input_embeddings.weight is discriminator.electra.embeddings.weight
    assert len(shared) == 5  # token, position and type embeddings, and their LayerNorm
    both = {id(weight) for weight in generator.weights} & {id(weight) for weight in discriminator.weights}
    assert both == shared
    assert len(model.trainable_variables) == len(generator.trainable_variables) + len(
        discriminator.trainable_variables) - 5
    # each model takes the shared embeddings of 16 to its own width: 32 for the discriminator, the generator's 16 as is
    assert discriminator.electra.embeddings_project.kernel.shape == (16, 32)
    assert not hasattr(generator.electra, "embeddings_project")


def test_replacements_follow_the_softmax_and_draws_are_keyed_by_seed_and_batch(wikitext_tokenizer):
    import tensorflow as tf

    from mlm_tpu.electra.replacements import REPLACEMENT_DRAWS, sample_from_draws, with_replacement_draws
    from mlm_tpu.mlm.masking import MlmMasker
    from mlm_tpu.tokenizer.load import load_tokenizer

    probabilities = np.array([0.5, 0.0, 0.2, 0.3], np.float32)
    logits = tf.math.log(tf.constant(probabilities))[None, None, :] * tf.ones([1, 20000, 1])
    draws = tf.random.stateless_uniform([1, 20000], seed=[1, 2])
    counts = np.bincount(sample_from_draws(logits, draws).numpy().ravel(), minlength=4) / 20000
    np.testing.assert_allclose(counts, probabilities, atol=0.01)
    assert sample_from_draws(logits[:, :2], tf.constant([[0.0, 0.9999]])).numpy().tolist() == [[0, 3]]

    tokenizer = load_tokenizer(str(wikitext_tokenizer[0]))
    batch = {"input_ids": tf.constant(tokenizer(["a test of the draws"] * 4, padding="max_length", max_length=16)[
        "input_ids"], tf.int32), "attention_mask": tf.ones([4, 16], tf.int32)}

    def transformed(seed, batch_number):
        return with_replacement_draws(MlmMasker(tokenizer, 0.3, seed), seed)(tf.constant(batch_number), batch)

    first = transformed(7, 3)
    masked = MlmMasker(tokenizer, 0.3, 7)(tf.constant(3), batch)
    assert all(np.array_equal(first[name], masked[name]) for name in masked)  # the masks are the masked LM's
    assert np.array_equal(first[REPLACEMENT_DRAWS], transformed(7, 3)[REPLACEMENT_DRAWS])
    for other in (transformed(8, 3), transformed(7, 4)):
        assert not np.array_equal(first[REPLACEMENT_DRAWS], other[REPLACEMENT_DRAWS])


def test_two_halves_weighted_by_their_tokens_make_the_whole_batchs_loss_gradients_and_counts():
    """What each replica computes, weighted as the trainer weighs it (task.loss_weights), adds up to what one replica
    computes on the whole batch: so two replicas train as one, within rounding."""
    import tensorflow as tf

    from mlm_tpu.electra.task import ElectraTask

    model, task = tiny_pretrainer(hidden_dropout_prob=0.0), ElectraTask("electra")
    rng = np.random.default_rng(0)
    lengths = np.array([16, 12, 5, 9])  # halves of different real and masked token counts
    attention = (np.arange(16)[None, :] < lengths[:, None]).astype(np.int32)
    labels = np.where((rng.random((4, 16)) < 0.3) & (attention > 0), rng.integers(5, 300, (4, 16)), -100)
    batch = {"input_ids": tf.constant(np.where(labels >= 0, 4, rng.integers(5, 300, (4, 16))) * attention, tf.int32),
             "attention_mask": tf.constant(attention), "labels": tf.constant(labels, tf.int32),
             "replacement_draws": tf.random.stateless_uniform([4, 16], seed=[3, 4])}

    def weighted(part, total_weights):
        with tf.GradientTape() as tape:
            outputs = task.training_outputs(model, part, False)
            loss = tf.reduce_sum(outputs.loss * task.loss_weights(part) / total_weights)
        return loss, tape.gradient(loss, model.trainable_variables), task.training_counts(outputs, part), outputs

    total = task.loss_weights(batch)
    whole, whole_gradients, whole_counts, outputs = weighted(batch, total)
    halves = [weighted({name: values[rows] for name, values in batch.items()}, total)
              for rows in (slice(0, 2), slice(2, 4))]
    np.testing.assert_allclose(halves[0][0] + halves[1][0], whole, rtol=1e-6)
    dense = [[tf.convert_to_tensor(gradient).numpy() for gradient in gradients]
             for gradients in (whole_gradients, halves[0][1], halves[1][1])]
    scale = max(np.abs(gradient).max() for gradient in dense[0])
    for gradient, first, second in zip(*dense):
        np.testing.assert_allclose(first + second, gradient, atol=1e-5 * scale)  # float32 rounding
    assert [float(a + b) for a, b in zip(halves[0][2], halves[1][2])] == [float(count) for count in whole_counts]
    assert float(whole_counts[1]) == lengths.sum()  # the discriminator's accuracy counts every real token

    # the discriminator's labels: replaced only where masked and where the sample is not the original token
    masked = labels >= 0
    replaced, read = outputs.replaced.numpy(), outputs.discriminator_input_ids.numpy()
    originals = np.where(masked, labels, batch["input_ids"].numpy())
    assert not (replaced & ~masked).any() and replaced.any()
    assert np.array_equal(replaced, read != originals)


def test_the_generators_sparse_head_samples_at_its_slots_and_gives_the_dense_heads_loss(tokenizer, rows):
    """The generator's head at the sparse head's prediction slots (the default) against at every position
    (--dense-mlm-head), on the same masks and draws: the same samples put in the discriminator's input, the same loss
    terms within float rounding, the same counts and gradients. With too few slots, the masks left out stay
    original tokens, never replaced."""
    import tensorflow as tf

    from mlm_tpu.electra.replacements import with_replacement_draws
    from mlm_tpu.electra.task import ElectraTask
    from mlm_tpu.mlm.masking import MlmMasker
    from mlm_tpu.mlm.prediction_slots import MASKED_POSITIONS, default_slots
    from mlm_tpu.training.task import TARGETS_LEFT_OUT

    model, task = tiny_pretrainer(hidden_dropout_prob=0.0), ElectraTask("electra")

    def batch(slots):
        return with_replacement_draws(MlmMasker(tokenizer, 0.3, 3, slots), 3)(tf.constant(7), rows)

    def run(batch):
        with tf.GradientTape() as tape:
            outputs = task.training_outputs(model, batch, False)  # no dropout: the two runs' must not differ
            loss = tf.reduce_sum(outputs.loss)
        gradients = [tf.convert_to_tensor(gradient).numpy() for gradient in
                     tape.gradient(loss, model.trainable_variables)]
        return outputs, gradients, [float(count) for count in task.training_counts(outputs, batch)]

    dense, sparse = batch(None), batch(default_slots(0.3, SPARSE_LENGTH))
    assert sparse[MASKED_POSITIONS].shape[1] < SPARSE_LENGTH and int(tf.reduce_sum(sparse[TARGETS_LEFT_OUT])) == 0
    (dense_outputs, dense_gradients, dense_counts), (sparse_outputs, sparse_gradients, sparse_counts) = map(
        run, (dense, sparse))
    assert sparse_outputs.generator_logits.shape[1] == sparse[MASKED_POSITIONS].shape[1]
    np.testing.assert_allclose(sparse_outputs.loss, dense_outputs.loss, rtol=1e-6)
    assert np.array_equal(sparse_outputs.discriminator_input_ids, dense_outputs.discriminator_input_ids)
    assert np.array_equal(sparse_outputs.replaced, dense_outputs.replaced) and dense_outputs.replaced.numpy().any()
    assert sparse_counts == dense_counts and np.array_equal(task.loss_weights(sparse), task.loss_weights(dense))
    scale = max(np.abs(gradient).max() for gradient in dense_gradients)
    for sparse_gradient, dense_gradient in zip(sparse_gradients, dense_gradients):
        np.testing.assert_allclose(sparse_gradient, dense_gradient, atol=1e-5 * scale)

    few = batch(2)  # rows of more masks keep 2, the others back to their tokens: only slots are sampled
    outputs = task.training_outputs(model, few, False)
    assert int(tf.reduce_sum(few[TARGETS_LEFT_OUT])) > 0
    slots = np.zeros(few["input_ids"].shape, bool)
    for row, (positions, labels) in enumerate(zip(few[MASKED_POSITIONS].numpy(), few["labels"].numpy())):
        slots[row, positions[labels != -100]] = True
    read = outputs.discriminator_input_ids.numpy()
    assert np.array_equal(read[~slots], few["input_ids"].numpy()[~slots]) and not outputs.replaced.numpy()[~slots].any()


def electra_counts(real_tokens, probability, slots=None):
    """google-research/electra's pretrain_helpers.mask: num_to_predict = max(1, min(N, round(num_tokens x
    mask_prob))), the product in float32 and rounded halves to even, as its TensorFlow computes it."""
    product = np.asarray(real_tokens, np.float32) * np.float32(probability)
    counts = np.round(product).astype(np.int64)
    return np.maximum(1, counts if slots is None else np.minimum(slots, counts))


def test_electra_masks_its_generators_input_as_electra_does(wikitext_tokenizer, wikitext_path):
    """On 1,000 rows of real text, of every real length from 5 to 64 tokens (the rest padding), --task electra's
    default masking (what its transform feeds the generator) puts the mask token at 85% of the chosen positions
    (within 1%), a random token at none, and chooses exactly ELECTRA's count in every row, with the sparse head's
    default slots and with the dense head; --mask-replace-prob and --random-replace-prob still win, and --task mlm
    keeps 🤗's 80/10/10, each token on its own."""
    from types import SimpleNamespace

    import tensorflow as tf
    from test_masking import masked_positions, packed, paragraphs

    from mlm_tpu.errors import UserError
    from mlm_tpu.tasks import TrainingConfig, make_task
    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(wikitext_tokenizer[0]))
    rows, _ = packed(tokenizer, paragraphs(wikitext_path, 1500), length=MAX_LENGTH)
    rows = rows[:1000]
    assert len(rows) == 1000
    real = 5 + np.arange(len(rows)) % (MAX_LENGTH - 4)  # 5 ... 64 real tokens, each row's own
    attention = (np.arange(MAX_LENGTH)[None] < real[:, None]).astype(np.int32)
    rows = np.where(attention > 0, rows, tokenizer.pad_token_id)
    batch = {"input_ids": tf.constant(rows, tf.int32), "attention_mask": tf.constant(attention)}

    def masked_by(task_name, dense=False, **settings):
        task = make_task(task_name)
        config = TrainingConfig("t", "o", task=task_name, dense_mlm_head=dense, **settings)
        task.check(config)
        task.prepare(config, tokenizer, SimpleNamespace(length=MAX_LENGTH), None)
        return task.make_transform(tokenizer)(11)(tf.constant(5), batch), task.prediction_slots

    def kinds(masked):
        chosen = masked_positions(masked)
        inputs = masked["input_ids"].numpy()
        return chosen, (inputs == tokenizer.mask_token_id)[chosen], ((inputs != rows) & (inputs !=
                                                                     tokenizer.mask_token_id))[chosen]

    for dense in (False, True):
        masked, slots = masked_by("electra", dense)
        chosen, as_mask, as_random = kinds(masked)
        assert as_mask.mean() == pytest.approx(0.85, abs=0.01) and not as_random.any(), dense
        assert np.array_equal(chosen.sum(axis=1), electra_counts(real, 0.15, slots)), dense
        assert not (chosen & (attention == 0)).any() and not np.isin(rows[chosen], tokenizer.all_special_ids).any()
    assert slots is None and chosen.sum(axis=1).min() == 1  # the shortest rows still mask one
    _, slots = masked_by("electra")
    assert slots == electra_counts([MAX_LENGTH], 0.15)[0]  # a full row's count: no row masks more

    with pytest.raises(UserError, match=r"^--mask-replace-prob 0.85 \(its default here\) and "
                                         "--random-replace-prob 0.2 add up to more than 1"):
        masked_by("electra", random_replace_prob=0.2)
    masked, slots = masked_by("electra", mask_replace_prob=0.8, random_replace_prob=0.1)  # the flags win
    chosen, as_mask, as_random = kinds(masked)
    assert as_mask.mean() == pytest.approx(0.8, abs=0.015) and as_random.mean() == pytest.approx(0.1, abs=0.01)
    assert np.array_equal(chosen.sum(axis=1), electra_counts(real, 0.15, slots))
    masked, _ = masked_by("mlm", dense=True)  # the masked LM: 🤗's, each token on its own, 80/10/10
    chosen, as_mask, as_random = kinds(masked)
    assert as_mask.mean() == pytest.approx(0.8, abs=0.015) and as_random.mean() == pytest.approx(0.1, abs=0.01)
    assert (chosen.sum(axis=1) != electra_counts(real, 0.15)).mean() > 0.5


def test_a_run_that_left_the_split_unset_resumes_only_with_the_split_it_used():
    """Runs record the replacement split they mask with (training_args.json, the backup's settings); a backup of
    before, which recorded it unset (None) and so masked 80/10/10, resumes as --task mlm (80/10/10 still), but as
    --task electra (now 85/15/0) only given that split again, or --allow-changed-settings: never silently changed."""
    from dataclasses import replace

    from mlm_tpu.errors import UserError
    from mlm_tpu.tasks import TrainingConfig, make_task
    from mlm_tpu.training.run_settings import check_resumed_settings, result_settings

    def settings(config):
        return result_settings(config, 16, ["shard-0.tfrecord"], [100])

    for name, split in (("mlm", (0.8, 0.1)), ("electra", (0.85, 0.0))):
        config = TrainingConfig("t", "o", task=name)
        recorded = settings(make_task(name).with_defaults(config))
        assert (recorded["mask_replace_prob"], recorded["random_replace_prob"]) == split
        assert check_resumed_settings(config, recorded, recorded, 4, "o", []) == []
    electra, before = make_task("electra"), settings(TrainingConfig("t", "o", task="electra"))  # the split None
    now = electra.with_defaults(TrainingConfig("t", "o", task="electra"))
    with pytest.raises(UserError, match=r"--mask-replace-prob was 0.8 .* is 0.85 now \(and --random-replace-prob\)"):
        check_resumed_settings(now, before, settings(now), 4, "o", [])
    given = electra.with_defaults(replace(now, mask_replace_prob=0.8, random_replace_prob=0.1))
    assert check_resumed_settings(given, before, settings(given), 4, "o", []) == []
    mlm = make_task("mlm").with_defaults(TrainingConfig("t", "o", task="mlm"))
    assert check_resumed_settings(mlm, settings(TrainingConfig("t", "o", task="mlm")), settings(mlm), 4, "o", []) == []


def save_as_trained(folder, model, tokenizer, epoch=1):
    """Save an ElectraPretrainer as the trainer saves it at an epoch's end."""
    from mlm_tpu.electra.task import ElectraTask

    task = ElectraTask("electra")
    facts = task.card_facts(model, tokenizer, epoch=epoch)
    task.save_model(str(folder), model, tokenizer, facts, {"training_args.json": {"epoch": epoch}}, "run")


def test_a_save_killed_while_writing_the_generator_leaves_both_models_from_the_save_before(
        wikitext_tokenizer, tmp_path, monkeypatch):
    """The discriminator and generator/ are written into one staging folder, then published: a save that dies
    writing the generator has published nothing, so the two are never one save apart; the next save publishes both,
    each folder recorded as mlm_tpu's."""
    import tensorflow as tf
    from safetensors.numpy import load_file
    from transformers import TFElectraForMaskedLM

    from mlm_tpu.output_dir import Record
    from mlm_tpu.tokenizer.load import load_tokenizer

    model, tokenizer, folder = tiny_pretrainer(), load_tokenizer(str(wikitext_tokenizer[0])), tmp_path / "run"

    def save(epoch):
        save_as_trained(folder, model, tokenizer, epoch)

    def contents():
        return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}

    def train_a_step():  # new weights in both models, the shared embeddings too
        for weight in model.trainable_variables:
            weight.assign_add(tf.fill(weight.shape, 0.01))

    save(1)
    first = contents()
    assert {"model.safetensors", "generator/model.safetensors", "generator/README.md"} <= set(first)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed while writing the generator")

    train_a_step()
    with monkeypatch.context() as patch:
        patch.setattr(TFElectraForMaskedLM, "save_pretrained", killed)
        with pytest.raises(KeyboardInterrupt):
            save(2)
    assert contents() == first and sorted(os.listdir(tmp_path)) == ["run"]  # nothing published, no staging left

    save(2)
    second = contents()
    assert all(second[name] != first[name] for name in ("model.safetensors", "generator/model.safetensors",
                                                        "training_args.json"))
    assert Record(str(folder)).unrecognised() == [] and Record(str(folder / "generator")).unrecognised() == []
    embeddings = "electra.embeddings.word_embeddings.weight"  # shared: the same in both when from the same save
    assert np.array_equal(load_file(folder / "model.safetensors")[embeddings],
                          load_file(folder / "generator" / "model.safetensors")[embeddings])


def test_the_encoder_tasks_start_from_the_saved_discriminator_with_every_weight_of_its_encoder(
        wikitext_tokenizer, tmp_path):
    """`--task sequence-classification | token-classification --model-name-or-path <electra output-dir>`: the
    encoder line's checks take the discriminator, and its loader finds every encoder weight there, only the head new."""
    from transformers import AutoConfig

    from mlm_tpu.model_folder.configs import read_model_config
    from mlm_tpu.model_folder.loading import load_with_new_head
    from mlm_tpu.tasks import make_task
    from mlm_tpu.tokenizer.load import load_tokenizer

    pretrained = tiny_pretrainer()
    save_as_trained(tmp_path / "run", pretrained, load_tokenizer(str(wikitext_tokenizer[0])))
    folder = str(tmp_path / "run")
    trained = {weight.name.split("/", 1)[1]: weight.numpy() for weight in pretrained.discriminator.electra.weights}
    for name in ("sequence-classification", "token-classification"):
        task = make_task(name)
        task.check_base(read_model_config(folder, "--model-name-or-path"), f"--model-name-or-path {folder}")
        model, new = load_with_new_head(folder, task.head_class, AutoConfig.from_pretrained(folder, num_labels=3),
                                        "--model-name-or-path")
        assert new and all(weight.split(".")[0] == "classifier" for weight in new), new  # the head alone
        loaded = {weight.name.split("/", 1)[1]: weight.numpy() for weight in model.electra.weights}
        assert loaded.keys() == trained.keys() and len(loaded) > 10
        assert all(np.array_equal(loaded[weight], trained[weight]) for weight in trained)


# --- end to end: --task electra trained for real ---

ELECTRA_RUN = dict(task="electra", max_length=MAX_LENGTH, model_config="electra-tiny", learning_rate=3e-3,
                   per_replica_batch_size=16, max_steps=24, steps_per_execution=2, backup_steps=4, logging_steps=1,
                   masking="whole-word")
# a tiny ELECTRA (dropout on), 24 steps of 16 examples, two per execution, a backup every four; whole words masked


def train_here(shards, tokenizer, output_dir: Path, **more) -> Tuple[object, str]:
    """(TrainingResult, log) of ELECTRA_RUN trained in this process (mlm_tpu.train_model), which has TensorFlow
    loaded already: a third of what `python train.py` costs."""
    import mlm_tpu

    with contextlib.redirect_stderr(io.StringIO()) as log:
        result = mlm_tpu.train_model(str(shards / "validation"), str(output_dir), tokenizer=str(tokenizer),
                                     **ELECTRA_RUN, **more)
    return result, log.getvalue()


@pytest.fixture(scope="module")
def electra_runs(shards, wikitext_tokenizer, tmp_path_factory):
    """The uninterrupted run (validated), and a run killed (`python train.py`, SIGKILL) after its backup of step 4,
    then started again; (folder, the uninterrupted run's log)."""
    folder = tmp_path_factory.mktemp("electra")
    tokenizer = wikitext_tokenizer[0]
    flags = [item for name, value in ELECTRA_RUN.items() for item in (f"--{name.replace('_', '-')}", value)]
    train_and_kill_after_backup([*flags, "--train-dataset", shards / "validation", "--tokenizer", tokenizer,
                                 "--output-dir", folder / "resumed"], 4, folder / "killed.log")
    _, resumed = train_here(shards, tokenizer, folder / "resumed")
    assert resumed_at(resumed) >= 4, resumed[-3000:]
    _, uninterrupted = train_here(shards, tokenizer, folder / "uninterrupted", eval_dataset=str(shards / "validation"))
    return folder, uninterrupted


@pytest.mark.slow  # trains (the module's runs)
def test_a_run_killed_and_started_again_ends_bit_identical_to_the_uninterrupted_one(electra_runs):
    folder, _ = electra_runs

    def by_name(folder):  # without the Keras model's own name, which a second model in one process numbers (_1)
        return {re.sub(r"^(\w+)/tf_electra_for_\w+?(_\d+)?/", r"\1/", name): value
                for name, value in weights(folder).items()}

    for model in ("", "generator"):  # the discriminator, and the generator in its own folder
        expected, got = by_name(folder / "uninterrupted" / model), by_name(folder / "resumed" / model)
        assert expected.keys() == got.keys() and len(expected) > 30
        for name, value in expected.items():
            assert np.array_equal(value, got[name]), name
    assert step_losses(folder / "resumed") == step_losses(folder / "uninterrupted")
    assert not (folder / "resumed" / "backup").exists()


@pytest.mark.slow  # trains (the module's runs)
def test_the_discriminator_learns_to_tell_replaced_tokens_better_than_calling_all_original(electra_runs):
    folder, log = electra_runs
    assert "24 steps in all" in log and "discriminator accuracy" in log
    # tokens/s and the FLOPs of both models, the generator's head at the sparse head's slots (10 of the 64 positions:
    # whole-word masking's budget of a full row, never exceeded)
    from transformers import AutoConfig

    from mlm_tpu.training.flops import electra_cost

    discriminator = AutoConfig.from_pretrained(folder / "uninterrupted")
    generator = AutoConfig.from_pretrained(folder / "uninterrupted" / "generator")
    per_token = electra_cost(generator, discriminator, MAX_LENGTH, 10).flops_per_token
    assert "Masking: whole-word masking of 15% of tokens" in log
    assert "Masked-LM head: sparse, at 10 of the 64 positions" in log
    logged = re.findall(r"[\d,]+ tokens/s .*, ([\d.]+) ([kMG])FLOP per token, MFU unknown", log)
    assert logged and all(float(value) * {"k": 1e3, "M": 1e6, "G": 1e9}[prefix] == pytest.approx(per_token, rel=5e-3)
                          for value, prefix in logged), log[-2000:]
    scores = json.loads((folder / "uninterrupted" / ".card_facts.json").read_text())["validation"]
    assert {"loss", "generator_loss", "generator_accuracy", "discriminator_loss", "discriminator_accuracy",
            "replaced_precision", "replaced_recall", "replaced_share"} <= set(scores)
    assert 0.05 < scores["replaced_share"] < 0.2  # ~15% masked, a few sampled right
    assert scores["discriminator_accuracy"] > 1 - scores["replaced_share"] + 0.005, scores
    assert scores["replaced_precision"] > 0.5 and scores["replaced_recall"] > 0.05, scores
    assert scores["loss"] == pytest.approx(scores["generator_loss"] + 50 * scores["discriminator_loss"])


@pytest.mark.slow  # trains (the module's runs)
def test_the_folder_holds_the_discriminator_and_the_generator_each_loading_in_transformers_5(electra_runs, tmp_path):
    folder = electra_runs[0] / "uninterrupted"
    for model, architecture, pipeline_tag in (("", "ElectraForPreTraining", "feature-extraction"),
                                              ("generator", "ElectraForMaskedLM", "fill-mask")):
        names = set(os.listdir(folder / model))
        assert {"tf_model.h5", "model.safetensors", "config.json", "tokenizer.json", "README.md"} <= names
        assert json.loads((folder / model / "config.json").read_text())["architectures"] == [architecture]
        assert f"pipeline_tag: {pipeline_tag}" in (folder / model / "README.md").read_text()
    assert "discriminator accuracy" in (folder / "README.md").read_text()
    python = pytorch_python()
    import mlm_tpu  # noqa: F401
    import transformers
    from transformers import AutoTokenizer

    arguments = []  # pytorch_check.py's: folder, class, inputs; both checked by one Python
    for model, architecture in (("", "ElectraForPreTraining"), ("generator", "ElectraForMaskedLM")):
        inputs = {name: value.numpy() for name, value in
                  AutoTokenizer.from_pretrained(folder / model)([ROBERTA_INPUT], return_tensors="tf").items()}
        tf_model = getattr(transformers, f"TF{architecture}").from_pretrained(folder / model, use_safetensors=False)
        np.savez(tmp_path / f"{architecture}.npz", logits=tf_model(**inputs).logits.numpy(), **inputs)
        arguments += [str(folder / model), architecture, str(tmp_path / f"{architecture}.npz")]
    result = subprocess.run([python, str(Path(__file__).parent / "pytorch_check.py"), *arguments],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = [json.loads(line) for line in result.stdout.strip().splitlines() if line.startswith("{")]
    assert len(found) == 2 and all(check["missing"] == [] and check["unexpected"] == [] and
                                   check["max_abs_diff"] < 1e-4 for check in found), found


@pytest.mark.slow  # trains (the module's runs)
def test_inspect_shows_the_whole_words_masked_and_the_tokens_the_generator_replaced(electra_runs, shards,
                                                                                    wikitext_tokenizer):
    from mlm_tpu.tasks import plug_in_of_split, shard_kinds
    from mlm_tpu.training.inspection import InspectionConfig, examples_as_fed

    examples = examples_as_fed(InspectionConfig(str(shards / "validation"), str(wikitext_tokenizer[0]),
                                                num_examples=4, masking="whole-word", task="electra",
                                                model=str(electra_runs[0] / "uninterrupted")), shard_kinds(),
                               plug_in_of_split)
    assert set(examples[0]) == {"input_ids", "labels", "masked_lm_positions", "targets_left_out", "masked",
                                "discriminator_input_ids", "replaced"}  # the sparse head's slots, as training's
    for example in examples:  # every word masked whole (⟦word⟧), none in part (un⟦believ⟧ably)
        view = example["masked"]["text"]
        assert view.count("⟦") >= 1 and not re.search(r"[^ ]⟦|⟧[^ ]", view), view
    for example in examples:
        fed, read = example["input_ids"]["ids"], example["discriminator_input_ids"]["ids"]
        assert len(fed) == len(read) == MAX_LENGTH and "[MASK]" in example["input_ids"]["text"]
        assert set(example["replaced"]["ids"]) <= set(read) and len(example["replaced"]["ids"]) <= len(
            example["labels"]["ids"])
    assert sum(len(example["replaced"]["ids"]) for example in examples) > 0


@pytest.mark.slow  # trains (the module's runs)
def test_export_writes_both_folders_in_the_pytorch_layout(electra_runs, tmp_path):
    from mlm_tpu.model_folder.export import ExportConfig
    from mlm_tpu.tasks import export_saved_model

    folder = electra_runs[0] / "uninterrupted"
    exported = Path(export_saved_model(ExportConfig(str(folder), output_dir=str(tmp_path / "exported"))))
    for model in ("", "generator"):
        written = (exported / model / "model.safetensors").read_bytes()
        assert written == (folder / model / "model.safetensors").read_bytes()
        assert (exported / model / "tf_model.h5").is_file() and (exported / model / "README.md").is_file()
