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

STEP_RESULTS = 6  # loss, hits, scored, left out, gradient norm, clipped


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


def make_train_steps(strategy, model, optimizer, dropout_keys, jit_compile: bool = False, task: Optional[Task] = None,
                     accumulation: int = 1, max_grad_norm: Optional[float] = None, warmup=None):
    """tf.function(iterator, n) running n optimizer steps; returns [n, STEP_RESULTS]: each step's loss (the mean over
    the global batch), the hits and scored positions of its training accuracy, the targets the batch's transform left
    out (its TARGETS_LEFT_OUT feature, if any), and with `max_grad_norm` the gradient's global norm and whether it
    was clipped (1) or not (0).

    The task's loss is a mean per term over its replica's positions (`task.training_outputs`, `task.loss_weights`:
    one term, the masked or target tokens, for most tasks); each term weighted by the replica's share of all its
    positions, the replicas' losses add up to the global batch's mean, however many replicas share it.
    `accumulation` (--gradient-accumulation-steps N): each replica's rows of the step are trained as N micro-batches
    in turn, one after the other in a loop (so only one micro-batch's activations live at a time), their gradients
    added up before the one update; each micro-batch's terms are weighted by its share of the whole step's
    positions, counted before the first, so the sum is the gradient of one batch of all the rows: its loss over all
    their targets, not a mean of the micro-batches' means.
    `max_grad_norm` (--max-grad-norm): the gradients are summed over the replicas here, their global norm taken and
    all of them scaled by max_grad_norm / norm where the norm is above it (the update then skips the optimizer's own
    sum over replicas).
    `warmup` (a batch_warmup.BatchWarmup): while it lasts, a step's batch holds fewer examples, the rows of its units
    first (the rest take no loss), and the loop trains only the micro-batches that hold them.
    `jit_compile`: each replica's forward and backward pass is compiled with XLA (the sums over replicas and the
    update stay outside, where the strategy does them). `task` gives the outputs, loss weights and counts (default:
    the model called on the batch, its loss and top logits over the positions that take a loss)."""
    task = task or Task("default")
    variables = model.trainable_variables

    def gradients_and_counts(batch, shares, micro_batch=None):
        dropout_keys.start_step(optimizer.iterations, micro_batch)
        with tf.GradientTape() as tape:
            outputs = task.training_outputs(model, batch, True)
            # one mean per term (transformers' sequence-classification heads give theirs per example)
            terms = tf.reduce_mean(tf.reshape(tf.cast(outputs.loss, tf.float32), [shares.shape[0], -1]), axis=1)
            loss = tf.reduce_sum(terms * shares)
        gradients = tape.gradient(loss, variables)
        hits, scored = task.training_counts(outputs, batch)
        left_out = tf.reduce_sum(tf.cast(batch.get(TARGETS_LEFT_OUT, tf.zeros([])), tf.float32))
        return gradients, tf.stack([loss, hits, scored, left_out])

    # Traced as written: transformers' TF models need no AutoGraph (Keras would otherwise convert every layer's
    # call, 2/3 of a run's start-up), and the graph is the same op for op: a run's weights are bit-identical.
    gradients_and_counts = tf.autograph.experimental.do_not_convert(gradients_and_counts)
    if jit_compile:
        gradients_and_counts = tf.function(gradients_and_counts, jit_compile=True)

    def accumulated(batch, weights_everywhere):
        """(the gradients summed over the replica's N micro-batches, None where a weight takes none; their counts
        summed), the micro-batches taken one at a time in a while loop."""
        parts = {name: tf.reshape(values, [accumulation, -1, *values.shape[1:]]) for name, values in batch.items()}
        untouched = []  # which weights take no gradient, as the loop's body is traced (once)

        def body(index, sums, counts):
            micro_batch = {name: values[index] for name, values in parts.items()}
            gradients, micro_counts = gradients_and_counts(
                micro_batch, task.loss_weights(micro_batch) / weights_everywhere, index)
            untouched[:] = [gradient is None for gradient in gradients]
            sums = [total if gradient is None else add(total, gradient) for total, gradient in zip(sums, gradients)]
            return index + 1, sums, counts + micro_counts

        zeros = [tf.zeros(variable.shape, tf.float32) for variable in variables]
        trained = micro_batches_at(optimizer.iterations)
        _, sums, counts = tf.while_loop(lambda index, *_: index < trained, body,
                                        (tf.constant(0), zeros, tf.zeros([4])), parallel_iterations=1)
        return [None if none else tf.ensure_shape(total, variable.shape)
                for total, none, variable in zip(sums, untouched, variables)], counts

    def add(total, gradient):
        """`total` + `gradient`: an embedding's rows (IndexedSlices) scattered in, never made dense (cheaper, and a
        dense sum of unknown shape in the loop is what Grappler rewrites into a temporary variable that fails in
        nested loops: AlreadyExistsError)."""
        if isinstance(gradient, tf.IndexedSlices):
            return tf.tensor_scatter_nd_add(total, tf.expand_dims(gradient.indices, 1), gradient.values)
        return total + tf.ensure_shape(gradient, total.shape)

    def micro_batches_at(step):
        """The micro-batches of this replica that step `step` trains: all, or fewer while a warm-up lasts."""
        if warmup is None:
            return accumulation
        per_unit = accumulation // warmup.units_per_step
        starts = tf.constant([first for first, _ in warmup.stages], tf.int64)
        units = tf.constant([batch // warmup.start for _, batch in warmup.stages], tf.int32)
        stage = tf.searchsorted(starts, tf.reshape(tf.cast(step, tf.int64), [1]), side="right")[0] - 1
        return tf.where(step < warmup.end, tf.gather(units, tf.maximum(stage, 0)) * per_unit, accumulation)

    def clipped(gradients):
        """(the gradients summed over the replicas and clipped to max_grad_norm, [their global norm, clipped or not])
        (each replica returns its share of the two, which the sum over replicas adds up). An embedding's rows
        (IndexedSlices) stay rows: made dense, they would take the optimizer's dense update, another numeric path, so
        a run below the limit would no longer be the run without it bit for bit (scaled by 1.0, a number is itself)."""
        context = tf.distribute.get_replica_context()
        summed = context.all_reduce(tf.distribute.ReduceOp.SUM, list(gradients))
        norm = tf.linalg.global_norm([rows_added_up(gradient) for gradient in summed])
        over = norm > max_grad_norm
        scale = tf.where(over, max_grad_norm / norm, 1.0)
        replicas = float(context.num_replicas_in_sync)
        return [scaled(gradient, scale) for gradient in summed], tf.stack([norm, tf.cast(over, tf.float32)]) / replicas

    def rows_added_up(gradient):
        """An embedding's rows with each row's repeats added up (the norm of the gradient, not of its pieces)."""
        if not isinstance(gradient, tf.IndexedSlices):
            return gradient
        rows, positions = tf.unique(gradient.indices)
        return tf.math.unsorted_segment_sum(gradient.values, positions, tf.shape(rows)[0])

    def scaled(gradient, scale):
        if isinstance(gradient, tf.IndexedSlices):
            return tf.IndexedSlices(gradient.values * scale, gradient.indices, gradient.dense_shape)
        return gradient * scale

    def replica_step(batch):
        weights_here = task.loss_weights(batch)
        weights_everywhere = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, weights_here)
        # a step of padding rows only (the end of a packed epoch) scores nothing: its loss is 0
        weights_everywhere = tf.maximum(weights_everywhere, 1.0)
        if accumulation == 1:
            gradients, counts = gradients_and_counts(batch, weights_here / weights_everywhere)
        else:
            gradients, counts = accumulated(batch, weights_everywhere)
        pairs = [(gradient, variable) for gradient, variable in zip(gradients, variables) if gradient is not None]
        if max_grad_norm is None:
            optimizer.apply_gradients(pairs)
            return tf.concat([counts, tf.zeros([2])], axis=0)
        gradients, norm = clipped([gradient for gradient, _ in pairs])
        optimizer.apply_gradients(zip(gradients, [variable for _, variable in pairs]),
                                  experimental_aggregate_gradients=False)
        return tf.concat([counts, norm], axis=0)

    @tf.function
    def train_steps(iterator, steps):
        results = tf.TensorArray(tf.float32, size=steps)
        for index in tf.range(steps):
            per_replica = strategy.run(replica_step, args=(next_per_replica(strategy, iterator),))
            results = results.write(index, strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None))
        return results.stack()

    return train_steps
