"""ModernBERT at long rows (issue 56): the blocked local and chunked global attention (mlm_tpu/modernbert/attention.py)
give the dense attention's logits and gradients (1e-5) with padding and packed documents; nothing in a training
step's graph is [length x length]; a step compiles under XLA at a long row; context extension's overrides
(max_position_embeddings, global_rope_theta) win over a checkpoint's config in either spelling and are written to the
saved folder, while shape-changing ones and bad windows are one error line each.

The dense reference lives here, in the test: the attention transformers 5's eager code computes, a [length x length]
softmax under the masking_utils rule, swapped into the model in place of the blocked and chunked functions.
"""

import json

import numpy as np
import pytest

from conftest import MAX_LENGTH, assert_user_error
from test_modernbert import perturb
from test_modernbert_training import dynamic_dimensions

# a global layer and two local ones with a window of 16 (8 each side); rows of 600 tokens: three query chunks of 256
SHAPE = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=2,
             local_attention=16, pad_token_id=0, max_position_embeddings=1024)
LENGTH = 600
TOLERANCE = 1e-5


def dense_attention(query, key, value, key_mask, document_ids, half_window=None):
    """Every query against every key, [batch, heads, length, length], masked as transformers 5 masks."""
    import tensorflow as tf

    length = tf.shape(query)[1]
    allowed = tf.cast(key_mask, tf.bool)[:, None, None, :]
    if document_ids is not None:
        allowed &= tf.equal(document_ids[:, None, :, None], document_ids[:, None, None, :])
    if half_window is not None:
        allowed &= (tf.abs(tf.range(length)[:, None] - tf.range(length)[None, :]) <= half_window)[None, None]
    scores = tf.cast(tf.einsum("bqhd,bkhd->bhqk", query, key), tf.float32)
    probabilities = tf.nn.softmax(scores + tf.where(allowed, 0.0, -1e9), axis=-1)
    return tf.einsum("bhqk,bkhd->bqhd", tf.cast(probabilities, value.dtype), value)


@pytest.fixture
def dense_model(monkeypatch):
    """`dense_model(model_fn)`: what model_fn() returns computed with the dense reference attention."""
    from mlm_tpu.modernbert import layers

    def run(model_fn):
        with monkeypatch.context() as patched:
            patched.setattr(layers, "local_attention",
                            lambda query, key, value, mask, documents, half, dropout=None:
                            dense_attention(query, key, value, mask, documents, half))
            patched.setattr(layers, "global_attention",
                            lambda query, key, value, mask, documents, *_: dense_attention(query, key, value, mask,
                                                                                          documents))
            return model_fn()

    return run


def packed_batch():
    """Two rows of LENGTH: one of three documents (250, 200, 100 tokens) then 50 padding tokens; one document of
    400 then padding. Labels at a few real tokens of each document."""
    rng = np.random.default_rng(3)
    input_ids = rng.integers(3, SHAPE["vocab_size"], (2, LENGTH))
    attention_mask = np.zeros((2, LENGTH), np.int32)
    document_ids = np.zeros((2, LENGTH), np.int32)
    for row, lengths in enumerate(((250, 200, 100), (400,))):
        ends = np.cumsum(lengths)
        attention_mask[row, :ends[-1]] = 1
        document_ids[row] = np.searchsorted(ends, np.arange(LENGTH), side="right")
        input_ids[row, ends[-1]:] = 0
    labels = np.full_like(input_ids, -100)
    labels[:, 5::37] = input_ids[:, 5::37]
    labels[attention_mask == 0] = -100
    return {"input_ids": input_ids, "attention_mask": attention_mask, "document_ids": document_ids, "labels": labels}


