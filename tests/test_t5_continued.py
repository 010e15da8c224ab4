"""`--task span-corruption --model-name-or-path M`: span corruption continues a T5 1.1 checkpoint (gated-GELU, its
output layer untied from the embeddings, a vocabulary larger than its tokenizer as T5's 32,128 against 32,100) with
M's own tokenizer: one saved by transformers 4.57's TensorFlow class, one saved by transformers 5 (PyTorch weights
only, its tokenizer as transformers 5 writes it). Each output layer is scaled far from a fresh model's, so a run that
did not load it would not start at its loss: one step at a learning rate too small to move a float32 weight validates
to the loss that transformers itself (TensorFlow 4.57, or PyTorch 5) computes for the checkpoint on the same
corrupted batches. An mT5 (T5 1.1's shape, a model type of its own) continues the same way, and stays an
mT5."""

import contextlib
import io
import json
import math
import subprocess
import textwrap

import numpy as np
import pytest

from conftest import MADE_BY_0_2, pytorch_python, run_module

pytestmark = pytest.mark.slow  # shards, builds two checkpoints and trains each

T5_TOKENIZER = MADE_BY_0_2 / "t5-tokenizer"
BATCH, SEED = 8, 42
SHAPE = dict(d_model=32, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2, d_kv=16,
             feed_forward_proj="gated-gelu", tie_word_embeddings=False, decoder_start_token_id=0, pad_token_id=0,
             eos_token_id=1)  # T5 1.1's shape, tiny
EXTRA_EMBEDDINGS = 28  # T5's 32,128 embeddings for its tokenizer's 32,100 pieces
OUTPUT_SCALE = 3.0  # the output layer x this: a loss far above ln(vocabulary), yet finite in float32


def shard_with(tokenizer, wikitext_path, folder):
    """Span-corruption shards of WikiText made with `tokenizer` (a checkpoint's own: what its run reads)."""
    for split, limit in (("train", "200"), ("validation", "60")):
        result = run_module("mlm_tpu.shard", "--task", "span-corruption", "--tokenizer", str(tokenizer),
                            "--text-files", str(wikitext_path), "--limit", limit, "--split", split, "--max-length",
                            "32", "--output-dir", str(folder))
        assert result.returncode == 0, result.stderr
    return folder


@pytest.fixture(scope="module")
def span_shards(wikitext_path, tmp_path_factory):
    return shard_with(T5_TOKENIZER, wikitext_path, tmp_path_factory.mktemp("t5-continued-shards"))


def config_values(tokenizer) -> dict:
    return dict(SHAPE, vocab_size=len(tokenizer) + EXTRA_EMBEDDINGS)


def save_tensorflow_checkpoint(family: str, folder):
    """A T5 1.1 (family "T5") or an mT5 ("MT5") saved by transformers 4.57's TensorFlow class, with its tokenizer."""
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    import transformers

    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(T5_TOKENIZER))
    config = getattr(transformers, f"{family}Config")(**config_values(tokenizer))
    model = getattr(transformers, f"TF{family}ForConditionalGeneration")(config)
    model.build_in_name_scope()
    model.lm_head.kernel.assign(model.lm_head.kernel * OUTPUT_SCALE)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tensorflow_checkpoint(tmp_path_factory):
    return save_tensorflow_checkpoint("T5", tmp_path_factory.mktemp("t5-1.1-tensorflow"))


@pytest.fixture(scope="module")
def tensorflow_mt5_checkpoint(tmp_path_factory):
    return save_tensorflow_checkpoint("MT5", tmp_path_factory.mktemp("mt5-tensorflow"))


PYTORCH_CHECKPOINT = textwrap.dedent("""
    import json, sys, torch, transformers
    from transformers import AutoTokenizer
    folder, tokenizer_folder, values, scale = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4])
    family = sys.argv[5]
    torch.manual_seed(0)
    config = getattr(transformers, f"{family}Config")(**values)
    model = getattr(transformers, f"{family}ForConditionalGeneration")(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tokenizer_folder).save_pretrained(folder)
""")

PYTORCH_LOSS = textwrap.dedent("""
    import json, sys, numpy, torch
    from transformers import AutoModelForSeq2SeqLM
    model = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1]).eval()
    batches = numpy.load(sys.argv[2])
    total = tokens = 0.0
    with torch.no_grad():
        for i in range(len(batches.files) // 3):
            labels = torch.tensor(batches[f"labels_{i}"])
            logits = model(input_ids=torch.tensor(batches[f"input_ids_{i}"]),
                           attention_mask=torch.tensor(batches[f"attention_mask_{i}"]), labels=labels).logits
            losses = torch.nn.functional.cross_entropy(logits.double().reshape(-1, logits.shape[-1]),
                                                       labels.reshape(-1), ignore_index=-100, reduction="sum")
            total += float(losses)
            tokens += float((labels != -100).sum())
    print(json.dumps({"loss": total / tokens, "tokens": tokens, "class": type(model).__name__}))
""")


