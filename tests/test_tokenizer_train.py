"""`python -m mlm_tpu.tokenizer train` and `encode`, run as a user runs them, on real WikiText."""

import json
import os
import subprocess
import sys

import pytest

from transformers import AutoTokenizer, PreTrainedTokenizerFast

from conftest import REPO_ROOT, assert_user_error, run_module
from fake_hub import FakeHub

SPECIAL_TOKEN_IDS = {"[CLS]": 0, "<pad>": 1, "[SEP]": 2, "<unk>": 3, "[MASK]": 4}  # RoBERTa's layout: pad at 1


def train(output_dir, *flags: str, **kwargs):
    return run_module("mlm_tpu.tokenizer", "train", "--output-dir", str(output_dir), *flags, **kwargs)


def test_saves_a_fast_tokenizer_that_autotokenizer_loads_with_every_role_set(wikitext_tokenizer):
    output_dir, _ = wikitext_tokenizer
    assert sorted(os.listdir(output_dir)) == [".mlm_tpu.json", "README.md", "special_tokens_map.json", "tokenizer.json",
                                              "tokenizer_config.json", "tokenizer_training.json"]
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    assert isinstance(tokenizer, PreTrainedTokenizerFast) and tokenizer.is_fast
    roles = (tokenizer.cls_token, tokenizer.sep_token, tokenizer.unk_token, tokenizer.pad_token, tokenizer.mask_token)
    assert roles == ("[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]")
    assert {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKEN_IDS} == SPECIAL_TOKEN_IDS
    assert (tokenizer.pad_token_id, tokenizer.mask_token_id) == (1, 4)
    assert len(tokenizer) == 2000 and tokenizer.model_max_length == 512


def test_sequences_are_framed_by_cls_and_sep(wikitext_tokenizer):
    tokenizer = AutoTokenizer.from_pretrained(wikitext_tokenizer[0])
    single = tokenizer("The game was released in Japan .")
    assert single["input_ids"][0] == 0 and single["input_ids"][-1] == 2
    assert sorted(single) == ["attention_mask", "input_ids"]  # no token types: RoBERTa has none
    pair = tokenizer("first part", "second part")["input_ids"]
    assert pair[0] == 0 and pair.count(2) == 2 and pair[-1] == 2
    first = tokenizer("first part", add_special_tokens=False)["input_ids"]
    assert pair[1:len(first) + 1] == first


def test_encode_then_decode_gives_back_the_text(wikitext_tokenizer, wikitext_path):
    tokenizer = AutoTokenizer.from_pretrained(wikitext_tokenizer[0])
    lines = [line.strip() for line in wikitext_path.read_text(encoding="utf-8").splitlines()
             if line.strip() and "<unk>" not in line and "``" not in line and "''" not in line][:300]
    assert len(lines) == 300
    for line in lines:
        ids = tokenizer(line)["input_ids"]
        assert tokenizer.unk_token_id not in ids
        assert tokenizer.decode(ids, skip_special_tokens=True) == " ".join(line.split())


def test_normalizer_turns_latex_quotes_into_plain_ones(wikitext_tokenizer):
    tokenizer = AutoTokenizer.from_pretrained(wikitext_tokenizer[0])
    ids = tokenizer("He said ``yes'' .")["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == 'He said "yes" .'


def test_training_info_and_summary(wikitext_tokenizer, wikitext_path):
    output_dir, result = wikitext_tokenizer
    info = json.loads((output_dir / "tokenizer_training.json").read_text())
    documents = sum(1 for line in wikitext_path.read_text(encoding="utf-8").splitlines() if line.strip())
    assert info["documents"] == documents
    assert info["corpus"]["text_files"] == [str(wikitext_path)]
    assert (info["vocab_size_requested"], info["vocab_size"]) == (2000, 2000)
    assert {"tokenizers", "transformers", "mlm_tpu", "python"} <= set(info["versions"])
    assert f"Trained on {documents:,} documents" in result.stderr and "vocabulary 2,000" in result.stderr


def test_same_corpus_and_flags_give_a_byte_identical_tokenizer_json(wikitext_tokenizer, wikitext_path, tmp_path):
    again = tmp_path / "again"
    result = train(again, "--text-files", str(wikitext_path), "--vocab-size", "2000")
    assert result.returncode == 0, result.stderr
    assert (again / "tokenizer.json").read_bytes() == (wikitext_tokenizer[0] / "tokenizer.json").read_bytes()


def test_encode_command_shows_tokens_ids_and_decoded_text(wikitext_tokenizer):
    result = run_module("mlm_tpu.tokenizer", "encode", "--tokenizer", str(wikitext_tokenizer[0]), "--json",
                        stdin="The song was a hit .\n\nIt sold well .\n")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["decoded"] for row in rows] == ["The song was a hit .", "It sold well ."]
    assert all(row["tokens"][0] == "[CLS]" and row["ids"][-1] == 2 for row in rows)