def test_blocked_and_chunked_attention_give_the_dense_logits_and_gradients_with_padding_and_packing(dense_model):
    """The same weights, the same packed and padded rows: logits at real tokens and every weight's gradient of the
    loss within 1e-5 of the dense attention's (three query chunks of the global layer, 75 blocks of each local one).
    The dense reference is not the model's own code: with the documents' ids dropped it differs (so would a wrong
    mask)."""
    import tensorflow as tf

    from mlm_tpu.modernbert.config import ModernBertConfig
    from mlm_tpu.modernbert.model import build

    model = build(ModernBertConfig(**SHAPE))
    perturb(model, 5)  # weights far from their small initial draws, so that context changes the logits
    batch = {name: tf.constant(values) for name, values in packed_batch().items()}
    real = batch["attention_mask"].numpy().astype(bool)

    def logits_and_gradients():
        with tf.GradientTape() as tape:
            outputs = model(batch, training=True)
        return outputs.logits.numpy(), tape.gradient(outputs.loss, model.trainable_variables)

    logits, gradients = logits_and_gradients()
    dense_logits, dense_gradients = dense_model(logits_and_gradients)
    assert np.abs(logits - dense_logits)[real].max() < TOLERANCE
    for gradient, dense_gradient in zip(gradients, dense_gradients):
        gradient, dense_gradient = tf.convert_to_tensor(gradient).numpy(), tf.convert_to_tensor(dense_gradient).numpy()
        assert np.abs(gradient - dense_gradient).max() < TOLERANCE * max(1.0, np.abs(dense_gradient).max())
    crossing = model({name: batch[name] for name in ("input_ids", "attention_mask")}).logits.numpy()
    assert np.abs(crossing - dense_logits)[real].max() > 1e-3


def square_shapes(graph, length: int) -> list:
    """The ops of `graph` (and of its functions: loops, gradients) with an output of two dimensions >= length."""
    found = []
    graphs = [graph, *(function.graph for function in graph._functions.values() if hasattr(function, "graph"))]
    for each in graphs:
        for operation in each.get_operations():
            for output in operation.outputs:
                dimensions = [size for size in (output.shape.as_list() if output.shape.rank else [])
                              if size is not None and size >= length]
                if len(dimensions) >= 2:
                    found.append(f"{operation.type} {operation.name} {output.shape}")
    return found


