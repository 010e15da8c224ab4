"""Delta-tuning on tiny random T5 and RoBERTa models, in process: only the delta trains, the base stays bit-identical,
the optimizer holds state for the delta alone, the loss falls, and LoRA, IA3 and adapters start as the base model."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

SETTINGS = SimpleNamespace(lora_rank=4, lora_alpha=8.0, lora_dropout=0.0, lora_targets=None, use_rslora=False,
                           ia3_targets=None, num_virtual_tokens=4, adapter_kind="houlsby", adapter_reduction=4)
STARTS_AS_BASE = {"lora", "ia3", "adapter"}  # prompt and prefix add tokens: the output changes from the start


def tiny_model(model_type: str, **t5_shape):
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    import tf_keras as keras
    from transformers import RobertaConfig, T5Config, TFRobertaForMaskedLM, TFT5ForConditionalGeneration

    keras.utils.set_random_seed(1)
    if model_type == "t5":
        shape = dict(vocab_size=60, d_model=32, d_ff=64, num_layers=2, num_heads=4, d_kv=8, decoder_start_token_id=0,
                     dropout_rate=0.0)
        model = TFT5ForConditionalGeneration(T5Config(**{**shape, **t5_shape}))
    else:
        model = TFRobertaForMaskedLM(RobertaConfig(vocab_size=60, hidden_size=32, intermediate_size=64,
                                                   num_hidden_layers=2, num_attention_heads=4, pad_token_id=1,
                                                   max_position_embeddings=40, hidden_dropout_prob=0.0,
                                                   attention_probs_dropout_prob=0.0))
    model.build_in_name_scope()
    return model


def batch(model_type: str):
    import tensorflow as tf

    rng = np.random.RandomState(0)
    ids = tf.constant(rng.randint(3, 60, (4, 10)), tf.int32)
    mask = tf.constant([[1] * 10, [1] * 10, [1] * 7 + [0] * 3, [1] * 5 + [0] * 5], tf.int32)
    if model_type == "t5":
        return {"input_ids": ids, "attention_mask": mask, "labels": ids[:, :4]}
    return {"input_ids": ids, "attention_mask": mask, "labels": tf.where(ids % 3 == 0, ids, -100)}


@pytest.mark.parametrize("model_type, method", [("t5", "lora"), ("t5", "ia3"), ("t5", "prompt"), ("t5", "prefix"),
                                                ("t5", "adapter"), ("roberta", "lora"), ("roberta", "ia3")])
def test_only_the_delta_trains_and_the_base_stays_bit_identical(model_type, method):
    import tensorflow as tf
    import tf_keras as keras

    from mlm_tpu.delta import method_class

    model = tiny_model(model_type)
    inputs = batch(model_type)
    base_logits = model(**inputs).logits.numpy()
    base_weights = {id(v): v.numpy() for v in model.weights}
    delta = method_class(method).of(SETTINGS)
    delta.apply(model)
    assert {id(v) for v in model.trainable_variables} == {id(v) for v in delta.delta_variables()}
    assert set(base_weights) <= {id(v) for v in model.non_trainable_variables}
    start = model(**inputs).logits.numpy()
    if method in STARTS_AS_BASE:
        assert np.array_equal(start, base_logits)  # B = 0, IA3 = 1, adapters' up-projection = 0
    else:
        assert not np.allclose(start, base_logits)

    optimizer = keras.optimizers.Adam(3e-2)
    losses = []
    for _ in range(15):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(**inputs, training=True).loss)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        losses.append(float(loss))
    assert losses[-1] < losses[0], losses  # (IA3 on a random RoBERTa moves slowest: 4.1055 -> 4.1038)
    assert all(np.array_equal(variable.numpy(), base_weights[id(variable)]) for variable in model.weights
               if id(variable) in base_weights)
    slots = [v for v in optimizer.variables() if v is not optimizer.iterations]
    assert len(slots) == 2 * len(delta.delta_variables())  # Adam's m and v for the delta's variables only
    state = delta.state_dict(model)
    assert state and all(isinstance(array, np.ndarray) for array in state.values())


def test_peft_key_names_and_shapes():
    from mlm_tpu.delta import method_class

    lora = method_class("lora").of(SETTINGS)
    model = tiny_model("t5")
    lora.apply(model)
    state = lora.state_dict(model)
    assert state["base_model.model.encoder.block.0.layer.0.SelfAttention.q.lora_A.weight"].shape == (4, 32)
    assert state["base_model.model.decoder.block.1.layer.1.EncDecAttention.v.lora_B.weight"].shape == (32, 4)
    assert len(state) == 2 * 2 * (2 + 4)  # q and v: 2 per encoder block, 4 per decoder block (cross-attention too)
    ia3 = method_class("ia3").of(SETTINGS)
    model = tiny_model("roberta")
    ia3.apply(model)
    state = ia3.state_dict(model)
    assert state["base_model.model.roberta.encoder.layer.0.attention.self.key.ia3_l"].shape == (32, 1)
    assert state["base_model.model.roberta.encoder.layer.0.output.dense.ia3_l"].shape == (1, 64)  # feed-forward
    assert state["base_model.model.roberta.encoder.layer.0.attention.output.dense.ia3_l"].shape == (1, 32)


def test_targets_that_match_no_layer_and_unsupported_models_are_refused():
    from mlm_tpu.delta import method_class
    from mlm_tpu.errors import UserError

    model = tiny_model("roberta")
    with pytest.raises(UserError, match="--lora-targets q,v: q, v matches no layer of this roberta model"):
        method_class("lora").of(SimpleNamespace(**{**vars(SETTINGS), "lora_targets": ("q", "v")})).apply(model)
    with pytest.raises(UserError, match="--delta prefix does not support roberta models"):
        method_class("prefix").of(SETTINGS).apply(model)


def test_prefix_rows_are_as_wide_as_heads_x_d_kv_where_that_is_not_d_model():
    """PEFT views each row of the prefix table as [2 x layers, heads, token_dim // heads]: token_dim must be heads x
    d_kv, the keys' width, which is not d_model in t5-3b and t5-11b (here 4 x 16 against 32). PEFT loading such a
    folder, with our logits, is tests/test_delta_train.py's."""
    from mlm_tpu.delta import method_class

    model = tiny_model("t5", d_kv=16)
    prefix = method_class("prefix").of(SETTINGS)
    prefix.apply(model)
    config = prefix.adapter_config(model, "base")
    assert config["token_dim"] == 64 and config["num_attention_heads"] == 4
    assert prefix.state_dict(model)["prompt_embeddings"].shape == (4, config["num_layers"] * 2 * config["token_dim"])


def test_prompt_tuning_starts_as_its_config_says_sampled_vocabulary():
    """PEFT's SAMPLE_VOCAB: each virtual token starts as the embedding of a token drawn from the vocabulary."""
    from mlm_tpu.delta import method_class

    model = tiny_model("t5")
    prompt = method_class("prompt").of(SETTINGS)
    prompt.apply(model)
    assert prompt.adapter_config(model, "base")["prompt_tuning_init"] == "SAMPLE_VOCAB"
    vocabulary = model.shared.embeddings.numpy()
    for row in prompt.state_dict(model)["prompt_embeddings"]:
        assert (vocabulary == row).all(axis=1).any()


def test_bottleneck_adapters_start_as_their_config_says_mam_adapter():
    """AdapterHub's `mam_adapter`: the down-projection as PyTorch's Linear starts (kaiming_uniform_ with a = sqrt(5):
    uniform within 1/sqrt(fan in)), its bias and the whole up-projection 0."""
    from mlm_tpu.delta import method_class

    model = tiny_model("t5")
    adapters = method_class("adapter").of(SETTINGS)
    adapters.apply(model)
    assert adapters.adapter_config(model, "base")["config"]["init_weights"] == "mam_adapter"
    bound = 1 / np.sqrt(32)  # d_model: the down-projection's fan in
    downs = []
    for name, array in adapters.state_dict(model).items():
        if name.endswith("adapter_down.0.weight"):
            assert 0.9 * bound < np.abs(array).max() <= bound, name
            downs.append(array.tobytes())
        else:
            assert not array.any(), name
    assert len(set(downs)) == len(downs) == 8  # Houlsby: 2 in each of the 4 blocks, each its own draw


@pytest.mark.parametrize("setting, value", [("delta", "ia3"), ("lora_rank", 4), ("lora_alpha", 32.0),
                                            ("lora_targets", ("q", "k", "v")), ("num_virtual_tokens", 8),
                                            ("adapter_kind", "houlsby"), ("adapter_reduction", 8)])
def test_a_resume_with_other_delta_settings_is_refused(setting, value, tmp_path):
    import dataclasses

    from mlm_tpu.errors import UserError
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.run_settings import check_resumed_settings, result_settings

    started = TrainingConfig(train_dataset="shards", output_dir=str(tmp_path), task="classification",
                             model_name_or_path="t5-small", delta="lora")
    resumed = dataclasses.replace(started, **{setting: value})
    recorded, current = (result_settings(config, 8, ["a.tfrecord"], [10]) for config in (started, resumed))
    with pytest.raises(UserError, match=f"--{setting.replace('_', '-')} was"):
        check_resumed_settings(resumed, recorded, current, 5, str(tmp_path), [])


@pytest.mark.parametrize("model_type, method", [("t5", "lora"), ("t5", "ia3"), ("roberta", "lora"), ("roberta", "ia3")])
def test_merging_folds_the_delta_into_the_base_weights(model_type, method):
    from mlm_tpu.delta import method_class

    model = tiny_model(model_type)
    inputs = batch(model_type)
    base_weights = {id(v) for v in model.weights}
    delta = method_class(method).of(SETTINGS)
    delta.apply(model)
    rng = np.random.RandomState(3)
    for variable in delta.delta_variables():  # a trained delta: B no longer 0, IA3's vectors no longer 1
        variable.assign(rng.normal(1.0 if method == "ia3" else 0.0, 0.3, variable.shape).astype(np.float32))
    expected = model(**inputs).logits.numpy()
    delta.merge(model)
    assert {id(v) for v in model.weights} == base_weights  # the base model again, its own weights only
    np.testing.assert_allclose(model(**inputs).logits.numpy(), expected, atol=1e-5)
    assert not np.allclose(expected, tiny_model(model_type)(**inputs).logits.numpy(), atol=1e-3)


@pytest.mark.parametrize("method", ["lora", "ia3", "prompt", "prefix", "adapter"])
def test_a_model_with_a_delta_is_backed_up_and_restored_whole(method, tmp_path):
    """The trainer's backups are TensorFlow checkpoints of the model: they refuse tracked lists whose items were
    replaced (how adapters were first put into T5's blocks), and a delta held outside what the model tracks would
    be left out. A fresh model with the same delta restored from one has every delta weight and the outputs of the
    model that wrote it (what a resumed run starts from; tests/test_delta_train.py kills and resumes a run)."""
    import tensorflow as tf

    from mlm_tpu.delta import method_class

    def model_with_delta():
        model = tiny_model("t5")
        delta = method_class(method).of(SETTINGS)
        delta.apply(model)
        model(**batch("t5"))
        return model, delta

    model, delta = model_with_delta()
    rng = np.random.RandomState(3)
    for variable in delta.delta_variables():  # trained values, unlike any fresh start
        variable.assign(rng.normal(1.0, 0.3, variable.shape).astype(np.float32))
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "backup"))
    restored, restored_delta = model_with_delta()
    tf.train.Checkpoint(model=restored).read(path).assert_existing_objects_matched()
    for name, array in delta.state_dict(model).items():
        np.testing.assert_array_equal(restored_delta.state_dict(restored)[name], array, err_msg=name)
    np.testing.assert_array_equal(restored(**batch("t5")).logits.numpy(), model(**batch("t5")).logits.numpy())


