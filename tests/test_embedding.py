"""--task sentence-embedding (issue 58): (query, positive, hard negative) shards; in-batch negatives over the global
batch, with GradCache and across replicas equal to one pass; any encoder folder as a start (a masked LM without a
pooler); the saved folder in sentence-transformers for RoBERTa, BERT and ModernBERT; predict embed and search; bad
input. The retrieval evaluation's own tests are in test_retrieval.py."""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT, assert_user_error, pytorch_python, run_module, run_train, write_jsonl

LENGTH = 32
TEXTS = ["A cat sat on the mat.", "The river flows into the sea in the north.", "Prices rose again this year."]


def pair_rows(paragraphs, count: int, seed: int):
    """(query, positive, negative) rows from real text: a paragraph's first third, the rest of it, and words of
    another paragraph."""
    random.seed(seed)
    rows = []
    for words in paragraphs[:count]:
        cut = len(words) // 3
        rows.append({"query": " ".join(words[:cut]), "positive": " ".join(words[cut:]),
                     "negative": " ".join(random.choice(paragraphs)[5:40])})
    return rows


@pytest.fixture(scope="module")
def pair_shards(tmp_path_factory, wikitext_path, wikitext_tokenizer):
    """Train (160 rows) and validation (40) shards of 32-token texts with one hard negative each; and the same
    training rows without their negatives (pairs-only: an empty negative feature, which must never reach the
    device)."""
    folder = tmp_path_factory.mktemp("pairs")
    paragraphs = [line.split() for line in wikitext_path.read_text(encoding="utf-8").splitlines()
                  if len(line.split()) > 30 and not line.strip().startswith("=")]
    for split, rows, negatives in (("train", pair_rows(paragraphs, 160, 0), True),
                                   ("validation", pair_rows(paragraphs[160:], 40, 1), True),
                                   ("pairs-only", pair_rows(paragraphs, 160, 0), False)):
        source = write_jsonl(folder / f"{split}.jsonl", rows)
        result = run_module("mlm_tpu.shard", "--task", "sentence-embedding", "--tokenizer", wikitext_tokenizer[0],
                            "--text-files", source, "--input-column", "query", "--target-column", "positive",
                            *(["--negative-columns", "negative"] if negatives else []), "--max-length", str(LENGTH),
                            "--split", split, "--output-dir", folder / "shards")
        assert result.returncode == 0, result.stderr[-2000:]
    return folder / "shards"


def test_a_row_holds_its_query_positive_and_hard_negative_as_the_tokenizer_encodes_them(pair_shards, wikitext_path,
                                                                                       wikitext_tokenizer):
    from transformers import AutoTokenizer

    from mlm_tpu.shards.tfrecord import iter_records

    manifest = json.loads((pair_shards / "train" / "manifest.json").read_text())
    assert manifest["settings"]["negative_columns"] == ["negative"]
    assert {name: feature["length"] for name, feature in manifest["features"].items()} == {
        "input_ids": LENGTH, "attention_mask": LENGTH, "positive_input_ids": LENGTH,
        "positive_attention_mask": LENGTH, "negative_input_ids": LENGTH, "negative_attention_mask": LENGTH}
    import tensorflow as tf

    shard = next((pair_shards / "train").glob("*.tfrecord"))
    record = next(iter_records(shard.read_bytes(), str(shard)))
    example = tf.train.Example.FromString(record).features.feature
    tokenizer = AutoTokenizer.from_pretrained(wikitext_tokenizer[0])
    rows = pair_rows([line.split() for line in wikitext_path.read_text(encoding="utf-8").splitlines()
                      if len(line.split()) > 30 and not line.strip().startswith("=")], 1, 0)
    for feature, column in (("input_ids", "query"), ("positive_input_ids", "positive"),
                            ("negative_input_ids", "negative")):
        expected = tokenizer(rows[0][column], truncation=True, max_length=LENGTH, padding="max_length")["input_ids"]
        assert list(example[feature].int64_list.value) == expected, feature


