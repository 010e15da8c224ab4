"""The downstream benchmark checks every input before it writes anything: a refused command leaves no
--output-dir behind, so the corrected command is not taken for a benchmark of other settings."""

import json

import pytest

from conftest import assert_user_error
from test_model_families import small_modernbert_folder

ROWS = ["a fine film , warm and funny,1", "a dull mess from start to end,0", "the best hour I spent this year,1",
        "nothing works and no one cares,0"]


@pytest.mark.slow
@pytest.mark.parametrize("as_task_file", [False, True], ids=["NAME=TRAIN:DEV", "task file"])
def test_a_dev_file_without_rows_leaves_nothing_and_the_corrected_command_runs(as_task_file, tmp_path, in_process,
                                                                                wikitext_tokenizer):
    model = small_modernbert_folder(tmp_path / "model", wikitext_tokenizer[0])
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    train.write_text("\n".join(["sentence,label", *ROWS * 2]) + "\n")
    dev.write_text("sentence,label\n")
    task = f"mine={train}:{dev}"
    if as_task_file:
        task = tmp_path / "mine.json"
        task.write_text(json.dumps({"name": "mine", "train_file": str(train), "validation_file": str(dev)}))
    output = tmp_path / "benchmark"
    flags = ["--model", model, "--tasks", task, "--seeds", 1, "--num-epochs", 1, "--max-length", 16,
             "--per-replica-batch-size", 4, "--output-dir", output]
    assert_user_error(in_process("downstream", *flags), str(dev), "no rows")
    assert not output.exists()
    dev.write_text("\n".join(["sentence,label", *ROWS]) + "\n")
    result = in_process("downstream", *flags, "--learning-rate", "1e-3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((output / "results.json").read_text())
