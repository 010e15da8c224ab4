"""ModernBERT in Keras 2 (mlm_tpu/modernbert/) computes what transformers 5's ModernBert* classes compute on the same
weights, in both directions (weights made by transformers 5 loaded here; made here, saved with transformers 5's
names and loaded there with no missing or unexpected keys), under eager and sdpa attention, on a batch with padding
and rows three times longer than the local window; a document packed with others gets the logits it gets alone;
XLA compiles it on this CPU; bad configs are one error line.

The PyTorch side runs in tests/modernbert_check.py under MLM_TPU_PYTORCH_PYTHON (a Python with torch and
transformers 5), one subprocess per test.
"""

import json
import subprocess

import numpy as np
import pytest

from conftest import REPO_ROOT, pytorch_python

LENGTH = 24  # rows of 24 tokens: three times the local window of 8 (a local layer sees 4 on each side)
TINY = {"model_type": "modernbert", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 3, "num_attention_heads": 2, "local_attention": 8, "pad_token_id": 0,
        "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2}
OLD_SPELLING = {**TINY, "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0}
NEW_SPELLING = {**TINY, "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
                "rope_parameters": {"full_attention": {"rope_theta": 160000.0, "rope_type": "default"},
                                    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}}
HEADS = {"masked_lm": ("masked_lm", "ModernBertForMaskedLM", {}),
         "classifier_cls": ("sequence_classification", "ModernBertForSequenceClassification",
                            {"classifier_pooling": "cls", "id2label": {0: "a", 1: "b", 2: "c"}}),
         "classifier_mean": ("sequence_classification", "ModernBertForSequenceClassification",
                             {"classifier_pooling": "mean", "id2label": {0: "a", 1: "b", 2: "c"}}),
         "tokens": ("token_classification", "ModernBertForTokenClassification",
                    {"id2label": {index: f"tag{index}" for index in range(5)}})}
TOLERANCE = 1e-4
MASKED_POSITIONS = np.array([[2, 9, 15, 23], [1, 4, 12, 16], [3, 5, 7, 9]])  # real tokens, in order


def padded_batch(path):
    """3 rows of 24 tokens: one full, two padded (17 and 10 real tokens), each starting with the cls id; labels
    (-100 but at MASKED_POSITIONS) for the masked LM's loss and sparse prediction."""
    rng = np.random.default_rng(0)
    input_ids = rng.integers(3, TINY["vocab_size"], (3, LENGTH))
    attention_mask = np.ones((3, LENGTH), np.int64)
    for row, real in ((1, 17), (2, 10)):
        input_ids[row, real:], attention_mask[row, real:] = 0, 0
    input_ids[:, 0] = 1
    labels = np.full_like(input_ids, -100)
    np.put_along_axis(labels, MASKED_POSITIONS, np.take_along_axis(input_ids, MASKED_POSITIONS, axis=1), axis=1)
    np.savez(path, input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    return input_ids, attention_mask


def run_check(python: str, *arguments) -> list:
    """tests/modernbert_check.py's JSON lines."""
    result = subprocess.run([python, str(REPO_ROOT / "tests" / "modernbert_check.py"), *map(str, arguments)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def outputs_of(model, input_ids, attention_mask):
    import tensorflow as tf

    return model({"input_ids": tf.constant(input_ids), "attention_mask": tf.constant(attention_mask)},
                 output_hidden_states=True)


def real(array, attention_mask):
    """The values at real tokens (all of a pooled classifier's)."""
    return array[attention_mask.astype(bool)] if array.shape[:2] == attention_mask.shape else array


def test_weights_made_by_transformers_5_give_its_logits_and_hidden_states_here(tmp_path):
    from mlm_tpu.modernbert.weights import from_pretrained

    python = pytorch_python()  # skips at once without one
    (tmp_path / "config.json").write_text(json.dumps(OLD_SPELLING))
    input_ids, attention_mask = padded_batch(tmp_path / "inputs.npz")
    run_check(python, "make", tmp_path / "config.json", tmp_path / "inputs.npz", tmp_path / "made")
    for name, (head, _, _) in HEADS.items():
        model, info = from_pretrained(str(tmp_path / "made" / name), head)
        assert info == {"missing": [], "unexpected": []}, name
        ours, theirs = outputs_of(model, input_ids, attention_mask), np.load(tmp_path / "made" / name / "outputs.npz")
        for implementation in ("eager", "sdpa"):
            difference = np.abs(real(ours.logits.numpy(), attention_mask)
                                - real(theirs[f"logits_{implementation}"], attention_mask)).max()
            assert difference < TOLERANCE, (name, implementation, difference)
        assert len(ours.hidden_states) == TINY["num_hidden_layers"] + 1
        for index, hidden in enumerate(ours.hidden_states):
            difference = np.abs(real(hidden.numpy(), attention_mask) - real(theirs[f"hidden_{index}"],
                                                                             attention_mask)).max()
            assert difference < TOLERANCE, (name, index, difference)
    assert model.config.classifier_pooling == "cls"  # read back from the folder transformers 5 wrote
    import tensorflow as tf

    masked_lm, theirs = from_pretrained(str(tmp_path / "made" / "masked_lm"))[0], np.load(
        tmp_path / "made" / "masked_lm" / "outputs.npz")
    labels = np.load(tmp_path / "inputs.npz")["labels"]
    loss = masked_lm(input_ids=tf.constant(input_ids), attention_mask=tf.constant(attention_mask),
                     labels=tf.constant(labels)).loss.numpy()
    assert abs(float(loss[0]) - float(theirs["loss"])) < TOLERANCE  # transformers TF losses are [1]
    sparse = masked_lm(input_ids=tf.constant(input_ids), attention_mask=tf.constant(attention_mask),
                       masked_positions=tf.constant(MASKED_POSITIONS)).logits.numpy()
    assert np.abs(sparse.reshape(-1, TINY["vocab_size"]) - theirs["logits_sparse"]).max() < TOLERANCE
    assert from_pretrained(str(tmp_path / "made" / "classifier_mean"), HEADS["classifier_mean"][0])[0] \
        .config.classifier_pooling == "mean"


def perturb(model, seed: int) -> None:
    """Every weight drawn again (norms around 1, biases away from 0), so none is trivially right."""
    rng = np.random.default_rng(seed)
    for variable in model.trainable_weights:
        noise = rng.normal(0.0, 0.1, variable.shape).astype(np.float32)
        variable.assign(1.0 + noise if "gamma" in variable.name else noise)


def test_weights_made_here_load_in_transformers_5_with_no_missing_keys_and_the_same_function(tmp_path):
    """Every bias the config can ask for is on (attention, MLP, norms, head), so the table's every row is used."""
    from mlm_tpu.modernbert.config import from_dict
    from mlm_tpu.modernbert.model import build
    from mlm_tpu.modernbert.weights import save_pretrained

    python = pytorch_python()  # skips at once without one
    input_ids, attention_mask = padded_batch(tmp_path / "inputs.npz")
    biased = {**OLD_SPELLING, "attention_bias": True, "mlp_bias": True, "norm_bias": True, "classifier_bias": True}
    arguments = []
    for seed, (name, (head, class_name, changes)) in enumerate(HEADS.items()):
        model = build(from_dict({**biased, **changes}), head)
        perturb(model, seed)
        save_pretrained(model, str(tmp_path / name))
        outputs = outputs_of(model, input_ids, attention_mask)
        np.savez(tmp_path / name / "tf_outputs.npz", logits=outputs.logits.numpy(),
                 **{f"hidden_{index}": hidden.numpy() for index, hidden in enumerate(outputs.hidden_states)})
        arguments += [tmp_path / name, class_name]
    reports = run_check(python, "check", tmp_path / "inputs.npz", *arguments)
    assert [report["folder"] for report in reports] == list(HEADS)
    for report in reports:
        assert (report["missing"], report["unexpected"], report["mismatched"]) == ([], [], []), report
        for implementation in ("eager", "sdpa"):
            assert report[f"logits_{implementation}"] < TOLERANCE, report
            assert report[f"hidden_{implementation}"] < TOLERANCE, report
    assert [report["classifier_pooling"] for report in reports[1:3]] == ["cls", "mean"]


def test_a_packed_document_gets_the_logits_it_gets_alone_and_xla_compiles_the_model():
    """Three documents (7, 11 and 9 tokens, longer than the local window's reach) in a row of 32 with 5 padding
    tokens: each document's logits equal its own row's; without its document ids the row's tokens would see the
    other documents (and the test would fail). The same model under XLA gives the same logits, its sparse
    prediction at gathered positions gives the dense logits there, and a training step reaches every weight."""
    import tensorflow as tf

    from mlm_tpu.modernbert.config import from_dict
    from mlm_tpu.modernbert.masks import document_ids_from_starts
    from mlm_tpu.modernbert.model import build

    model = build(from_dict(NEW_SPELLING), "masked_lm")
    perturb(model, 7)
    rng = np.random.default_rng(1)
    documents = [rng.integers(3, TINY["vocab_size"], length) for length in (7, 11, 9)]
    packed = np.concatenate(documents + [np.zeros(5, np.int64)])[None, :]
    starts = np.zeros_like(packed)
    starts[0, np.cumsum([0, 7, 11, 9])] = 1  # three documents, then the padding as a fourth
    attention_mask = (np.arange(32) < 27).astype(np.int64)[None, :]
    inputs = {"input_ids": tf.constant(packed), "attention_mask": tf.constant(attention_mask),
              "document_ids": document_ids_from_starts(tf.constant(starts))}
    logits = model(inputs).logits.numpy()[0]
    crossing = model({name: inputs[name] for name in ("input_ids", "attention_mask")}).logits.numpy()[0]
    start = 0
    for document in documents:
        alone = model({"input_ids": tf.constant(document[None, :])}).logits.numpy()[0]
        assert np.abs(logits[start:start + len(document)] - alone).max() < 1e-5
        assert np.abs(crossing[start:start + len(document)] - alone).max() > 1e-3
        start += len(document)

    positions = tf.constant([[0, 5, 8, 20, 26]])

    @tf.function(jit_compile=True)
    def compiled(batch):
        """The dense logits, and a training step's loss and gradients on the sparse head."""
        with tf.GradientTape() as tape:
            sparse = model({**batch, "masked_positions": positions, "labels": tf.gather(batch["input_ids"], positions,
                                                                                        batch_dims=1)}, training=True)
        return model(batch).logits, sparse.logits, tape.gradient(sparse.loss, model.trainable_variables)

    dense, sparse, gradients = compiled(inputs)
    assert np.abs(dense.numpy()[0] - logits).max() < 1e-5
    assert np.abs(sparse.numpy()[0] - logits[positions.numpy()[0]]).max() < 1e-5
    assert all(gradient is not None and np.isfinite(gradient.numpy()).all() and np.abs(gradient.numpy()).max() > 0
               for gradient in gradients)


def test_both_config_spellings_are_one_config_and_flops_count_the_window():
    from mlm_tpu.modernbert.config import from_dict
    from mlm_tpu.modernbert.flops import attention_pairs, encoder_parameters, head_parameters
    from mlm_tpu.modernbert.model import build
    from mlm_tpu.modernbert.presets import PRESETS, preset

    old, new = from_dict(OLD_SPELLING), from_dict(NEW_SPELLING)
    assert old == new and from_dict(new.to_dict()) == new
    assert new.to_dict()["layer_types"] == NEW_SPELLING["layer_types"] and "global_rope_theta" not in new.to_dict()
    assert from_dict({**OLD_SPELLING, "global_attn_every_n_layers": 1}).layer_types == ("full_attention",) * 3
    # the weights a position runs through are the model's, the token embeddings counted once (as the decoder)
    model = build(new, "masked_lm")
    assert sum(int(np.prod(variable.shape)) for variable in model.trainable_weights) \
        == encoder_parameters(new) + head_parameters(new, "masked_lm")
    # a local layer attends to 2 x 4 + 1 keys (fewer at the ends); the global one to all 24
    assert attention_pairs(new, LENGTH) == LENGTH * LENGTH + 2 * (LENGTH * 9 - 2 * (4 + 3 + 2 + 1))
    assert {name: preset(name).num_hidden_layers for name in PRESETS}["modernbert-base"] == 22


def test_the_sparse_head_of_the_masked_lm_line_finds_modernberts_encoder_and_head():
    """mlm/sparse_head.py (what the trainer's sparse prediction runs) takes the model as it takes transformers'."""
    import tensorflow as tf

    from mlm_tpu.mlm.sparse_head import logits_at
    from mlm_tpu.modernbert.config import from_dict
    from mlm_tpu.modernbert.model import build

    model = build(from_dict(NEW_SPELLING), "masked_lm")
    perturb(model, 5)
    input_ids = tf.constant(np.random.default_rng(3).integers(3, TINY["vocab_size"], (2, LENGTH)))
    attention_mask, positions = tf.ones_like(input_ids), tf.constant([[1, 2, 20], [0, 9, 23]])
    dense = model(input_ids=input_ids, attention_mask=attention_mask).logits
    sparse = logits_at(model, input_ids, attention_mask, positions, training=False)
    assert np.abs(sparse.numpy() - tf.gather(dense, positions, batch_dims=1).numpy()).max() < 1e-5


def test_under_mixed_bfloat16_the_logits_are_float32_and_near_float32s():
    import tensorflow as tf
    import tf_keras as keras

    from mlm_tpu.modernbert.config import from_dict
    from mlm_tpu.modernbert.model import build

    config = from_dict(NEW_SPELLING)
    exact = build(config, "masked_lm")
    perturb(exact, 3)
    input_ids = tf.constant(np.random.default_rng(2).integers(3, TINY["vocab_size"], (2, LENGTH)))
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        mixed = build(config, "masked_lm")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    for ours, theirs in zip(mixed.weights, exact.weights):
        ours.assign(theirs)
    logits = mixed(input_ids=input_ids).logits
    assert logits.dtype == tf.float32
    assert np.abs(logits.numpy() - exact(input_ids=input_ids).logits.numpy()).max() < 0.1


@pytest.mark.parametrize("change, words", [
    ({"local_attention": 0}, "local_attention must be a positive whole number, not 0"),
    ({"local_attention": -128}, "local_attention must be a positive whole number, not -128"),
    ({"layer_types": ["full_attention", "sliding_attention"]}, "layer_types names 2 layers, but num_hidden_layers"),
    ({"rope_parameters": {"full_attention": {"rope_type": "yarn", "rope_theta": 1.0}}}, "rope_type 'yarn'"),
])
def test_a_bad_config_is_one_error_line_naming_the_file(tmp_path, change, words):
    from mlm_tpu.errors import UserError
    from mlm_tpu.modernbert.config import read_config

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**NEW_SPELLING, **change}))
    with pytest.raises(UserError) as raised:
        read_config(str(path))
    assert str(raised.value).startswith(f"{path}: ") and words in str(raised.value)
    assert "\n" not in str(raised.value)


def test_weights_of_other_shapes_than_the_config_are_one_error_line(tmp_path):
    from mlm_tpu.errors import UserError
    from mlm_tpu.modernbert.config import from_dict
    from mlm_tpu.modernbert.model import build
    from mlm_tpu.modernbert.weights import from_pretrained, save_pretrained

    save_pretrained(build(from_dict(NEW_SPELLING), "masked_lm"), str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({**NEW_SPELLING, "intermediate_size": 64}))
    with pytest.raises(UserError, match=r"model.layers.0.mlp.Wi.weight has shape \[96, 32\], but its config.json "
                                        r"makes it \[128, 32\]"):
        from_pretrained(str(tmp_path), "masked_lm")