def save_pytorch_checkpoint(family: str, folder):
    """The same shape saved by transformers 5 (model.safetensors only; tokenizer_config.json naming
    TokenizersBackend): a T5 1.1 (family "T5") or an mT5 ("MT5", whose output layer transformers 5 always ties to the
    embeddings, and never scales)."""
    from mlm_tpu.tokenizer.load import load_tokenizer

    values = config_values(load_tokenizer(str(T5_TOKENIZER)))
    subprocess.run([pytorch_python(), "-c", PYTORCH_CHECKPOINT, str(folder), str(T5_TOKENIZER), json.dumps(values),
                    str(OUTPUT_SCALE), family], check=True, timeout=300)
    assert not list(folder.glob("tf_model*.h5")) and (folder / "model.safetensors").is_file()
    return folder


@pytest.fixture(scope="module")
def pytorch_checkpoint(tmp_path_factory):
    return save_pytorch_checkpoint("T5", tmp_path_factory.mktemp("t5-1.1-pytorch"))


def validation_batches(checkpoint, span_shards):
    """The corrupted validation batches the run validates on: its masks' seed and batch size."""
    from mlm_tpu.shards.pipeline import evaluation_batches
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.t5.shard_kinds import SPAN_CORRUPTION_ROWS
    from mlm_tpu.t5.span_corruption import SpanCorrupter
    from mlm_tpu.t5.span_corruption_task import recorded_lengths
    from mlm_tpu.tasks import shard_kinds
    from mlm_tpu.tokenizer.load import load_tokenizer

    shards = find_shards(str(span_shards / "validation"), shard_kinds(), SPAN_CORRUPTION_ROWS.name,
                         SPAN_CORRUPTION_ROWS.features(None))
    corrupter = SpanCorrupter.for_tokenizer(load_tokenizer(str(checkpoint)), recorded_lengths(shards, "test"), SEED)
    batches = evaluation_batches(shards, BATCH, corrupter).take(math.ceil(shards.records / BATCH))
    return [{name: values.numpy() for name, values in batch.items()} for batch in batches]


def tensorflow_loss(checkpoint, batches) -> float:
    """transformers 4.57's TensorFlow T5 (or mT5, as its config says) on the checkpoint: the mean cross-entropy over
    every target token."""
    from transformers import TFAutoModelForSeq2SeqLM

    model = TFAutoModelForSeq2SeqLM.from_pretrained(checkpoint, use_safetensors=False)
    total = tokens = 0.0
    for batch in batches:
        logits = model(**batch, training=False).logits.numpy().astype(np.float64)
        for row, position in zip(*np.nonzero(batch["labels"] != -100)):
            scores = logits[row, position]
            log_norm = scores.max() + np.log(np.exp(scores - scores.max()).sum())
            total += log_norm - scores[batch["labels"][row, position]]
            tokens += 1
    return total / tokens


