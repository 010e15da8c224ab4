"""The corpus readers: every source, streaming, limits, and every kind of bad input."""

import argparse
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mlm_tpu.cli.flags import ConfigFlags, add_corpus_flags
from mlm_tpu.corpus import BUILTIN_CORPORA, Corpus, CorpusSource
from mlm_tpu.errors import UserError

from conftest import assert_user_error, run_module, write_jsonl


def corpus_from_flags(*flags: str) -> Corpus:
    parser = argparse.ArgumentParser()
    config_flags = ConfigFlags(CorpusSource)
    add_corpus_flags(config_flags, parser, prefix="")
    return Corpus(config_flags.build(parser.parse_args(list(flags))))


def test_txt_lines_are_documents_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text(" = Title = \n\nFirst line of text.\n   \nSecond line.\n", encoding="utf-8")
    corpus = corpus_from_flags("--text-files", str(path))
    assert list(corpus.documents()) == ["= Title =", "First line of text.", "Second line."]
    assert corpus.documents_read == 3
    assert corpus.characters_read == len("= Title =First line of text.Second line.")


def test_wikitext_file_reads_every_non_blank_line(wikitext_path):
    expected = [line.strip() for line in wikitext_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert list(corpus_from_flags("--text-files", str(wikitext_path)).documents()) == expected


def test_jsonl_json_csv_and_parquet_read_the_text_column(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"body": "one", "id": 1}, {"body": None}, {"body": "two"}])
    (tmp_path / "b.json").write_text(json.dumps([{"body": "three"}, {"body": "four"}]), encoding="utf-8")
    write_jsonl(tmp_path / "c.json", [{"body": "five"}])  # JSON lines under a .json name
    (tmp_path / "d.csv").write_text('id,body\n1,six\n2,"seven, with a comma"\n', encoding="utf-8")
    pq.write_table(pa.table({"body": ["eight", "", "nine"], "n": [1, 2, 3]}), tmp_path / "e.parquet")
    corpus = corpus_from_flags("--text-files", str(tmp_path / "*"), "--text-column", "body")
    assert list(corpus.documents()) == ["one", "two", "three", "four", "five", "six", "seven, with a comma",
                                        "eight", "nine"]


def test_folders_and_globs_expand_in_sorted_order(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("bee\n", encoding="utf-8")
    (tmp_path / "sub" / "a.txt").write_text("ay\n", encoding="utf-8")
    (tmp_path / "sub" / "notes.md").write_text("ignored\n", encoding="utf-8")
    (tmp_path / "c.txt").write_text("sea\n", encoding="utf-8")
    assert list(corpus_from_flags("--text-files", str(tmp_path / "sub")).documents()) == ["ay", "bee"]
    assert list(corpus_from_flags("--text-files", str(tmp_path / "**" / "*.txt")).documents()) == ["sea", "ay", "bee"]


def test_builtin_corpus_is_real_english_prose_needing_no_download():
    corpus = corpus_from_flags("--builtin-corpus", "pydoc-topics")
    documents = list(corpus.documents())
    assert len(documents) > 2000 and corpus.characters_read > 300_000
    words = " ".join(documents).split()
    assert words.count("the") > 3000  # prose, not code or markup
    assert not any(set(d) <= set("*=-~^ ") for d in documents)  # headings' underlines dropped


def test_limit_caps_documents_and_batches_have_the_asked_size(wikitext_path):
    corpus = corpus_from_flags("--text-files", str(wikitext_path), "--limit", "25")
    batches = list(corpus.batches(10))
    assert [len(b) for b in batches] == [10, 10, 5]
    assert corpus.documents_read == 25


def test_reading_is_streamed_not_loaded_whole(tmp_path):
    """The first document arrives before the reader has looked at the (broken) end of the file."""
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps({"text": "first"}) + "\n" + "{broken\n", encoding="utf-8")
    documents = corpus_from_flags("--text-files", str(path)).documents()
    assert next(documents) == "first"
    with pytest.raises(UserError, match="line 2 is not valid JSON"):
        next(documents)


def test_a_dataset_folder_is_read_through_datasets_streaming(tmp_path):
    """The Hub code path (`datasets.load_dataset(..., streaming=True)`) exercised on a local folder."""
    folder = tmp_path / "my_dataset"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", [{"text": "alpha"}, {"text": ""}, {"text": "beta"}])
    write_jsonl(folder / "validation.jsonl", [{"text": "gamma"}])
    assert list(corpus_from_flags("--dataset", str(folder)).documents()) == ["alpha", "beta"]
    assert list(corpus_from_flags("--dataset", str(folder), "--split", "validation").documents()) == ["gamma"]
    with pytest.raises(UserError, match="has no column 'body'"):
        list(corpus_from_flags("--dataset", str(folder), "--text-column", "body").documents())
    with pytest.raises(UserError, match="split 'test'"):
        list(corpus_from_flags("--dataset", str(folder), "--split", "test").documents())


def test_default_source_is_wikitext_103_like_the_reference():
    source = corpus_from_flags().source
    assert (source.dataset, source.dataset_config, source.split) == ("wikitext", "wikitext-103-raw-v1", "train")


