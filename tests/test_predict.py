"""`python -m mlm_tpu.predict` (fill-mask) for real on a tiny RoBERTa trained in the tests."""

import json

import pytest

from conftest import assert_user_error, run_module

pytestmark = pytest.mark.slow  # trains models

SENTENCE = "The game was released in [MASK] ."


def predict(*args, stdin=""):
    return run_module("mlm_tpu.predict", *map(str, args), stdin=stdin)


def test_json_gives_top_k_per_mask_and_both_mask_spellings_agree(trained_mlm):
    model_dir, _ = trained_mlm
    result = predict("--model", model_dir, "--top-k", 4, "--json", SENTENCE, SENTENCE.replace("[MASK]", "<mask>"),
                     "The [MASK] was released in <mask> .")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["sentence"] for line in lines] == [SENTENCE, SENTENCE.replace("[MASK]", "<mask>"),
                                                    "The [MASK] was released in <mask> ."]
    single, other_spelling, double = (line["predictions"] for line in lines)
    assert len(single) == 1 and len(single[0]) == 4 and len(double) == 2 and all(len(m) == 4 for m in double)
    assert single == other_spelling
    for candidates in single + double:
        scores = [c["score"] for c in candidates]
        assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores) and sum(scores) <= 1 + 1e-6
        assert len({c["token"] for c in candidates}) == 4
    assert all("[MASK]" not in c["sequence"] and "[CLS]" not in c["sequence"] for c in single[0])


def test_table_from_stdin_shows_the_same_predictions(trained_mlm):
    model_dir, _ = trained_mlm
    as_json = predict("--model", model_dir, "--top-k", 3, "--json", SENTENCE)
    table = predict("fill-mask", "--model", model_dir, "--top-k", 3, stdin=f"{SENTENCE}\n\n")
    assert as_json.returncode == 0 and table.returncode == 0, table.stderr[-3000:]
    lines = table.stdout.splitlines()
    assert lines[0] == SENTENCE
    for rank, candidate in enumerate(json.loads(as_json.stdout)["predictions"][0], start=1):
        assert f"{rank:>2}. " in lines[rank] and f"{candidate['score']:.4f}" in lines[rank]
        assert candidate["sequence"] in lines[rank]


def test_a_sentence_without_a_mask_is_named(trained_mlm, in_process):
    result = in_process("predict", "--model", trained_mlm[0], SENTENCE, "No mask in this one.")
    assert_user_error(result, "no mask in 'No mask in this one.'", "[MASK]")


def test_a_folder_that_is_not_a_model_and_bad_flags(tmp_path, trained_mlm, in_process):
    assert_user_error(in_process("predict", "--model", tmp_path, SENTENCE), str(tmp_path), "no config.json")
    assert_user_error(in_process("predict", "--model", tmp_path / "missing", SENTENCE), "no config.json")
    assert_user_error(in_process("predict", "--model", trained_mlm[0], "--top-k", 0, SENTENCE), "--top-k")
    assert_user_error(in_process("predict", "--model", trained_mlm[0], stdin="\n"), "no input", "[MASK]")
