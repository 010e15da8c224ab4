"""What goes wrong before a multi-worker run starts is one line, exit 2, before TensorFlow loads: a malformed
TF_CONFIG, a port in use (the launcher's and a worker's own), a launch without its command, a misspelt flag; the
launcher's signals and its end reach every worker."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, assert_user_error, run_module, run_train


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
    """A launcher of two stand-in workers, once both are ready: (launcher, worker pids, its output so far)."""
    launcher = subprocess.Popen(
        [sys.executable, "-c", "import sys; from mlm_tpu.training.local_cluster import launch; "
                               f"sys.exit(launch([sys.executable, '-c', {WORKER!r}, {str(folder)!r}], 2))"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    lines = []
    deadline = time.monotonic() + 60
    while sum(line.endswith("] ready\n") for line in lines) < 2 and time.monotonic() < deadline:
        lines.append(launcher.stdout.readline())
    pids = [int(pid) for pid in re.findall(r"Worker \d: process (\d+)", "".join(lines))]
    assert len(pids) == 2, "".join(lines)
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
    output = "".join(lines) + launcher.communicate(timeout=30)[0]
    assert launcher.returncode == 42, output
    assert "stopped: every worker saved a backup at the same step and stopped" in output
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(f"stopped-{pid}" for pid in pids)

