"""What goes wrong before a multi-worker run starts is one line, exit 2, before TensorFlow loads: a malformed
TF_CONFIG, a port in use (the launcher's and a worker's own), a launch without its command, a misspelt flag; the
launcher's signals and its end reach every worker; the workers agree on the backup they resume from."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

from conftest import REPO_ROOT, assert_user_error, run_module, run_train

from mlm_tpu.errors import UserError


def flags(folder):
    return ["--train-dataset", folder / "shards", "--tokenizer", folder / "tokenizer", "--output-dir", folder / "out"]


def tf_config(cluster, task=None) -> str:
    return json.dumps({"cluster": cluster, **({"task": task} if task else {})})


@pytest.mark.parametrize("value, phrases", [
    ("{bad", ["TF_CONFIG is not valid JSON", "it should look like {\"cluster\""]),
    (tf_config({"worker": ["a:1", "b:2"]}), ["TF_CONFIG needs a \"cluster\" and a \"task\" object"]),
    (tf_config({"worker": ["a:1", "b"]}, {"type": "worker", "index": 0}),
     ["cluster.worker must be a list of \"host:port\""]),
    (tf_config({"worker": ["a:1", "b:2"]}, {"type": "worker", "index": 2}),
     ["task {\"type\": \"worker\", \"index\": 2} is not one of its cluster's tasks (worker 0, worker 1)"]),
    (tf_config({"worker": ["a:1"], "ps": ["c:3"]}, {"type": "worker", "index": 0}), ["TF_CONFIG names ps tasks"]),
    (tf_config({"worker": ["a:1", "a:1"]}, {"type": "worker", "index": 0}), ["names the same host:port twice"]),
])
def test_a_malformed_tf_config_is_one_line(value, phrases, tmp_path):
    assert_user_error(run_train(*flags(tmp_path), env={"TF_CONFIG": value}), *phrases)
    assert not (tmp_path / "out").exists()


def test_cpu_replicas_do_not_go_with_several_workers(tmp_path):
    config = tf_config({"worker": ["localhost:1", "localhost:2"]}, {"type": "worker", "index": 0})
    assert_user_error(run_train(*flags(tmp_path), "--cpu-replicas", 2, env={"TF_CONFIG": config}),
                      "--cpu-replicas 2 splits the CPU of one process", "drop --cpu-replicas")


@pytest.fixture()
def busy_port():
    """A port something listens on."""
    with socket.socket() as listener:
        listener.bind(("", 0))
        listener.listen()
        yield listener.getsockname()[1]


def test_a_port_in_use_is_one_line(busy_port, tmp_path):
    result = run_module("mlm_tpu.launch", "--workers", "2", "--port", str(busy_port - 1), "--", "train",
                        *map(str, flags(tmp_path)))
    assert_user_error(result, f"port {busy_port} is in use", f"need ports {busy_port - 1} to {busy_port}",
                      "choose another --port")
    config = tf_config({"worker": [f"localhost:{busy_port}", "localhost:1"]}, {"type": "worker", "index": 0})
    assert_user_error(run_train(*flags(tmp_path), env={"TF_CONFIG": config}),
                      f"port {busy_port} of worker 0 (the chief, localhost:{busy_port}) is in use")


@pytest.mark.parametrize("command", [[], ["--"], ["--", "evaluate"]])
def test_launch_needs_the_train_command(command):
    assert_user_error(run_module("mlm_tpu.launch", "--workers", "2", *command), "give the command after --",
                      "only train runs on several workers")


def test_launch_help_says_how_it_runs():
    result = run_module("mlm_tpu.launch", "--help")
    assert result.returncode == 0
    for phrase in ("--workers N", "--port P", "TF_CONFIG", "prefixed with its worker's index"):
        assert phrase in " ".join(result.stdout.split()), phrase


def test_a_workers_own_error_line_is_the_launchers(tmp_path):
    """A misspelt flag fails in every worker, at argparse: the launcher's one line is that error, not an exit code."""
    result = run_module("mlm_tpu.launch", "--workers", "2", "--", "train", "--learnig-rate", "1e-3",
                        *map(str, flags(tmp_path)))
    assert_user_error(result, "error: unrecognized arguments: --learnig-rate 1e-3", "the first to fail")


