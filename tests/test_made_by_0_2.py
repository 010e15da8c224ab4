"""What mlm_tpu 0.2 wrote is still read: its tokenizers, shards and model folders (tests/fixtures/made-by-0.2)
work with every command of this version, end to end."""

import json
import shutil

import pytest

from conftest import REPO_ROOT, assert_user_error, run_module, run_train
from mlm_tpu.output_dir import Record

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "made-by-0.2"


@pytest.mark.slow  # runs the commands end to end
def test_its_masked_lm_is_evaluated_on_its_shards_and_fills_masks():
    evaluation = run_module("mlm_tpu.evaluate", "--model", str(FIXTURES / "roberta"), "--eval-dataset",
                            str(FIXTURES / "shards" / "validation"), "--json")
    assert evaluation.returncode == 0, evaluation.stderr
    assert json.loads(evaluation.stdout)["examples"] > 0
    filled = run_module("mlm_tpu.predict", "--model", str(FIXTURES / "roberta"), "--json", "The [MASK] statement.")
    assert filled.returncode == 0, filled.stderr
    assert len(json.loads(filled.stdout)["predictions"][0]) == 5


@pytest.mark.slow  # runs the commands end to end
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


# Its folders have no record of what mlm_tpu wrote (output_dir.py): the files of the names it wrote count as its own.

def test_its_tokenizer_is_replaced_with_overwrite_and_the_users_file_beside_it_is_kept(tmp_path):
    folder = shutil.copytree(FIXTURES / "tokenizer", tmp_path / "tokenizer")
    (folder / "notes.txt").write_text("mine\n")
    flags = ["train", "--builtin-corpus", "pydoc-topics", "--limit", "300", "--vocab-size", "350", "--output-dir",
             str(folder)]
    assert_user_error(run_module("mlm_tpu.tokenizer", *flags), "already holds", "tokenizer.json", "--overwrite")
    result = run_module("mlm_tpu.tokenizer", *flags, "--overwrite")
    assert result.returncode == 0, result.stderr
    assert json.loads((folder / "tokenizer_training.json").read_text())["vocab_size"] == 350
    assert (folder / "notes.txt").read_text() == "mine\n" and "notes.txt" not in Record(str(folder)).files


def test_its_split_is_replaced_with_overwrite_and_the_users_file_beside_it_is_kept(tmp_path):
    split = shutil.copytree(FIXTURES / "shards" / "train", tmp_path / "shards" / "train")
    (split / "README.md").write_text("where these came from\n")
    flags = ["--tokenizer", str(FIXTURES / "tokenizer"), "--builtin-corpus", "pydoc-topics", "--limit", "60",
             "--max-length", "16", "--output-dir", str(tmp_path / "shards")]
    assert_user_error(run_module("mlm_tpu.shard", *flags), "other settings", "--overwrite")
    result = run_module("mlm_tpu.shard", *flags, "--overwrite")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((split / "manifest.json").read_text())
    assert manifest["settings"]["max_length"] == 16
    assert sorted(path.name for path in split.iterdir()) == sorted(
        ["README.md", "manifest.json", *(entry["name"] for entry in manifest["shards"])])


@pytest.mark.slow
def test_its_model_folder_is_exported_in_place_once_overwriting_its_config_is_allowed(tmp_path):
    folder = shutil.copytree(FIXTURES / "roberta", tmp_path / "roberta")
    refused = run_module("mlm_tpu.export", "--model", str(folder))  # its pad_token_id is not TF RoBERTa's
    assert_user_error(refused, "already holds config.json", "--overwrite")
    result = run_module("mlm_tpu.export", "--model", str(folder), "--overwrite")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((folder / "config.json").read_text())["pad_token_id"] == 1
    record = Record(str(folder))
    assert {"model.safetensors", "README.md", "config.json", "tf_model.h5"} <= set(record.files)
    assert record.unrecognised() == []


@pytest.mark.slow
def test_its_run_folder_is_trained_over_and_the_users_file_in_it_is_kept(tmp_path):
    folder = shutil.copytree(FIXTURES / "roberta", tmp_path / "roberta")
    (folder / "notes.txt").write_text("mine\n")
    result = run_train("--train-dataset", FIXTURES / "shards" / "train", "--tokenizer", FIXTURES / "tokenizer",
                       "--model-config", "tiny", "--per-replica-batch-size", 16, "--max-steps", 2, "--output-dir",
                       folder)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (folder / "notes.txt").read_text() == "mine\n"
    assert Record(str(folder)).unrecognised() == ["notes.txt"]
    assert (folder / "model.safetensors").is_file()
