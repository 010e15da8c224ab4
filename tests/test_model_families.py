"""The family registry (model_folder/families.py): ModernBERT through the stages as any family goes, asked of the
registry (issue 50): trained from scratch with the sparse and the dense head, continued from a folder transformers 5
saved, and saved as transformers 5's ModernBertForMaskedLM loads it (no missing or unexpected keys, its logits within
1e-4 of TensorFlow's)."""

import json
import subprocess
import textwrap

import numpy as np
import pytest

from conftest import MAX_LENGTH, assert_user_error, pytorch_python, run_train
from mlm_tpu.model_folder import families

# transformers 5, on a folder: its class, what it lacked or did not use, and its logits on two rows (one padded)
PT5_LOGITS = textwrap.dedent("""
    import json, sys
    import numpy as np, torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    folder, out, texts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    model, info = AutoModelForMaskedLM.from_pretrained(folder, output_loading_info=True, attn_implementation="eager")
    batch = AutoTokenizer.from_pretrained(folder)(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits.numpy()
    np.savez(out, logits=logits, input_ids=batch["input_ids"].numpy(), attention_mask=batch["attention_mask"].numpy())
    print(json.dumps({"class": type(model).__name__, "missing": sorted(info["missing_keys"]),
                      "unexpected": sorted(info["unexpected_keys"])}))
""")
def test_the_registry_answers_for_each_family(tmp_path):
    """A ModernBERT preset or config.json is ModernBERT's; any other (a RoBERTa preset, a Hub name) the generic
    entry's; a class's name says its head, whichever family's class."""
    assert families.of_preset("modernbert-tiny") is families.MODERNBERT
    assert families.of_model_config("tiny") is None and families.of_folder("roberta-base") is families.GENERIC
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "modernbert"}))
    assert families.of_folder(str(tmp_path)) is families.MODERNBERT
    model_class = families.MODERNBERT.model_class("token_classification")
    assert families.head_of_class(model_class) == "token_classification"
    assert families.head_of_class(families.GENERIC.model_class("masked_lm")) == "masked_lm"
    assert families.GENERIC.builds("masked_lm") is False and families.MODERNBERT.builds("sequence_classification")


TEXTS = ["the river and its long bridges of the town " * 4, "the end"]  # two rows, one padded


