"""Dropout whose randomness is a function of (seed, step) and of which rows of the global batch it falls on, so a
resumed run drops exactly what the uninterrupted run dropped, on any number of workers and replicas.

Keras' Dropout layers draw from stateful generators that checkpoints do not hold: after a
restart their streams begin again from the seed. Here every Dropout layer of the model draws from
a stateless generator instead, keyed by (seed, optimizer step, virtual input pipeline, layer, call
within the step): the rows each virtual pipeline gives the batch (shards/layout.py) get the noise of
that pipeline, whichever replica trains them. A replica holding several pipelines' rows draws each
part's noise on its own; one holding a part of a pipeline's rows draws that pipeline's noise and
keeps its part. The training step says which step it is running before the forward pass. With
--gradient-accumulation-steps a replica's rows are trained as micro-batches, blocks of them: a micro-batch of whole
pipelines' rows is keyed the same way, its rows getting the dropout they get in one batch of the step's rows; one
that holds a part of a pipeline's rows (V below replicas x N) draws its own noise, keyed by the pipeline and the part,
as drawing the pipeline's whole noise for each part would cost N-fold: there dropout depends on the split.
"""

import threading
from typing import List

import tensorflow as tf
import tf_keras as keras

from mlm_tpu.shards.layout import BatchLayout

DROPOUT_STREAM = 3  # keeps dropout's keys apart from the data's and the masks'
PART_STREAM = 1 << 20  # keeps a micro-batch's part of a pipeline apart from the layers folded into a pipeline's key


