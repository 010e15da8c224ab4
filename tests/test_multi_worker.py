"""Multi-worker training with real worker processes on loopback (CPU, ring collectives), started by `mlm-tpu launch`:
the same run as one process makes, whatever the number of workers and replicas; killed, preempted (SIGTERM) and
resumed, on the same or another number of workers; only the chief writes; each fault is one line.

Equality: two workers x one replica against one process x two replicas and one process x one replica, same global
batch. They agree within 1e-6 but not bit for bit: TensorFlow's graph optimizer (grappler) arranges the replicas'
arithmetic differently in one process than in two (with it off, their gradients are bit-identical), and one replica
sums the global batch in another order than two. AdamW with its usual epsilon (1e-8) turns those last-bit differences
of near-zero gradients into weight differences of the learning rate's size (its step is about lr x sign(gradient)
however small the gradient): the T5 classifier, whose ReLU units have many near-zero gradients, ended 4.9e-5 apart
after 12 steps at 1e-4 on one machine (7.6e-7 on another). So these runs take --adam-epsilon 1e-3, which leaves tiny
gradients tiny steps: measured here, masked LM within 7.5e-9 and T5 within 1.2e-7 (one float32 step at 1.0) at
learning rate 1e-3. The losses of every step agree within 1e-5. The same topology killed and started again is
bit-identical."""

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from conftest import MAX_LENGTH, REPO_ROOT, assert_user_error, backup_reached, run_module, run_train, train_until_killed
from test_resume import assert_same_run, resumed_at, step_losses, weights

from mlm_tpu.model_folder.card import FACTS_FILE
from mlm_tpu.output_dir import RECORD

pytestmark = pytest.mark.slow  # worker processes, each loading TensorFlow and training

LEARNING_RATE = 1e-3
ADAM_EPSILON = 1e-3  # AdamW's 1e-8 would blow last-bit differences of tiny gradients up to the learning rate
STEPS = 12


def mlm_flags(shards, tokenizer, output_dir, per_replica=8, *more):
    """A tiny RoBERTa (dropout on), global batch 16, 12 steps, two per execution, a backup every two."""
    return ["--train-dataset", shards / "validation", "--tokenizer", tokenizer, "--max-length", MAX_LENGTH,
            "--model-config", "tiny", "--learning-rate", LEARNING_RATE, "--adam-epsilon", ADAM_EPSILON,
            "--per-replica-batch-size", per_replica,
            "--max-steps", STEPS, "--steps-per-execution", 2, "--backup-steps", 2, "--logging-steps", 1,
            "--output-dir", output_dir, *more]


def t5_flags(shards, tokenizer, output_dir, per_replica=8):
    """A tiny T5 classifier from scratch, global batch 16, 12 steps."""
    return ["--task", "classification", "--train-dataset", shards / "train", "--tokenizer", tokenizer,
            "--model-config", "t5-tiny", "--learning-rate", LEARNING_RATE, "--adam-epsilon", ADAM_EPSILON,
            "--per-replica-batch-size", per_replica,
            "--max-steps", STEPS, "--steps-per-execution", 2, "--logging-steps", 1, "--output-dir", output_dir]


def launch(flags, tmp: Path, workers: int = 2):
    """`mlm-tpu launch --workers N -- train flags`, with the workers' temporary folders under `tmp`."""
    tmp.mkdir(exist_ok=True)
    return run_module("mlm_tpu.launch", "--workers", str(workers), "--", "train", *map(str, flags),
                      env_overrides={"TMPDIR": str(tmp)})


def launch_and_signal(flags, ready, worker: Optional[int], number: int, log: Path, tmp: Path):
    """Launch two workers; once `ready(output so far)`, send signal `number` to worker `worker` (None: to the
    launcher). (exit code, output, seconds from the signal to the launcher's exit)."""
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "TMPDIR": str(tmp)}
    with open(log, "w") as stream:
        process = subprocess.Popen([sys.executable, "-m", "mlm_tpu.launch", "--workers", "2", "--", "train",
                                    *map(str, flags)], stdout=stream, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT)
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline and not ready(log.read_text()):
            time.sleep(0.05)
        assert process.poll() is None, "training finished before the signal:\n" + log.read_text()[-3000:]
        if worker is None:
            process.send_signal(number)
        else:
            os.kill(int(re.search(rf"Worker {worker}: process (\d+)", log.read_text()).group(1)), number)
        signalled = time.monotonic()
        process.wait(timeout=180)
    return process.returncode, log.read_text(), time.monotonic() - signalled


