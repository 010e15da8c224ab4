"""What goes wrong before a multi-worker run starts is one line, exit 2, before TensorFlow loads: a malformed
TF_CONFIG, a port in use (the launcher's and a worker's own), a launch without its command."""

import json
import socket

import pytest

from conftest import assert_user_error, run_module, run_train



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
