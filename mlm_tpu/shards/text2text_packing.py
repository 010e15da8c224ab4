"""`--pack`: several text-to-text examples in one row, so short examples do not train on padding.

Text-to-text shards hold one example per row, padded to --max-length (inputs) and the target length
(labels -100). Packing puts consecutive examples of the training order into one row, inputs after
inputs and targets after targets, as long as both fit, and numbers each example's tokens with its
segment id (1, 2, ... within the row; 0 is padding): `input_segments` and `target_segments`. The model
then lets a token attend only to tokens of its own segment (the T5 task builds the block-diagonal
masks from them), so each example is computed as if it were alone; T5's relative position buckets
need nothing else, since an example's tokens stay contiguous and keep their distances.

Deterministic and keyed like the unpacked pipeline (pipeline.py), over the same virtual input
pipelines (layout.py): virtual pipeline v packs only its own part of the records, read in its own order from
(seed, v), and gives each step global batch / V packed rows; the machines' pipelines put those parts
together as for unpacked rows, so every step's rows are the same on any number of workers or
replicas. Each epoch a virtual pipeline's shuffled records are cut into chunks of CHUNK examples,
each chunk packed greedily in order (a row never spans two chunks). Every epoch has the same number
of steps: as many as epoch 1's packing fills in the virtual pipeline that fills fewest, computed at
start from the examples' lengths; a later epoch whose packing makes a few rows more drops them (as
unpacked epochs drop their last partial batch), one that makes fewer ends with empty rows, which
take no loss. Counting them packs the whole training set once, so the count is kept (packed_rows.py). A
resumed run rebuilds its epoch's packing from the epoch's start and drops the rows before its step (never sent
to the device).
"""

from typing import Dict, List, Optional

import tensorflow as tf

from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.shards.layout import BatchLayout
from mlm_tpu.shards.pipeline import HostOrders, TrainingOrder, decoder, host_batches, pipeline_window
from mlm_tpu.shards.reading import ShardSet

CHUNK = 1024  # examples packed together


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


def _packed_rows(order: TrainingOrder, decode, epoch) -> tf.data.Dataset:
    """Epoch `epoch`'s packed rows, serialized records decoded (`decode`, pipeline.decoder) a chunk at a time."""
    return order.records(epoch, 0).batch(CHUNK).map(lambda records: pack_examples(decode(0, records))).unbatch()


def _empty_rows(shards: ShardSet) -> tf.data.Dataset:
    row = {"input_ids": tf.zeros([shards.features["input_ids"]], tf.int32),
           "labels": tf.fill([shards.features["labels"]], tf.constant(IGNORE_INDEX, tf.int32)),
           "input_segments": tf.zeros([shards.features["input_ids"]], tf.int32),
           "target_segments": tf.zeros([shards.features["labels"]], tf.int32)}
    return tf.data.Dataset.from_tensors(row).repeat()


def packed_rows_per_pipeline(shards: ShardSet, pipelines: int, *, seed: int, window: int) -> List[int]:
    """How many packed rows epoch 1 makes in each of `pipelines` virtual pipelines (`window`: each one's shuffling
    window): each reads and packs its whole part once, so packed_rows.py keeps the count."""
    decode, counts = decoder(shards, None, None), []
    for pipeline in range(pipelines):
        order = TrainingOrder.of(shards.share(pipeline, pipelines), seed, pipeline, window)
        rows = _packed_rows(order, decode, 0).reduce(tf.constant(0, tf.int64), lambda count, _: count + 1)
        counts.append(int(rows.numpy()))
    return counts


def packed_steps_per_epoch(shards: ShardSet, layout: BatchLayout, *, seed: int, window: int) -> int:
    """Steps in which every virtual pipeline has its whole part of the batch in packed rows: the fewest that epoch
    1's packing fills in any of them (counted now; packed_rows.py keeps the count)."""
    rows = packed_rows_per_pipeline(shards, layout.input_pipelines, seed=seed, window=pipeline_window(window, layout))
    return min(rows) // layout.rows_per_pipeline


def host_packed_batches(shards: ShardSet, layout: BatchLayout, host: int, *, seed: int, window: int,
                        steps_per_epoch: int, start_step: int = 0, vocab_size: Optional[int] = None):
    """As pipeline.host_training_batches, with packed rows: each virtual pipeline packs its own part's examples and
    gives each step layout.rows_per_pipeline rows, `steps_per_epoch` steps per epoch, from `start_step` on."""
    orders = HostOrders(shards, layout, host, seed, window)
    decode = decoder(shards, None, vocab_size)  # every token id checked (pipeline.reading_errors names a bad shard)
    rows, first_epoch, first_step = layout.rows_per_pipeline, *divmod(start_step, steps_per_epoch)

    def pipeline_parts(index):
        order = orders.order(index)

        def epoch_rows(epoch) -> tf.data.Dataset:
            return _packed_rows(order, decode, epoch).concatenate(_empty_rows(shards)).take(steps_per_epoch * rows)

        packed = epoch_rows(first_epoch).skip(first_step * rows).concatenate(
            tf.data.Dataset.counter(first_epoch + 1).flat_map(epoch_rows))
        return packed.batch(rows, drop_remainder=True)

    return host_batches(layout, host, pipeline_parts)
