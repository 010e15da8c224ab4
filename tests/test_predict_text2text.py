"""`python -m mlm_tpu.predict text2text` for real on the tiny T5 models trained in the tests."""

import csv
import json

import pytest

from conftest import CLASSES, assert_user_error, run_module

pytestmark = pytest.mark.slow  # trains models


def predict(*args, stdin=""):
    return run_module("mlm_tpu.predict", "text2text", *map(str, args), stdin=stdin)


def quality_input(cue):
    return f"quality: How do I read a file?\nThe answer was {cue} and it came from the film"


def test_classification_gives_the_label_and_each_labels_probability(trained_classifier):
    inputs = [quality_input(cue) for cue in CLASSES.values()]
    result = predict("--model", trained_classifier[0], "--json", *inputs)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["input"] for line in lines] == inputs
    for line, label in zip(lines, CLASSES):
        assert set(line["scores"]) == set(CLASSES) and sum(line["scores"].values()) == pytest.approx(1, abs=1e-5)
        assert line["label"] == max(line["scores"], key=line["scores"].get)
    assert [line["label"] for line in lines] == list(CLASSES)  # the word that gives the class away decides it
    assert "warning" not in result.stderr


def test_classification_table_from_stdin_and_the_prefix_warning(trained_classifier):
    one_line = quality_input("excellent").replace("\n", " ")  # stdin holds one input per line
    result = predict("--model", trained_classifier[0], stdin=f"{one_line}\n\nno prefix here\n")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warning:" in result.stderr and "'quality:'" in result.stderr
    blocks = result.stdout.strip().split("\n\n")
    assert len(blocks) == 2 and blocks[0].startswith("input:  quality: How do I read a file?")
    assert blocks[0].splitlines()[-1].startswith("label:  high (")


def test_generation_copies_the_span(trained_copier, t5_data):
    with open(t5_data.folder / "copy-validation.csv", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))[:20]
    result = predict("--model", trained_copier[0], *[f"copy: {row['source']}" for row in rows])
    assert result.returncode == 0, result.stderr[-3000:]
    blocks = [block.splitlines() for block in result.stdout.strip().split("\n\n")]
    assert [block[0] for block in blocks] == [f"input:  copy: {row['source']}" for row in rows]
    outputs = [block[1].removeprefix("output: ") for block in blocks]
    assert sum(output == row["target"] for output, row in zip(outputs, rows)) > 10


def test_bad_input(trained_classifier, trained_copier, tmp_path, in_process):
    def predict(*args, stdin=None):
        return in_process("predict", "text2text", *args, stdin=stdin)

    assert_user_error(predict("--model", trained_classifier[0], stdin="\n"), "no input")
    assert_user_error(predict("--model", tmp_path, "quality: x"), "no config.json")
    assert_user_error(predict("--model", trained_copier[0], "--task", "classification", "copy: a b"),
                      "not trained for classification", "--labels")
    assert_user_error(predict("--model", trained_classifier[0], "quality: x", "--labels", "none", "high"),
                      "label 'none' is 2 tokens")
    assert_user_error(predict("--model", trained_classifier[0], "--batch-size", 0, "quality: x"), "--batch-size")
