"""`python -m mlm_tpu.shard --task text2text`: one T5 example per row, cut, padded and labelled exactly."""

import csv
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from transformers import AutoTokenizer

from conftest import T5_MAX_LENGTH, T5_MAX_TARGET_LENGTH, assert_user_error, run_module, write_jsonl
from mlm_tpu.errors import UserError
from mlm_tpu.cli.shard import FLAGS, build_parser
from mlm_tpu.shards.sharding import shard_corpus
from mlm_tpu.tasks import shard_kinds
from mlm_tpu.t5.text2text_rows import head_and_end, head_and_tail, padded_rows


def test_head_and_tail_keeps_the_first_and_last_halves():
    ids = list(range(10))
    assert head_and_tail(ids, 10) == ids and head_and_tail(ids, 12) == ids
    assert head_and_tail(ids, 6) == [0, 1, 2, 7, 8, 9]
    assert head_and_tail(ids, 5) == [0, 1, 2, 8, 9]  # an odd length gives the head the extra token
    assert head_and_tail(list(range(1000)), 512) == list(range(256)) + list(range(744, 1000))


def test_targets_keep_their_head_and_closing_token_and_pad_with_minus_100():
    assert head_and_end([5, 6, 7, 8, 1], 3) == [5, 6, 1] and head_and_end([5, 1], 3) == [5, 1]
    rows = padded_rows([[5, 1], [7, 8, 1]], 4, -100)
    assert rows.tolist() == [[5, 1, -100, -100], [7, 8, 1, -100]] and rows.dtype == np.int64


def read_records(split_dir, max_length, max_target_length):
    import tensorflow as tf

    schema = {"input_ids": tf.io.FixedLenFeature([max_length], tf.int64),
              "attention_mask": tf.io.FixedLenFeature([max_length], tf.int64),
              "labels": tf.io.FixedLenFeature([max_target_length], tf.int64)}
    files = sorted(str(p) for p in split_dir.glob("*.tfrecord"))
    return list(tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, schema))
                .as_numpy_iterator())