def largest_difference(folder: Path, other: Path) -> float:
    mine, theirs = weights(folder), weights(other)
    assert mine.keys() == theirs.keys() and len(mine) > 10
    return max(float(np.max(np.abs(mine[name].astype(np.float64) - theirs[name]))) for name in mine)


def assert_only_the_chief_wrote(output_dir: Path, tmp: Path) -> None:
    """The output folder holds the model, its card and logs and mlm_tpu's records of them, nothing of the workers (no
    worker check token, no claim left behind); no temporary folder remains."""
    names = set(os.listdir(output_dir))
    assert {"tf_model.h5", "model.safetensors", "README.md", "config.json", "training_args.json", "logs"} <= names
    assert not [name for name in names - {RECORD, FACTS_FILE} if name.startswith(".") or name == "backup"], names
    assert not scratch_folders(tmp)


def scratch_folders(tmp: Path) -> list:
    """The workers' temporary folders left in `tmp` (TensorFlow's autograph leaves files of its own there)."""
    return [name for name in os.listdir(tmp) if name.startswith("mlm-tpu-worker-")]


class ScratchWatch:
    """The names of the files that appear in the workers' temporary folders under `tmp` while it runs (looked at
    every 10 ms: a worker deletes its folder at its end)."""

    def __init__(self, tmp: Path):
        self.tmp, self.seen, self.done = tmp, set(), threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.done.wait(0.01):
            for folder in scratch_folders(self.tmp) if self.tmp.is_dir() else ():
                for _, _, names in os.walk(self.tmp / folder):
                    self.seen.update(names)

    def __enter__(self) -> "ScratchWatch":
        self.thread.start()
        return self

    def __exit__(self, *exception) -> None:
        self.done.set()
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def mlm_runs(shards, wikitext_tokenizer, tmp_path_factory):
    """The masked LM trained by 2 workers x 1 replica (and what they wrote into their temporary folders), 1 process x
    2 replicas and 1 process x 1 replica."""
    folder = tmp_path_factory.mktemp("mlm-runs")
    tokenizer = wikitext_tokenizer[0]
    with ScratchWatch(folder / "tmp") as scratch:
        result = launch(mlm_flags(shards, tokenizer, folder / "workers"), folder / "tmp")
    assert result.returncode == 0, result.stderr[-3000:]
    for name, more in (("replicas", ["--cpu-replicas", 2]), ("alone", [])):
        per_replica = 8 if more else 16
        single = run_train(*mlm_flags(shards, tokenizer, folder / name, per_replica, *more))
        assert single.returncode == 0, single.stderr[-3000:]
    return folder, result, scratch.seen


def test_two_workers_train_the_masked_lm_one_process_trains(mlm_runs):
    folder, result, scratch = mlm_runs
    assert "[worker 0] Training (mlm) on MultiWorkerMirroredStrategy over 2 workers with 2 replica(s): global batch " \
           "16 = 8 per replica x 2, made by 2 input pipelines" in result.stderr
    assert largest_difference(folder / "workers", folder / "replicas") <= 1e-6
    assert largest_difference(folder / "workers", folder / "alone") <= 1e-6
    losses = [step_losses(folder / name) for name in ("workers", "replicas", "alone")]
    assert len(losses[0]) == STEPS and all(abs(losses[0][step] - run[step]) < 1e-5 for run in losses[1:]
                                           for step in losses[0])
    assert_only_the_chief_wrote(folder / "workers", folder / "tmp")
    # worker 1 backed up into its temporary folder (the strategy wants every worker in a backup), but saved no model
    assert "step-2.json" in scratch and not {"tf_model.h5", "model.safetensors", "config.json"} & scratch, scratch


