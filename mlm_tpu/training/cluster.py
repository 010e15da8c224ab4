"""The cluster of a multi-worker run: TF_CONFIG read and checked, and MultiWorkerMirroredStrategy started over it.

TF_CONFIG (as Vertex AI, the Kubernetes training operator and TensorFlow's docs set it) names the
cluster's tasks, `{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": i}}`
(a "chief" task may come first). With more than one task, every task runs the same `train.py`
command and the strategy all-reduces gradients over all of them (multi_worker.py: who writes what).

What can go wrong here is one line each: a malformed TF_CONFIG; a port already in use; a worker that
never starts (the strategy's constructor would wait for it forever: here the wait is bounded and the
missing worker named); a worker that failed or stopped answering mid-run, named in the others' error.
"""

import json
import os
import re
import socket
from dataclasses import dataclass
from typing import List, Optional, Tuple

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.training.local_cluster import follow_launcher

TF_CONFIG = "TF_CONFIG"
COMMUNICATIONS = ("auto", "ring", "nccl")
JOBS = ("chief", "worker")  # in TensorFlow's order of ids: the chief (if any) is worker 0
EXAMPLE = '{"cluster": {"worker": ["host0:port", "host1:port"]}, "task": {"type": "worker", "index": 0}}'
FAILED = "mlm_tpu worker failed: "  # what a worker's error, passed on by the coordination service, starts with
REPORTED = re.compile(r"Error reported from /job:(\w+)/(?:replica:\d+/)?task:(\d+): " + re.escape(FAILED) + "(.*)")
TASK = re.compile(r"/job:(\w+)/(?:replica:\d+/)?task:(\d+)")


@dataclass(frozen=True)
class Cluster:
    """The tasks TF_CONFIG names, in TensorFlow's order, and which of them this process is."""

    tasks: Tuple[Tuple[str, int, str], ...]  # (job, index in its job, host:port)
    index: int  # this process' place in `tasks`: TensorFlow's id in the cluster

    @property
    def size(self) -> int:
        return len(self.tasks)

    @property
    def address(self) -> str:
        return self.tasks[self.index][2]

    def name(self, index: int) -> str:
        job, position, address = self.tasks[index]
        return f"worker {index} ({'the chief, ' if index == 0 else ''}{address})"

    def index_of(self, job: str, position: int) -> Optional[int]:
        for index, (task_job, task_position, _) in enumerate(self.tasks):
            if (task_job, task_position) == (job, position):
                return index
        return None


def read_cluster(environ=os.environ) -> Optional[Cluster]:
    """The cluster TF_CONFIG names, or None when it is unset or names one task (one process trains alone)."""
    text = environ.get(TF_CONFIG, "").strip()
    if not text:
        return None
    try:
        config = json.loads(text)
    except ValueError as error:
        raise UserError(f"TF_CONFIG is not valid JSON ({error}); it should look like {EXAMPLE}") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise UserError(f"TF_CONFIG needs a \"cluster\" and a \"task\" object; it should look like {EXAMPLE}")
    others = sorted(set(cluster) - set(JOBS))
    if others:
        raise UserError(f"TF_CONFIG names {', '.join(others)} tasks; train.py runs MultiWorkerMirroredStrategy, "
                        "whose tasks are one optional chief and workers")
    tasks: List[Tuple[str, int, str]] = []
    for job in JOBS:
        addresses = cluster.get(job, [])
        if not isinstance(addresses, list) or not all(isinstance(a, str) and _port_of(a) for a in addresses):
            raise UserError(f"TF_CONFIG's cluster.{job} must be a list of \"host:port\" addresses, not "
                            f"{json.dumps(addresses)}")
        tasks += [(job, position, address) for position, address in enumerate(addresses)]
    if len({address for _, _, address in tasks}) < len(tasks):
        raise UserError("TF_CONFIG names the same host:port twice; give every task its own port")
    if cluster.get("chief") and len(cluster["chief"]) > 1:
        raise UserError("TF_CONFIG names more than one chief; name one (or none: worker 0 is then the chief)")
    job, position = task.get("type"), task.get("index", 0)
    place = Cluster(tuple(tasks), 0).index_of(job, position) if isinstance(position, int) else None
    if place is None:
        raise UserError(f"TF_CONFIG's task {json.dumps(task)} is not one of its cluster's tasks "
                        f"({', '.join(f'{j} {p}' for j, p, _ in tasks)}); set task.type and task.index to this "
                        "process' own")
    return Cluster(tuple(tasks), place) if len(tasks) > 1 else None


def _port_of(address: str) -> Optional[int]:
    host, _, port = address.rpartition(":")
    return int(port) if host and port.isdigit() and 0 < int(port) < 65536 else None


