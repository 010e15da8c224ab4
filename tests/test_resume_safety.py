"""A resumed run is the run it says it is: before going on from a backup, the trainer checks the run's settings, that
no other run is writing the folder, and that the backup is whole; each refusal is one line and leaves the folder
byte-identical."""

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MAX_LENGTH, REPO_ROOT, assert_user_error, backup_reached, run_train, train_until_killed

pytestmark = pytest.mark.slow


def flags(shards, tokenizer, output_dir, *more):
    """A tiny RoBERTa, 25 steps per epoch at a global batch of 16, a backup every 4 steps."""
    return ["--train-dataset", shards / "validation", "--tokenizer", tokenizer, "--max-length", MAX_LENGTH,
            "--model-config", "tiny", "--learning-rate", "3e-3", "--per-replica-batch-size", 16, "--max-steps", 16,
            "--steps-per-execution", 2, "--backup-steps", 4, "--logging-steps", 1, "--output-dir", output_dir, *more]


def tree(folder: Path) -> dict:
    """Every file under `folder` and its SHA-256, but the claim the killed run left (each run takes it over)."""
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file() and path.name != ".writer.json"}


@pytest.fixture(scope="module")
def killed_run(shards, wikitext_tokenizer, tmp_path_factory):
    """The output folder of a run killed (SIGKILL) once it had backed up step 4 or later."""
    output_dir = tmp_path_factory.mktemp("killed") / "run"
    train_until_killed(flags(shards, wikitext_tokenizer[0], output_dir), lambda: backup_reached(output_dir, 4))
    return output_dir


@pytest.fixture
def run_copy(killed_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(killed_run, copy)
    return copy


def backup_step(output_dir: Path) -> int:
    return max(int(name[5:-5]) for name in os.listdir(output_dir / "backup") if re.fullmatch(r"step-\d+\.json", name))


def refused(output_dir: Path, command, *phrases) -> str:
    """Run `command`; it must fail in one line holding `phrases`, and leave `output_dir` byte-identical."""
    before = tree(output_dir)
    line = assert_user_error(command(), *phrases)
    assert tree(output_dir) == before
    return line


@pytest.mark.parametrize("change, phrases", [
    (["--learning-rate", "1e-3"], ["--learning-rate was 0.003", "is 0.001 now"]),
    (["--per-replica-batch-size", "8"], ["the global batch", "was 16", "is 8 now"]),
    (["--seed", "7"], ["--seed was 42", "is 7 now"]),
    (["--train-dataset", "{shards}/train"], ["--train-dataset was", "/validation'", "(and the training shards)"]),
])
def test_a_setting_that_changes_the_result_is_refused_naming_both_values_and_the_fixes(
        change, phrases, run_copy, shards, wikitext_tokenizer, in_process):
    change = [value.format(shards=shards) for value in change]
    line = refused(run_copy, lambda: in_process("train", *flags(shards, wikitext_tokenizer[0], run_copy), *change),
                   *phrases, "--output-dir", "--allow-changed-settings")
    assert f"at step {backup_step(run_copy)}" in line


def test_fewer_shards_are_refused_as_the_changed_setting_not_by_the_data_order_they_break(
        run_copy, shards, wikitext_tokenizer, tmp_path, in_process):
    """The settings are compared first: one shard cannot feed the backup's input pipelines, but what the user changed
    is the shards, and the fixes are those of a changed setting."""
    recorded = json.loads((run_copy / "training_args.json").read_text())["input_pipelines"]
    assert recorded > 1  # the run this test resumes reads several shards at once
    one_shard = tmp_path / "one-shard"
    one_shard.mkdir()
    first = sorted((shards / "validation").glob("*.tfrecord"))[0]
    shutil.copy(first, one_shard / first.name)
    line = refused(run_copy, lambda: in_process("train", *flags(shards, wikitext_tokenizer[0], run_copy),
                                                "--train-dataset", one_shard),
                   "--train-dataset was", "(and the training shards)", "--output-dir", "--allow-changed-settings")
    assert "--input-pipelines" not in line


def test_an_allowed_change_is_recorded_with_its_step_and_free_settings_change_silently(
        run_copy, shards, wikitext_tokenizer):
    step = backup_step(run_copy)
    result = run_train(*flags(shards, wikitext_tokenizer[0], run_copy), "--learning-rate", "1e-3",
                       "--allow-changed-settings", "--logging-steps", "2", "--backup-steps", "8")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Resuming from the backup at step {step}" in result.stderr
    assert "resuming with the change" in result.stderr
    info = json.loads((run_copy / "training_args.json").read_text())
    assert info["learning_rate"] == 1e-3
    assert info["run"]["setting_changes"] == [{"step": step, "setting": "--learning-rate", "from": 0.003,
                                               "to": 0.001}]


def test_a_run_whose_folder_another_live_process_trains_into_is_refused_naming_it(run_copy, shards,
                                                                                  wikitext_tokenizer):
    (run_copy / ".writer.json").write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                                       "started": "2026-11-23T08:00:00", "updated": 0}))
    refused(run_copy, lambda: run_train(*flags(shards, wikitext_tokenizer[0], run_copy)),
            "is being written by another training run", f"host {socket.gethostname()}", f"process {os.getpid()}",
            "another --output-dir")


