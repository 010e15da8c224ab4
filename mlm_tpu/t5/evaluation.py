"""Validation of a text-to-text model over shards: on-device predictions, host-side scores, each epoch.

Every replica runs the task's on-device step (class ids, or generated tokens) on its batches of
the eval shards; only those small integer tensors are gathered to the host, which scores them.
The last partial batch is filled with padding rows (labels -100) that the scores leave out, so
every example counts exactly once and shapes stay fixed.
"""

from typing import Dict, Tuple

import numpy as np
import tensorflow as tf
import tf_keras as keras
from transformers import TFT5ForConditionalGeneration

from mlm_tpu.cli import log
from mlm_tpu.data import ShardSet, distributed_dataset, evaluation_steps, find_shards, text2text_features
from mlm_tpu.evaluation import evaluation_strategy
from mlm_tpu.pretrained import load_pretrained
from mlm_tpu.strategy import describe
from mlm_tpu.t5.tasks import make_task, task_settings


def can_compile_per_replica(strategy: tf.distribute.Strategy) -> bool:
    """Whether XLA can compile each replica's step: not when the replicas are logical devices of one CPU
    (--cpu-replicas), where XLA cannot reach the variables the other replicas hold."""
    return strategy.num_replicas_in_sync == 1 or "CPU" not in strategy.extended.worker_devices[0].upper()


class Text2TextEvaluator:
    """Runs `task.on_device` over every example of `shards` under `strategy`; `run()` returns the task's scores."""

    def __init__(self, strategy: tf.distribute.Strategy, model, task, shards: ShardSet, per_replica_batch_size: int,
                 jit_compile: bool):
        self.task = task
        self.steps = evaluation_steps(shards, per_replica_batch_size, strategy)
        self.dataset = distributed_dataset(strategy, shards, per_replica_batch_size, lambda seed: None, shuffle=False,
                                           seed=0, pad_endlessly=True)
        replica_step = tf.function(lambda batch: task.on_device(model, batch), jit_compile=jit_compile)

        @tf.function
        def step(iterator) -> Dict[str, tf.Tensor]:
            outputs = strategy.run(replica_step, args=(next(iterator),))
            return {name: strategy.gather(value, axis=0) for name, value in outputs.items()}

        self.step = step

    def outputs(self) -> Dict[str, np.ndarray]:
        """The on-device outputs for every row of every step, padding rows included."""
        iterator = iter(self.dataset)
        steps = [{name: value.numpy() for name, value in self.step(iterator).items()} for _ in range(self.steps)]
        return {name: np.concatenate([step[name] for step in steps]) for name in steps[0]}

    def run(self) -> Dict[str, float]:
        return self.task.score(self.outputs())


class Text2TextValidation(keras.callbacks.Callback):
    """Adds the task's validation scores (val_accuracy, val_rougeL, ...) to each epoch's logs, and says them."""

    def __init__(self, evaluator: Text2TextEvaluator):
        super().__init__()
        self.evaluator = evaluator

    def on_epoch_end(self, epoch, logs=None):
        scores = self.evaluator.run()
        if logs is not None:  # the same dict the later callbacks (saving, TensorBoard, History) receive
            logs.update({f"val_{name}": value for name, value in scores.items()})
        log(f"Epoch {epoch + 1} validation: {self.evaluator.task.describe(scores)}")


def run_text2text_evaluation(args) -> Tuple[str, Dict[str, float]]:
    """`python -m mlm_tpu.evaluate` for a T5 model: (its task, its scores) on --eval-dataset."""
    strategy = evaluation_strategy(args)
    shards = find_shards(args.eval_dataset, text2text_features(args.max_length, None), "--eval-dataset")
    with strategy.scope():
        model, tokenizer = load_pretrained(args.model, TFT5ForConditionalGeneration)
    settings = task_settings(model.config) or {"task": "generation"}
    task = make_task(settings, tokenizer, shards.features["labels"])
    jit_compile = args.tpu is not None or (task.name == "generation" and can_compile_per_replica(strategy))
    evaluator = Text2TextEvaluator(strategy, model, task, shards, args.per_replica_batch_size, jit_compile)
    log(f"Evaluating {args.model} ({task.name}) on {shards.records:,} examples on {describe(strategy)}: "
        f"{evaluator.steps} steps")
    return task.name, evaluator.run()