def _answers(address: str, timeout: float = 1.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def _check_port_free(cluster: Cluster) -> None:
    port = _port_of(cluster.address)
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed run's sockets in TIME_WAIT are fine
    try:
        probe.bind(("", port))
    except OSError as error:
        raise UserError(f"port {port} of {cluster.name(cluster.index)} is in use ({error.strerror}): another "
                        "program (or an earlier run still stopping) listens there; give this worker a free port in "
                        "TF_CONFIG (mlm-tpu launch --port chooses the first of consecutive ports)") from None
    finally:
        probe.close()


def check_cluster(hardware) -> Optional[Cluster]:
    """The cluster TF_CONFIG names for training on `hardware` (a HardwareConfig), checked with this worker's port
    and the flags that go with it, before TensorFlow loads; None for one process alone. A worker `mlm-tpu launch`
    started begins to watch for the launcher's end here."""
    follow_launcher()
    cluster = read_cluster() if hardware.tpu is None else None
    if cluster is None:
        return None
    if hardware.cpu_replicas > 1:
        raise UserError(f"--cpu-replicas {hardware.cpu_replicas} splits the CPU of one process; with TF_CONFIG each "
                        "worker trains one replica on its CPU (or one per GPU): drop --cpu-replicas")
    if hardware.communication not in COMMUNICATIONS:
        raise UserError(f"--communication must be one of {', '.join(COMMUNICATIONS)}, not {hardware.communication!r}")
    _check_port_free(cluster)
    return cluster


def start_strategy(cluster: Cluster, communication: str, start_timeout: float):
    """MultiWorkerMirroredStrategy over `cluster`, created before anything else touches TensorFlow's context.

    Its constructor waits for every task to register with the coordination service, by default forever: here the
    service is configured as the strategy would configure it, plus a registration barrier that gives up after
    `start_timeout` seconds, and the workers that do not answer at their address are named."""
    import tensorflow as tf
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.eager import context

    log(f"Joining the cluster as {cluster.name(cluster.index)} of {cluster.size} (waiting up to "
        f"{start_timeout:g} s for all of them)")
    jobs = [job for job in JOBS if any(task[0] == job for task in cluster.tasks)]
    context.context().configure_coordination_service(
        service_type="standalone", service_leader=f"/job:{cluster.tasks[0][0]}/replica:0/task:0",
        coordinated_jobs=[coordination_config_pb2.CoordinatedJob(
            name=job, num_tasks=sum(task[0] == job for task in cluster.tasks)) for job in jobs],
        cluster_register_timeout_in_ms=int(start_timeout * 1000))
    # not among configure_coordination_service's arguments: without it the timeout above does not bound the wait
    context.context()._coordination_service_config.cluster_register_with_barrier = True
    implementation = {"auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
                      "ring": tf.distribute.experimental.CommunicationImplementation.RING,
                      "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL}[communication]
    try:
        return tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver(),
            communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation))
    except (tf.errors.DeadlineExceededError, tf.errors.UnavailableError):
        raise UserError(_cluster_did_not_form(cluster, start_timeout)) from None


def _cluster_did_not_form(cluster: Cluster, seconds: float) -> str:
    """Which workers are missing, in words."""
    missing = [cluster.name(index) for index in range(cluster.size) if index != cluster.index
               and not _answers(cluster.tasks[index][2])]
    if missing:
        return (f"{', '.join(missing)} did not start within {seconds:g} s (nothing answers at its address); start "
                "every worker with the same command and its own TF_CONFIG task, or raise --cluster-start-timeout")
    return (f"the cluster did not form within {seconds:g} s although every worker answers at its address; check "
            "that all of them run train.py with the same TF_CONFIG cluster")


def why_others_stop(cluster: Cluster, message: str, backup_folder: str) -> str:
    """What to tell the user when a step of this worker failed because of another (TensorFlow's `message`)."""
    from mlm_tpu.training.backup import backup_steps

    this = cluster.name(cluster.index)
    reported = REPORTED.search(message)
    if reported:
        who = cluster.index_of(reported.group(1), int(reported.group(2)))
        return (f"{cluster.name(who) if who is not None else 'another worker'} failed, so {this} stops too: "
                f"{reported.group(3)}")
    named = [cluster.index_of(job, int(task)) for job, task in TASK.findall(message)]
    others = [index for index in named if index is not None and index != cluster.index]
    who = cluster.name(others[0]) if others else "another worker"
    steps = backup_steps(backup_folder)
    then = (f"the run resumes from its backup of step {steps[0]} in {backup_folder}" if steps else
            "no backup was written yet, so the run starts over")
    return (f"{who} stopped answering (killed, crashed or cut off), so {this} stops too; start every worker "
            f"again with the same command: {then}")