def test_the_claim_of_a_run_that_is_gone_is_taken_over(run_copy, shards, wikitext_tokenizer):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (run_copy / ".writer.json").write_text(json.dumps({"host": socket.gethostname(), "pid": int(gone.stdout),
                                                       "started": "2026-11-23T08:00:00", "updated": 0}))
    result = run_train(*flags(shards, wikitext_tokenizer[0], run_copy))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Taking over" in result.stderr and "Resuming from the backup" in result.stderr
    assert not (run_copy / ".writer.json").exists()


def _truncate_data(backup: Path, step: int) -> None:
    data = next(backup.glob(f"step-{step}.data-*"))
    data.write_bytes(data.read_bytes()[:100])


def _garble_index(backup: Path, step: int) -> None:
    index = backup / f"step-{step}.index"
    index.write_bytes(bytes(reversed(index.read_bytes())))


def _delete_json(backup: Path, step: int) -> None:
    (backup / f"step-{step}.json").unlink()


@pytest.mark.parametrize("damage, phrases", [
    (_truncate_data, ["is damaged", ".data-00000-of-00001 holds", "bytes, not"]),
    (_garble_index, ["is damaged", ".index does not match its checksum"]),
    (_delete_json, ["is incomplete", ".json, which is written last"]),
])
def test_a_damaged_backup_is_named_as_damaged_with_the_fix(damage, phrases, run_copy, shards, wikitext_tokenizer,
                                                            in_process):
    step = backup_step(run_copy)
    damage(run_copy / "backup", step)
    line = refused(run_copy, lambda: in_process("train", *flags(shards, wikitext_tokenizer[0], run_copy)),
                   f"backup of step {step}", *phrases, "no earlier backup", "delete")
    assert "settings" not in line


def test_a_damaged_newest_backup_falls_back_to_the_previous_one(run_copy, shards, wikitext_tokenizer):
    """The previous backup is deleted only once the next is complete: a newer backup found damaged is passed over."""
    backup, step = run_copy / "backup", backup_step(run_copy)
    newer = step + 4
    for path in backup.glob(f"step-{step}.*"):
        shutil.copy(path, backup / path.name.replace(f"step-{step}.", f"step-{newer}."))
    record = json.loads((backup / f"step-{newer}.json").read_text())
    record["step"] = newer
    record["files"] = {name.replace(f"step-{step}.", f"step-{newer}."): facts for name, facts in record["files"].items()}
    (backup / f"step-{newer}.json").write_text(json.dumps(record))
    _truncate_data(backup, newer)
    result = run_train(*flags(shards, wikitext_tokenizer[0], run_copy))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"the backup of step {newer}" in result.stderr and "is damaged" in result.stderr
    assert f"falling back to the previous backup, at step {step}" in result.stderr
    assert f"Resuming from the backup at step {step}" in result.stderr


def test_a_model_shape_the_config_cannot_have_is_one_line_and_leaves_nothing(shards, wikitext_tokenizer, tmp_path,
                                                                             in_process):
    output_dir = tmp_path / "heads"
    result = in_process("train", *flags(shards, wikitext_tokenizer[0], output_dir), "--config-overrides", "num_attention_heads=3")
    assert_user_error(result, "the model cannot be built", "--config-overrides", "attention heads")
    assert not output_dir.exists()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="a small private file system needs root and unshare (CI has both)")
def test_a_full_disk_while_writing_a_backup_says_so_in_the_systems_words(shards, wikitext_tokenizer, tmp_path):
    """The output folder on a 300 KB tmpfs of its own: the run's records fit, the first backup does not."""
    output_dir = tmp_path / "small-disk"
    output_dir.mkdir()
    command = " ".join(f"'{part}'" for part in [sys.executable, REPO_ROOT / "train.py",
                                                *flags(shards, wikitext_tokenizer[0], output_dir)])
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=300k tmpfs '{output_dir}' && "
                             f"exec {command}"], capture_output=True, text=True, env=env, timeout=600)
    line = assert_user_error(result, "cannot write the backup of step 4", "No space left on device",
                             "run the same command again")
    assert "function_node" not in line and "SaveV2" not in line
