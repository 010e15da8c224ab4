"""Validation of a text-to-text model over shards: on-device predictions, host-side scores, each epoch.

Every replica runs the scorer's on-device step (class ids, or generated tokens) on its batches;
only those small integer tensors are gathered to the host, which scores them. Padding rows
(labels -100) are left out of the scores, so every example counts exactly once.
"""

from typing import Dict

import numpy as np
import tensorflow as tf

from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.training.evaluation import ShardRunner
from mlm_tpu.training.task import Scores, Validation


def can_compile_per_replica(strategy: tf.distribute.Strategy) -> bool:
    """Whether XLA can compile each replica's step: not when the replicas are logical devices of one CPU
    (--cpu-replicas), where XLA cannot reach the variables the other replicas hold."""
    return strategy.num_replicas_in_sync == 1 or "CPU" not in strategy.extended.worker_devices[0].upper()


class Text2TextValidation(Validation):
    """Runs `scorer.on_device` over every example of `shards` under `strategy`; `run()` returns its scores."""

    def __init__(self, strategy: tf.distribute.Strategy, model, scorer, shards: ShardSet, per_replica_batch_size: int,
                 jit_compile: bool):
        self.scorer = scorer
        self.runner = ShardRunner(strategy, shards, per_replica_batch_size, lambda seed: None, 0,
                                  lambda batch: scorer.on_device(model, batch), vocab_size=model.config.vocab_size,
                                  jit_compile=jit_compile, gather=True)

    def outputs(self) -> Dict[str, np.ndarray]:
        """The on-device outputs for every row of every step, padding rows included."""
        return self.runner.run()

    def run(self, show_progress: bool = False) -> Scores:
        return self.scorer.score(self.runner.run(show_progress))

    def describe(self, scores: Scores) -> str:
        return self.scorer.describe(scores)