FIXTURES = Path(__file__).parent / "fixtures" / "made-by-0.2"


def trainer_model_and_optimizer(method: str, length: int, **settings):
    """What the trainer builds for `train.py --task classification --delta method` on the fixture T5 classifier with
    `length`-token examples: (the model with its delta, the optimizer with its state), AdamW at 1e-2 from step 0."""
    from mlm_tpu.tasks import training_task
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.optimizers import with_schedule_defaults
    from mlm_tpu.training.input import Plan
    from mlm_tpu.training.step import build_model_and_optimizer

    config = with_schedule_defaults(TrainingConfig(
        train_dataset="shards", output_dir="unused", task="classification", delta=method,
        model_name_or_path=str(FIXTURES / "t5-classifier"), learning_rate=1e-2, warmup_steps=0, **settings))
    task = training_task(config)
    tokenizer = task.load_tokenizer(config)
    return build_model_and_optimizer(config, task, tokenizer, SimpleNamespace(length=length), Plan(4, 10, 1, 10))


@pytest.mark.parametrize("method", ["ia3", "prompt", "prefix", "lora"])
def test_adamw_decays_lora_but_not_ia3_scales_or_virtual_tokens(method):
    """AdamW's default decay (1e-3) would pull IA3's scales from 1 (their no-op) toward 0 and shrink the virtual
    tokens; PEFT's recipes decay neither. A step with zero gradients leaves them as they were, and shrinks LoRA's
    matrices by the rate x the decay."""
    import tensorflow as tf

    model, optimizer = trainer_model_and_optimizer(method, 16)
    before = [variable.numpy() for variable in model.trainable_variables]
    optimizer.apply_gradients((tf.zeros_like(variable), variable) for variable in model.trainable_variables)
    for variable, start in zip(model.trainable_variables, before):
        if method == "lora":
            np.testing.assert_allclose(variable.numpy(), start * (1 - 1e-2 * 1e-3), rtol=1e-6, err_msg=variable.name)
        else:
            np.testing.assert_array_equal(variable.numpy(), start, err_msg=variable.name)
    if method == "lora":
        assert any(not np.array_equal(variable.numpy(), start) for variable, start in
                   zip(model.trainable_variables, before))


