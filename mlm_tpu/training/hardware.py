"""Where training and evaluation run (a TPU, every GPU, the CPU split into replicas, or several worker processes
that TF_CONFIG names), in what precision, and whether TensorFlow must compute the same bits on every run.

`set_up(hardware)` does all three once per process, before any model is built, and returns the
distribution strategy that every model and input pipeline is then made under.
"""

import os
from typing import Optional

import tensorflow as tf
import tf_keras as keras

from mlm_tpu.errors import UserError, reason_of
from mlm_tpu.training.config import HardwareConfig
from mlm_tpu.training.cluster import check_cluster, start_strategy

LOCAL_TPU = "local"  # what a bare --tpu means: the TPU VM this runs on (or Colab's TPU)

def connect_to_tpu(name: str, zone: Optional[str], project: Optional[str]) -> tf.distribute.Strategy:
    """Resolve, connect to and initialise the TPU system, then return a TPUStrategy over it."""
    try:
        if name == LOCAL_TPU and os.environ.get("COLAB_TPU_ADDR"):
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
        else:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=name, zone=zone, project=project)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as error:
        where = "on this machine" if name == LOCAL_TPU else f"named '{name}'"
        raise UserError(f"no TPU found {where} ({reason_of(error).split('. ')[0]}); check --tpu/--tpu-zone/--gcp-project, "
                        "or drop --tpu to train on the GPUs or the CPU") from None


def split_cpu(replicas: int) -> tf.distribute.Strategy:
    """A MirroredStrategy over `replicas` logical CPU devices: the multi-replica path without accelerators."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    except RuntimeError:  # already initialised: fine if it already has that many devices
        pass
    devices = [device.name for device in tf.config.list_logical_devices("CPU")]
    if len(devices) < replicas:
        raise UserError(f"--cpu-replicas {replicas}: TensorFlow was already started with {len(devices)} CPU device(s)")
    return tf.distribute.MirroredStrategy(devices[:replicas])


def select_strategy(tpu: Optional[str] = None, tpu_zone: Optional[str] = None, gcp_project: Optional[str] = None,
                    cpu_replicas: int = 1) -> tf.distribute.Strategy:
    """TPUStrategy when --tpu is given, MirroredStrategy over all GPUs when there are any, else the CPU."""
    if tpu is not None:
        return connect_to_tpu(tpu, tpu_zone, gcp_project)
    if tf.config.list_physical_devices("GPU"):
        return tf.distribute.MirroredStrategy()
    if cpu_replicas > 1:
        return split_cpu(cpu_replicas)
    return tf.distribute.get_strategy()


def set_up(hardware: HardwareConfig, multi_worker: bool = False) -> tf.distribute.Strategy:
    """Choose the strategy, then the precision and determinism the flags ask for. With `multi_worker` (training),
    a TF_CONFIG naming several tasks gives MultiWorkerMirroredStrategy: call this before anything else runs
    TensorFlow, since collectives are configured when its context starts."""
    cluster = check_cluster(hardware) if multi_worker else None
    if cluster:
        strategy = start_strategy(cluster, hardware.communication, hardware.cluster_start_timeout)
    else:
        strategy = select_strategy(hardware.tpu, hardware.tpu_zone, hardware.gcp_project, hardware.cpu_replicas)
    if hardware.wants_determinism:
        tf.config.experimental.enable_op_determinism()
    if hardware.wants_bf16:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    return strategy


def describe(strategy: tf.distribute.Strategy) -> str:
    """Words for the log: which strategy, over how many replicas."""
    kind = type(strategy).__name__
    if kind == "_DefaultDistributionStrategy":
        kind = "the default strategy (one CPU device)"
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        workers = strategy.num_replicas_in_sync // len(strategy.extended.worker_devices)
        kind = f"MultiWorkerMirroredStrategy over {workers} workers"
    return f"{kind} with {strategy.num_replicas_in_sync} replica(s)"


def wants_jit_compile(jit_compile: Optional[bool], hardware: HardwareConfig) -> bool:
    """Whether to compile each replica's training step with XLA: as --jit-compile says, else on GPUs only (a TPU
    compiles everything anyway; on CPUs XLA was slower here: benchmarks/train_throughput.py --jit-compile)."""
    if jit_compile is not None:
        return jit_compile and hardware.tpu is None
    return hardware.tpu is None and bool(tf.config.list_physical_devices("GPU"))