@pytest.mark.slow  # runs the commands end to end
def test_overwrite_replaces_the_tokenizer_and_keeps_other_files(tmp_path):
    output_dir = tmp_path / "tok"
    output_dir.mkdir()
    (output_dir / "notes.txt").write_text("mine", encoding="utf-8")
    result = train(output_dir, "--builtin-corpus", "pydoc-topics", "--vocab-size", "400")  # beside the user's file
    assert result.returncode == 0, result.stderr
    refused = train(output_dir, "--builtin-corpus", "pydoc-topics", "--vocab-size", "500")
    assert_user_error(refused, str(output_dir), "already holds", "tokenizer.json", "--overwrite")
    assert len(AutoTokenizer.from_pretrained(output_dir)) == 400
    result = train(output_dir, "--builtin-corpus", "pydoc-topics", "--vocab-size", "500", "--overwrite")
    assert result.returncode == 0, result.stderr
    assert (output_dir / "notes.txt").read_text() == "mine"
    assert len(AutoTokenizer.from_pretrained(output_dir)) == 500
    assert not [p for p in os.listdir(tmp_path) if ".partial-" in p]


def test_bad_tokenizer_flags_fail_in_one_line(tmp_path):
    corpus = ["--builtin-corpus", "pydoc-topics"]
    assert_user_error(train(tmp_path / "a", *corpus, "--vocab-size", "5"), "--vocab-size 5", "at least 6")
    assert_user_error(train(tmp_path / "b", *corpus, "--batch-size", "0"), "--batch-size")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert_user_error(train(a_file, *corpus), "is a file")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_push_to_an_unreachable_hub_fails_clearly_after_saving_locally(tmp_path):
    output_dir = tmp_path / "tok"
    result = train(output_dir, "--builtin-corpus", "pydoc-topics", "--vocab-size", "500",
                   "--hub-model-id", "someone/tok")
    assert_user_error(result, "someone/tok", str(output_dir), "huggingface-cli upload")
    assert AutoTokenizer.from_pretrained(output_dir).mask_token == "[MASK]"


def test_underscore_flag_spellings_of_the_reference_script_work(tmp_path):
    result = run_module("mlm_tpu.tokenizer", "train", "--builtin_corpus", "pydoc-topics", "--vocab_size", "300",
                        "--batch_size", "50", "--limit", "400", "--output_dir", str(tmp_path / "tok"))
    assert result.returncode == 0, result.stderr
    info = json.loads((tmp_path / "tok" / "tokenizer_training.json").read_text())
    assert (info["documents"], info["vocab_size"]) == (400, 300)


def test_help_lists_every_flag():
    result = run_module("mlm_tpu.tokenizer", "train", "--help")
    assert result.returncode == 0
    for flag in ["--dataset", "--dataset-config", "--split", "--text-files", "--text-column", "--builtin-corpus",
                 "--limit", "--algorithm", "--template", "--byte-fallback", "--lowercase", "--normalization",
                 "--vocab-size", "--batch-size", "--model-max-length", "--sample-documents", "--seed", "--output-dir",
                 "--overwrite", "--push-to-hub", "--hub-model-id"]:
        assert flag in result.stdout, flag


