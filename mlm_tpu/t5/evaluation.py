"""Validation of a text-to-text model on the device: whether XLA can compile each replica's step.

Validation itself (the scorer's on-device step on every example, class ids or generated tokens gathered to the
host and scored there) is training/evaluation.py's PredictionValidation; T5's scorers are in classification.py
and generation.py.
"""

import tensorflow as tf


def can_compile_per_replica(strategy: tf.distribute.Strategy) -> bool:
    """Whether XLA can compile each replica's step: not when the replicas are logical devices of one CPU
    (--cpu-replicas), where XLA cannot reach the variables the other replicas hold."""
    return strategy.num_replicas_in_sync == 1 or "CPU" not in strategy.extended.worker_devices[0].upper()