def transformers_5_logits(folder, tmp_path, texts=TEXTS) -> dict:
    out = tmp_path / f"{folder.name}-pt5.npz"
    ran = subprocess.run([pytorch_python(), "-c", PT5_LOGITS, str(folder), str(out), json.dumps(texts)],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    return {**json.loads(ran.stdout.strip().splitlines()[-1]), **np.load(out)}


def assert_loads_in_transformers_5(folder, tmp_path, texts=TEXTS) -> dict:
    """transformers 5 loads the folder as ModernBertForMaskedLM, every key used, with mlm_tpu's logits (1e-4) on
    `texts` as its AutoTokenizer cuts them; returns what it found (its ids among them)."""
    from transformers import TFAutoModelForMaskedLM

    from mlm_tpu.model_folder.loading import load_pretrained

    found = transformers_5_logits(folder, tmp_path, texts)
    assert (found["class"], found["missing"], found["unexpected"]) == ("ModernBertForMaskedLM", [], [])
    model, _ = load_pretrained(str(folder), TFAutoModelForMaskedLM)
    ours = model({"input_ids": found["input_ids"], "attention_mask": found["attention_mask"]}).logits.numpy()
    real = found["attention_mask"].astype(bool)
    assert np.abs(ours - found["logits"])[real].max() < 1e-4
    return found


@pytest.mark.slow
@pytest.mark.parametrize("head", ["sparse", "dense"])
def test_modernbert_from_scratch_saves_what_transformers_5_loads(head, shards, wikitext_tokenizer, tmp_path,
                                                                  in_process):
    output_dir = tmp_path / f"modernbert-{head}"
    result = run_train("--task", "mlm", "--model-config", "modernbert-tiny", "--train-dataset", shards / "train",
                       "--tokenizer", wikitext_tokenizer[0], "--max-length", MAX_LENGTH, "--per-replica-batch-size",
                       8, "--max-steps", 3, "--output-dir", output_dir,
                       *(["--dense-mlm-head"] if head == "dense" else []))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Masked-LM head: {head}" in result.stderr
    assert "Packed rows: each document attends only to itself" in result.stderr  # the family's default
    assert "tf_model.h5" not in {path.name for path in output_dir.iterdir()}  # transformers 4 has no ModernBERT
    assert_loads_in_transformers_5(output_dir, tmp_path)
    if head == "sparse":  # predict (fill-mask) and evaluate take it as any masked LM
        filled = in_process("predict", "--model", output_dir, "--top-k", 3, "The river is the [MASK] of the town.")
        assert filled.returncode == 0 and filled.stdout.count("\n   ") == 3, filled.stderr[-2000:]  # 3 candidates
        scored = in_process("evaluate", "--model", output_dir, "--eval-dataset", shards / "validation")
        assert scored.returncode == 0 and "Packed rows: each document" in scored.stderr, scored.stderr[-2000:]
        assert "masked accuracy" in scored.stdout


def small_modernbert_folder(folder, tokenizer_folder, **changes):
    """A ModernBERT folder as mlm_tpu saves it (config.json, model.safetensors), with the tokenizer given; no
    training."""
    from mlm_tpu.modernbert import presets, weights
    from mlm_tpu.modernbert.model import build
    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(tokenizer_folder), "--tokenizer")
    config = families.MODERNBERT.fitted_config(presets.preset("modernbert-tiny", hidden_size=32, intermediate_size=32,
                                                              num_hidden_layers=1), tokenizer, MAX_LENGTH)
    config = config.replace(**changes)
    weights.save_pretrained(build(config), str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def test_modernbert_bad_checkpoints_are_one_error_line(in_process, shards, wikitext_tokenizer, tmp_path):
    """A tokenizer larger than the checkpoint's vocabulary, and weights of other shapes than its config.json says:
    one error line each, exit 2, nothing written."""
    small = small_modernbert_folder(tmp_path / "small-vocabulary", wikitext_tokenizer[0], vocab_size=100)
    reshaped = small_modernbert_folder(tmp_path / "reshaped", wikitext_tokenizer[0])
    config = json.loads((reshaped / "config.json").read_text())
    (reshaped / "config.json").write_text(json.dumps({**config, "hidden_size": 64, "intermediate_size": 64}))
    for base, phrases in ((small, ("the tokenizer has 2,000 tokens", "only 100 embeddings")),
                          (reshaped, ("has shape", "the weights and the config do not belong together"))):
        output_dir = tmp_path / f"out-{base.name}"
        result = in_process("train", "--task", "mlm", "--model-name-or-path", base, "--train-dataset",
                            shards / "train", "--tokenizer", wikitext_tokenizer[0], "--max-length", MAX_LENGTH,
                            "--max-steps", 1, "--output-dir", output_dir)
        assert_user_error(result, *phrases)
        assert not output_dir.exists()


# transformers 5's classifier of a folder: its class, pooling, loading info, and its logits on two rows (one padded)
PT5_CLASSIFIER = textwrap.dedent("""
    import json, sys
    import numpy as np, torch
    import transformers
    folder, class_name, out = sys.argv[1:4]
    model, info = getattr(transformers, class_name).from_pretrained(folder, output_loading_info=True)
    batch = transformers.AutoTokenizer.from_pretrained(folder)(["the river and its long bridges", "the end"],
                                                               padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits.numpy()
    np.savez(out, logits=logits, input_ids=batch["input_ids"].numpy(), attention_mask=batch["attention_mask"].numpy())
    print(json.dumps({"class": type(model).__name__, "pooling": model.config.classifier_pooling,
                      "missing": sorted(info["missing_keys"]), "unexpected": sorted(info["unexpected_keys"])}))
""")


@pytest.mark.slow
@pytest.mark.parametrize("task, run, pooling, base", [("sequence-classification", "single", "mean", "pretrained"),
                                                      ("sequence-classification", "single", "cls", "pretrained"),
                                                      ("sequence-classification", "single", "mean", "scratch"),
                                                      ("token-classification", "tags", None, "pretrained")])
def test_modernbert_fine_tunes_into_transformers_5s_own_classifiers(task, run, pooling, base, wikitext_tokenizer,
                                                                     tmp_path):
    """A ModernBERT fine-tuned with its own classifier_pooling (native: no remote code) or as a tagger is saved as
    transformers 5's ModernBertFor* loads it, every key used, pooling kept, logits within 1e-4 of mlm_tpu's."""
    from test_encoder import shard
    from transformers import TFAutoModelForSequenceClassification, TFAutoModelForTokenClassification

    from mlm_tpu.model_folder.loading import load_pretrained

    model = (["--model-config", "modernbert-tiny", "--tokenizer", wikitext_tokenizer[0]] if base == "scratch" else
             ["--model-name-or-path", small_modernbert_folder(tmp_path / "base", wikitext_tokenizer[0],
                                                              classifier_pooling="cls")])
    shards = shard(wikitext_tokenizer[0], tmp_path, run)
    output_dir = tmp_path / "fine-tuned"
    result = run_train("--task", task, *model, "--train-dataset", shards / "train",
                       "--eval-dataset", shards / "validation", "--per-replica-batch-size", 16, "--max-steps", 2,
                       "--output-dir", output_dir, *(["--classifier-pooling", pooling] if pooling else []))
    assert result.returncode == 0, result.stderr[-3000:]
    sequence = task == "sequence-classification"
    class_name = "ModernBertForSequenceClassification" if sequence else "ModernBertForTokenClassification"
    out = tmp_path / "pt5.npz"
    ran = subprocess.run([pytorch_python(), "-c", PT5_CLASSIFIER, str(output_dir), class_name, str(out)],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    found = {**json.loads(ran.stdout.strip().splitlines()[-1]), **np.load(out)}
    assert (found["class"], found["missing"], found["unexpected"]) == (class_name, [], [])
    assert found["pooling"] == (pooling or "cls")
    model, _ = load_pretrained(str(output_dir), TFAutoModelForSequenceClassification if sequence else
                               TFAutoModelForTokenClassification)
    ours = model({"input_ids": found["input_ids"], "attention_mask": found["attention_mask"]}).logits.numpy()
    real = slice(None) if sequence else found["attention_mask"].astype(bool)
    assert np.abs(ours - found["logits"])[real].max() < 1e-4


def test_packed_rows_keep_each_document_to_itself_by_its_separator(wikitext_tokenizer):
    """The document ids the masked-LM line gives a ModernBERT's packed rows (each document ends at the tokenizer's
    separator, as the shard command packs them): each of 3 documents in one row gets the logits it gets alone."""
    import tensorflow as tf

    from mlm_tpu.modernbert import presets
    from mlm_tpu.modernbert.model import build
    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(wikitext_tokenizer[0]), "--tokenizer")
    family = families.MODERNBERT
    model = build(family.fitted_config(presets.preset("modernbert-tiny", local_attention=8), tokenizer, MAX_LENGTH))
    documents = [tokenizer(text)["input_ids"] for text in
                 ("The river runs through the old town and under its bridges .", "A short one .",
                  "In 1907 the railway reached the valley , and the town grew around its station .")]
    row = sum(documents, [])
    padding = MAX_LENGTH - len(row)
    input_ids = tf.constant([row + [tokenizer.pad_token_id] * padding])
    document_ids = family.document_ids(input_ids, tokenizer.sep_token_id)
    assert document_ids.numpy()[0, :len(row)].tolist() == sum(([n + 1] * len(d) for n, d in enumerate(documents)), [])
    packed = model(input_ids, attention_mask=tf.constant([[1] * len(row) + [0] * padding]),
                   document_ids=document_ids).logits.numpy()[0]
    start = 0
    for document in documents:
        alone = model(tf.constant([document])).logits.numpy()[0]
        assert np.abs(packed[start:start + len(document)] - alone).max() < 1e-5
        start += len(document)
