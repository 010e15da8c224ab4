"""What mlm_tpu 0.2 wrote is still read: its tokenizers, shards and model folders (tests/fixtures/made-by-0.2)
work with every command of this version, end to end."""

import json

import pytest

from conftest import REPO_ROOT, run_module, run_train

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "made-by-0.2"


def test_its_masked_lm_is_evaluated_on_its_shards_and_fills_masks():
    evaluation = run_module("mlm_tpu.evaluate", "--model", str(FIXTURES / "roberta"), "--eval-dataset",
                            str(FIXTURES / "shards" / "validation"), "--json")
    assert evaluation.returncode == 0, evaluation.stderr
    assert json.loads(evaluation.stdout)["examples"] > 0
    filled = run_module("mlm_tpu.predict", "--model", str(FIXTURES / "roberta"), "--json", "The [MASK] statement.")
    assert filled.returncode == 0, filled.stderr
    assert len(json.loads(filled.stdout)["predictions"][0]) == 5


def test_its_t5_classifier_predicts_its_labels():
    result = run_module("mlm_tpu.predict", "text2text", "--model", str(FIXTURES / "t5-classifier"), "--json",
                        "rate: how is this done")
    assert result.returncode == 0, result.stderr
    settings = json.loads((FIXTURES / "t5-classifier" / "config.json").read_text())["task_specific_params"]
    assert json.loads(result.stdout)["label"] in settings["mlm_tpu_text2text"]["labels"]


@pytest.mark.slow
def test_its_shards_and_tokenizer_train_a_new_model(tmp_path):
    result = run_train("--train-dataset", FIXTURES / "shards" / "train", "--eval-dataset",
                       FIXTURES / "shards" / "validation", "--tokenizer", FIXTURES / "tokenizer", "--model-config",
                       "tiny", "--per-replica-batch-size", 16, "--max-steps", 4, "--output-dir", tmp_path / "model")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "model" / "model.safetensors").is_file()