# Stand-in workers: the chief exits at once, quoting worker 1's error as a worker told by the coordination service
# does; worker 1, the one that failed, exits a second later.
QUOTING_WORKERS = """
import json, os, sys, time
if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 0:
    print("error: worker 1 (localhost:1) failed, so worker 0 (the chief, localhost:2) stops too: x is corrupt",
          file=sys.stderr)
    sys.exit(2)
time.sleep(1)
print("error: x is corrupt", file=sys.stderr)
sys.exit(2)
"""


def test_the_failing_worker_is_named_even_when_another_exits_first_quoting_it():
    launcher = subprocess.run(
        [sys.executable, "-c", "import sys; from mlm_tpu.training.local_cluster import launch; "
                               f"sys.exit(launch([sys.executable, '-c', {QUOTING_WORKERS!r}], 2))"],
        capture_output=True, text=True, cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=60)
    assert_user_error(launcher, "error: x is corrupt (worker 1, the first to fail; the others stopped with it)")


# A stand-in worker (no TensorFlow): it follows its launcher as train's workers do, and stops on SIGTERM as they
# do (exit 42), leaving a file that says so: after its print, which fails if its output was not taken off the pipe
# to a launcher that is gone.
WORKER = """
import os, signal, sys, time
from mlm_tpu.training.local_cluster import follow_launcher

def stop(number, frame):
    print("stopped: stopped at step 1 (SIGTERM)", file=sys.stderr, flush=True)
    with open(os.path.join(sys.argv[1], f"stopped-{os.getpid()}"), "w") as stream:
        stream.write("stopped")
    sys.exit(42)

signal.signal(signal.SIGTERM, stop)
follow_launcher()
print("ready", flush=True)
time.sleep(120)
"""


