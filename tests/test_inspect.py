"""`python -m mlm_tpu.inspect`: a split's first examples as the model receives them, for each kind of split."""

import json
import re

import pytest

from conftest import REPO_ROOT, assert_user_error, run_module

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "made-by-0.2"


def inspect(*flags):
    result = run_module("mlm_tpu.inspect", *map(str, flags), "--json")
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.slow  # runs the commands end to end
def test_span_corruption_examples_show_sentinels_in_place_of_the_spans(tmp_path, wikitext_path):
    tokenizer = FIXTURES / "t5-tokenizer"
    result = run_module("mlm_tpu.shard", "--task", "span-corruption", "--tokenizer", str(tokenizer), "--text-files",
                        str(wikitext_path), "--limit", "200", "--max-length", "128", "--output-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    examples = inspect("--dataset", tmp_path / "train", "--tokenizer", tokenizer, "--num-examples", 2)
    assert len(examples) == 2
    for example in examples:
        inputs, labels = example["input_ids"], example["labels"]
        assert (len(inputs["ids"]), len(labels["ids"])) == (128, 29)
        assert "<extra_id_0>" in inputs["text"] and labels["text"].startswith("<extra_id_0>")
        assert inputs["text"].endswith("</s>") and labels["text"].endswith("</s>")


@pytest.mark.slow  # runs the commands end to end
def test_masked_lm_and_text2text_examples():
    masked = inspect("--dataset", FIXTURES / "shards" / "validation", "--tokenizer", FIXTURES / "tokenizer",
                     "--mlm-probability", 0.5, "--masking", "whole-word")
    assert len(masked) == 3 and all("[MASK]" in example["input_ids"]["text"] for example in masked)
    assert all(example["labels"]["ids"] for example in masked)
    for example in masked:  # the masks: the positions, and whole words in brackets
        view = example["masked"]["text"]
        assert len(example["masked"]["ids"]) == len(example["labels"]["ids"]) and view.count("⟦") >= 2
        assert re.fullmatch(r"(⟦[^⟦⟧ ]+⟧|[^⟦⟧ ]+)( (⟦[^⟦⟧ ]+⟧|[^⟦⟧ ]+))*", view), view
    pairs = inspect("--dataset", FIXTURES / "t5-shards" / "validation", "--tokenizer", FIXTURES / "t5-tokenizer",
                    "--num-examples", 1)
    assert set(pairs[0]) == {"input_ids", "labels"} and pairs[0]["labels"]["text"].endswith("</s>")


def test_another_tokenizer_is_one_line():
    result = run_module("mlm_tpu.inspect", "--dataset", str(FIXTURES / "shards" / "validation"), "--tokenizer",
                        str(FIXTURES / "t5-tokenizer"))
    assert_user_error(result, "another tokenizer")