def test_two_workers_train_deberta_v3_one_process_trains(shards, wikitext_tokenizer, tmp_path):
    """DeBERTa-v3 by replaced-token detection with GDES, dropout on: the generator's samples, E_G (moved by the
    generator's gradient alone) and E_delta come out of two workers as out of one process: the discriminator (E_G +
    E_delta merged) and the generator both. (The relative-position table's dropout was keyed by a replica's first
    input pipeline, so two workers dropped other units of it than one process: 1.5e-4 apart after 12 steps.)"""
    def flags(output_dir, per_replica=8):  # mlm_flags' run, its model the DeBERTa-v3 preset (the later flag wins)
        return [*mlm_flags(shards, wikitext_tokenizer[0], output_dir, per_replica), "--task", "electra",
                "--model-config", "deberta-v3-tiny"]

    result = launch(flags(tmp_path / "workers"), tmp_path / "tmp")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "over 2 workers with 2 replica(s)" in result.stderr and "embeddings gradient-disentangled" in result.stderr
    alone = run_train(*flags(tmp_path / "alone", 16))
    assert alone.returncode == 0, alone.stderr[-3000:]
    for model in ("", "generator"):
        assert largest_difference(tmp_path / "workers" / model, tmp_path / "alone" / model) <= 1e-6, model
    assert_only_the_chief_wrote(tmp_path / "workers", tmp_path / "tmp")


def test_two_workers_train_the_t5_classifier_one_process_trains(quality_shards, t5_data, tmp_path):
    result = launch(t5_flags(quality_shards, t5_data.tokenizer, tmp_path / "workers"), tmp_path / "tmp")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "made by 2 input pipelines" in result.stderr
    # against one process with one replica (the masked LM above is also held to one process with two replicas)
    alone = run_train(*t5_flags(quality_shards, t5_data.tokenizer, tmp_path / "alone", 16))
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert largest_difference(tmp_path / "workers", tmp_path / "alone") <= 1e-6
    assert_only_the_chief_wrote(tmp_path / "workers", tmp_path / "tmp")


def test_killed_then_preempted_workers_started_again_end_as_the_uninterrupted_run(mlm_runs, shards,
                                                                                   wikitext_tokenizer, tmp_path):
    """SIGKILL to worker 1: worker 0 stops within 30 s with one line. SIGTERM to worker 0 of the next launch: both
    save a backup at the same step and stop. The third launch finishes: bit for bit the uninterrupted run."""
    output_dir = tmp_path / "out"
    flags = mlm_flags(shards, wikitext_tokenizer[0], output_dir)
    tmp = tmp_path / "tmp"
    code, output, seconds = launch_and_signal(flags, lambda text: "[worker 0] Backup written at step 4" in text, 1,
                                              signal.SIGKILL, tmp_path / "killed.log", tmp)
    assert code == 1 and seconds < 30, output[-3000:]
    assert re.search(r"\[worker 0\] error: worker 1 \(localhost:\d+\) stopped answering \(killed, crashed or cut "
                     r"off\), so worker 0 \(the chief, localhost:\d+\) stops too; start every worker again", output)
    assert "error: worker 1 failed first (killed by SIGKILL); the others stopped with it" in output
    assert "Traceback" not in output

    code, output, _ = launch_and_signal(flags, lambda text: "[worker 0] Backup written at step" in text, 0,
                                        signal.SIGTERM, tmp_path / "preempted.log", tmp)
    stopped = re.findall(r"\[worker (\d)\] stopped: stopped at step (\d+) \(", output)
    assert code == 42 and sorted(worker for worker, _ in stopped) == ["0", "1"], output[-3000:]
    assert stopped[0][1] == stopped[1][1] and resumed_at(output) < int(stopped[0][1]) < STEPS
    assert "stopped at step %s (SIGTERM on worker 0 (the chief" % stopped[0][1] in output
    assert backup_reached(output_dir, int(stopped[0][1])) and not scratch_folders(tmp)  # the killed one's too
    assert "stopped: every worker saved a backup at the same step and stopped" in output

    finished = launch(flags, tmp)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert resumed_at(finished.stderr) == int(stopped[0][1])
    assert_same_run(output_dir, mlm_runs[0] / "workers")
    assert_only_the_chief_wrote(output_dir, tmp)