def start_launcher(folder: Path):
    """A launcher of two stand-in workers, once both are ready: (launcher, worker pids, its output lines as they
    come)."""
    launcher = subprocess.Popen(
        [sys.executable, "-c", "import sys; from mlm_tpu.training.local_cluster import launch; "
                               f"sys.exit(launch([sys.executable, '-c', {WORKER!r}, {str(folder)!r}], 2))"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    lines = []
    threading.Thread(target=lambda: [lines.append(line) for line in launcher.stdout], daemon=True).start()
    deadline = time.monotonic() + 60
    while sum(line.endswith("] ready\n") for line in lines) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = [int(pid) for pid in re.findall(r"Worker \d: process (\d+)", "".join(lines))]
    assert len(pids) == 2 and sum(line.endswith("] ready\n") for line in lines) == 2, "".join(lines)
    return launcher, pids, lines


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")
def test_workers_stop_with_a_backup_when_the_launcher_is_killed(tmp_path):
    """kill -9 leaves the launcher no time to pass anything on: each worker sees it gone and stops as SIGTERM makes
    it stop, its output going nowhere."""
    launcher, pids, _ = start_launcher(tmp_path)
    launcher.kill()
    launcher.wait(timeout=10)
    deadline = time.monotonic() + 20
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(running, pids))
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(f"stopped-{pid}" for pid in pids)


def test_sighup_to_the_launcher_stops_every_worker_with_a_backup(tmp_path):
    """A closed terminal (or dropped ssh session) sends SIGHUP: the workers get SIGTERM and stop, and the launcher
    says so."""
    launcher, pids, lines = start_launcher(tmp_path)
    launcher.send_signal(signal.SIGHUP)
    launcher.wait(timeout=30)
    deadline = time.monotonic() + 10
    while not any(line.startswith("stopped:") for line in lines) and time.monotonic() < deadline:
        time.sleep(0.05)  # the last lines, still on their way through the pipe
    output = "".join(lines)
    assert launcher.returncode == 42, output
    assert "stopped: every worker saved a backup at the same step and stopped" in output
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(f"stopped-{pid}" for pid in pids)


class SharedStore:
    """The coordination service's key-value store (set, and get waiting for the key), shared by workers in one
    process."""

    def __init__(self):
        self.values, self.changed = {}, threading.Condition()

    def set_config_key_value(self, key, value):
        with self.changed:
            self.values[key] = value
            self.changed.notify_all()

    def get_config_key_value(self, key, timeout_in_ms=0):
        with self.changed:
            assert self.changed.wait_for(lambda: key in self.values, timeout_in_ms / 1000), key
            return self.values[key]


def write_backup(folder: Path, step: int, damaged: bool = False) -> None:
    """A backup of `step` as Backup.save leaves it: its checkpoint file, then step-N.json with the file's size and
    CRC32 (`damaged`: the file no longer matches them)."""
    from mlm_tpu.training.backup import FORMAT

    folder.mkdir(parents=True, exist_ok=True)
    checkpoint = folder / f"step-{step}.index"
    checkpoint.write_bytes(b"weights" * step)
    facts = {"bytes": checkpoint.stat().st_size, "crc32": zlib.crc32(checkpoint.read_bytes())}
    (folder / f"step-{step}.json").write_text(json.dumps({"format": FORMAT, "step": step, "loop": {}, "settings": None,
                                                          "setting_changes": [], "files": {checkpoint.name: facts}}))
    if damaged:
        checkpoint.write_bytes(b"garbage" * step)


def agree(chiefs_view: Path, others_view: Path, wait_seconds: float = 1.0) -> list:
    """Workers 0 and 1 of one cluster, in two threads, each seeing the backup folder as it is in its view: what each
    resumes from (a step, or None), or the one line it stops with."""
    from mlm_tpu.training.cluster import Cluster
    from mlm_tpu.training.multi_worker import Worker

    tasks = (("worker", 0, "localhost:1"), ("worker", 1, "localhost:2"))
    store, outcomes = SharedStore(), [None, None]

    def resume(index: int, view: Path) -> None:
        try:
            record = Worker(Cluster(tasks, index), store=store).agreed_backup(str(view), wait_seconds)
            outcomes[index] = record.step if record else None
        except UserError as error:
            outcomes[index] = str(error)

    workers = [threading.Thread(target=resume, args=(index, view)) for index, view in enumerate((chiefs_view,
                                                                                                 others_view))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    return outcomes


def test_every_worker_resumes_from_the_backup_the_chief_chose(tmp_path):
    """A shared file system's cached metadata may show a worker an older view of the backup folder: it never resumes
    from another step than the chief; it waits a while for the chief's backup to show, else both stop in one line."""
    chief, lagging = tmp_path / "chief", tmp_path / "lagging"
    write_backup(chief, 8)
    write_backup(lagging, 4)  # the chief has written step 8 and deleted step 4 since
    outcomes = agree(chief, lagging)
    assert outcomes[0] == outcomes[1]
    for phrase in ("worker 1 (localhost:2) cannot see the backup of step 8 that worker 0 (the chief, localhost:1) "
                   "resumes from, even after 1 s (there is no backup of step 8", "step-8.json is missing",
                   "NFS attribute cache"):
        assert phrase in outcomes[1], outcomes[1]

    shows_later = threading.Timer(0.3, write_backup, (lagging, 8))
    shows_later.start()
    assert agree(chief, lagging, wait_seconds=20) == [8, 8]
    shows_later.join()

    nothing = tmp_path / "nothing"  # the chief finds none (the run had finished): a stale view's backup is not used
    assert agree(nothing, lagging) == [None, None]

    damaged = tmp_path / "damaged"
    write_backup(damaged, 8, damaged=True)
    chiefs, others = agree(damaged, lagging)
    assert "the backup of step 8" in chiefs and "does not match its checksum" in chiefs
    assert others == f"worker 0 (the chief, localhost:1) failed, so worker 1 (localhost:2) stops too: {chiefs}"
