"""Continued pretraining on every masked-LM family (issue 39): a tiny PyTorch-only checkpoint of BERT, RoBERTa,
XLM-RoBERTa, DistilBERT, ALBERT, DeBERTa-v2 and the ELECTRA generator, saved by transformers 5 with a tokenizer of its
family's kind (WordPiece, byte-level BPE, Unigram), loads in TensorFlow with the masked-LM loss transformers 5
computes; `python train.py --task mlm --model-name-or-path` continues it; its output folder loads in transformers 5
with TensorFlow's logits; export, fill-mask, evaluate and inspect work on it."""

import functools
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, pytorch_python, run_module, run_train

FAMILIES = {"bert": "wordpiece", "roberta": "bpe", "xlm-roberta": "unigram", "distilbert": "wordpiece",
            "albert": "unigram", "deberta-v2": "unigram", "electra": "wordpiece"}  # family -> its tokenizer's kind
MAX_LENGTH = 32
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, wikitext_path) -> Path:
    """One folder per family (random weights, model.safetensors and the tokenizer as transformers 5 saves them) and
    FAMILY.npz beside it: a masked batch with transformers 5's loss and logits on it; all made in one subprocess."""
    python = pytorch_python()
    root = tmp_path_factory.mktemp("families")
    for algorithm in set(FAMILIES.values()):
        result = run_module("mlm_tpu.tokenizer", "train", "--text-files", str(wikitext_path), "--limit", "400",
                            "--algorithm", algorithm, "--vocab-size", "400", "--output-dir", str(root / algorithm))
        assert result.returncode == 0, result.stderr
    texts = [line.strip() for line in wikitext_path.read_text().splitlines() if len(line) > 80][:4]
    spec = {"output": str(root), "seed": 3, "texts": texts,
            "families": {family: str(root / algorithm) for family, algorithm in FAMILIES.items()}}
    (root / "spec.json").write_text(json.dumps(spec))
    result = subprocess.run([python, str(REPO_ROOT / "tests" / "masked_lm_checkpoints.py"), str(root / "spec.json")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    made = [json.loads(line) for line in result.stdout.splitlines()]
    assert [entry["family"] for entry in made] == list(FAMILIES)
    for entry in made:  # PyTorch weights only, and a tokenizer saved by transformers 5
        assert "model.safetensors" in entry["files"] and "tf_model.h5" not in entry["files"], entry
        assert entry["transformers"].startswith("5."), entry
    return root


def tensorflow_outputs(model, batch, sparse: bool):
    """The loss and logits of `model` on the masked batch, with the dense head or the sparse one (at 12 slots)."""
    import tensorflow as tf

    from mlm_tpu.mlm.prediction_slots import into_slots
    from mlm_tpu.mlm.sparse_head import sparse_outputs

    inputs = {name: tf.constant(batch[name]) for name in ("input_ids", "attention_mask", "labels")}
    if sparse:
        return sparse_outputs(model, into_slots(inputs, 12, tf.random.uniform(batch["labels"].shape, seed=0)), False)
    return model(**inputs, training=False)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_transformers_5_checkpoint_gives_its_own_masked_lm_loss_in_tensorflow(checkpoints, family, capsys):
    """Weights, tied head and positions loaded right: transformers 5's loss and logits on the same masked batch, with
    the dense head and the sparse one (which finds each family's head)."""
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    from mlm_tpu.mlm.continued import continued_masked_lm
    from mlm_tpu.tokenizer.load import load_tokenizer

    folder = checkpoints / family
    model = continued_masked_lm(str(folder), load_tokenizer(str(folder)))
    assert "with its masked-LM head" in capsys.readouterr().err  # nothing of the head initialised anew
    batch = np.load(f"{folder}.npz")
    dense = tensorflow_outputs(model, batch, sparse=False)
    assert abs(float(np.mean(dense.loss)) - float(batch["loss"])) < TOLERANCE
    assert np.abs(dense.logits.numpy() - batch["logits"]).max() < TOLERANCE
    assert abs(float(np.mean(tensorflow_outputs(model, batch, sparse=True).loss)) - float(batch["loss"])) < TOLERANCE


# the weights a sequence classifier adds to each family's masked LM as transformers 5 saves it: BERT's and ALBERT's pooler
# (inside the encoder's prefix, which their masked LMs save without) and the classifier
CLASSIFIER_MODULES = {"bert": "bert.pooler.dense, classifier", "albert": "albert.pooler, classifier",
                      "distilbert": "classifier, pre_classifier", "deberta-v2": "classifier, pooler.dense"}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_transformers_5_masked_lm_fine_tunes_with_its_new_head_named(checkpoints, family, capsys):
    """Fine-tuning starts from a masked LM saved with PyTorch weights alone (every run_mlm.py BERT): what the
    classifier adds is new and named, a BERT's pooler too, where it was refused as missing encoder weights."""
    import mlm_tpu  # noqa: F401
    from transformers import TFAutoModelForSequenceClassification

    from mlm_tpu.encoder.models import Labels, pretrained_encoder

    _, new_weights = pretrained_encoder(str(checkpoints / family), TFAutoModelForSequenceClassification,
                                        Labels(("a", "b")))
    modules = CLASSIFIER_MODULES.get(family, "classifier.dense, classifier.out_proj")
    assert f"a new head is initialised for 2 outputs: {modules}" in capsys.readouterr().err


MARKS = {"wordpiece": ("##", False), "bpe": ("Ġ", True), "unigram": ("▁", True)}  # marker, whether it starts a word


@pytest.mark.parametrize("family", FAMILIES)
def test_whole_word_masking_finds_the_words_of_each_familys_tokenizer_as_transformers_5_saves_it(checkpoints,
                                                                                                  family):
    """WordPiece marks a word's later pieces (##), SentencePiece (▁) and byte-level BPE (Ġ) its first; the
    SentencePiece families' own classes (XLMRobertaTokenizer, AlbertTokenizer, DebertaV2Tokenizer) saved by
    transformers 5 load as theirs."""
    from mlm_tpu.tokenizer.load import load_tokenizer
    from mlm_tpu.tokenizer.word_starts import word_start_flags, word_start_table, word_starts

    tokenizer = load_tokenizer(str(checkpoints / family))
    starts = word_starts(tokenizer)
    assert (starts.family, starts.marker, starts.marks_start) == (FAMILIES[family], *MARKS[FAMILIES[family]])
    ids = tokenizer("The unbelievably gigantic tower")["input_ids"]
    flags = word_start_flags(ids, word_start_table(tokenizer), set(tokenizer.all_special_ids))
    words = [piece for piece, start in zip(tokenizer.convert_ids_to_tokens(ids), flags) if start]
    assert len(ids) > 8 and len(words) == 2 + 4, words  # [CLS] and [SEP] count as words of their own


@functools.lru_cache(maxsize=None)
def continued_run(checkpoints: Path, family: str) -> Path:
    """Shards made with the checkpoint's tokenizer, and the checkpoint continued on them for a few steps by the real
    command; its output folder."""
    folder, shards, output = checkpoints / family, checkpoints / f"{family}-shards", checkpoints / f"{family}-run"
    for split, limit in (("train", "60"), ("validation", "20")):
        result = run_module("mlm_tpu.shard", "--tokenizer", str(folder), "--text-files", str(REPO_ROOT.parent /
                            "shared" / "data" / "wikitext-2" / "valid.txt"), "--limit", limit, "--split", split,
                            "--max-length", str(MAX_LENGTH), "--output-dir", str(shards))
        assert result.returncode == 0, result.stderr
    result = run_train("--task", "mlm", "--model-name-or-path", folder, "--train-dataset", shards / "train",
                       "--eval-dataset", shards / "validation", "--max-length", MAX_LENGTH, "--max-steps", 3,
                       "--per-replica-batch-size", 4, "--learning-rate", "1e-3", "--output-dir", output)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Continuing {folder}" in result.stderr
    return output


def pytorch_logits_check(folder: Path, inputs_path: Path) -> dict:
    """tests/pytorch_check.py's report on `folder` loaded by transformers 5's AutoModelForMaskedLM."""
    result = subprocess.run([pytorch_python(), str(REPO_ROOT / "tests" / "pytorch_check.py"), str(folder),
                             "AutoModelForMaskedLM", str(inputs_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_a_continued_checkpoint_trains_and_its_folder_loads_in_transformers_5_with_tensorflows_logits(
        checkpoints, family, tmp_path):
    from transformers import TFAutoModelForMaskedLM

    from mlm_tpu.model_folder.loading import load_model

    output = continued_run(checkpoints, family)
    assert json.loads((output / "config.json").read_text())["model_type"] == family
    batch = np.load(checkpoints / f"{family}.npz")
    inputs = {name: batch[name] for name in ("input_ids", "attention_mask")}
    model = load_model(str(output), TFAutoModelForMaskedLM)
    tensorflow_logits = model(**inputs, training=False).logits.numpy()
    assert np.abs(tensorflow_logits - batch["logits"]).max() > TOLERANCE  # it trained: the weights moved
    np.savez(tmp_path / "inputs.npz", **inputs, logits=tensorflow_logits)
    report = pytorch_logits_check(output, tmp_path / "inputs.npz")
    assert report["transformers"].startswith("5.") and not report["missing"], report
    assert report["max_abs_diff"] < TOLERANCE, report


@pytest.mark.slow
@pytest.mark.parametrize("family", ["bert", "distilbert"])
def test_export_fill_mask_evaluate_and_inspect_work_on_a_continued_folder(checkpoints, family, tmp_path):
    """The folder of a continued BERT or DistilBERT (whose BERT tokenizer gives token_type_ids it does not take)."""
    output = continued_run(checkpoints, family)
    shards = checkpoints / f"{family}-shards"
    result = run_module("mlm_tpu.export", "--model", str(output), "--output-dir", str(tmp_path / "exported"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "exported" / "model.safetensors").read_bytes() == (output / "model.safetensors").read_bytes()
    result = run_module("mlm_tpu.predict", "--model", str(output), "--json", "--top-k", "3", "The [MASK] was built .")
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout.splitlines()[0])["predictions"][0]) == 3  # the one mask's top 3
    result = run_module("mlm_tpu.evaluate", "--model", str(output), "--eval-dataset", str(shards / "validation"),
                        "--json")
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout.splitlines()[-1])
    assert scores["task"] == "mlm" and 0 < scores["loss"] < 10, scores
    result = run_module("mlm_tpu.inspect", "--dataset", str(shards / "train"), "--tokenizer", str(output),
                        "--masking", "whole-word", "--mlm-probability", "0.5", "--num-examples", "2", "--json")
    assert result.returncode == 0, result.stderr
    for example in map(json.loads, result.stdout.splitlines()):  # WordPiece words masked whole: ⟦word⟧, never wo⟦rd⟧
        view = example["masked"]["text"]
        assert view.count("⟦") >= 2 and re.fullmatch(r"(⟦[^⟦⟧ ]+⟧|[^⟦⟧ ]+)( (⟦[^⟦⟧ ]+⟧|[^⟦⟧ ]+))*", view), view


@pytest.mark.slow
def test_a_bert_preset_trains_from_scratch_and_its_folder_loads_in_transformers_5(checkpoints, tmp_path):
    """--model-config bert-tiny: a BertForMaskedLM of Turc et al.'s shape, positions from 0, WordPiece token types."""
    from transformers import TFAutoModelForMaskedLM

    from mlm_tpu.model_folder.loading import load_model

    continued_run(checkpoints, "bert")  # its shards, made with the WordPiece tokenizer
    shards, output = checkpoints / "bert-shards", tmp_path / "bert-tiny"
    result = run_train("--task", "mlm", "--model-config", "bert-tiny", "--tokenizer", checkpoints / "bert",
                       "--train-dataset", shards / "train", "--max-length", MAX_LENGTH, "--max-steps", 2,
                       "--per-replica-batch-size", 4, "--output-dir", output)
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((output / "config.json").read_text())
    assert (config["architectures"], config["hidden_size"], config["num_hidden_layers"], config["type_vocab_size"],
            config["max_position_embeddings"]) == (["BertForMaskedLM"], 128, 2, 2, 512)
    batch = np.load(checkpoints / "bert.npz")
    inputs = {name: batch[name] for name in ("input_ids", "attention_mask")}
    logits = load_model(str(output), TFAutoModelForMaskedLM)(**inputs, training=False).logits.numpy()
    np.savez(tmp_path / "inputs.npz", **inputs, logits=logits)
    report = pytorch_logits_check(output, tmp_path / "inputs.npz")
    assert not report["missing"] and report["max_abs_diff"] < TOLERANCE, report
