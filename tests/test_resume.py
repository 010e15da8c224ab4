"""Preemption-exact training: a run killed (SIGKILL, as a preemption does) or stopped (SIGTERM, a preemption's notice)
and started again with the same command ends with the same weights, bit for bit, as the uninterrupted run, and logs the
same loss at every step."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import MAX_LENGTH, REPO_ROOT, assert_user_error, run_train, t5_flags

pytestmark = pytest.mark.slow


def mlm_flags(shards, tokenizer, output_dir, *more):
    """A tiny RoBERTa with dropout on (the preset's 0.1), whole words masked, two steps per execution, a backup every
    four steps; two epochs of 25 steps (400 examples, a global batch of 16), so executions are cut short at the first
    epoch's end."""
    return ["--train-dataset", shards / "validation", "--eval-dataset", shards / "validation", "--tokenizer", tokenizer,
            "--max-length", MAX_LENGTH, "--model-config", "tiny", "--masking", "whole-word", "--learning-rate", "3e-3",
            "--per-replica-batch-size", 16, "--num-epochs", 2, "--steps-per-execution", 2, "--backup-steps", 4,
            "--logging-steps", 1, "--output-dir", output_dir, *more]


def train_and_kill_after_backup(flags, backup_step: int, log: Path) -> None:
    """Start `python train.py flags`, and kill it with SIGKILL once it has written the backup of `backup_step`
    (the steps it took since are lost and must be done again)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    with open(log, "w") as stream:
        process = subprocess.Popen([sys.executable, str(REPO_ROOT / "train.py"), *map(str, flags)], env=env,
                                   stdout=subprocess.DEVNULL, stderr=stream, cwd=REPO_ROOT)
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline:
            if f"Backup written at step {backup_step}\n" in log.read_text():
                break
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL, "training finished before it could be killed"


def weights(folder: Path) -> dict:
    """A saved model's weights by name: tf_model.h5's, or (a hand-written family's folder holds none) those of
    model.safetensors."""
    if not (folder / "tf_model.h5").exists():
        from safetensors.numpy import load_file

        return load_file(folder / "model.safetensors")
    import h5py

    found = {}
    with h5py.File(folder / "tf_model.h5", "r") as stream:
        stream.visititems(lambda name, item: found.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset)
                          else None)
    return found


def step_losses(folder: Path) -> dict:
    from mlm_tpu.training.run_logs import read_scalars

    return read_scalars(str(folder / "logs" / "train"))["loss"]


def assert_same_run(resumed: Path, uninterrupted: Path) -> None:
    expected, got = weights(uninterrupted), weights(resumed)
    assert expected.keys() == got.keys() and len(expected) > 10
    assert not (resumed / "backup").exists()  # a finished run leaves no backup behind
    for name, value in expected.items():
        assert np.array_equal(value, got[name]), name  # bit for bit
    assert step_losses(resumed) == step_losses(uninterrupted)


def resumed_at(log: str) -> int:
    return int(re.search(r"Resuming from the backup at step (\d+)", log).group(1))


# `python train.py` with a Keras callback that sends the process SIGTERM after the last step of epoch 1 (step 25), as
# a preemption notice may come in just before an epoch's validation and save
SIGTERM_AT_THE_END_OF_EPOCH_1 = """
import os, signal, sys
from mlm_tpu.cli import run_command
from mlm_tpu.cli.train import build_config, build_parser
from mlm_tpu.console import import_tensorflow, quiet_libraries
import_tensorflow()
quiet_libraries()
import tf_keras as keras
from mlm_tpu.tasks import training_task
from mlm_tpu.training.trainer import train

class SigtermAtTheEndOfEpoch1(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch + 1 == 25:
            os.kill(os.getpid(), signal.SIGTERM)

def main(argv):
    config = build_config(build_parser("train.py").parse_args(argv))
    train(config, training_task(config), [SigtermAtTheEndOfEpoch1()])

run_command(main, sys.argv[1:])
"""


@pytest.fixture(scope="module")
def uninterrupted_mlm(shards, wikitext_tokenizer, tmp_path_factory):
    """The masked LM of mlm_flags on one replica, uninterrupted: (folder, run). The kill-and-stop test compares with
    it, and the backup test reads its backups (one run instead of two)."""
    output_dir = tmp_path_factory.mktemp("uninterrupted-mlm") / "model"
    result = run_train(*mlm_flags(shards, wikitext_tokenizer[0], output_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir, result


def test_a_masked_lm_killed_then_stopped_at_an_epochs_end_ends_as_the_uninterrupted_run(
        uninterrupted_mlm, shards, wikitext_tokenizer, tmp_path):
    """Killed (SIGKILL) after its backup of step 8; started again and sent SIGTERM after the last step of epoch 1: the
    backup comes before the epoch's validation and save, which could outlast a preemption's notice; started again, it
    does them first, and ends bit for bit as the uninterrupted run, validation scores and all: its whole-word masks too
    are drawn from (seed, step) alone. (Several replicas and workers killed and resumed: test_multi_worker.py, and the
    continued run below.)"""
    from mlm_tpu.training.run_logs import read_scalars

    uninterrupted, result = uninterrupted_mlm
    assert "25 steps per epoch, 50 steps in all" in result.stderr and len(step_losses(uninterrupted)) == 50

    resumed = tmp_path / "resumed"
    flags = mlm_flags(shards, wikitext_tokenizer[0], resumed)
    train_and_kill_after_backup(flags, 8, tmp_path / "killed.log")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    stopped = subprocess.run([sys.executable, "-c", SIGTERM_AT_THE_END_OF_EPOCH_1, *map(str, flags)],
                             capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600)
    assert stopped.returncode == 42, stopped.stderr[-3000:]
    assert 8 <= resumed_at(stopped.stderr) < 25
    assert "stopped: stopped at step 25 (SIGTERM on the only worker)" in stopped.stderr
    assert "Epoch 1 training" not in stopped.stderr and not (resumed / "config.json").exists()

    finished = run_train(*flags)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert resumed_at(finished.stderr) == 25
    assert finished.stderr.index("Epoch 1 validation") < finished.stderr.index("Epoch 2 training")
    assert_same_run(resumed, uninterrupted)
    assert (read_scalars(str(resumed / "logs" / "validation")) ==
            read_scalars(str(uninterrupted / "logs" / "validation")))


def test_a_t5_classifier_killed_in_its_second_epoch_ends_as_the_uninterrupted_run_and_keeps_the_same_best_epoch(
        quality_shards, t5_data, tmp_path):
    def flags(output_dir):
        return [*t5_flags(quality_shards, t5_data.tokenizer, output_dir, "classification"), "--num-epochs", 3,
                "--per-replica-batch-size", 32, "--steps-per-execution", 2, "--backup-steps", 4, "--logging-steps", 1]

    uninterrupted = tmp_path / "uninterrupted"
    result = run_train(*flags(uninterrupted))
    assert result.returncode == 0, result.stderr[-3000:]
    resumed = tmp_path / "resumed"
    train_and_kill_after_backup(flags(resumed), 28, tmp_path / "killed.log")  # epochs of 18 steps: in epoch 2
    finished = run_train(*flags(resumed))
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert resumed_at(finished.stderr) >= 28
    assert_same_run(resumed, uninterrupted)
    assert (resumed / "best_model.json").read_text() == (uninterrupted / "best_model.json").read_text()


def test_backups_fall_every_n_optimizer_steps_whatever_the_steps_per_execution(uninterrupted_mlm, shards,
                                                                               wikitext_tokenizer, tmp_path,
                                                                               in_process):
    """Epochs of 25 steps with 2 steps per execution: executions are cut at epoch ends, never across a backup (28,
    32, ... come after the cut at 25)."""
    _, result = uninterrupted_mlm
    assert "25 steps per epoch, 50 steps in all" in result.stderr
    assert re.findall(r"Backup written at step (\d+)", result.stderr) == [str(step) for step in range(4, 50, 4)]
    refused = in_process("train", *mlm_flags(shards, wikitext_tokenizer[0], tmp_path / "bad", "--backup-steps", 5))
    assert_user_error(refused, "--backup-steps 5 is not a multiple of --steps-per-execution 2", "use 4")


FIXTURES = REPO_ROOT / "tests" / "fixtures" / "made-by-0.2"


def test_a_continued_run_killed_after_a_backup_ends_as_the_uninterrupted_run(tmp_path):
    """A run continuing a checkpoint (mlm_tpu 0.2's tiny RoBERTa, dropout on) on 2 replicas scores it before its first
    step, once: killed after its backup of step 8 and started again, it does not score it again but keeps the figures
    its backup holds, and ends bit for bit as the uninterrupted run."""
    def flags(output_dir):
        return ["--train-dataset", FIXTURES / "shards" / "train", "--eval-dataset", FIXTURES / "shards" / "validation",
                "--model-name-or-path", FIXTURES / "roberta", "--learning-rate", "3e-3", "--cpu-replicas", 2,
                "--per-replica-batch-size", 4, "--max-steps",
                16, "--steps-per-execution", 2, "--backup-steps", 4, "--logging-steps", 1, "--output-dir", output_dir]

    def scored_before(folder: Path) -> dict:
        return json.loads((folder / "training_args.json").read_text())["run"]["validation_before_training"]

    uninterrupted = tmp_path / "uninterrupted"
    result = run_train(*flags(uninterrupted))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("Before training (the checkpoint as loaded): loss ") == 1

    resumed = tmp_path / "resumed"
    train_and_kill_after_backup(flags(resumed), 8, tmp_path / "killed.log")
    assert "Before training (the checkpoint as loaded)" in (tmp_path / "killed.log").read_text()
    finished = run_train(*flags(resumed))
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert resumed_at(finished.stderr) == 8 and "Before training" not in finished.stderr
    assert_same_run(resumed, uninterrupted)
    assert scored_before(resumed) == scored_before(uninterrupted)