@pytest.mark.parametrize("method", ["prompt", "lora"])
def test_t5_deltas_take_inputs_past_512_tokens(method):
    """T5's relative attention has no longest input (full fine-tuning takes any length): a delta run on 600-token
    examples (prompt tuning adds its 20 virtual tokens) builds, and scores them."""
    import tensorflow as tf

    model, _ = trainer_model_and_optimizer(method, 600, **({"num_virtual_tokens": 20} if method == "prompt" else {}))
    ids = tf.constant(np.random.RandomState(0).randint(3, 30, (1, 600)), tf.int32)
    loss = model(input_ids=ids, attention_mask=tf.ones_like(ids), labels=ids[:, :2]).loss
    assert np.isfinite(loss.numpy()).all()


def test_roberta_deltas_keep_the_length_of_its_positions():
    from mlm_tpu.errors import UserError
    from mlm_tpu.tasks import training_task
    from mlm_tpu.tasks import TrainingConfig

    config = TrainingConfig(train_dataset="shards", output_dir="unused", task="mlm", delta="lora",
                            model_name_or_path=str(FIXTURES / "roberta"), tokenizer=str(FIXTURES / "roberta"))
    task = training_task(config)
    with pytest.raises(UserError, match="examples of 600 tokens are longer than .* takes \\(510 tokens\\)"):
        task.build_model(config, task.load_tokenizer(config), SimpleNamespace(length=600))