def long_row_step(length: int):
    """A tiny model's training step (forward, loss, gradients) as a function, and a packed row of `length` (two
    documents) with four labelled slots."""
    import tensorflow as tf

    from mlm_tpu.modernbert.config import ModernBertConfig
    from mlm_tpu.modernbert.model import build

    model = build(ModernBertConfig(**{**SHAPE, "max_position_embeddings": length}))
    input_ids = np.random.default_rng(0).integers(3, SHAPE["vocab_size"], (1, length))
    slots = [3, length // 2, length * 3 // 4, length - 1]
    batch = {"input_ids": tf.constant(input_ids), "attention_mask": tf.ones([1, length], tf.int32),
             "document_ids": tf.constant((np.arange(length) >= length * 5 // 8).astype(np.int32)[None]),
             "masked_positions": tf.constant([slots]), "labels": tf.constant(input_ids[:, slots])}

    def step(batch):
        with tf.GradientTape() as tape:
            loss = model(batch, training=True).loss
        return loss, tape.gradient(loss, model.trainable_variables)

    return model, step, batch


def test_a_training_step_at_8192_tokens_holds_no_square_tensor():
    """The whole step of a packed 8,192-token row, traced: no op of its graph, nor of the loops' and the custom
    gradient's, has two dimensions of the row's length; nor has inference's."""
    import tensorflow as tf

    length = 8192
    model, step, batch = long_row_step(length)
    assert square_shapes(tf.function(step).get_concrete_function(batch).graph, length) == []
    assert square_shapes(tf.function(lambda batch: model(batch).logits).get_concrete_function(
        {name: batch[name] for name in ("input_ids", "attention_mask")}).graph, length) == []


@pytest.mark.slow
def test_a_training_step_at_8192_tokens_compiles_under_xla_with_static_shapes():
    """XLA compiles the step of a packed 8,192-token row with no dynamic dimension and runs it to finite
    gradients."""
    import tensorflow as tf

    model, step, batch = long_row_step(8192)
    compiled = tf.function(step, jit_compile=True)
    assert dynamic_dimensions(compiled.experimental_get_compiler_ir(batch)(stage="hlo")) == []
    loss, gradients = compiled(batch)
    assert np.isfinite(loss.numpy()) and all(np.isfinite(gradient.numpy()).all() for gradient in gradients)


@pytest.mark.parametrize("extension", [
    ("--config-overrides", "max_position_embeddings=8192,global_rope_theta=160000"),
    ("--recipe", "modernbert-context-extension", "--max-length", MAX_LENGTH, "--gradient-accumulation-steps", 1),
], ids=["overrides", "recipe"])
def test_context_extension_overrides_win_over_a_checkpoints_config_and_are_saved(in_process, shards,
                                                                                 wikitext_tokenizer, tmp_path,
                                                                                 extension):
    """A ModernBERT folder in transformers 5's spelling (rope_parameters) that reads 32 positions with a global
    rotary base of 10,000: 64-token shards are refused without an override, naming the flag; continued with
    max_position_embeddings=8192,global_rope_theta=160000 (given, or by `--recipe modernbert-context-extension`, its
    rows and batch scaled down by flags), its saved config says both (the base's spelling used to win over the
    override, silently)."""
    from test_model_families import small_modernbert_folder

    base = small_modernbert_folder(tmp_path / "base", wikitext_tokenizer[0], max_position_embeddings=32,
                                   local_attention=16, global_rope_theta=10_000.0)
    assert json.loads((base / "config.json").read_text())["rope_parameters"]["full_attention"]["rope_theta"] == 10_000
    flags = ("train", "--model-name-or-path", base, "--train-dataset", shards / "train", "--max-steps", 1,
             "--per-replica-batch-size", 2, "--output-dir", tmp_path / "extended")
    if extension[0] == "--config-overrides":
        assert_user_error(in_process(*flags), f"holds {MAX_LENGTH}-token examples", "(32 tokens)",
                          f"--config-overrides max_position_embeddings={MAX_LENGTH} (rotary positions")
        assert not (tmp_path / "extended").exists()
    result = in_process(*flags, *extension)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Memory plan per replica (2 x {MAX_LENGTH} tokens, float32): about" in result.stderr
    saved = json.loads((tmp_path / "extended" / "config.json").read_text())
    assert saved["max_position_embeddings"] == 8192
    assert saved["rope_parameters"] == {"full_attention": {"rope_theta": 160_000.0, "rope_type": "default"},
                                        "sliding_attention": {"rope_theta": 10_000.0, "rope_type": "default"}}


@pytest.mark.parametrize("overrides, words", [
    ("hidden_size=64", ("has shape", "the weights and the config do not belong together")),
    ("local_attention=15", ("local_attention 15 is odd", "give an even window")),
    ("local_attention=1024", ("local_attention 1024 is wider than the longest row the model reads",
                              "max_position_embeddings 128")),
    ("rope_theta=160000", ("rope_theta names no one rotary base", "global_rope_theta")),
])
def test_overrides_that_change_a_shape_or_give_a_bad_window_are_one_error_line(in_process, shards, wikitext_tokenizer,
                                                                              tmp_path, overrides, words):
    from test_model_families import small_modernbert_folder

    base = small_modernbert_folder(tmp_path / "base", wikitext_tokenizer[0], max_position_embeddings=128,
                                   local_attention=16)
    result = in_process("train", "--model-name-or-path", base, "--train-dataset", shards / "train",
                        "--max-steps", 1, "--config-overrides", overrides, "--output-dir", tmp_path / "out")
    assert_user_error(result, *words)
    assert not (tmp_path / "out").exists()


def test_the_memory_plan_counts_every_weight_and_grows_with_the_row_not_its_square():
    """The plan's weights are the built model's (4 bytes each), Adam's state twice them; its activations at 8,192
    tokens are about 8 times those at 1,024 (the window's and the chunks' cost), not 64 times."""
    from mlm_tpu.modernbert import memory
    from mlm_tpu.modernbert.config import ModernBertConfig
    from mlm_tpu.modernbert.model import build

    config = ModernBertConfig(**{**SHAPE, "max_position_embeddings": 8192})
    model = build(config)
    short, long = memory.plan(config, 1024, 1), memory.plan(config, 8192, 1)
    assert short.weights == 4 * sum(variable.shape.num_elements() for variable in model.trainable_variables)
    assert short.optimizer_state == 2 * short.weights
    activations = [plan.global_layers + plan.local_layers + plan.head for plan in (short, long)]
    assert 7.5 < activations[1] / activations[0] < 8.5


@pytest.mark.slow
def test_a_1024_token_checkpoint_continued_at_8192_loads_in_transformers_5_with_its_fill_mask(
        in_process, wikitext_tokenizer, wikitext_path, tmp_path):
    """Context extension end to end: a ModernBERT of 1,024 positions and a global rotary base of 10,000, continued by
    train.py on 8,192-token packed shards with max_position_embeddings=8192,global_rope_theta=160000. transformers 5
    loads the folder (every key used) with those values; its eager logits on a whole 8,192-token row are mlm_tpu's
    (1e-4), and `predict fill-mask` on a ~6,000-token document gives transformers 5's top 5 and probabilities
    (1e-4)."""
    from transformers import TFAutoModelForMaskedLM

    from conftest import REPO_ROOT, pytorch_python, run_train
    from test_model_families import small_modernbert_folder
    from mlm_tpu.model_folder.loading import load_pretrained
    from mlm_tpu.tokenizer.load import load_tokenizer

    python = pytorch_python()  # skips at once without one
    tokenizer = load_tokenizer(str(wikitext_tokenizer[0]))
    tokenizer.model_max_length = 8192
    tokenizer.save_pretrained(str(tmp_path / "tokenizer"))
    sharded = in_process("shard", "--tokenizer", tmp_path / "tokenizer", "--text-files", wikitext_path,
                         "--max-length", 8192, "--output-dir", tmp_path / "shards")
    assert sharded.returncode == 0, sharded.stderr[-2000:]
    base = small_modernbert_folder(tmp_path / "base", tmp_path / "tokenizer", num_hidden_layers=3,
                                   layer_types=("full_attention", "sliding_attention", "sliding_attention"),
                                   local_attention=16, max_position_embeddings=1024, global_rope_theta=10_000.0)
    extended = tmp_path / "extended"
    result = run_train("--model-name-or-path", base, "--train-dataset", tmp_path / "shards" / "train",
                       "--config-overrides", "max_position_embeddings=8192,global_rope_theta=160000",
                       "--per-replica-batch-size", 1, "--max-steps", 2, "--output-dir", extended)
    assert result.returncode == 0, result.stderr[-3000:]

    words = " ".join(wikitext_path.read_text(encoding="utf-8").split("\n")[:3000]).split()
    long_row = tokenizer(" ".join(words[:12000]))["input_ids"][:8192]  # a whole row of text, no padding
    document = " ".join(words[:4000])
    while len(tokenizer(document)["input_ids"]) > 6000:
        document = document.rsplit(" ", 50)[0]
    middle = document.split(" ")
    middle[len(middle) // 2] = "[MASK]"
    document = " ".join(middle)
    ids = tokenizer(document)["input_ids"]
    assert len(long_row) == 8192 and 5000 < len(ids) <= 6000
    padded = np.zeros((2, 8192), np.int64)
    padded[0] = long_row
    padded[1, :len(ids)] = ids
    attention_mask = np.zeros_like(padded)
    attention_mask[0] = 1
    attention_mask[1, :len(ids)] = 1
    np.savez(tmp_path / "inputs.npz", input_ids=padded, attention_mask=attention_mask)
    checked = subprocess_json(python, str(REPO_ROOT / "tests" / "modernbert_long_check.py"), extended,
                              tmp_path / "inputs.npz", tmp_path / "pt5.npz")
    assert (checked["missing"], checked["unexpected"]) == ([], [])
    assert checked["max_position_embeddings"] == 8192
    assert checked["rope_parameters"]["full_attention"]["rope_theta"] == 160_000
    assert checked["rope_parameters"]["sliding_attention"]["rope_theta"] == 10_000
    theirs = np.load(tmp_path / "pt5.npz")

    model, _ = load_pretrained(str(extended), TFAutoModelForMaskedLM)
    ours = model({"input_ids": padded[:1], "attention_mask": attention_mask[:1]}).logits.numpy()[0]
    assert np.abs(ours - theirs["logits_0"]).max() < 1e-4

    predicted = in_process("predict", "fill-mask", "--model", extended, "--json", "--top-k", 5, document)
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    (candidates,) = json.loads(predicted.stdout.splitlines()[-1])["predictions"]
    mask_at = ids.index(tokenizer.mask_token_id)
    logits = theirs["logits_1"][mask_at].astype(np.float64)
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    expected = np.argsort(-probabilities)[:5]
    assert [candidate["token"] for candidate in candidates] == expected.tolist()
    assert np.abs(np.array([candidate["score"] for candidate in candidates]) - probabilities[expected]).max() < 1e-4


def subprocess_json(python: str, *arguments) -> dict:
    import subprocess

    result = subprocess.run([python, *map(str, arguments)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])