@pytest.mark.slow
def test_grad_cache_and_two_replicas_give_the_one_pass_loss_and_gradients(pair_shards, wikitext_tokenizer):
    """The symmetric loss of 8 rows (each query against 8 positives and 8 hard negatives) and its gradients: GradCache
    3 texts at a time, one pass on 2 replicas (negatives gathered across them) and GradCache on 2 replicas, each
    within 1e-5 of one pass on one device. Without the gathering, 2 replicas would score each query against half
    the documents: another loss (0.69 away here)."""
    result = subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "embedding_check.py"),
                             str(pair_shards / "train"), str(wikitext_tokenizer[0])], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=900, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(found["ways"]) == {"grad_cache", "two_replicas", "two_replicas_grad_cache"}
    for way in found["ways"].values():
        assert way["loss_diff"] < 1e-5 and way["gradient_diff"] < 1e-5, found
        assert way["largest_gradient"] > 1e-2, found  # gradients that say something


@pytest.fixture(scope="module")
def trained_embedder(tmp_path_factory, pair_shards, wikitext_tokenizer):
    """A tiny RoBERTa from scratch, fine-tuned 2 epochs contrastively by the real `python train.py` on pairs without
    hard negatives (their empty feature crashed TensorFlow's CPU kernels when it reached the device), validated on the
    same split (the validation path reads such splits too)."""
    output_dir = tmp_path_factory.mktemp("embedder") / "model"
    result = run_train("--task", "sentence-embedding", "--train-dataset", pair_shards / "pairs-only", "--eval-dataset",
                       pair_shards / "pairs-only", "--tokenizer", wikitext_tokenizer[0], "--model-config", "tiny",
                       "--max-length", LENGTH, "--per-replica-batch-size", 16, "--num-epochs", 2, "--learning-rate",
                       "1e-3", "--output-dir", output_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir, result


@pytest.mark.slow
def test_trains_and_saves_a_sentence_transformers_folder_that_predict_embeds(trained_embedder, in_process, tmp_path):
    output_dir, result = trained_embedder
    assert "Each query is scored against the global batch's positives (cosine x 20)" in result.stderr
    losses = [float(loss) for loss in __import__("re").findall(r"training: loss ([\d.]+)", result.stderr)]
    assert len(losses) == 2 and losses[1] < losses[0], result.stderr[-2000:]
    assert "MRR@10" in result.stderr
    for name in ("modules.json", "1_Pooling/config.json", "config_sentence_transformers.json",
                 "sentence_bert_config.json", "model.safetensors", "README.md"):
        assert (output_dir / name).is_file(), name
    assert json.loads((output_dir / "config_sentence_transformers.json").read_text())["similarity_fn_name"] == "cosine"
    assert json.loads((output_dir / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"] is True
    card = (output_dir / "README.md").read_text()
    assert "sentence-similarity" in card and "mrr_at_10" in card
    shown = in_process("predict", "embed", "--model", output_dir, "--json", *TEXTS)
    assert shown.returncode == 0, shown.stderr
    vectors = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [row["text"] for row in vectors] == TEXTS and all(len(row["embedding"]) == 64 for row in vectors)
    written = in_process("predict", "embed", "--model", output_dir, "--output", tmp_path / "v.npy", *TEXTS)
    assert written.returncode == 0, written.stderr
    assert np.allclose(np.load(tmp_path / "v.npy"), [row["embedding"] for row in vectors], atol=1e-6)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(reversed(TEXTS)) + "\n", encoding="utf-8")
    searched = in_process("predict", "search", "--model", output_dir, "--corpus", corpus, "--json", TEXTS[1])
    assert searched.returncode == 0, searched.stderr
    hits = json.loads(searched.stdout)["results"]
    assert len(hits) == 3 and hits[0]["text"] == TEXTS[1] and hits[0]["score"] == pytest.approx(1.0, abs=1e-5)


def saved_encoder(folder, preset: str, tokenizer_folder):
    """A bare encoder of `preset` from scratch, saved as the task saves its model (family's save, tokenizer,
    sentence-transformers' files; mean pooling but for BERT's, cls); returns its pooling."""
    from transformers import AutoTokenizer

    from mlm_tpu.embedding.encoder import encoder_from_scratch
    from mlm_tpu.model_folder import families
    from mlm_tpu.model_folder.pooling import write_sentence_transformers_files

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    model = encoder_from_scratch(preset, tokenizer, LENGTH, None)
    model.build_in_name_scope()
    pooling = "cls" if preset.startswith("bert") else "mean"
    os.makedirs(folder)
    families.of_model(model).save(model, str(folder), LENGTH)
    tokenizer.save_pretrained(folder)
    write_sentence_transformers_files(str(folder), model.config, LENGTH, pooling, "cosine")
    return pooling


def test_sentence_transformers_embeds_a_roberta_a_bert_and_a_modernbert_as_mlm_tpu_does(tmp_path,
                                                                                         wikitext_tokenizer):
    """Each family's folder, saved with its sentence-transformers files, embeds in sentence-transformers 5 (PyTorch,
    transformers 5) within 1e-4 of `predict embed`'s vectors (mean pooling, and cls for the BERT)."""
    from mlm_tpu.embedding.prediction import Embedder

    python = pytorch_python()
    arguments = []
    for preset in ("tiny", "bert-tiny", "modernbert-tiny"):
        folder = tmp_path / preset
        saved_encoder(folder, preset, wikitext_tokenizer[0])
        np.save(tmp_path / f"{preset}.npy", Embedder(str(folder))(TEXTS))
        arguments += [str(folder), str(tmp_path / f"{preset}.npy")]
    (tmp_path / "texts.json").write_text(json.dumps(TEXTS))
    result = subprocess.run([python, str(REPO_ROOT / "tests" / "sentence_transformers_check.py"),
                             str(tmp_path / "texts.json"), *arguments], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["architecture"] for row in found] == ["RobertaModel", "BertModel", "ModernBertModel"]
    assert [row["pooling"] for row in found] == ["mean", "cls", "mean"]
    assert all(row["similarity"] == "cosine" and row["max_abs_diff"] < 1e-4 for row in found), found


def test_a_masked_lm_folder_without_a_pooler_starts_an_embedding_model(trained_mlm, capsys):
    """A masked LM has no pooler, which the bare encoder class holds: it loads (today's TFAutoModel load refuses it
    as lacking roberta.pooler.dense), the log says the pooler is new and unread, and the vectors are the masked LM's
    own encoder's hidden states, mean-pooled."""
    import tensorflow as tf
    from transformers import TFAutoModelForMaskedLM

    from mlm_tpu.embedding.encoder import TextEmbedder, pretrained_encoder
    from mlm_tpu.model_folder.loading import load_model

    folder = str(trained_mlm[0])
    model = pretrained_encoder(folder)
    assert "has no pooler" in capsys.readouterr().err
    masked_lm = load_model(folder, TFAutoModelForMaskedLM)
    ids = tf.constant([[0, 15, 27, 99, 2, 1, 1, 1]])
    mask = tf.constant([[1, 1, 1, 1, 1, 0, 0, 0]])
    hidden = masked_lm.roberta(input_ids=ids, attention_mask=mask).last_hidden_state
    expected = tf.reduce_sum(hidden * tf.cast(mask[:, :, None], tf.float32), axis=1) / 5.0
    assert np.allclose(TextEmbedder(model, "mean")(ids, mask).numpy(), expected.numpy(), atol=1e-6)


@pytest.mark.parametrize("flags, phrases", [
    (["--gradient-accumulation-steps", "2"], ["--gradient-accumulation-steps 2", "--grad-cache-mini-batch-size"]),
    (["--per-replica-batch-size", "1"], ["global batch of 1 has none", "--per-replica-batch-size to 2"]),
    (["--embedding-pooling", "max"], ["--embedding-pooling must be cls or mean"]),
])
def test_bad_settings_are_one_line_and_nothing_is_written(flags, phrases, pair_shards, wikitext_tokenizer, in_process,
                                                          tmp_path):
    result = in_process("train", "--task", "sentence-embedding", "--train-dataset", pair_shards / "train",
                        "--tokenizer", wikitext_tokenizer[0], "--model-config", "tiny", "--max-length", LENGTH,
                        "--output-dir", tmp_path / "out", *flags)
    assert_user_error(result, *phrases)
    assert not (tmp_path / "out").exists()
