"""Bad input across every command, in one table: what a careless or unlucky user gives, and what must happen.

Each row makes its input under a fresh folder, runs the command (in this process, through the same
`run_command` wrapper a shell user goes through, so a stray exception fails the row with its
traceback), and checks: the exit code (2 for bad input; 0 where the right answer is to do the work),
one `error:` line holding the row's phrases, no traceback, and what must not be on disk afterwards
(half-written files, a model saved over a good one), and what must be byte-identical afterwards (the
user's files: a command writes only what it made, output_dir.py). New flags and formats get their rows here.

Rows that need a trained model or a training step are marked slow; the others run in seconds.
"""

import csv
import filecmp
import hashlib
import io
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import pytest

from conftest import REPO_ROOT, assert_user_error, run_module, run_train
from mlm_tpu.shards.format import WRITER_RECORD
from mlm_tpu.shards.tfrecord import frame_records, iter_records

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "made-by-0.2"


@dataclass
class Inputs:
    """What a row builds its input from: a scratch folder and the session's real tokenizers and shards."""

    tmp: Path
    tokenizer: Path  # the masked-LM tokenizer the shards were made with (2,000 pieces)
    shards: Path  # its train/ and validation/ splits, 64-token examples
    t5_tokenizer: Path

    def copy(self, source: Path, name: str) -> Path:
        target = self.tmp / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
        return target

    def good_model(self) -> Path:
        """An output folder that already holds a trained model a failed run must leave as it is."""
        return self.copy(FIXTURES / "roberta", "good-model")


@dataclass
class Row:
    id: str
    command: str  # a `mlm-tpu` command
    make_args: Callable[[Inputs], List[str]]
    phrases: Tuple[str, ...] = ()
    exit_code: int = 2
    absent: Tuple[str, ...] = ()  # paths under the scratch folder that must not exist afterwards
    unchanged: Tuple[str, ...] = ()  # folders under the scratch folder that must be as good_model() made them
    kept: Tuple[str, ...] = ()  # files or folders under the scratch folder that must be byte-identical afterwards
    slow: bool = False
    stdin: bytes = b""  # what the command reads on stdin
    check: Callable[[Inputs, str], None] = field(default=lambda inputs, stdout: None)  # more, for exit-0 rows


ROWS: List[Row] = []


def row(command: str, *phrases: str, **options):
    """Register the decorated function (Inputs -> the command's arguments) as a row of the table."""
    def register(make_args):
        ROWS.append(Row(make_args.__name__, command, make_args, phrases, **options))
        return make_args
    return register


def text_file(inputs: Inputs, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = inputs.tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding=encoding)
    return path


