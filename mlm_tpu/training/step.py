"""The train step: the task's model and optimizer, built under the strategy, and the tf.function that runs n
optimizer steps per call into the device, each step's loss and counts coming back."""

from typing import Optional

import tensorflow as tf

from mlm_tpu.console import log
from mlm_tpu.errors import UserError, reason_of
from mlm_tpu.shards.pipeline import next_per_replica
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.training.config import TrunkConfig
from mlm_tpu.training.input import Plan
from mlm_tpu.training.optimizers import create_state, describe_optimizer, make_optimizer
from mlm_tpu.training.task import TARGETS_LEFT_OUT, Task


def build_model_and_optimizer(config: TrunkConfig, task: Task, tokenizer, shards: ShardSet, plan: Plan):
    """The task's model, built, and its optimizer with its state (training/optimizers.py)."""
    try:
        model = task.build_model(config, tokenizer, shards)
    except ValueError as error:  # transformers' configs refuse shapes they cannot have (heads not dividing width)
        raise UserError(f"the model cannot be built with these settings: {reason_of(error)}; fix --model-config or "
                        "--config-overrides") from None
    model.build_in_name_scope()  # the weights exist before a backup is restored into them
    optimizer = make_optimizer(config, plan.total_steps, task.no_weight_decay)
    create_state(optimizer, model.trainable_variables)  # now, under the strategy: its size is known, a backup restores
    log(describe_optimizer(config, optimizer, model))
    return model, optimizer


def make_train_steps(strategy, model, optimizer, dropout_keys, jit_compile: bool = False, task: Optional[Task] = None):
    """tf.function(iterator, n) running n optimizer steps; returns [n, 4]: each step's loss (the mean over the global
    batch), the hits and scored positions of its training accuracy, and the targets the batch's transform left out
    (its TARGETS_LEFT_OUT feature, if any).

    The task's loss is a mean per term over its replica's positions (`task.training_outputs`, `task.loss_weights`:
    one term, the masked or target tokens, for most tasks); each term weighted by the replica's share of all its
    positions, the replicas' losses add up to the global batch's mean, however many replicas share it.
    `jit_compile`: each replica's forward and backward pass is compiled with XLA (the sums over replicas and the
    update stay outside, where the strategy does them). `task` gives the outputs, loss weights and counts (default:
    the model called on the batch, its loss and top logits over the positions that take a loss)."""
    task = task or Task("default")

    def gradients_and_counts(batch, shares):
        dropout_keys.start_step(optimizer.iterations)
        with tf.GradientTape() as tape:
            outputs = task.training_outputs(model, batch, True)
            # one mean per term (transformers' sequence-classification heads give theirs per example)
            terms = tf.reduce_mean(tf.reshape(tf.cast(outputs.loss, tf.float32), [shares.shape[0], -1]), axis=1)
            loss = tf.reduce_sum(terms * shares)
        gradients = tape.gradient(loss, model.trainable_variables)
        hits, scored = task.training_counts(outputs, batch)
        left_out = tf.reduce_sum(tf.cast(batch.get(TARGETS_LEFT_OUT, tf.zeros([])), tf.float32))
        return gradients, tf.stack([loss, hits, scored, left_out])

    # Traced as written: transformers' TF models need no AutoGraph (Keras would otherwise convert every layer's
    # call, 2/3 of a run's start-up), and the graph is the same op for op: a run's weights are bit-identical.
    gradients_and_counts = tf.autograph.experimental.do_not_convert(gradients_and_counts)
    if jit_compile:
        gradients_and_counts = tf.function(gradients_and_counts, jit_compile=True)

    def replica_step(batch):
        weights_here = task.loss_weights(batch)
        weights_everywhere = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, weights_here)
        # a step of padding rows only (the end of a packed epoch) scores nothing: its loss is 0
        gradients, counts = gradients_and_counts(batch, weights_here / tf.maximum(weights_everywhere, 1.0))
        optimizer.apply_gradients([(gradient, variable) for gradient, variable in
                                   zip(gradients, model.trainable_variables) if gradient is not None])
        return counts

    @tf.function
    def train_steps(iterator, steps):
        results = tf.TensorArray(tf.float32, size=steps)
        for index in tf.range(steps):
            per_replica = strategy.run(replica_step, args=(next_per_replica(strategy, iterator),))
            results = results.write(index, strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None))
        return results.stack()

    return train_steps