def make_bad_inputs(tmp_path):
    """Each bad input, as the flags a user would pass, with words its error line must contain."""
    blank = tmp_path / "blank.txt"
    blank.write_text("\n   \n\n", encoding="utf-8")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9\n".encode("latin-1"))
    wrong_column = str(write_jsonl(tmp_path / "wrong.jsonl", [{"content": "hello"}]))
    csv_file = tmp_path / "table.csv"
    csv_file.write_text("content\nhello\n", encoding="utf-8")
    parquet_file = tmp_path / "table.parquet"
    pq.write_table(pa.table({"content": ["hello"]}), parquet_file)
    not_parquet = tmp_path / "fake.parquet"
    not_parquet.write_text("not parquet", encoding="utf-8")
    numbers = str(write_jsonl(tmp_path / "numbers.jsonl", [{"text": 42}]))
    other_type = tmp_path / "notes.md"
    other_type.write_text("hello\n", encoding="utf-8")
    return {
        "missing file": (["--text-files", str(tmp_path / "nope.txt")], ["nope.txt", "does not exist"]),
        "glob matching nothing": (["--text-files", str(tmp_path / "*.nothing")], ["matches no file"]),
        "unknown jsonl column": (["--text-files", wrong_column], ["no column 'text'", "content", "--text-column"]),
        "unknown csv column": (["--text-files", str(csv_file)], ["no column 'text'", "--text-column"]),
        "unknown parquet column": (["--text-files", str(parquet_file)], ["no column 'text'", "--text-column"]),
        "corpus with no text": (["--text-files", str(blank)], ["no text", "blank.txt"]),
        "file that is not UTF-8": (["--text-files", str(latin1)], ["latin1.txt", "not UTF-8"]),
        "file that is not parquet": (["--text-files", str(not_parquet)], ["fake.parquet", "not a readable parquet"]),
        "column holding numbers": (["--text-files", numbers], ["holds int values, not text"]),
        "unsupported file type": (["--text-files", str(other_type)], ["notes.md", ".txt"]),
        "two sources at once": (["--builtin-corpus", "pydoc-topics", "--text-files", str(blank)], ["only one"]),
        "limit below one": (["--builtin-corpus", "pydoc-topics", "--limit", "0"], ["--limit"]),
        "hub dataset while offline": (["--dataset", "wikitext", "--dataset-config", "wikitext-2-raw-v1"],
                                      ["wikitext", "--builtin-corpus"]),
    }


BAD_INPUT_NAMES = [
    "missing file", "glob matching nothing", "unknown jsonl column", "unknown csv column",
    "unknown parquet column", "corpus with no text", "file that is not UTF-8", "file that is not parquet",
    "column holding numbers", "unsupported file type", "two sources at once", "limit below one",
    "hub dataset while offline",
]


@pytest.mark.parametrize("name", BAD_INPUT_NAMES)
def test_bad_corpus_input_is_one_clear_line_and_exit_2(tmp_path, name):
    bad_inputs = make_bad_inputs(tmp_path)
    assert sorted(bad_inputs) == sorted(BAD_INPUT_NAMES)
    flags, phrases = bad_inputs[name]
    out = tmp_path / "tokenizer_out"
    result = run_module("mlm_tpu.tokenizer", "train", *flags, "--vocab-size", "100", "--output-dir", str(out),
                        env_overrides={"HF_HOME": str(tmp_path / "hf_home")})
    assert_user_error(result, *phrases)
    assert not out.exists(), "a failed run must leave no output behind"
    assert not [p for p in os.listdir(tmp_path) if ".partial-" in p]


def test_builtin_corpus_splits_are_disjoint_and_cover_it():
    splits = {name: list(corpus_from_flags("--builtin-corpus", "pydoc-topics", "--split", name).documents())
              for name in ("train", "validation", "test")}
    everything = list(corpus_from_flags("--builtin-corpus", "pydoc-topics").documents())
    assert splits["train"] == everything  # train is the default
    full = list(BUILTIN_CORPORA["pydoc-topics"]())
    assert sorted(splits["train"] + splits["validation"] + splits["test"]) == sorted(full)
    assert splits["validation"] == full[::20] and splits["test"] == full[1::20]
    with pytest.raises(UserError, match="has splits validation, test, train, not .dev."):
        corpus_from_flags("--builtin-corpus", "pydoc-topics", "--split", "dev")


def test_parts_read_one_after_another_give_the_corpus_documents(tmp_path):
    """Line-aligned byte ranges of a .txt file, whatever their size: Windows and old-Mac line ends, blank lines,
    characters of several bytes, lines longer than a document, no newline at the end."""
    path = tmp_path / "mixed.txt"
    long_line = " ".join(f"wörd{i}" for i in range(40_000))  # ~350,000 characters: four documents
    path.write_bytes(f"first\r\nsecond\rthird\n\n  \nfourth é ü\n{long_line}\nafter\r\n\r\nlast".encode())
    corpus = corpus_from_flags("--text-files", str(path), str(path))
    whole = list(corpus.documents())
    assert len(whole) == 2 * 10
    for part_bytes in (1, 7, 100, 150_000, 10**9):
        parts = corpus.parts(part_bytes)
        assert [document for part in parts for document in corpus.part(part).documents()] == whole
        assert len(parts) > 2 or part_bytes > 150_000


def test_gzipped_files_read_as_their_text(tmp_path):
    import gzip

    write_jsonl(tmp_path / "rows.jsonl", [{"text": "alpha"}, {"text": "beta"}])
    for name, data in (("rows.json.gz", (tmp_path / "rows.jsonl").read_bytes()), ("lines.txt.gz", b"gamma\ndelta\n")):
        with gzip.open(tmp_path / name, "wb") as stream:
            stream.write(data)
    corpus = corpus_from_flags("--text-files", str(tmp_path / "rows.json.gz"), str(tmp_path / "lines.txt.gz"))
    assert list(corpus.documents()) == ["alpha", "beta", "gamma", "delta"]
    assert [part.end for part in corpus.parts(1)] == [None, None]  # compressed files are read whole