class StepKeys:
    """The keys of the step being traced, per replica thread; hands each dropout call its own seeds."""

    def __init__(self, seed: int, layout: BatchLayout, units_per_step: int = 1):
        self.seed = seed
        self.layout = layout
        self.units_per_step = units_per_step  # a batch-size warm-up's: the layout's batches in a full step
        self._local = threading.local()

    def start_step(self, step: tf.Tensor, micro_batch=None) -> None:
        """Called by the training step of each replica, before its forward pass; with --gradient-accumulation-steps,
        before each of its micro-batches (`micro_batch`, a tensor), whose rows are a block of the replica's: one that
        holds whole pipelines' rows gets the dropout they get in one batch; a part of one pipeline's rows draws its
        own, keyed by the pipeline and the part."""
        key = tf.constant([self.seed, DROPOUT_STREAM], dtype=tf.int64)
        key = tf.random.experimental.stateless_fold_in(key, tf.cast(step, tf.int64))
        block = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.int64)
        layout = self.layout
        if micro_batch is not None:
            micro_batch = tf.cast(micro_batch, tf.int64)
            if self.units_per_step > 1:  # a batch-size warm-up: the step's units are the layout's batches, in turn
                key = tf.random.experimental.stateless_fold_in(key, micro_batch // layout.accumulation)
                micro_batch %= layout.accumulation
            block = block * layout.accumulation + micro_batch
        self._local.step_key = key
        blocks, rows = layout.micro_batches, layout.rows_per_micro_batch
        if blocks <= layout.input_pipelines:  # whole pipelines: this block's rows are theirs, in order
            per_block = layout.input_pipelines // blocks
            pipelines = [block * per_block + index for index in range(per_block)]
            self._local.offset = None
        elif micro_batch is None:  # a part of one pipeline's rows: the pipeline's noise is drawn, this part kept
            sharing = blocks // layout.input_pipelines
            pipelines = [block // sharing]
            self._local.offset = block % sharing * rows
        else:  # a micro-batch of a part of one pipeline's rows: drawing the pipeline's noise for each of them would
            # cost N-fold, so the part draws its own, keyed by the pipeline and the part (not a row's noise in one batch)
            sharing = blocks // layout.input_pipelines
            pipeline = tf.random.experimental.stateless_fold_in(key, block // sharing)
            self._local.keys = [tf.random.experimental.stateless_fold_in(pipeline, block % sharing + PART_STREAM)]
            self._local.offset, self._local.calls = None, {}
            return
        self._local.keys = [tf.random.experimental.stateless_fold_in(key, pipeline) for pipeline in pipelines]
        self._local.calls = {}

    def seeds_for(self, layer: int) -> List[tf.Tensor]:
        """The seeds of this call of `layer`, one per key of the rows' pipelines."""
        return self._seeds(self._step_value("keys"), layer)

    def seed_for_table(self, layer: int) -> tf.Tensor:
        """The seed of dropout on a tensor no row of the batch owns (DeBERTa's relative-position table): the step's
        and the layer's alone, so that every replica and micro-batch drops the same units, whatever the topology."""
        return self._seeds([self._step_value("step_key")], layer)[0]

    def _step_value(self, name: str):
        value = getattr(self._local, name, None)
        if value is None:
            raise RuntimeError("dropout ran outside a training step: call StepKeys.start_step first")
        return value

    def _seeds(self, keys: List[tf.Tensor], layer: int) -> List[tf.Tensor]:
        """Each key folded with `layer` and with how many times the layer has run in this step (a layer called
        twice draws twice)."""
        call = self._local.calls.get(layer, 0)
        self._local.calls[layer] = call + 1
        return [tf.random.experimental.stateless_fold_in(tf.random.experimental.stateless_fold_in(key, layer), call)
                for key in keys]

    def dropout(self, inputs: tf.Tensor, rate, layer: int) -> tf.Tensor:
        """`inputs` (this replica's rows first) with dropout drawn from the keys of the pipelines the rows are of."""
        seeds = self.seeds_for(layer)
        rows = self.layout.rows_per_micro_batch
        if inputs.shape[0] is not None and inputs.shape[0] != rows:
            raise RuntimeError(f"dropout on a tensor of {inputs.shape[0]} rows, not the replica's {rows}")
        if self._local.offset is None:
            if len(seeds) == 1:
                return tf.nn.experimental.stateless_dropout(inputs, rate=rate, seed=seeds[0])
            parts = tf.split(inputs, len(seeds), axis=0)
            return tf.concat([tf.nn.experimental.stateless_dropout(part, rate=rate, seed=seed)
                              for part, seed in zip(parts, seeds)], axis=0)
        pipeline_rows = self.layout.rows_per_pipeline
        whole = tf.concat([[pipeline_rows], tf.shape(inputs)[1:]], axis=0)
        kept = tf.nn.experimental.stateless_dropout(tf.ones(whole, inputs.dtype), rate=rate, seed=seeds[0]) != 0
        kept = kept[self._local.offset:self._local.offset + rows]
        return tf.where(kept, inputs * tf.cast(1 / (1 - rate), inputs.dtype), tf.zeros([], inputs.dtype))


class _KeyedDropout:
    """What a Dropout layer calls in place of its random generator."""

    def __init__(self, keys: StepKeys, layer: int):
        self.keys = keys
        self.layer = layer

    def _maybe_init(self) -> None:  # Keras asks its generators to set themselves up; there is nothing to set up
        pass

    def dropout(self, inputs, rate, noise_shape=None):
        if noise_shape is not None:
            raise RuntimeError("a Dropout layer with a noise_shape cannot be keyed by rows of the batch")
        return self.keys.dropout(inputs, rate, self.layer)


def key_dropout_by_step(model: keras.Model, seed: int, layout: BatchLayout, units_per_step: int = 1) -> StepKeys:
    """Make every Dropout layer of `model` draw from (seed, step, virtual pipeline, layer, call); return the keys to
    start at each step (`units_per_step`: a batch-size warm-up's full step, in the layout's batches)."""
    keys = StepKeys(seed, layout, units_per_step)
    layers: List[keras.layers.Dropout] = [layer for layer in model.submodules
                                          if isinstance(layer, keras.layers.Dropout)]
    for index, layer in enumerate(layers):
        layer._random_generator = _KeyedDropout(keys, index)
    return keys