def tree(path: Path) -> dict:
    """Every file under `path` (or `path` itself), hidden ones included, by its relative name: its bytes' digest."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def parquet_file(inputs: Inputs, name: str, columns: dict) -> Path:
    import pyarrow
    import pyarrow.parquet

    path = inputs.tmp / name
    pyarrow.parquet.write_table(pyarrow.table(columns), path)
    return path


def tokenizer_flags(inputs: Inputs, *corpus: str, output: str = "tok") -> List[str]:
    return ["train", "--text-files", *corpus, "--vocab-size", "200", "--output-dir", str(inputs.tmp / output)]


def shard_flags(inputs: Inputs, *extra: str, tokenizer=None, output: str = "out") -> List[str]:
    return ["--tokenizer", str(tokenizer or inputs.tokenizer), "--max-length", "32", "--output-dir",
            str(inputs.tmp / output), *extra]


def train_flags(inputs: Inputs, train=None, *extra: str, output: str = "model") -> List[str]:
    return ["--train-dataset", str(train or inputs.shards / "train"), "--tokenizer", str(inputs.tokenizer),
            "--model-config", "tiny", "--per-replica-batch-size", "16", "--max-steps", "2", "--output-dir",
            str(inputs.tmp / output), *extra]


def short_shards(inputs: Inputs, keep_manifest: bool) -> Path:
    """The training split with its last shard cut short by whole records (its name still counts them all)."""
    split = inputs.copy(inputs.shards / "train", "short")
    last = sorted(split.glob("*.tfrecord"))[-1]
    data = last.read_bytes()
    kept = list(iter_records(data, str(last)))[:-3]
    last.write_bytes(frame_records(kept))
    if not keep_manifest:
        (split / "manifest.json").unlink()
    return split


def damaged_manifest(inputs: Inputs, source: Path, name: str) -> Path:
    split = inputs.copy(source, name)
    manifest = split / "manifest.json"
    manifest.write_text(manifest.read_text()[:50])
    return split


# --- tokenizer ---------------------------------------------------------------------------------------------------

@row("tokenizer", "--vocab-size", "at most", absent=("tok",))
def vocab_size_overflow(inputs):
    return [*tokenizer_flags(inputs, str(text_file(inputs, "c.txt", "a b c\n")))[:-4], "--vocab-size", "99999999999",
            "--output-dir", str(inputs.tmp / "tok")]


@row("tokenizer", "--vocab-size", "at most", absent=("tok",))
def vocab_size_abort(inputs):
    return [*tokenizer_flags(inputs, str(text_file(inputs, "c.txt", "a b c\n")))[:-4], "--vocab-size", "1000000000",
            "--output-dir", str(inputs.tmp / "tok")]


@row("tokenizer", "--template t5", "--algorithm unigram", "--algorithm bpe takes --template mlm", absent=("tok",))
def t5_template_with_byte_level_bpe(inputs):
    return [*tokenizer_flags(inputs, str(text_file(inputs, "c.txt", "a b c\n"))), "--algorithm", "bpe", "--template",
            "t5"]


@row("tokenizer", "--byte-fallback", "byte-level already", absent=("tok",))
def byte_fallback_with_byte_level_bpe(inputs):
    return [*tokenizer_flags(inputs, str(text_file(inputs, "c.txt", "a b c\n"))), "--algorithm", "bpe",
            "--byte-fallback"]


@row("tokenizer", "--byte-fallback", "wordpiece", "no byte pieces", absent=("tok",))
def byte_fallback_with_wordpiece(inputs):
    return [*tokenizer_flags(inputs, str(text_file(inputs, "c.txt", "a b c\n"))), "--algorithm", "wordpiece",
            "--byte-fallback"]


@row("tokenizer", "--template t5", "--lowercase", "transformers 5", absent=("tok",))
def t5_template_lowercased(inputs):
    return [*tokenizer_flags(inputs, str(text_file(inputs, "c.txt", "a b c\n"))), "--template", "t5", "--lowercase"]


@row("tokenizer", "--vocab-size 200", "256 bytes", "at least 262", absent=("tok",))
def byte_level_bpe_vocabulary_smaller_than_its_bytes(inputs):
    return [*tokenizer_flags(inputs, str(text_file(inputs, "c.txt", "a b c\n"))), "--algorithm", "bpe"]


@row("tokenizer", "--vocab-size 200", "256 byte pieces", "at least 262", absent=("tok",))
def byte_fallback_vocabulary_smaller_than_its_bytes(inputs):
    return [*tokenizer_flags(inputs, str(text_file(inputs, "c.txt", "a b c\n"))), "--byte-fallback"]


@row("tokenizer", exit_code=0)
def csv_cell_over_128_kb(inputs):
    path = inputs.tmp / "big.csv"
    with open(path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(["text"])
        writer.writerow([" ".join(f"word{i % 500}" for i in range(30_000))])  # ~250 KB
        writer.writerow(["a short row"])
    return tokenizer_flags(inputs, str(path))


@row("tokenizer", exit_code=0)
def csv_with_byte_order_mark(inputs):
    return tokenizer_flags(inputs, str(text_file(inputs, "excel.csv", "text\nsome words here\nand more words\n",
                                                 encoding="utf-8-sig")))


@row("tokenizer", "column 'text'", "int", "not text", absent=("tok",))
def parquet_text_column_of_integers(inputs):
    return tokenizer_flags(inputs, str(parquet_file(inputs, "numbers.parquet", {"text": [1, 2, 3]})))


@row("tokenizer", "no tokenizer.json", "--tokenizer")
def encode_folder_without_tokenizer_json(inputs):
    folder = inputs.copy(inputs.tokenizer, "no-tokenizer")
    (folder / "tokenizer.json").unlink()
    return ["encode", "--tokenizer", str(folder), "some text"]


@row("tokenizer", "stdin", "not UTF-8", stdin="caf\xe9 au lait\n".encode("latin-1"))
def encode_latin1_on_stdin(inputs):
    return ["encode", "--tokenizer", str(inputs.tokenizer)]


@row("tokenizer", "tokenizer.json", "not a valid", absent=("tok",))
def encode_truncated_tokenizer_json(inputs):
    folder = inputs.copy(inputs.tokenizer, "cut-tokenizer")
    (folder / "tokenizer.json").write_text((folder / "tokenizer.json").read_text()[:3000])
    return ["encode", "--tokenizer", str(folder), "some text"]


def extend_flags(inputs: Inputs, *extra: str, tokenizer=None) -> List[str]:
    return ["extend", "--tokenizer", str(tokenizer or inputs.tokenizer), "--output-dir", str(inputs.tmp / "ext"), *extra]


@row("tokenizer", "--num-new-pieces 500", "more than the corpus yields", "at most", absent=("ext",))
def extend_with_more_pieces_than_the_corpus_yields(inputs):
    corpus = text_file(inputs, "c.txt", "The hedgehogs and the gammarus of Pennsylvania.\n" * 5)
    return extend_flags(inputs, "--text-files", str(corpus), "--num-new-pieces", "500")


@row("tokenizer", "BPE with dropout 0.1", "differently from call to call", absent=("ext",))
def extend_a_bpe_with_dropout(inputs):
    folder = inputs.copy(REPO_ROOT / "tests" / "fixtures" / "transformers-5" / "bpe-source", "dropout")
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    data["model"]["dropout"] = 0.1
    (folder / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    return extend_flags(inputs, "--new-pieces-file", str(text_file(inputs, "w.txt", "hedgehog\n")), tokenizer=folder)


@row("tokenizer", "--new-pieces-file", "does not exist", absent=("ext",))
def extend_with_a_missing_pieces_file(inputs):
    return extend_flags(inputs, "--new-pieces-file", str(inputs.tmp / "missing.txt"))


@row("tokenizer", "--new-pieces-file", "'two words' is not one word", absent=("ext",))
def extend_with_two_words_on_a_line(inputs):
    return extend_flags(inputs, "--new-pieces-file", str(text_file(inputs, "w.txt", "hedgehog\ntwo words\n")))


@row("tokenizer", "give one of --num-new-pieces", absent=("ext",))
def extend_with_neither_a_count_nor_a_file(inputs):
    return extend_flags(inputs, "--text-files", str(text_file(inputs, "c.txt", "some text\n")))


@row("tokenizer", "--tokenizer", "not a tokenizer folder", absent=("ext",))
def extend_a_missing_tokenizer(inputs):
    return extend_flags(inputs, "--num-new-pieces", "5", "--text-files", str(text_file(inputs, "c.txt", "some text\n")),
                        tokenizer=inputs.tmp / "nowhere")


# --- shard ---------------------------------------------------------------------------------------------------------

@row("shard", "tokenizer.json", "not a valid", absent=("out",))
def shard_truncated_tokenizer_json(inputs):
    folder = inputs.copy(inputs.tokenizer, "cut-tokenizer")
    (folder / "tokenizer.json").write_text((folder / "tokenizer.json").read_text()[:3000])
    return shard_flags(inputs, "--text-files", str(text_file(inputs, "c.txt", "some text\n" * 50)), tokenizer=folder)


@row("shard", "manifest", "not valid JSON", "cannot tell", "even with --overwrite", kept=("out",))
def shard_over_invalid_manifest(inputs):
    corpus = text_file(inputs, "c.txt", "some text here\n" * 400)
    split = inputs.tmp / "out" / "train"
    split.mkdir(parents=True)
    (split / "manifest.json").write_text('{"records": 1')
    return shard_flags(inputs, "--text-files", str(corpus), "--overwrite")


@row("shard", exit_code=0, check=lambda inputs, _: _targets_are(inputs, {"0", "1"}))
def text2text_integer_targets_in_parquet(inputs):
    path = parquet_file(inputs, "labels.parquet", {"text": ["good film", "bad film"] * 20, "label": [1, 0] * 20})
    return ["--task", "text2text", "--tokenizer", str(inputs.t5_tokenizer), "--text-files", str(path),
            "--input-column", "text", "--target-column", "label", "--max-length", "16", "--max-target-length", "4",
            "--output-dir", str(inputs.tmp / "out")]


def _targets_are(inputs: Inputs, expected: set) -> None:
    manifest = json.loads((inputs.tmp / "out" / "train" / "manifest.json").read_text())
    assert set(manifest["target_counts"]) == expected


@row("shard", "text", "list", "not text", absent=("out/train",))
def text2text_list_targets_in_parquet(inputs):
    path = parquet_file(inputs, "lists.parquet", {"text": ["a", "b"], "label": [[1], [2]]})
    return ["--task", "text2text", "--tokenizer", str(inputs.t5_tokenizer), "--text-files", str(path),
            "--input-column", "text", "--target-column", "label", "--output-dir", str(inputs.tmp / "out")]


@row("shard", "Bad_Bucket!", "bucket name")
def invalid_bucket_name(inputs):
    return [*shard_flags(inputs, "--text-files", str(text_file(inputs, "c.txt", "some text\n")))[:-2],
            "--output-dir", "gs://Bad_Bucket!/x"]


@row("shard", "--max-length", "at least")
def shard_max_length_zero(inputs):
    return [*shard_flags(inputs, "--text-files", str(text_file(inputs, "c.txt", "some text\n")))[:4],
            "--max-length", "0", "--output-dir", str(inputs.tmp / "out")]


@row("shard", "is being written", "another", absent=("out/train/manifest.json",))
def shard_split_another_job_is_writing(inputs):
    split = inputs.tmp / "out" / "train"
    split.mkdir(parents=True)
    (split / WRITER_RECORD).write_text(json.dumps({"host": os.uname().nodename, "pid": os.getppid(),
                                                        "started": "2026-11-23T10:00:00"}))
    return shard_flags(inputs, "--text-files", str(text_file(inputs, "c.txt", "some text here\n" * 400)))


@row("shard", exit_code=0)
def shard_over_a_stale_lock(inputs):
    """A lock left by a job that was killed (its process is gone) does not block the next one."""
    split = inputs.tmp / "out" / "train"
    split.mkdir(parents=True)
    (split / WRITER_RECORD).write_text(json.dumps({"host": os.uname().nodename, "pid": 2**22 + 7,
                                                        "started": "2026-11-23T10:00:00"}))
    return shard_flags(inputs, "--text-files", str(text_file(inputs, "c.txt", "some text here\n" * 400)))


@row("shard", "113 noise spans", "has 100", "--max-length of at most 452", "--noise-density", "--mean-noise-span-length",
     absent=("out",))
def span_corruption_needing_more_sentinels_than_the_t5_tokenizer_has(inputs):
    return ["--task", "span-corruption", "--tokenizer", str(inputs.t5_tokenizer), "--text-files",
            str(text_file(inputs, "c.txt", "some text here\n" * 400)), "--max-length", "512", "--noise-density", "0.3",
            "--mean-noise-span-length", "1.5", "--output-dir", str(inputs.tmp / "out")]


FN_API = ["--runner", "FnApiRunner", "--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]


@row("shard", "--runner Nope", "not a runner", "FnApiRunner", absent=("out",))
def shard_runner_beam_does_not_know(inputs):
    return shard_flags(inputs, "--builtin-corpus", "pydoc-topics", "--runner", "Nope")


@row("shard", "--direct_num_wrkers", "did you mean --direct_num_workers", absent=("out",))
def shard_beam_option_misspelt(inputs):
    return shard_flags(inputs, "--builtin-corpus", "pydoc-topics", *FN_API[:4], "--direct_num_wrkers", "2")


@row("shard", "--tokenizer", "on this machine", "gs://", absent=("out",))
def shard_on_dataflow_from_a_local_tokenizer(inputs):
    return [*shard_flags(inputs, "--builtin-corpus", "pydoc-topics")[:-2], "--output-dir", "gs://bucket/shards",
            "--runner", "DataflowRunner", "--project", "p", "--region", "us-central1", "--temp_location",
            "gs://bucket/tmp"]


@row("shard", "--text-files", "on this machine", "flink's workers", "gs://", "LOOPBACK", absent=("out",))
def shard_on_a_flink_cluster_from_local_files(inputs):
    return ["--tokenizer", "gs://bucket/tokenizer", "--text-files", str(text_file(inputs, "c.txt", "some text\n")),
            "--output-dir", "gs://bucket/shards", "--runner", "flink", "--flink_master", "flink.example.com:8081"]


@row("shard", "--direct_num_workers is an Apache Beam pipeline option", "--runner", absent=("out",))
def shard_beam_options_without_a_runner(inputs):
    return shard_flags(inputs, "--builtin-corpus", "pydoc-topics", *FN_API[4:])


@row("shard", "rows.jsonl row 3", "target column 'label' is empty", slow=True, absent=("out/train/manifest.json",))
def shard_with_beam_a_bad_row_read_on_a_worker(inputs):
    rows = [{"text": f"question {number}", "label": "" if number == 3 else "yes"} for number in range(1, 50)]
    text_file(inputs, "rows.jsonl", "".join(json.dumps(one) + "\n" for one in rows))
    return ["--task", "text2text", "--tokenizer", str(inputs.t5_tokenizer), "--text-files", str(inputs.tmp / "rows.jsonl"),
            "--input-column", "text", "--target-column", "label", "--output-dir", str(inputs.tmp / "out"), *FN_API]


# --- train ---------------------------------------------------------------------------------------------------------

@row("train", "--shuffle-buffer-size", "at least 1", absent=("model",))
def shuffle_buffer_zero(inputs):
    return train_flags(inputs, None, "--shuffle-buffer-size", "0")


@row("train", "--seed", "at least 0", absent=("model",))
def negative_seed(inputs):
    return train_flags(inputs, None, "--seed", "-1")


@row("train", "--learning-rate", "above 0", absent=("model",))
def learning_rate_nan(inputs):
    return train_flags(inputs, None, "--learning-rate", "nan")


@row("train", "--learning-rate", "above 0", absent=("model",))
def learning_rate_negative(inputs):
    return train_flags(inputs, None, "--learning-rate", "-1")


@row("train", "--new-embeddings mean", "needs --model-name-or-path", absent=("model",))
def new_embeddings_without_a_checkpoint(inputs):
    return train_flags(inputs, None, "--new-embeddings", "mean")


@row("train", "--new-embeddings mean", "adds no piece", "tokenizer extend", absent=("model",))
def new_embeddings_without_an_extended_tokenizer(inputs):
    model = inputs.good_model()
    return ["--train-dataset", str(FIXTURES / "shards" / "train"), "--tokenizer", str(model), "--model-name-or-path",
            str(model), "--max-steps", "1", "--new-embeddings", "mean", "--output-dir", str(inputs.tmp / "model")]


@row("train", "is not an extension of --model-name-or-path", "tokenizer extend", absent=("model",))
def a_larger_tokenizer_that_is_not_the_checkpoints_extended(inputs):
    return ["--train-dataset", str(inputs.shards / "train"), "--tokenizer", str(inputs.tokenizer),
            "--model-name-or-path", str(inputs.good_model()), "--max-steps", "1", "--output-dir", str(inputs.tmp / "model")]


@row("train", "changes the id of 2 of", absent=("model",))
def an_extended_tokenizer_that_moves_an_old_piece(inputs):
    """The checkpoint's Unigram with a piece added and two old pieces' ids swapped: the embeddings would no longer
    mean what the ids say."""
    model = inputs.good_model()
    moved = inputs.tmp / "moved-tokenizer"
    moved.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(model / name, moved / name)
    data = json.loads((moved / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = data["model"]["vocab"]
    vocab[100], vocab[101] = vocab[101], vocab[100]
    vocab.append(["\u2581hedgehog", -12.0])
    (moved / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    return ["--train-dataset", str(inputs.shards / "train"), "--tokenizer", str(moved), "--model-name-or-path",
            str(model), "--max-steps", "1", "--output-dir", str(inputs.tmp / "model")]


@row("train", "--max-grad-norm", "above 0", absent=("model",))
def max_grad_norm_zero(inputs):
    return train_flags(inputs, None, "--max-grad-norm", "0")


@row("train", "--input-pipelines 4", "3 micro-batches", "--gradient-accumulation-steps 3", absent=("model",))
def micro_batches_that_split_input_pipelines(inputs):
    return train_flags(inputs, None, "--gradient-accumulation-steps", "3", "--input-pipelines", "4")


@row("train", "--batch-size-warmup-min-size 8", "micro-batches of 16", absent=("model",))
def batch_warmup_that_micro_batches_do_not_divide(inputs):
    return train_flags(inputs, None, "--gradient-accumulation-steps", "4", "--batch-size-warmup-min-size", "8",
                       "--batch-size-warmup-tokens", "1000")


@row("train", "--lr-schedule rsqrt --learning-rate 1 is its peak", "--base-learning-rate 1", absent=("model",))
def t5x_base_learning_rate_given_as_the_peak(inputs):
    return train_flags(inputs, None, "--lr-schedule", "rsqrt", "--learning-rate", "1.0")


@row("train", "--decay-ratio", absent=("model",))
def decay_ratio_zero(inputs):
    return train_flags(inputs, None, "--lr-schedule", "wsd", "--decay-ratio", "0")


@row("train", "--decay-ratio", absent=("model",))
def decay_ratio_above_one(inputs):
    return train_flags(inputs, None, "--lr-schedule", "wsd", "--decay-ratio", "1.5")


@row("train", "--decay-ratio 0.5 sets the share of the steps, at the end, that decay under --lr-schedule wsd",
     "--lr-schedule linear does not read it", absent=("model",))
def decay_ratio_of_a_schedule_without_one(inputs):
    return train_flags(inputs, None, "--lr-schedule", "linear", "--decay-ratio", "0.5")


@row("train", "--decay-shape linear sets the shape of the decay of --lr-schedule wsd",
     "--lr-schedule cosine does not read it", absent=("model",))
def decay_shape_of_cosine(inputs):
    return train_flags(inputs, None, "--lr-schedule", "cosine", "--decay-shape", "linear")


@row("train", "--min-learning-rate 0.0001 sets the rate at the end of the decay of --lr-schedule wsd or cosine",
     "--lr-schedule linear does not read it", absent=("model",))
def minimum_rate_of_linear(inputs):
    return train_flags(inputs, None, "--lr-schedule", "linear", "--min-learning-rate", "1e-4")


@row("train", "--eval-mlm-probability", "span-corruption", absent=("model",))
def eval_mlm_probability_without_masking(inputs):
    return train_flags(inputs, None, "--task", "span-corruption", "--eval-mlm-probability", "0.15")


@row("train", "--recipe bort: no such recipe", "dapt", absent=("model",))
def unknown_recipe(inputs):
    return train_flags(inputs, None, "--recipe", "bort")


@row("train", "--mlm-probability-schedule's phases end at step 1, but the run has 2 steps", absent=("model",))
def masking_schedule_short_of_the_run(inputs):
    return train_flags(inputs, None, "--mlm-probability-schedule", "0.3:1")


@row("train", "--classifier-pooling is a setting of --task sequence-classification, not of --task mlm",
     absent=("model",))
def classifier_pooling_of_a_masked_lm(inputs):
    return train_flags(inputs, None, "--classifier-pooling", "mean")


@row("train", "--classifier-pooling is a setting of --task sequence-classification, not of --task "
     "token-classification", absent=("model",))
def classifier_pooling_of_a_tagger(inputs):
    return train_flags(inputs, None, "--task", "token-classification", "--classifier-pooling", "mean")


@row("train", "--classifier-pooling must be cls or mean, not 'max'", absent=("model",))
def unknown_classifier_pooling(inputs):
    return train_flags(inputs, None, "--task", "sequence-classification", "--classifier-pooling", "max")


@row("train", "--metric-for-best-model f1 picks the best epoch, and --keep-epoch last keeps the last one",
     "--keep-epoch best", absent=("model",))
def best_metric_with_the_last_epoch_kept(inputs):
    return train_flags(inputs, None, "--task", "sequence-classification", "--keep-epoch", "last",
                       "--metric-for-best-model", "f1")


@row("train", "is a file", absent=("model/training_args.json",))
def output_dir_is_a_file(inputs):
    text_file(inputs, "model", "not a folder")
    return train_flags(inputs)


@row("train", "README.md", "did not write", kept=("model",), absent=("model/training_args.json", "model/backup"))
def train_into_a_folder_with_the_users_readme(inputs):
    text_file(inputs, "model/README.md", "# notes on the run I plan\n")
    return train_flags(inputs)


@row("train", "not writable", absent=("locked/model",))
def read_only_output_folder(inputs):
    locked = inputs.tmp / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.access(locked, os.W_OK):
        pytest.skip("running as root: permissions do not stop writing")
    return train_flags(inputs, None, output="locked/model")


@row("train", "manifest", "not valid JSON", absent=("model",))
def train_on_invalid_manifest(inputs):
    return train_flags(inputs, damaged_manifest(inputs, inputs.shards / "train", "bad-manifest"))


@row("train", "manifest", "not valid JSON", kept=("model",), absent=("model/training_args.json",))
def train_on_invalid_manifest_into_a_folder_with_the_users_readme(inputs):
    """What it reads is checked before where it writes: the damaged manifest, not the README.md in the way."""
    text_file(inputs, "model/README.md", "# notes on the run I plan\n")
    return train_flags(inputs, damaged_manifest(inputs, inputs.shards / "train", "bad-manifest"))


@row("train", "holds", "fewer", "re-shard", absent=("model",))
def train_on_short_shard_with_manifest(inputs):
    return train_flags(inputs, short_shards(inputs, keep_manifest=True))


@row("train", "holds", "fewer", "re-shard", slow=True, absent=("model/config.json",))
def train_on_short_shard_without_manifest(inputs):
    return train_flags(inputs, short_shards(inputs, keep_manifest=False), "--max-steps", "40")


@row("train", "another tokenizer", "--tokenizer", absent=("model",))
def train_with_another_tokenizer_of_the_same_size(inputs):
    other = inputs.tmp / "other-tokenizer"
    result = run_module("mlm_tpu.tokenizer", "train", "--builtin-corpus", "pydoc-topics", "--vocab-size", "2000",
                        "--output-dir", str(other))
    assert result.returncode == 0, result.stderr
    return [*train_flags(inputs)[:2], "--tokenizer", str(other), *train_flags(inputs)[4:]]


@row("train", "token id", "vocabulary", "tokenizer", slow=True, absent=("model/config.json",))
def train_on_shards_without_manifest_from_a_bigger_tokenizer(inputs):
    split = inputs.copy(inputs.shards / "train", "bigger")
    (split / "manifest.json").unlink()
    small = inputs.tmp / "small-tokenizer"
    result = run_module("mlm_tpu.tokenizer", "train", "--builtin-corpus", "pydoc-topics", "--vocab-size", "500",
                        "--output-dir", str(small))
    assert result.returncode == 0, result.stderr
    return [*train_flags(inputs, split)[:2], "--tokenizer", str(small), *train_flags(inputs)[4:]]


@row("train", "mask token", "span-corruption", absent=("model",))
def masked_lm_with_a_t5_tokenizer(inputs):
    return [*train_flags(inputs)[:2], "--tokenizer", str(inputs.t5_tokenizer), *train_flags(inputs)[4:]]


@row("train", "--train-dataset", "105 noise spans", "has 100", "re-shard", "--max-length of at most 1809",
     absent=("model",))
def span_corruption_shards_needing_more_sentinels_than_the_tokenizer_has(inputs):
    """Raw rows made elsewhere (no manifest: T5's noise settings) too long for 100 sentinels: the fix is in the
    shards, not the tokenizer."""
    import numpy as np

    from mlm_tpu.shards.format import shard_name
    from mlm_tpu.shards.tfrecord import serialize_examples

    split = inputs.tmp / "long-rows"
    split.mkdir()
    rows = np.random.default_rng(0).integers(10, 500, size=(4, 2100))
    (split / shard_name("dataset", 0, 4)).write_bytes(frame_records(serialize_examples({"input_ids": rows})))
    return ["--task", "span-corruption", "--train-dataset", str(split), "--tokenizer", str(inputs.t5_tokenizer),
            "--model-config", "t5-tiny", "--per-replica-batch-size", "2", "--max-steps", "1", "--output-dir",
            str(inputs.tmp / "model")]


@row("train", "--model-config", "t5", "masked", absent=("model",))
def t5_config_as_masked_lm_model_config(inputs):
    config = text_file(inputs, "config.json", json.dumps({"model_type": "t5", "d_model": 32, "num_layers": 1,
                                                          "num_heads": 2, "d_ff": 64, "d_kv": 16}))
    flags = train_flags(inputs)
    flags[flags.index("--model-config") + 1] = str(config)
    return flags


@row("train", "loss became", "nothing is saved", slow=True, unchanged=("model",))
def loss_turns_nan(inputs):
    inputs.good_model()
    os.rename(inputs.tmp / "good-model", inputs.tmp / "model")
    shutil.copytree(inputs.tmp / "model", inputs.tmp / "good-model")
    return train_flags(inputs, None, "--config-overrides", "initializer_range=1e30")


# --- delta-tuning: train --delta, and the adapter folders predict, evaluate and export take ------------------------

def delta_flags(inputs: Inputs, method: str, *extra: str, base: str = "t5-classifier") -> List[str]:
    """One step of --delta `method` on a model made by mlm_tpu 0.2 (the T5 classifier, or the RoBERTa)."""
    t5 = base == "t5-classifier"
    return ["--task", "classification" if t5 else "mlm", "--delta", method, "--model-name-or-path",
            str(FIXTURES / base), "--train-dataset", str(FIXTURES / ("t5-shards" if t5 else "shards") / "train"),
            "--per-replica-batch-size", "4", "--max-steps", "1", "--output-dir", str(inputs.tmp / "adapter"), *extra]


def adapter_folder(inputs: Inputs, method: str, base: str) -> Path:
    """An adapter folder as train.py --delta writes it (its record and tokenizer), for the base `base`."""
    from mlm_tpu.delta.record import DELTA_RECORD

    folder = inputs.tmp / f"{method}-adapter"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(FIXTURES / "t5-classifier" / name, folder / name)
    (folder / DELTA_RECORD).write_text(json.dumps({
        "delta": method, "settings": {}, "base_model_name_or_path": base, "model_type": "t5",
        "architecture": "T5ForConditionalGeneration", "task_specific_params": None}))
    return folder


@row("train", "--delta prefix does not support roberta models", absent=("adapter",))
def delta_on_a_model_type_it_does_not_support(inputs):
    return delta_flags(inputs, "prefix", base="roberta")


@row("train", "error: --model-name-or-path 'runs/modle'", "neither a model folder here nor", absent=("adapter",))
def delta_on_a_misspelt_base_folder(inputs):
    """Named by the flag the user gave, not by --tokenizer, whose default comes from the base."""
    flags = delta_flags(inputs, "lora", base="roberta")
    flags[flags.index("--model-name-or-path") + 1] = "runs/modle"
    return flags


@row("train", "error: --model-name-or-path", "holds no tokenizer", absent=("adapter",))
def delta_on_a_base_folder_without_its_tokenizer(inputs):
    base = inputs.copy(FIXTURES / "roberta", "base")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (base / name).unlink()
    flags = delta_flags(inputs, "lora", base="roberta")
    flags[flags.index("--model-name-or-path") + 1] = str(base)
    return flags


def t5_task_on_a_roberta(inputs: Inputs, *delta: str) -> List[str]:
    return ["--task", "generation", *delta, "--model-name-or-path", str(FIXTURES / "roberta"), "--tokenizer",
            str(FIXTURES / "t5-classifier"), "--train-dataset", str(FIXTURES / "t5-shards" / "train"),
            "--per-replica-batch-size", "4", "--max-steps", "1", "--output-dir", str(inputs.tmp / "out")]


@row("train", "--task generation needs a base of one of the types mt5, t5", "--model-name-or-path", "is a roberta model",
     absent=("out",))
def delta_of_a_t5_task_on_a_roberta(inputs):
    """Checked before anything is built: transformers would build a T5 from the RoBERTa's config."""
    return t5_task_on_a_roberta(inputs, "--delta", "lora")


@row("train", "--task generation needs a base of one of the types mt5, t5", "--model-name-or-path", "is a roberta model",
     absent=("out",))
def t5_task_fine_tuning_a_roberta(inputs):
    return t5_task_on_a_roberta(inputs)


@row("train", "--lora-targets query", "matches no layer of this t5 model", absent=("adapter",))
def lora_targets_matching_no_layer(inputs):
    return delta_flags(inputs, "lora", "--lora-targets", "query")


@row("train", "--lora-rank", "at least 1", absent=("adapter",))
def lora_rank_zero(inputs):
    return delta_flags(inputs, "lora", "--lora-rank", "0")


@row("train", "--pack cannot run --delta prompt", "drop --pack", absent=("adapter",))
def prompt_tuning_on_packed_rows(inputs):
    return delta_flags(inputs, "prompt", "--pack")


@row("train", "--lora-rank is a setting of --delta lora, not of --delta ia3", absent=("adapter",))
def another_method_s_setting(inputs):
    return delta_flags(inputs, "ia3", "--lora-rank", "4")


@row("predict", "for the base model", "gone-base", "not there", "--base-model")
def predict_with_an_adapter_whose_base_is_missing(inputs):
    folder = adapter_folder(inputs, "lora", str(inputs.tmp / "gone-base"))
    return ["text2text", "--model", str(folder), "rate: some words"]


@row("evaluate", "for the base model", "gone-base", "not there", "--base-model")
def evaluate_an_adapter_whose_base_is_missing(inputs):
    folder = adapter_folder(inputs, "lora", str(inputs.tmp / "gone-base"))
    return ["--model", str(folder), "--eval-dataset", str(FIXTURES / "t5-shards" / "validation")]


@row("export", "for the base model", "gone-base", "not there", "--base-model", absent=("merged",))
def merge_an_adapter_whose_base_is_missing(inputs):
    folder = adapter_folder(inputs, "ia3", str(inputs.tmp / "gone-base"))
    return ["--model", str(folder), "--merge", "--output-dir", str(inputs.tmp / "merged")]


@row("export", "adapter_model.safetensors is not a readable safetensors file", "cut short", kept=("lora-adapter",
                                                                                                  "merged"))
def merge_an_adapter_whose_weights_are_cut_short(inputs):
    """Named before the output folder (holding the user's README.md) is checked: what it reads comes first."""
    import numpy as np
    from safetensors.numpy import save_file

    folder = adapter_folder(inputs, "lora", str(FIXTURES / "t5-classifier"))
    save_file({"lora_A": np.zeros((8, 64), np.float32)}, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_model.safetensors").write_bytes((folder / "adapter_model.safetensors").read_bytes()[:-100])
    text_file(inputs, "merged/README.md", "# my notes\n")
    return ["--model", str(folder), "--merge", "--output-dir", str(inputs.tmp / "merged")]


@row("export", "prompt tuning", "cannot be folded", "only lora and ia3", absent=("merged",))
def merge_prompt_tuning(inputs):
    folder = adapter_folder(inputs, "prompt", str(FIXTURES / "t5-classifier"))
    return ["--model", str(folder), "--merge", "--output-dir", str(inputs.tmp / "merged")]


@row("evaluate", "--base-model is for adapter folders", "drop --base-model")
def base_model_for_a_whole_model(inputs):
    return ["--model", str(FIXTURES / "t5-classifier"), "--base-model", "t5-small", "--eval-dataset",
            str(FIXTURES / "t5-shards" / "validation")]


# --- electra ---------------------------------------------------------------------------------------------------------

@row("train", "--generator-size-ratio is a setting of --task electra, not of --task mlm", absent=("model",))
def electra_setting_for_the_masked_lm(inputs):
    return train_flags(inputs, None, "--generator-size-ratio", "0.5")


@row("train", "--generator-size-ratio", "at most 1", absent=("model",))
def generator_bigger_than_the_discriminator(inputs):
    return train_flags(inputs, None, "--task", "electra", "--generator-size-ratio", "1.5")


@row("train", "--model-config", "roberta configuration", "--task electra trains ELECTRA", absent=("model",))
def roberta_config_for_electra(inputs):
    config = text_file(inputs, "config.json", json.dumps({"model_type": "roberta", "hidden_size": 32}))
    flags = train_flags(inputs, None, "--task", "electra")
    flags[flags.index("--model-config") + 1] = str(config)
    return flags


@row("train", "--delta lora", "--task electra pretrains (or continues) both of its models whole", absent=("adapter",))
def electra_with_a_delta(inputs):
    flags = train_flags(inputs, None, "--task", "electra", output="adapter")
    del flags[flags.index("--model-config"):flags.index("--model-config") + 2]
    return [*flags, "--delta", "lora", "--model-name-or-path", str(FIXTURES / "roberta")]


@row("inspect", "--task electra", "give --model")
def electra_inspection_without_its_model(inputs):
    return ["--dataset", str(inputs.shards / "validation"), "--tokenizer", str(inputs.tokenizer), "--task", "electra"]


@row("inspect", "--task mlm", "drop --model")
def masked_lm_inspection_with_a_model(inputs):
    return ["--dataset", str(inputs.shards / "validation"), "--tokenizer", str(inputs.tokenizer), "--model",
            str(FIXTURES / "roberta")]


@row("inspect", "--task span-corruption trains on span-corruption splits", "a mlm split")
def inspection_as_a_task_of_another_kind(inputs):
    return ["--dataset", str(inputs.shards / "validation"), "--tokenizer", str(inputs.tokenizer), "--task",
            "span-corruption"]


@row("evaluate", "holds a discriminator", "no generator/", "--task electra")
def electra_discriminator_without_its_generator(inputs):
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras)
    from transformers import AutoTokenizer, ElectraConfig, TFElectraForPreTraining

    tokenizer = AutoTokenizer.from_pretrained(inputs.tokenizer)
    model = TFElectraForPreTraining(ElectraConfig(vocab_size=len(tokenizer), embedding_size=8, hidden_size=16,
                                                  num_hidden_layers=1, num_attention_heads=2, intermediate_size=32))
    model.build_in_name_scope()
    model.save_pretrained(inputs.tmp / "discriminator")
    tokenizer.save_pretrained(inputs.tmp / "discriminator")
    return ["--model", str(inputs.tmp / "discriminator"), "--eval-dataset", str(inputs.shards / "validation")]


# --- output folders: a command writes only what it made, and replaces only what mlm_tpu wrote (output_dir.py) ------

def a_corpus(inputs: Inputs) -> str:
    return str(text_file(inputs, "corpus.txt", "some words to learn from here\n" * 200))


@row("tokenizer", "README.md", "did not write", "even with --overwrite", kept=("tok",))
def tokenizer_over_a_users_readme(inputs):
    text_file(inputs, "tok/README.md", "# my notes\n")
    return [*tokenizer_flags(inputs, a_corpus(inputs)), "--overwrite"]


@row("tokenizer", "already holds", "tokenizer.json", "--overwrite", kept=("tok",))
def tokenizer_over_an_earlier_tokenizer(inputs):
    inputs.copy(inputs.tokenizer, "tok")
    return tokenizer_flags(inputs, a_corpus(inputs))


@row("tokenizer", "--text-files", "missing.txt", kept=("tok",))
def tokenizer_of_a_missing_corpus_over_an_earlier_tokenizer(inputs):
    """What it reads is checked before where it writes: the missing corpus, not the tokenizer already there."""
    inputs.copy(inputs.tokenizer, "tok")
    return tokenizer_flags(inputs, str(inputs.tmp / "missing.txt"))


@row("tokenizer", "tokenizer_config.json", "changed since", kept=("tok",))
def tokenizer_over_one_the_user_edited(inputs):
    config = inputs.copy(inputs.tokenizer, "tok") / "tokenizer_config.json"
    config.write_text(config.read_text().replace("512", "1024"))
    return [*tokenizer_flags(inputs, a_corpus(inputs)), "--overwrite"]


@row("shard", "stranger-00000-5.tfrecord", "did not write", "even with --overwrite", kept=("out",))
def shard_overwrite_beside_a_shard_mlm_tpu_did_not_write(inputs):
    inputs.copy(inputs.shards / "train", "out/train")
    text_file(inputs, "out/train/stranger-00000-5.tfrecord", "not ours")
    return shard_flags(inputs, "--text-files", a_corpus(inputs), "--overwrite")


@row("shard", exit_code=0, check=lambda inputs, _: _only_the_users_file_and_the_new_split(inputs))
def shard_overwrite_keeps_the_users_files(inputs):
    inputs.copy(inputs.shards / "train", "out/train")
    text_file(inputs, "out/train/NOTES.md", "where these shards came from\n")
    return shard_flags(inputs, "--text-files", a_corpus(inputs), "--overwrite")


def _only_the_users_file_and_the_new_split(inputs: Inputs) -> None:
    split = inputs.tmp / "out" / "train"
    manifest = json.loads((split / "manifest.json").read_text())
    assert manifest["settings"]["max_length"] == 32  # the new split, not the copied one (64)
    assert sorted(p.name for p in split.iterdir()) == sorted(["NOTES.md", "manifest.json",
                                                               *(entry["name"] for entry in manifest["shards"])])
    assert (split / "NOTES.md").read_text() == "where these shards came from\n"


@row("export", "README.md", "did not write", "even with --overwrite", kept=("out",), absent=("out/model.safetensors",))
def export_into_a_folder_with_the_users_readme(inputs):
    text_file(inputs, "out/README.md", "# what I keep here\n")
    return ["--model", str(FIXTURES / "roberta"), "--output-dir", str(inputs.tmp / "out"), "--overwrite"]


@row("export", "README.md", "did not write", kept=("model",), absent=("model/model.safetensors",))
def export_in_place_over_the_users_readme(inputs):
    model = inputs.copy(FIXTURES / "roberta", "model")
    text_file(inputs, "model/README.md", "# my model\n")
    return ["--model", str(model), "--overwrite"]


def exported_before(inputs: Inputs, name: str) -> Path:
    """A copy of a model folder as an earlier export (or the trainer) left it: weights and card beside it."""
    exported = inputs.copy(FIXTURES / "roberta", name)
    (exported / "model.safetensors").write_bytes(b"weights an earlier export wrote")
    text_file(inputs, f"{name}/README.md", "---\nlibrary_name: transformers\n---\nA model, trained with mlm_tpu.\n")
    return exported


@row("export", "already holds", "README.md", "--overwrite", kept=("exported",))
def export_over_an_earlier_export(inputs):
    return ["--model", str(FIXTURES / "roberta"), "--output-dir", str(exported_before(inputs, "exported"))]


@row("export", "error: --model ", "already holds", "model.safetensors", "--overwrite", "give an --output-dir",
     kept=("model",))
def export_in_place_over_an_earlier_export(inputs):
    """In place, the folder is named by the flag the user gave: --model, not --output-dir."""
    return ["--model", str(exported_before(inputs, "model"))]


@row("export", "error: --model ", "tf_model.h5", "cut short", kept=("model",))
def export_in_place_a_model_whose_weights_are_cut_short(inputs):
    """What it reads is checked before where it writes: the damaged weights are named, not the earlier export."""
    model = exported_before(inputs, "model")
    (model / "tf_model.h5").write_bytes((model / "tf_model.h5").read_bytes()[:50_000])
    return ["--model", str(model)]


@row("plot", "the run folder", "loss.png", "did not write", kept=("run",))
def plot_over_the_users_loss_png(inputs):
    run = earlier_plot(inputs)
    text_file(inputs, "run/loss.png", "my own picture, drawn over the trainer's")
    return [str(run)]


@row("plot", "figure.png", "did not write", "even with --overwrite", kept=("run",))
def plot_over_the_users_picture(inputs):
    run = inputs.copy(FIXTURES / "roberta", "run")
    text_file(inputs, "run/figure.png", "my own picture")
    return [str(run), "--output", str(run / "figure.png"), "--overwrite"]


def earlier_plot(inputs: Inputs, name: str = "loss.png") -> Path:
    """A copy of a run, with the plot mlm_tpu drew at `name` in it (the trainer's is loss.png)."""
    from mlm_tpu.training.loss_plot import plot_losses

    run = inputs.copy(FIXTURES / "roberta", "run")
    plot_losses(str(run), str(run / name), overwrite=True)
    return run


def _redrawn(inputs: Inputs, stdout: str) -> None:
    from mlm_tpu.output_dir import Record

    plot = inputs.tmp / "run" / "loss.png"
    assert f"written to {plot}" in stdout, stdout
    assert plot.read_bytes().startswith(b"\x89PNG") and Record(str(plot.parent)).owns("loss.png")


@row("plot", exit_code=0, check=_redrawn)
def plot_redraws_the_runs_own_plot(inputs):
    """Redrawing RUN_DIR/loss.png, which the trainer draws, is what plot is for: no --overwrite."""
    return [str(earlier_plot(inputs))]


@row("plot", "--output", "already holds", "figure.png", "--overwrite", kept=("run",))
def plot_over_its_earlier_plot_elsewhere(inputs):
    run = earlier_plot(inputs, "figure.png")
    return [str(run), "--output", str(run / "figure.png")]


@row("plot", "events.out.tfevents.", "is damaged", kept=("run",))
def plot_with_a_damaged_events_file_beside_an_earlier_plot(inputs):
    """What it reads is checked before where it writes: the damage is reported, not the plot already there."""
    run = earlier_plot(inputs, "figure.png")
    next((run / "logs" / "train").glob("events.out.tfevents.*")).write_bytes(b"")
    return [str(run), "--output", str(run / "figure.png")]


@row("demo", "model", "did not make", kept=("runs",), absent=("runs/tokenizer", "runs/shards"))
def demo_into_a_folder_holding_the_users_model(inputs):
    inputs.copy(FIXTURES / "roberta", "runs/model")
    return ["--output-dir", str(inputs.tmp / "runs")]


@row("demo", "model/notes.txt", "did not make", kept=("runs",))
def demo_over_its_earlier_output_holding_a_users_file(inputs):
    earlier_demo(inputs, inputs.tmp / "runs" / "demo")
    text_file(inputs, "runs/demo/model/notes.txt", "mine\n")
    return ["--output-dir", str(inputs.tmp / "runs" / "demo")]


def earlier_demo(inputs: Inputs, folder: Path) -> Path:
    """What the demo left before folders had records, made of mlm_tpu 0.2's files: its tokenizer, trained on the
    built-in corpus, its shards, and a model trained with that tokenizer."""
    inputs.copy(FIXTURES / "tokenizer", str(folder.relative_to(inputs.tmp) / "tokenizer"))
    for split in ("train", "validation"):
        inputs.copy(FIXTURES / "shards" / split, str(folder.relative_to(inputs.tmp) / "shards" / split))
    model = inputs.copy(FIXTURES / "roberta", str(folder.relative_to(inputs.tmp) / "model"))
    run_info = json.loads((model / "training_args.json").read_text())
    (model / "training_args.json").write_text(json.dumps({**run_info, "tokenizer": str(folder / "tokenizer")}))
    return folder


# --- evaluate ------------------------------------------------------------------------------------------------------

@row("evaluate", "manifest", "not valid JSON")
def evaluate_on_invalid_manifest(inputs):
    return ["--model", str(FIXTURES / "roberta"), "--eval-dataset",
            str(damaged_manifest(inputs, FIXTURES / "shards" / "validation", "bad-manifest"))]


@row("evaluate", "holds", "fewer", "re-shard")
def evaluate_on_short_shard(inputs):
    split = inputs.copy(FIXTURES / "shards" / "validation", "short")
    (split / "manifest.json").unlink()
    shard = sorted(split.glob("*.tfrecord"))[-1]
    shard.write_bytes(frame_records(list(iter_records(shard.read_bytes(), str(shard)))[:-2]))
    return ["--model", str(FIXTURES / "roberta"), "--eval-dataset", str(split)]


# --- predict -------------------------------------------------------------------------------------------------------

@row("predict", "tokens", "at most", "shorten")
def fill_mask_on_a_10000_token_sentence(inputs):
    return ["fill-mask", "--model", str(FIXTURES / "roberta"), "The [MASK] is " + "very " * 10_000 + "long."]


@row("predict", "stdin", "not UTF-8", stdin=b"The [MASK] is \xff\xfe.\n")
def fill_mask_latin1_on_stdin(inputs):
    return ["fill-mask", "--model", str(FIXTURES / "roberta")]


@row("predict", "roberta", "not a T5", "fill its masks")
def text2text_with_a_masked_lm(inputs):
    return ["text2text", "--model", str(FIXTURES / "roberta"), "some text"]


@row("predict", "T5", "text2text")
def fill_mask_with_a_t5(inputs):
    return ["fill-mask", "--model", str(FIXTURES / "t5-classifier"), "some [MASK] text"]


# --- plot ----------------------------------------------------------------------------------------------------------

@row("plot", "training_args.json", "not valid JSON", absent=("run/loss.png",))
def plot_with_half_written_run_info(inputs):
    run = inputs.copy(FIXTURES / "roberta", "run")
    (run / "training_args.json").write_text((run / "training_args.json").read_text()[:40])
    return [str(run)]


@row("plot", "--output", "does not exist")
def plot_output_in_a_missing_folder(inputs):
    return [str(FIXTURES / "roberta"), "--output", str(inputs.tmp / "nowhere" / "loss.png")]


@row("plot", "damaged", "events", absent=("run/loss.png",))
def plot_with_a_damaged_events_file(inputs):
    run = inputs.copy(FIXTURES / "roberta", "run")
    events = sorted((run / "logs").rglob("events.out.tfevents.*"))[0]
    data = bytearray(events.read_bytes())
    data[len(data) // 2] ^= 0xFF
    events.write_bytes(bytes(data))
    return [str(run)]


def reframed_events(inputs: Inputs, damage: Callable[[bytes], bytes]) -> Path:
    """A copy of a run whose events files keep valid checksums around records that `damage` rewrote."""
    run = inputs.copy(FIXTURES / "roberta", "run")
    for events in (run / "logs").rglob("events.out.tfevents.*"):
        events.write_bytes(frame_records([damage(record) for record in iter_records(events.read_bytes(), "")]))
    return run


@row("plot", "events.out.tfevents.", "is damaged", "record 1 is not a TensorBoard event", "restore it",
     absent=("run/loss.png",))
def plot_with_every_events_record_garbage(inputs):
    return [str(reframed_events(inputs, lambda record: bytes(255 - byte for byte in record)))]


@row("plot", "events.out.tfevents.", "is damaged", "record 1 is empty", absent=("run/loss.png",))
def plot_with_every_events_record_empty(inputs):
    return [str(reframed_events(inputs, lambda record: b""))]


@row("plot", "events.out.tfevents.", "is damaged", "empty", absent=("run/loss.png",))
def plot_with_an_events_file_cut_to_nothing(inputs):
    run = inputs.copy(FIXTURES / "roberta", "run")
    next((run / "logs" / "train").glob("events.out.tfevents.*")).write_bytes(b"")
    return [str(run)]


@row("plot", "cannot read", "permission", absent=("run/loss.png",))
def plot_with_unreadable_logs(inputs):
    run = inputs.copy(FIXTURES / "roberta", "run")
    for events in (run / "logs").rglob("events.out.tfevents.*"):
        events.chmod(0)
    if os.access(next((run / "logs").rglob("events.out.tfevents.*")), os.R_OK):
        pytest.skip("running as root: permissions do not stop reading")
    return [str(run)]


# --- export --------------------------------------------------------------------------------------------------------

@row("export", "not a model folder", absent=("out",))
def export_a_tokenizer_folder(inputs):
    return ["--model", str(inputs.tokenizer), "--output-dir", str(inputs.tmp / "out")]


# --- encoders: sequence and token classification (rows are checked before anything is written) ---------------------

def labelled_flags(inputs: Inputs, name: str, text: str, *flags: str, task: str = "sequence-classification"):
    return ["--task", task, "--text-files", str(text_file(inputs, name, text)), *flags, "--tokenizer",
            str(inputs.tokenizer), "--max-length", "32", "--output-dir", str(inputs.tmp / "out")]


@row("shard", "rows.csv row 2", "text column 'text' is empty", absent=("out",))
def sequence_classification_with_an_empty_text(inputs):
    return labelled_flags(inputs, "rows.csv", "text,label\nfine,a\n,b\n", "--input-column", "text",
                          "--target-column", "label")


@row("shard", "rows.csv row 1", "pair column 'second' is empty", absent=("out",))
def sentence_pair_empty_on_one_side(inputs):
    return labelled_flags(inputs, "rows.csv", "first,second,label\nfine, ,a\n", "--input-column", "first",
                          "--pair-column", "second", "--target-column", "label")


@row("shard", "has no column 'label'", "--target-column", absent=("out",))
def sequence_classification_without_its_label_column(inputs):
    return labelled_flags(inputs, "rows.jsonl", '{"text": "fine"}\n', "--input-column", "text", "--target-column",
                          "label")


@row("shard", "rows.csv row 3", "'n/a', not a number", "other labels are scores", "--problem-type", absent=("out",))
def regression_label_that_is_not_a_number(inputs):
    return labelled_flags(inputs, "rows.csv", "text,score\nfine,3.8\ngood,1\nbad,n/a\n", "--input-column", "text",
                          "--target-column", "score")


@row("shard", "rows.jsonl row 2", "3 words", "2 tags", "exactly one tag", absent=("out",))
def token_classification_row_with_fewer_tags_than_words(inputs):
    return labelled_flags(inputs, "rows.jsonl", '{"w": ["a", "b"], "t": ["O", "O"]}\n{"w": ["a", "b", "c"], "t": '
                          '["O", "B-X"]}\n', "--input-column", "w", "--target-column", "t", task="token-classification")


def labelled_shards(inputs: Inputs, validation_labels=("a", "b")) -> Path:
    """Sequence-classification shards of a few rows (labels a and b), and validation rows of `validation_labels`."""
    from mlm_tpu.api import shard_corpus

    for split, labels in (("train", ("a", "b")), ("validation", validation_labels)):
        rows = "".join(json.dumps({"text": f"text number {index}", "label": label}) + "\n"
                       for index, label in enumerate(labels * 8))
        shard_corpus(str(inputs.tokenizer), str(inputs.tmp / "labelled"), task="sequence-classification",
                     text_files=(str(text_file(inputs, f"{split}.jsonl", rows)),), split=split,
                     input_columns=("text",), target_column="label", max_length=32)
    return inputs.tmp / "labelled"


def fine_tuning_flags(inputs: Inputs, shards: Path, *extra: str) -> List[str]:
    return ["--task", "sequence-classification", "--train-dataset", str(shards / "train"), "--eval-dataset",
            str(shards / "validation"), "--tokenizer", str(inputs.tokenizer), "--per-replica-batch-size", "4",
            "--output-dir", str(inputs.tmp / "model"), *extra]


@row("train", "--eval-dataset has labels that training never saw (c)", absent=("model",))
def validation_label_training_never_saw(inputs):
    return fine_tuning_flags(inputs, labelled_shards(inputs, ("a", "c")), "--model-config", "tiny")


@row("train", "t5 model", "encoder-decoder", "fine-tune an encoder", absent=("model",))
def sequence_classification_on_a_t5(inputs):
    return fine_tuning_flags(inputs, labelled_shards(inputs), "--model-name-or-path",
                             str(FIXTURES / "t5-classifier"))


@row("train", "gpt2 model", "not an encoder", "roberta-base", absent=("model",))
def sequence_classification_on_a_causal_lm(inputs):
    text_file(inputs, "gpt2/config.json", json.dumps({"model_type": "gpt2", "n_embd": 32, "n_layer": 1, "n_head": 2}))
    return fine_tuning_flags(inputs, labelled_shards(inputs), "--model-name-or-path", str(inputs.tmp / "gpt2"))


@row("train", "--task sequence-classification delta-tunes an encoder with --delta lora or ia3",
     "--delta prompt is for T5", absent=("model",))
def prompt_tuning_an_encoder_s_classifier(inputs):
    """Refused before the shards are read (these are masked-LM ones) or the base is loaded."""
    return fine_tuning_flags(inputs, inputs.shards, "--delta", "prompt", "--model-name-or-path",
                             str(FIXTURES / "roberta"))


@row("predict", "RobertaForMaskedLM", "not a token classification model", "--task token-classification")
def token_classification_with_a_masked_lm(inputs):
    return ["token-classification", "--model", str(FIXTURES / "roberta"), "Alice lives in Paris"]


@pytest.fixture(scope="module")
def bad_input_sources(wikitext_tokenizer, shards, t5_data):
    return wikitext_tokenizer[0], shards, t5_data.tokenizer


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id, marks=[pytest.mark.slow] if case.slow else [])
                                  for case in ROWS])