def test_push_to_hub_uploads_every_saved_file(tmp_path):
    output_dir = tmp_path / "tok"
    with FakeHub(tmp_path / "hub") as hub:
        result = train(output_dir, "--builtin-corpus", "pydoc-topics", "--vocab-size", "500", "--push-to-hub",
                       "--hub-model-id", "someone/pydoc-unigram",
                       env_overrides={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub.endpoint, "HF_TOKEN": "hf_test"})
    assert result.returncode == 0, result.stderr
    assert [commit["repo_id"] for commit in hub.commits] == ["someone/pydoc-unigram"]
    pushed = hub.repos["someone/pydoc-unigram"]
    saved = [name for name in os.listdir(output_dir) if name != ".mlm_tpu.json"]  # the record of what it wrote stays
    assert sorted(os.listdir(pushed)) == sorted(saved)
    for name in saved:
        assert (pushed / name).read_bytes() == (output_dir / name).read_bytes()
    assert f"Pushed to the Hub: {hub.endpoint}/someone/pydoc-unigram/commit/" in result.stderr
    assert "AutoTokenizer.from_pretrained(\"someone/pydoc-unigram\")" in (pushed / "README.md").read_text()



PEAK_OF_CHILD = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(child.pid, 0)
print(usage.ru_maxrss, file=sys.stderr)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def train_measured(output_dir, *flags):
    """Train in a child process, as a user runs it; (exit code, stderr, the child's peak memory in MB).

    A child's peak counts the memory of the process it was forked from (here, pytest's), so a small Python process
    starts it and reports it.
    """
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run([sys.executable, "-c", PEAK_OF_CHILD, sys.executable, "-m", "mlm_tpu.tokenizer", "train",
                             "--output-dir", str(output_dir), *flags], env=env, cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=600)
    return result.returncode, result.stderr, int(result.stderr.split()[-1]) / 1024


@pytest.mark.slow
def test_a_sample_of_a_10x_corpus_trains_in_memory_bounded_by_the_sample(wikitext_path, tmp_path):
    """--sample-documents reads the whole corpus once but holds only the sample: the trainer sees 1,000 documents,
    the same seed gives the same tokenizer byte for byte, another seed another sample, and the child process'
    peak memory stays below that of training on the whole 10x corpus."""
    corpus = tmp_path / "wikitext-10x.txt"
    corpus.write_text(wikitext_path.read_text(encoding="utf-8") * 10, encoding="utf-8")
    flags = ["--text-files", str(corpus), "--vocab-size", "1000"]
    runs = {}
    for name, extra in (("sample", ["--sample-documents", "1000", "--seed", "3"]),
                        ("again", ["--sample-documents", "1000", "--seed", "3"]),
                        ("other seed", ["--sample-documents", "1000", "--seed", "4"]), ("whole", [])):
        code, stderr, peak_mb = train_measured(tmp_path / name, *flags, *extra)
        assert code == 0, stderr
        runs[name] = (json.loads((tmp_path / name / "tokenizer_training.json").read_text()), peak_mb,
                      (tmp_path / name / "tokenizer.json").read_bytes())
    print({name: f"{peak:.0f} MB" for name, (_, peak, _) in runs.items()})
    info = runs["sample"][0]
    read = 10 * sum(1 for line in wikitext_path.read_text(encoding="utf-8").splitlines() if line.strip())
    assert info["sample"] == {"documents": 1000, "seed": 3, "from_documents": read,
                              "from_characters": runs["whole"][0]["characters"]}
    assert info["documents"] == 1000 and info["characters"] < runs["whole"][0]["characters"] / 10
    assert runs["sample"][2] == runs["again"][2] != runs["other seed"][2]
    assert runs["sample"][1] < runs["whole"][1] and runs["other seed"][1] < runs["whole"][1]


def test_seed_without_a_sample_is_one_line(tmp_path):
    result = train(tmp_path / "tok", "--builtin-corpus", "pydoc-topics", "--seed", "3")
    assert_user_error(result, "--seed", "--sample-documents")