def test_records_hold_prefixed_joined_inputs_cut_head_and_tail_and_minus_100_labels(quality_shards, t5_data):
    tokenizer = AutoTokenizer.from_pretrained(t5_data.tokenizer)
    rows = [json.loads(line) for line in (t5_data.folder / "quality-train.jsonl").read_text().splitlines()]
    records = read_records(quality_shards / "train", T5_MAX_LENGTH, T5_MAX_TARGET_LENGTH)
    assert len(records) == len(rows) == 600
    cut = 0
    for row, record in zip(rows, records):
        ids = tokenizer(f"quality: {row['title']}\n{row['body']}")["input_ids"]
        cut += len(ids) > T5_MAX_LENGTH
        kept = ids if len(ids) <= T5_MAX_LENGTH else ids[:T5_MAX_LENGTH // 2] + ids[-(T5_MAX_LENGTH // 2):]
        expected = kept + [0] * (T5_MAX_LENGTH - len(kept))
        assert record["input_ids"].tolist() == expected
        assert record["attention_mask"].tolist() == [1] * len(kept) + [0] * (T5_MAX_LENGTH - len(kept))
        label = tokenizer(row["label"])["input_ids"]
        assert len(label) == 2 and label[-1] == 1  # one class token, then </s>
        assert record["labels"].tolist() == label + [-100] * (T5_MAX_TARGET_LENGTH - 2)
    assert 0 < cut < len(rows)  # some inputs were long enough to be cut, and the check above saw them

    manifest = json.loads((quality_shards / "train" / "manifest.json").read_text())
    assert manifest["features"] == {"input_ids": {"dtype": "int64", "length": T5_MAX_LENGTH},
                                    "attention_mask": {"dtype": "int64", "length": T5_MAX_LENGTH},
                                    "labels": {"dtype": "int64", "length": T5_MAX_TARGET_LENGTH}}
    assert manifest["target_counts"] == {label: sum(r["label"] == label for r in rows) for label in
                                         sorted({r["label"] for r in rows})}
    assert (manifest["records"], manifest["documents"], manifest["truncated_inputs"]) == (600, 600, cut)
    settings = manifest["settings"]
    assert (settings["task"], settings["input_columns"], settings["target_column"], settings["source_prefix"]) == \
        ("text2text", ["title", "body"], "label", "quality:")
    assert [entry["name"] for entry in manifest["shards"]] == [f"dataset-0000{i}-200.tfrecord" for i in range(3)]


def test_csv_and_parquet_give_the_same_records_as_jsonl(t5_data, tmp_path):
    rows = [{"q": f"question {i} about a film", "a": f"answer {i}"} for i in range(30)]
    write_jsonl(tmp_path / "rows.jsonl", rows)
    with open(tmp_path / "rows.csv", "w", encoding="utf-8", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=["q", "a"])
        writer.writeheader()
        writer.writerows(rows)
    pq.write_table(pa.table({"a": [r["a"] for r in rows], "q": [r["q"] for r in rows]}), tmp_path / "rows.parquet")
    shard_bytes = []
    for suffix in ("jsonl", "csv", "parquet"):
        out = tmp_path / suffix
        result = run_module("mlm_tpu.shard", "--task", "text2text", "--tokenizer", str(t5_data.tokenizer),
                            "--text-files", str(tmp_path / f"rows.{suffix}"), "--input-column", "q",
                            "--target-column", "a", "--max-length", "16", "--max-target-length", "8",
                            "--output-dir", str(out))
        assert result.returncode == 0, result.stderr
        assert "30 examples of 16 input and 8 target tokens" in result.stderr
        shard_bytes.append((out / "train" / "dataset-00000-30.tfrecord").read_bytes())
    assert shard_bytes[0] == shard_bytes[1] == shard_bytes[2]


def config_for(*flags):
    return FLAGS.build(build_parser().parse_args(list(map(str, flags))))


def test_a_bad_row_stops_the_job_and_the_rerun_after_fixing_it_ends_as_a_clean_run(t5_data, tmp_path):
    """The error names the row; the shards written before it are kept and the rerun goes on from there."""
    rows = [{"q": f"question number {i}", "a": ["yes", "no", "maybe"][i % 3]} for i in range(400)]
    broken = [dict(row, a="") if i == 333 else row for i, row in enumerate(rows)]
    flags = ["--task", "text2text", "--tokenizer", t5_data.tokenizer, "--input-column", "q", "--target-column", "a",
             "--max-length", 16, "--max-target-length", 4, "--shard-size", 50, "--batch-size", 40]
    data = write_jsonl(tmp_path / "rows.jsonl", broken)
    with pytest.raises(UserError, match=f"{data} row 334: the target column 'a' is empty"):
        shard_corpus(config_for(*flags, "--text-files", data, "--output-dir", tmp_path / "out"), shard_kinds())
    kept = sorted(n for n in os.listdir(tmp_path / "out" / "train") if n.endswith(".tfrecord"))
    assert kept and not (tmp_path / "out" / "train" / "manifest.json").exists()

    write_jsonl(data, rows)
    resumed = shard_corpus(config_for(*flags, "--text-files", data, "--output-dir", tmp_path / "out"), shard_kinds())
    clean = shard_corpus(config_for(*flags, "--text-files", data, "--output-dir", tmp_path / "clean"), shard_kinds())
    assert resumed == clean and resumed["target_counts"] == {"maybe": 133, "no": 133, "yes": 134}
    for entry in clean["shards"]:
        assert (tmp_path / "out" / "train" / entry["name"]).read_bytes() == \
            (tmp_path / "clean" / "train" / entry["name"]).read_bytes()


BAD_INPUTS = {
    "missing column": (["--input-column", "question"], ["has no column 'question'", "columns: a, q"]),
    "empty target": (["--text-files", "{tmp}/empty-target.jsonl"], ["empty-target.jsonl row 2",
                                                                    "target column 'a' is empty"]),
    "empty input": (["--text-files", "{tmp}/empty-input.jsonl"], ["empty-input.jsonl row 1", "input (q) is empty"]),
    "text file without columns": (["--text-files", "{tmp}/plain.txt"], ["plain.txt", "one text per line"]),
    "task prefix given as the file prefix": (["--prefix", "quality:"], ["--prefix", "--source-prefix"]),
    "no target column": (["--target-column", None], ["--task text2text needs --input-column"]),
    "target among the inputs": (["--input-column", "a"], ["--target-column 'a' is also an --input-column"]),
    "target length below 2": (["--max-target-length", "1"], ["--max-target-length", "at least 2"]),
    "built-in corpus": (["--builtin-corpus", "pydoc-topics"], ["built-in corpus is plain text"]),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_text2text_input_is_one_clear_line_and_nothing_is_left_behind(name, t5_data, tmp_path, in_process):
    write_jsonl(tmp_path / "rows.jsonl", [{"q": "What is a film?", "a": "a motion picture"}])
    write_jsonl(tmp_path / "empty-target.jsonl", [{"q": "one", "a": "x"}, {"q": "two", "a": "  "}])
    write_jsonl(tmp_path / "empty-input.jsonl", [{"q": None, "a": "x"}])
    (tmp_path / "plain.txt").write_text("just text\n", encoding="utf-8")
    flags = {"--task": "text2text", "--tokenizer": str(t5_data.tokenizer), "--text-files": str(tmp_path / "rows.jsonl"),
             "--input-column": "q", "--target-column": "a", "--max-length": "16", "--output-dir": str(tmp_path / "out")}
    overrides, phrases = BAD_INPUTS[name]
    for flag, value in zip(overrides[::2], overrides[1::2]):
        if flag == "--builtin-corpus":
            del flags["--text-files"]
        flags[flag] = value and value.format(tmp=tmp_path)
    result = in_process("shard", *[part for flag, value in flags.items() if value for part in (flag, value)])
    assert_user_error(result, *phrases)
    assert not [n for _, _, names in os.walk(tmp_path / "out") for n in names]


def test_text2text_flags_are_refused_for_masked_lm_sharding(wikitext_tokenizer, tmp_path):
    result = run_module("mlm_tpu.shard", "--tokenizer", str(wikitext_tokenizer[0]), "--builtin-corpus",
                        "pydoc-topics", "--target-column", "label", "--output-dir", str(tmp_path / "out"))
    assert_user_error(result, "--target-column is for --task text2text")


def test_help_lists_the_text2text_flags():
    result = run_module("mlm_tpu.shard", "--help")
    for flag in ["--task", "--input-column", "--target-column", "--source-prefix", "--max-target-length"]:
        assert flag in result.stdout, flag