def test_bad_input(case: Row, tmp_path, bad_input_sources, in_process, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tokenizer, shard_folder, t5_tokenizer = bad_input_sources
    inputs = Inputs(tmp_path, tokenizer, shard_folder, t5_tokenizer)
    arguments = case.make_args(inputs)
    before = {path: tree(tmp_path / path) for path in case.kept}
    ran = in_process(case.command, *arguments, stdin=case.stdin or None)
    code, out, err = ran.returncode, ran.stdout, ran.stderr
    assert code == case.exit_code, f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-3000:]}"
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    if case.exit_code == 2:
        assert len(errors) == 1, err
        for phrase in case.phrases:
            assert phrase in errors[0], f"{phrase!r} not in {errors[0]!r}"
    else:
        assert not errors, err
        case.check(inputs, out)
    for path in case.absent:
        assert not (tmp_path / path).exists(), f"{path} was left behind"
    for path, files in before.items():
        assert tree(tmp_path / path) == files, f"{path} changed"
    for folder in case.unchanged:
        comparison = filecmp.dircmp(tmp_path / "good-model", tmp_path / folder)
        assert not comparison.diff_files and not comparison.left_only, f"{folder} changed: {comparison.diff_files}"
    leftovers = [str(p) for p in tmp_path.rglob("*.partial*")]
    assert not leftovers, f"half-written files left: {leftovers}"


