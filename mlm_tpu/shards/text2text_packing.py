"""`--pack`: several text-to-text examples in one row, so short examples do not train on padding.

Text-to-text shards hold one example per row, padded to --max-length (inputs) and the target length
(labels -100). Packing puts consecutive examples of the training order into one row, inputs after
inputs and targets after targets, as long as both fit, and numbers each example's tokens with its
segment id (1, 2, ... within the row; 0 is padding): `input_segments` and `target_segments`. The model
then lets a token attend only to tokens of its own segment (the T5 task builds the block-diagonal
masks from them), so each example is computed as if it were alone; T5's relative position buckets
need nothing else, since an example's tokens stay contiguous and keep their distances.

Deterministic and keyed like the unpacked pipeline (pipeline.py): each epoch reads the same
shuffled order of records, cut into chunks of CHUNK examples, each chunk packed greedily in order
(a row never spans two chunks). Every epoch has the same number of steps: as many as epoch 1's
packing fills, computed at start from the examples' lengths; a later epoch whose packing makes a few
rows more drops them (as unpacked epochs drop their last partial batch), one that makes fewer ends
with empty rows, which take no loss. A resumed run rebuilds its epoch's packing from the epoch's
start and drops the rows before its step (never sent to the device).
"""

from typing import Dict, Optional

import tensorflow as tf

from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.shards.pipeline import ID_BEYOND_VOCABULARY, TrainingOrder, _pipelines
from mlm_tpu.shards.reading import ShardSet

CHUNK = 1024  # examples packed together


def _parse(shards: ShardSet):
    schema = {name: tf.io.FixedLenFeature([length], tf.int64) for name, length in shards.features.items()}
    return lambda records: {name: tf.cast(values, tf.int32)
                            for name, values in tf.io.parse_example(records, schema).items()}


def row_of_each_example(input_lengths: tf.Tensor, target_lengths: tf.Tensor, max_length: int,
                        max_target_length: int):
    """Greedy packing in order: (row, input offset, target offset) of each example."""

    def place(state, lengths):
        row, used_inputs, used_targets = state
        inputs, targets = lengths
        fits = tf.logical_and(used_inputs + inputs <= max_length, used_targets + targets <= max_target_length)
        row = tf.where(fits, row, row + 1)
        start_inputs, start_targets = tf.where(fits, used_inputs, 0), tf.where(fits, used_targets, 0)
        return row, start_inputs + inputs, start_targets + targets

    zero = tf.constant(0, tf.int32)
    rows, ends_inputs, ends_targets = tf.scan(place, (input_lengths, target_lengths), initializer=(zero, zero, zero))
    return rows, ends_inputs - input_lengths, ends_targets - target_lengths


def _scatter_rows(values: tf.Tensor, lengths: tf.Tensor, rows: tf.Tensor, offsets: tf.Tensor, row_count: tf.Tensor,
                  width: int, fill: int) -> tf.Tensor:
    """[row_count, width]: each example's first `lengths` values placed at (its row, its offset + j)."""
    positions = tf.range(tf.shape(values)[1])[None, :]
    where = tf.where(positions < lengths[:, None])  # (example, j)
    example, j = tf.cast(where[:, 0], tf.int32), tf.cast(where[:, 1], tf.int32)
    indices = tf.stack([tf.gather(rows, example), tf.gather(offsets, example) + j], axis=1)
    placed = tf.scatter_nd(indices, tf.gather_nd(values, where) - fill, [row_count, width])
    return placed + fill