def tiny_classifier(family: str, head: str):
    """A tiny random `family` encoder with a 3-label `head` ("SequenceClassification" or "TokenClassification")."""
    import mlm_tpu  # noqa: F401
    import tf_keras as keras
    import transformers

    keras.utils.set_random_seed(1)
    shape = dict(vocab_size=60, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 pad_token_id=1, max_position_embeddings=40, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                 num_labels=3)
    config = {"roberta": transformers.RobertaConfig, "bert": transformers.BertConfig,
              "electra": transformers.ElectraConfig}[family](**shape)
    model = getattr(transformers, f"TF{type(config).__name__.removesuffix('Config')}For{head}")(config)
    model.build_in_name_scope()
    return model


# (family, head, method, the PyTorch names of the weights a masked-LM base lacks) -> PEFT's keys of what is saved whole
CLASSIFIERS = {
    ("roberta", "SequenceClassification", "lora", ("classifier.dense.weight", "classifier.dense.bias",
                                                   "classifier.out_proj.weight", "classifier.out_proj.bias")):
        {"classifier.dense.weight": (32, 32), "classifier.dense.bias": (32,), "classifier.out_proj.weight": (3, 32),
         "classifier.out_proj.bias": (3,)},
    ("bert", "SequenceClassification", "ia3", ("bert.pooler.dense.weight", "bert.pooler.dense.bias",
                                               "classifier.weight", "classifier.bias")):
        {"bert.pooler.dense.weight": (32, 32), "bert.pooler.dense.bias": (32,), "classifier.weight": (3, 32),
         "classifier.bias": (3,)},
    ("electra", "TokenClassification", "lora", ("classifier.weight", "classifier.bias")):
        {"classifier.weight": (3, 32), "classifier.bias": (3,)},
}