@pytest.mark.parametrize("arguments, phrases", [([], ("no command given",)),
                                                 (["trian"], ("unknown command 'trian'", "did you mean 'train'")),
                                                 (["--tpu"], ("'--tpu' is a flag", "after the command"))],
                         ids=["bare", "misspelt", "flag-first"])
def test_a_missing_or_unknown_command_is_one_error_line_after_the_list(arguments, phrases, in_process):
    ran = in_process(*(arguments or [None]))
    code, out, err = ran.returncode, ran.stdout, ran.stderr
    assert code == 2 and not out and "Traceback" not in err, err
    assert "commands:" in err and "  train " in err and "  tokenizer " in err  # the list of commands comes first
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and err.rstrip().endswith(errors[0]), err
    for phrase in phrases:
        assert phrase in errors[0], errors[0]


def full_disk_unavailable_reason() -> Optional[str]:
    """Why a small tmpfs cannot be mounted in a private mount namespace here, or None."""
    import shutil as which
    import subprocess

    if os.geteuid() != 0 or not which.which("unshare"):
        return "needs root and `unshare` for a small tmpfs in a private mount namespace"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"], capture_output=True,
                           text=True)
    return f"cannot mount a tmpfs: {probe.stderr.strip()}" if probe.returncode else None


def test_a_full_disk_while_saving_a_tokenizer_is_one_line_and_leaves_nothing(tmp_path):
    """A real ENOSPC: the command runs on a 16 KB tmpfs (mounted in its own mount namespace, so nothing else sees
    it), which holds the small files but not tokenizer.json, written by the tokenizers library in Rust."""
    import subprocess

    reason = full_disk_unavailable_reason()
    if reason:
        pytest.skip(reason)
    disk = tmp_path / "disk"
    disk.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    script = (f'mount -t tmpfs -o size=16k tmpfs "{disk}" && "$@"; code=$?; echo "left: $(ls -A "{disk}")"; '
              "exit $code")
    result = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-m", "mlm_tpu.tokenizer",
                             "train", "--builtin-corpus", "pydoc-topics", "--limit", "300", "--vocab-size", "300",
                             "--output-dir", str(disk / "tok")], capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                            timeout=600)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and str(disk) in errors[0], result.stderr
    assert result.stdout.strip().splitlines()[-1] == "left:", result.stdout  # no tokenizer, no staging folder