def pytorch_run(checkpoint, batches, tmp_path) -> dict:
    """transformers 5's PyTorch T5 (or mT5) on the checkpoint, on the same batches: its loss, and the class it loaded
    the checkpoint as."""
    path = tmp_path / "batches.npz"
    np.savez(path, **{f"{name}_{i}": values for i, batch in enumerate(batches) for name, values in batch.items()})
    result = subprocess.run([pytorch_python(), "-c", PYTORCH_LOSS, str(checkpoint), str(path)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def pytorch_loss(checkpoint, batches, tmp_path) -> float:
    return pytorch_run(checkpoint, batches, tmp_path)["loss"]


def continued_validation(checkpoint, span_shards, output_dir):
    """(validation scores, log) of `train --task span-corruption --model-name-or-path checkpoint`, one step at a
    learning rate too small to move a float32 weight, with the checkpoint's own tokenizer (no --tokenizer); the
    scores before the first step (the checkpoint as loaded) must be the same."""
    import mlm_tpu

    with contextlib.redirect_stderr(io.StringIO()) as log:
        result = mlm_tpu.train_model(str(span_shards / "train"), str(output_dir), task="span-corruption",
                                     eval_dataset=str(span_shards / "validation"), model_name_or_path=str(checkpoint),
                                     max_steps=1, learning_rate=1e-15, per_replica_batch_size=BATCH, seed=SEED)
    assert result.before_training["loss"] == pytest.approx(result.epochs[-1]["validation"]["loss"], rel=1e-5)
    assert "Before training (the checkpoint as loaded): loss" in log.getvalue()
    return result.epochs[-1]["validation"], log.getvalue()


def test_span_corruption_continues_a_tensorflow_t5_1_1_from_its_loss(tensorflow_checkpoint, span_shards, tmp_path):
    expected = tensorflow_loss(tensorflow_checkpoint, validation_batches(tensorflow_checkpoint, span_shards))
    vocabulary = json.loads((tensorflow_checkpoint / "config.json").read_text())["vocab_size"]
    assert 2 * math.log(vocabulary) < expected < 80  # far from chance; its perplexity a float32
    scores, log = continued_validation(tensorflow_checkpoint, span_shards, tmp_path / "run")
    assert scores["loss"] == pytest.approx(expected, rel=1e-4), log[-3000:]
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (saved["feed_forward_proj"], saved["tie_word_embeddings"], saved["vocab_size"]) == (
        "gated-gelu", False, vocabulary)
    assert f"T5 continued from {tensorflow_checkpoint} by span corruption" in (tmp_path / "run" / "README.md"
                                                                                 ).read_text()


def test_span_corruption_refuses_a_model_config_beside_the_checkpoint(tensorflow_checkpoint):
    from mlm_tpu.errors import UserError
    from mlm_tpu.tasks import TrainingConfig, make_task

    for flags in (dict(model_config="t5-tiny"), dict(config_overrides="dropout_rate=0")):
        config = TrainingConfig("train", "out", task="span-corruption", model_name_or_path=str(tensorflow_checkpoint),
                                **flags)
        with pytest.raises(UserError, match="give --model-name-or-path .* or --model-config/--config-overrides"):
            make_task("span-corruption").check(config)


def test_span_corruption_continues_a_pytorch_only_t5_1_1_saved_by_transformers_5_from_its_loss(
        pytorch_checkpoint, wikitext_path, tmp_path):
    """Sharded with the checkpoint's tokenizer as transformers 5 saved it: it rewrites a T5 tokenizer's normalizer and
    pre-tokenizer as its T5Tokenizer class makes them, a tokenizer of other pieces for some text, so the shards of the
    original are refused (one line: re-shard with this one)."""
    span_shards = shard_with(pytorch_checkpoint, wikitext_path, tmp_path / "shards")
    batches = validation_batches(pytorch_checkpoint, span_shards)
    expected = pytorch_loss(pytorch_checkpoint, batches, tmp_path)
    scores, log = continued_validation(pytorch_checkpoint, span_shards, tmp_path / "run")
    assert scores["loss"] == pytest.approx(expected, rel=1e-4), log[-3000:]


def test_span_corruption_continues_a_tensorflow_mt5_as_an_mt5(tensorflow_mt5_checkpoint, span_shards, tmp_path):
    """An mT5 continues from its own loss, and its folder is an mT5's, which evaluate and predict text2text take."""
    import mlm_tpu

    checkpoint = tensorflow_mt5_checkpoint
    expected = tensorflow_loss(checkpoint, validation_batches(checkpoint, span_shards))
    scores, log = continued_validation(checkpoint, span_shards, tmp_path / "run")
    assert scores["loss"] == pytest.approx(expected, rel=1e-4), log[-3000:]
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (saved["model_type"], saved["architectures"], saved["tie_word_embeddings"]) == (
        "mt5", ["MT5ForConditionalGeneration"], False)
    assert "(mt5)" in (tmp_path / "run" / "README.md").read_text()
    evaluated = mlm_tpu.evaluate_model(str(tmp_path / "run"), str(span_shards / "validation"),
                                       per_replica_batch_size=BATCH, seed=SEED)
    assert (evaluated.task, evaluated.scores["loss"]) == ("span-corruption", pytest.approx(expected, rel=1e-4))
    [predicted] = mlm_tpu.predict_text2text(str(tmp_path / "run"), ["The <extra_id_0> walks in the park."],
                                            max_new_tokens=3)
    assert isinstance(predicted["output"], str)


def test_span_corruption_continues_a_pytorch_only_mt5_saved_by_transformers_5_from_its_loss(wikitext_path, tmp_path):
    """transformers 5 writes an mT5's output layer tied (only the embeddings in the file) and never scales it, where
    transformers 4 reads a tied mT5 as scaled: the run must start at transformers 5's loss, and its folder load in
    transformers 5 as an mT5 with that loss."""
    checkpoint = save_pytorch_checkpoint("MT5", tmp_path / "mt5")
    span_shards = shard_with(checkpoint, wikitext_path, tmp_path / "shards")
    batches = validation_batches(checkpoint, span_shards)
    expected = pytorch_loss(checkpoint, batches, tmp_path)
    scores, log = continued_validation(checkpoint, span_shards, tmp_path / "run")
    assert scores["loss"] == pytest.approx(expected, rel=1e-4), log[-3000:]
    continued = pytorch_run(tmp_path / "run", batches, tmp_path)
    assert continued["class"] == "MT5ForConditionalGeneration"
    assert continued["loss"] == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("delta", [None, "lora"])
def test_generation_fine_tunes_an_mt5_as_an_mt5(delta, tensorflow_mt5_checkpoint, short_shards, tmp_path):
    """An mT5 fine-tunes, whole or with a LoRA delta (PEFT's T5 targets), and its run is an mT5's."""
    import mlm_tpu

    mlm_tpu.train_model(str(short_shards), str(tmp_path / "run"), task="generation", delta=delta,
                        model_name_or_path=str(tensorflow_mt5_checkpoint), max_steps=1, per_replica_batch_size=BATCH)
    if delta:
        saved = json.loads((tmp_path / "run" / "adapter_config.json").read_text())
        assert (saved["task_type"], sorted(saved["target_modules"])) == ("SEQ_2_SEQ_LM", ["q", "v"])
        return
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (saved["model_type"], saved["task_specific_params"]["mlm_tpu_text2text"]["task"]) == ("mt5", "generation")