def test_a_run_moves_from_one_process_to_two_workers_and_back(mlm_runs, shards, wikitext_tokenizer, tmp_path):
    """1 process x 2 replicas, killed after its backup of step 2; 2 workers, stopped after their first backup by a
    SIGTERM to the launcher, which passes it on; 1 process x 1 replica finishes: within 1e-6 of the uninterrupted
    two-worker run, the same loss at every step."""
    output_dir = tmp_path / "out"
    tokenizer = wikitext_tokenizer[0]
    train_until_killed(mlm_flags(shards, tokenizer, output_dir, 8, "--cpu-replicas", 2),
                       lambda: backup_reached(output_dir, 2))
    code, output, _ = launch_and_signal(mlm_flags(shards, tokenizer, output_dir),
                                        lambda text: "[worker 0] Backup written at step" in text, None, signal.SIGTERM,
                                        tmp_path / "workers.log", tmp_path / "tmp")
    assert code == 42 and "[worker 0] Resuming from the backup at step " in output, output[-3000:]
    assert "[worker 0] stopped: stopped at step" in output and "[worker 1] stopped: stopped at step" in output
    assert "stopped: every worker saved a backup at the same step and stopped" in output
    finished = run_train(*mlm_flags(shards, tokenizer, output_dir, 16))
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert resumed_at(finished.stderr) >= 4
    assert largest_difference(output_dir, mlm_runs[0] / "workers") <= 1e-6
    expected = step_losses(mlm_runs[0] / "workers")
    assert all(abs(loss - expected[step]) < 1e-5 for step, loss in step_losses(output_dir).items())


def test_a_worker_that_never_starts_is_named(shards, wikitext_tokenizer, tmp_path):
    from mlm_tpu.training.local_cluster import free_ports, tf_config

    ports = free_ports(2)
    started = time.monotonic()
    result = run_train(*mlm_flags(shards, wikitext_tokenizer[0], tmp_path / "out"), "--cluster-start-timeout", 5,
                       env={"TF_CONFIG": tf_config(ports, 0)})
    assert_user_error(result, f"worker 1 (localhost:{ports[1]}) did not start within 5 s", "--cluster-start-timeout")
    assert time.monotonic() - started < 60 and not (tmp_path / "out").exists()


def test_a_worker_that_cannot_see_the_output_dir_says_so(shards, wikitext_tokenizer, tmp_path):
    """Two workers whose --output-dir are not the same folder, as on machines without shared storage."""
    from mlm_tpu.training.local_cluster import free_ports, tf_config

    ports = free_ports(2)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    workers = [subprocess.Popen([sys.executable, str(REPO_ROOT / "train.py"),
                                 *map(str, mlm_flags(shards, wikitext_tokenizer[0], tmp_path / f"machine-{index}"))],
                                env={**env, "TF_CONFIG": tf_config(ports, index)}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT) for index in (0, 1)]
    outputs = [worker.communicate(timeout=300) for worker in workers]
    for index, worker in enumerate(workers):
        assert_user_error(subprocess.CompletedProcess([], worker.returncode, *outputs[index]),
                          "worker 1 (localhost:", f"cannot see the --output-dir {tmp_path / 'machine-'}",
                          "shared file system")
    assert os.listdir(tmp_path / "machine-0") == [] and not (tmp_path / "machine-1").exists()


def test_a_worker_failing_on_a_corrupt_shard_is_the_one_line_the_launcher_shows(shards, wikitext_tokenizer, tmp_path):
    """Worker 1 alone reads the second of two shards (two input pipelines): it fails on its corrupt record, and the
    launcher's line is its own error; worker 0 stops at once quoting it, blaming no crash, promising no backup."""
    train = tmp_path / "shards"
    shutil.copytree(shards / "validation", train)
    os.remove(train / "manifest.json")  # it holds the shards' checksums, which would refuse them before training
    second = sorted(train.glob("*.tfrecord"))[1]
    data = bytearray(second.read_bytes())
    data[len(data) // 8] ^= 0xFF
    second.write_bytes(bytes(data))
    flags = mlm_flags(shards, wikitext_tokenizer[0], tmp_path / "out")
    flags[flags.index("--train-dataset") + 1] = train
    result = launch(flags, tmp_path / "tmp")
    line = assert_user_error(result, f"{second.name} is corrupt", "(worker 1, the first to fail; the others stopped "
                                                                   "with it)")
    corrupt = line[len("error: "):line.index(" (worker 1, the first to fail")]
    assert re.search(r"\[worker 0\] error: worker 1 \(localhost:\d+\) failed, so worker 0 \(the chief, "
                     r"localhost:\d+\) stops too: " + re.escape(corrupt), result.stderr), result.stderr[-3000:]
    assert "stopped answering" not in result.stderr and "resumes from" not in result.stderr