def test_two_sharders_on_one_split_never_mix(tmp_path, wikitext_tokenizer, wikitext_path):
    """Two jobs started at once on the same split with other settings: one writes it, the other stops with one
    line, and the split holds only the first one's shards and manifest."""
    import subprocess

    from conftest import REPO_ROOT as root

    env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"}
    jobs = [subprocess.Popen([sys.executable, "-m", "mlm_tpu.shard", "--tokenizer", str(wikitext_tokenizer[0]),
                              "--text-files", str(wikitext_path), "--max-length", str(length), "--shard-size", "100",
                              "--output-dir", str(tmp_path)], env=env, cwd=root, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for length in (32, 48)]
    results = [(job.wait(timeout=600), job.stderr.read()) for job in jobs]
    assert sorted(code for code, _ in results) == [0, 2], results
    winner = 32 if results[0][0] == 0 else 48
    loser_error = [line for code, err in results if code == 2 for line in err.splitlines() if line.startswith("error:")]
    assert len(loser_error) == 1 and ("being written" in loser_error[0] or "other settings" in loser_error[0])
    manifest = json.loads((tmp_path / "train" / "manifest.json").read_text())
    assert manifest["settings"]["max_length"] == winner
    assert sorted(p.name for p in (tmp_path / "train").glob("*.tfrecord")) == sorted(
        entry["name"] for entry in manifest["shards"])
    assert not (tmp_path / "train" / WRITER_RECORD).exists()


# --- a base's own tokenizer, and its own head: what fine-tuning and the masked-LM commands read from a base folder ---

@pytest.fixture(scope="module")
def other_vocabularies(tmp_path_factory, wikitext_path):
    """Tokenizers of the sizes of mlm_tpu 0.2's RoBERTa (300 pieces) and T5 classifier (400), trained on other text
    (WikiText), and shards made with each (sequence-classification rows, text-to-text rows): what a user who
    fine-tunes one of those bases with a --tokenizer of their own has. {"roberta"|"t5": (tokenizer, shards)}."""
    import mlm_tpu

    folder = tmp_path_factory.mktemp("other-vocabularies")
    rows = folder / "rows.jsonl"
    rows.write_text("".join(json.dumps({"text": f"text number {index}", "label": "ab"[index % 2]}) + "\n"
                            for index in range(16)))
    found = {}
    for base, template, size, task, columns in (("roberta", "mlm", 300, "sequence-classification", {}),
                                                ("t5", "t5", 400, "text2text", {"source_prefix": "rate:"})):
        tokenizer = mlm_tpu.train_tokenizer(str(folder / f"{base}-tokenizer"), text_files=(str(wikitext_path),),
                                            template=template, vocab_size=size)
        mlm_tpu.shard_corpus(tokenizer, str(folder / f"{base}-shards"), task=task, text_files=(str(rows),),
                             split="train", input_columns=("text",), target_column="label", max_length=16,
                             **columns)
        found[base] = (tokenizer, folder / f"{base}-shards" / "train")
    return found


BASES = {"roberta": ("sequence-classification", FIXTURES / "roberta"),
         "t5": ("generation", FIXTURES / "t5-classifier")}


@pytest.mark.parametrize("base, delta", [("roberta", ()), ("t5", ()), ("roberta", ("--delta", "lora"))],
                         ids=["sequence-classification", "t5-generation", "lora-sequence-classification"])
def test_fine_tuning_refuses_a_tokenizer_whose_vocabulary_is_not_the_bases(base, delta, other_vocabularies,
                                                                            tmp_path, in_process):
    """The shards and --tokenizer agree, but the base's embeddings were learnt for its own tokenizer's pieces: one
    line that says to shard with the base's tokenizer, before anything is written."""
    task, base_folder = BASES[base]
    tokenizer, shards = other_vocabularies[base]
    result = in_process("train", "--task", task, *delta, "--model-name-or-path", base_folder, "--tokenizer", tokenizer,
                        "--train-dataset", shards, "--per-replica-batch-size", 4, "--max-steps", 1, "--output-dir",
                        tmp_path / "model")
    assert_user_error(result, f"--tokenizer {tokenizer} has another vocabulary than the tokenizer of "
                      f"--model-name-or-path {base_folder}", f"shard the data with the base's tokenizer "
                      f"(`mlm-tpu shard --tokenizer {base_folder} ...`)")
    assert not (tmp_path / "model").exists()


@pytest.mark.slow  # trains a step each
@pytest.mark.parametrize("case", ["same vocabulary, other files", "base without a tokenizer"])
def test_fine_tuning_takes_the_bases_vocabulary_in_other_files_and_any_tokenizer_for_a_base_without_one(case,
                                                                                                        tmp_path):
    """What is compared is the vocabulary (pieces and ids), not the files; a base that has no tokenizer of its own
    takes the --tokenizer given, as before."""
    from transformers import AutoTokenizer

    base, tokenizer = FIXTURES / "roberta", tmp_path / "tokenizer"
    AutoTokenizer.from_pretrained(base, model_max_length=32).save_pretrained(tokenizer)  # other files
    assert (tokenizer / "tokenizer_config.json").read_bytes() != (base / "tokenizer_config.json").read_bytes()
    if case == "base without a tokenizer":
        base = shutil.copytree(FIXTURES / "roberta", tmp_path / "base", ignore=shutil.ignore_patterns("tokenizer*",
                                                                                                       "special*"))
    result = run_train("--task", "mlm", "--delta", "lora", "--model-name-or-path", base, "--tokenizer", tokenizer,
                       "--train-dataset", FIXTURES / "shards" / "train", "--per-replica-batch-size", 4, "--max-steps",
                       1, "--output-dir", tmp_path / "adapter")
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def electra_folder(tmp_path_factory):
    """An ELECTRA run's output folder (the discriminator, and its generator in generator/), two steps of the real
    trainer on mlm_tpu 0.2's shards."""
    import contextlib

    import mlm_tpu

    folder = tmp_path_factory.mktemp("electra") / "run"
    with contextlib.redirect_stderr(io.StringIO()):
        mlm_tpu.train_model(str(FIXTURES / "shards" / "train"), str(folder), tokenizer=str(FIXTURES / "tokenizer"),
                            task="electra", model_config="electra-tiny", per_replica_batch_size=8, max_steps=2)
    return folder


def test_fill_mask_refuses_an_electra_discriminator_and_names_its_generator(electra_folder, in_process):
    """The discriminator has no masked-LM head: a new one would guess every piece at about 1/vocabulary."""
    before = tree(electra_folder)
    result = in_process("predict", "fill-mask", "--model", electra_folder, "Paris is the [MASK].")
    assert_user_error(result, f"--model {electra_folder} is an ELECTRA discriminator (it has no masked-LM head); use "
                      f"its generator: {electra_folder / 'generator'}")
    assert tree(electra_folder) == before
    result = run_module("mlm_tpu", "predict", "fill-mask", "--model", str(electra_folder / "generator"), "--json",
                        "Paris is the [MASK].")
    assert result.returncode == 0, result.stderr[-3000:]


def test_delta_tuning_a_masked_lm_on_an_electra_discriminator_is_refused(electra_folder, tmp_path, in_process):
    """The same check wherever a masked LM is loaded from a folder: here the base of --task mlm --delta."""
    result = in_process("train", "--task", "mlm", "--delta", "lora", "--model-name-or-path", electra_folder,
                        "--train-dataset", FIXTURES / "shards" / "train", "--per-replica-batch-size", 4, "--max-steps",
                        1, "--output-dir", tmp_path / "adapter")
    assert_user_error(result, f"--model-name-or-path {electra_folder} is an ELECTRA discriminator", "no masked-LM head",
                      f"use its generator: {electra_folder / 'generator'}")
    assert not (tmp_path / "adapter").exists()


def test_an_electra_folder_still_evaluates_and_exports_as_electra(electra_folder, tmp_path):
    """evaluate and export read the folder as the ELECTRA run it is (both models); the discriminator's card offers no
    fill-mask, its generator's does."""
    evaluation = run_module("mlm_tpu", "evaluate", "--model", str(electra_folder), "--eval-dataset",
                            str(FIXTURES / "shards" / "validation"), "--json")
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    assert "discriminator_accuracy" in json.loads(evaluation.stdout)
    export = run_module("mlm_tpu", "export", "--model", str(electra_folder), "--output-dir", str(tmp_path / "out"))
    assert export.returncode == 0, export.stderr[-3000:]
    assert "pipeline_tag: feature-extraction" in (tmp_path / "out" / "README.md").read_text()
    assert "pipeline_tag: fill-mask" in (tmp_path / "out" / "generator" / "README.md").read_text()


def test_fill_mask_refuses_a_fine_tuned_classifier(tmp_path, in_process):
    """A sequence classifier has no masked-LM head either: a new one would guess at random."""
    from transformers import RobertaConfig, TFRobertaForSequenceClassification

    folder = tmp_path / "classifier"
    config = RobertaConfig(vocab_size=300, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=66, num_labels=2)
    model = TFRobertaForSequenceClassification.from_config(config)
    model(model.dummy_inputs)
    model.save_pretrained(folder)
    for name in os.listdir(FIXTURES / "tokenizer"):
        shutil.copy(FIXTURES / "tokenizer" / name, folder / name)
    before = tree(folder)
    result = in_process("predict", "fill-mask", "--model", folder, "Paris is the <mask>.")
    assert_user_error(result, f"--model {folder} is a fine-tuned RobertaForSequenceClassification",
                      "no masked-LM head", "fill masks with the masked LM it was fine-tuned from")
    assert tree(folder) == before