def pack_examples(examples: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Decoded text-to-text examples (input_ids, attention_mask, labels) -> packed rows (input_ids, labels,
    input_segments, target_segments). Inputs are the first sum(attention_mask) tokens, targets the labels that are
    not -100 (the sharder writes both at the start of their row)."""
    max_length, max_target_length = examples["input_ids"].shape[1], examples["labels"].shape[1]
    input_lengths = tf.reduce_sum(tf.cast(examples["attention_mask"] > 0, tf.int32), axis=1)
    target_lengths = tf.reduce_sum(tf.cast(examples["labels"] != IGNORE_INDEX, tf.int32), axis=1)
    rows, input_offsets, target_offsets = row_of_each_example(input_lengths, target_lengths, max_length,
                                                              max_target_length)
    row_count = rows[-1] + 1
    first_row = tf.concat([[0], tf.where(rows[1:] != rows[:-1], 1, 0)], axis=0)
    # an example's segment id: its place in its row, from 1
    starts = tf.range(tf.size(rows)) * first_row
    segment = tf.range(tf.size(rows)) - tf.scan(tf.maximum, starts) + 1
    segments = tf.broadcast_to(segment[:, None], tf.shape(examples["input_ids"]))
    target_segments = tf.broadcast_to(segment[:, None], tf.shape(examples["labels"]))
    return {  # padding inputs are 0s: never attended to, whatever the pad token
        "input_ids": _scatter_rows(examples["input_ids"], input_lengths, rows, input_offsets, row_count, max_length,
                                   0),
        "labels": _scatter_rows(examples["labels"], target_lengths, rows, target_offsets, row_count,
                                max_target_length, IGNORE_INDEX),
        "input_segments": _scatter_rows(segments, input_lengths, rows, input_offsets, row_count, max_length, 0),
        "target_segments": _scatter_rows(target_segments, target_lengths, rows, target_offsets, row_count,
                                         max_target_length, 0),
    }


def _packed_rows(order: TrainingOrder, shards: ShardSet, epoch) -> tf.data.Dataset:
    """Epoch `epoch`'s packed rows, serialized records decoded a chunk at a time."""
    parse = _parse(shards)
    return order.records(epoch, 0).batch(CHUNK).map(lambda records: pack_examples(parse(records))).unbatch()


def _empty_rows(shards: ShardSet) -> tf.data.Dataset:
    row = {"input_ids": tf.zeros([shards.features["input_ids"]], tf.int32),
           "labels": tf.fill([shards.features["labels"]], tf.constant(IGNORE_INDEX, tf.int32)),
           "input_segments": tf.zeros([shards.features["input_ids"]], tf.int32),
           "target_segments": tf.zeros([shards.features["labels"]], tf.int32)}
    return tf.data.Dataset.from_tensors(row).repeat()


def packed_batches_per_epoch(shards: ShardSet, batch_size: int, *, seed: int, pipeline: int, window: int) -> int:
    """Batches of `batch_size` packed rows in the first epoch (every epoch gets this many)."""
    order = TrainingOrder(shards, seed, pipeline, window)
    rows = _packed_rows(order, shards, 0).reduce(tf.constant(0, tf.int64), lambda count, _: count + 1)
    return int(rows.numpy()) // batch_size


def packed_training_batches(shards: ShardSet, batch_size: int, *, seed: int, pipeline: int, window: int,
                            batches_per_epoch: int, start_batch: int = 0,
                            vocab_size: Optional[int] = None) -> tf.data.Dataset:
    """This pipeline's batches of packed rows, endlessly, from its `start_batch`-th: `batches_per_epoch` per epoch."""
    order = TrainingOrder(shards, seed, pipeline, window)
    rows_per_epoch = batches_per_epoch * batch_size
    first_epoch, first_batch = divmod(start_batch, batches_per_epoch)

    def epoch_rows(epoch) -> tf.data.Dataset:
        return _packed_rows(order, shards, epoch).concatenate(_empty_rows(shards)).take(rows_per_epoch)

    rows = epoch_rows(first_epoch).skip(first_batch * batch_size).concatenate(
        tf.data.Dataset.counter(first_epoch + 1).flat_map(epoch_rows))
    return rows.batch(batch_size, drop_remainder=True).map(
        lambda batch: _checked(batch, vocab_size), num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _checked(batch: Dict[str, tf.Tensor], vocab_size: Optional[int]) -> Dict[str, tf.Tensor]:
    """The batch, once every token id is known to be below `vocab_size` (pipeline.reading_errors names a shard
    that fails)."""
    if vocab_size is None:
        return batch
    largest = tf.maximum(tf.reduce_max(batch["input_ids"]), tf.reduce_max(batch["labels"]))
    with tf.control_dependencies([tf.debugging.Assert(largest < vocab_size, [ID_BEYOND_VOCABULARY, largest])]):
        return {name: tf.identity(values) for name, values in batch.items()}


def packed_steps_per_epoch(shards: ShardSet, per_replica_batch_size: int, strategy: tf.distribute.Strategy, *,
                           seed: int, window: int) -> int:
    """Steps in which every input pipeline has a whole batch of packed rows for each of its replicas."""
    pipelines, replicas = _pipelines(strategy)
    return min(packed_batches_per_epoch(shards.share(pipeline, pipelines), per_replica_batch_size, seed=seed,
                                        pipeline=pipeline, window=window) // replicas
               for pipeline in range(pipelines))


def distributed_packed_training_dataset(strategy: tf.distribute.Strategy, shards: ShardSet,
                                        per_replica_batch_size: int, *, seed: int, window: int, steps_per_epoch: int,
                                        start_step: int = 0, vocab_size: Optional[int] = None):
    """As pipeline.distributed_training_dataset, with packed rows."""
    _, replicas = _pipelines(strategy)

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        pipeline = context.input_pipeline_id
        return packed_training_batches(shards.share(pipeline, context.num_input_pipelines), per_replica_batch_size,
                                       seed=seed, pipeline=pipeline, window=window,
                                       batches_per_epoch=steps_per_epoch * replicas,
                                       start_batch=start_step * replicas, vocab_size=vocab_size)

    return strategy.distribute_datasets_from_function(dataset_fn)