@pytest.mark.parametrize("case", list(CLASSIFIERS), ids=lambda case: "-".join(case[:3]))
def test_a_classifier_s_new_head_trains_with_the_delta_and_is_saved_whole_under_peft_s_keys(case):
    """PEFT's SEQ_CLS / TOKEN_CLS: `classifier` (and any other new module: BERT's pooler under a masked-LM base) is a
    module to save, trained whole beside the delta and saved under `base_model.model.` + its PyTorch names, [out, in];
    no delta goes inside it; the encoder stays bit-identical. (The key names are those PEFT 0.21 saves for these
    heads; PEFT loading them is tests/test_delta_encoder.py's.)"""
    import tensorflow as tf
    import tf_keras as keras

    from mlm_tpu.delta import method_class
    from mlm_tpu.delta.modules_to_save import modules_to_save

    family, head, method, new_weights = case
    model = tiny_classifier(family, head)
    base_weights = {id(v): v.numpy() for v in model.weights}
    head_ids = {id(v) for v in model.weights if "classifier" in v.name or "pooler" in v.name}
    delta = method_class(method).of(SETTINGS)
    delta.modules_to_save = modules_to_save(model, new_weights)
    assert delta.modules_to_save == (("bert.pooler.dense",) if family == "bert" else ()) + ("classifier", "score")
    delta.apply(model)
    assert {id(v) for v in model.trainable_variables} == {id(v) for v in delta.delta_variables()}
    assert head_ids <= {id(v) for v in model.trainable_variables}

    inputs = batch("roberta")
    labels = tf.constant([0, 2, 1, 2]) if head == "SequenceClassification" else inputs["input_ids"] % 3
    optimizer = keras.optimizers.Adam(3e-2)
    losses = []
    for _ in range(10):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                                        labels=labels, training=True).loss)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        losses.append(float(loss))
    assert losses[-1] < losses[0], losses
    for variable in model.weights:
        if id(variable) in head_ids:
            assert not np.array_equal(variable.numpy(), base_weights[id(variable)]), variable.name
        elif id(variable) in base_weights:
            np.testing.assert_array_equal(variable.numpy(), base_weights[id(variable)], err_msg=variable.name)

    state = delta.state_dict(model)
    whole = {name.removeprefix("base_model.model."): value.shape for name, value in state.items()
             if not any(mark in name for mark in (".lora_", ".ia3_l"))}
    assert whole == CLASSIFIERS[case]
    assert not any(("classifier" in name or "pooler" in name) for name in state if name.removeprefix(
        "base_model.model.") not in whole)  # no delta inside a module saved whole, as PEFT wraps none there
    assert sum(value.size for value in state.values()) == sum(v.shape.num_elements() for v in model.trainable_variables)
    config = delta.adapter_config(model, "base")
    assert config["task_type"] == ("SEQ_CLS" if head == "SequenceClassification" else "TOKEN_CLS")
    assert config["modules_to_save"] == list(delta.modules_to_save)


def test_a_classifier_with_a_delta_is_backed_up_and_restored_with_its_head(tmp_path):
    """What a resumed encoder run starts from: the backup (a TensorFlow checkpoint of the model) holds the trained
    head beside the delta, and restores both, bit for bit, into a fresh model with the same delta."""
    import tensorflow as tf

    from mlm_tpu.delta import method_class

    inputs = batch("roberta")

    def classifier_with_delta():
        model = tiny_classifier("roberta", "SequenceClassification")
        delta = method_class("lora").of(SETTINGS)
        delta.modules_to_save = ("classifier", "score")
        delta.apply(model)
        model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        return model, delta

    model, delta = classifier_with_delta()
    rng = np.random.RandomState(3)
    for variable in delta.delta_variables():  # trained values: B no longer 0, the head not as initialised
        variable.assign(rng.normal(0.0, 0.3, variable.shape).astype(np.float32))
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "backup"))
    restored, restored_delta = classifier_with_delta()
    tf.train.Checkpoint(model=restored).read(path).assert_existing_objects_matched()
    expected, got = delta.state_dict(model), restored_delta.state_dict(restored)
    assert expected.keys() == got.keys() and any(".classifier." in name for name in got)
    for name, array in expected.items():
        np.testing.assert_array_equal(got[name], array, err_msg=name)
    logits = [m(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits.numpy()
              for m in (model, restored)]
    np.testing.assert_array_equal(*logits)
