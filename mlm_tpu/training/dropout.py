"""Dropout whose randomness is a function of (seed, step), so a resumed run drops exactly what the
uninterrupted run dropped.

Keras' Dropout layers draw from stateful generators that checkpoints do not hold: after a
restart their streams begin again from the seed. Here every Dropout layer of the model draws from
a stateless generator instead, keyed by (seed, optimizer step, replica, layer, call within the
step); the training step says which step it is running before the forward pass.
"""

import threading
from typing import List

import tensorflow as tf
import tf_keras as keras

DROPOUT_STREAM = 3  # keeps dropout's keys apart from the data's and the masks'


class StepKeys:
    """The key of the step being traced, per replica thread; hands each dropout call its own seed."""

    def __init__(self, seed: int):
        self.seed = seed
        self._local = threading.local()

    def start_step(self, step: tf.Tensor) -> None:
        """Called by the training step of each replica, before its forward pass."""
        key = tf.constant([self.seed, DROPOUT_STREAM], dtype=tf.int64)
        key = tf.random.experimental.stateless_fold_in(key, tf.cast(step, tf.int64))
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        self._local.key = tf.random.experimental.stateless_fold_in(key, tf.cast(replica, tf.int64))
        self._local.calls = {}

    def seed_for(self, layer: int) -> tf.Tensor:
        key = getattr(self._local, "key", None)
        if key is None:
            raise RuntimeError("dropout ran outside a training step: call StepKeys.start_step first")
        call = self._local.calls.get(layer, 0)
        self._local.calls[layer] = call + 1
        return tf.random.experimental.stateless_fold_in(tf.random.experimental.stateless_fold_in(key, layer), call)


class _KeyedDropout:
    """What a Dropout layer calls in place of its random generator."""

    def __init__(self, keys: StepKeys, layer: int):
        self.keys = keys
        self.layer = layer

    def _maybe_init(self) -> None:  # Keras asks its generators to set themselves up; there is nothing to set up
        pass

    def dropout(self, inputs, rate, noise_shape=None):
        return tf.nn.experimental.stateless_dropout(inputs, rate=rate, noise_shape=noise_shape,
                                                    seed=self.keys.seed_for(self.layer))


def key_dropout_by_step(model: keras.Model, seed: int) -> StepKeys:
    """Make every Dropout layer of `model` draw from (seed, step, replica, layer, call); return the keys to start."""
    keys = StepKeys(seed)
    layers: List[keras.layers.Dropout] = [layer for layer in model.submodules
                                          if isinstance(layer, keras.layers.Dropout)]
    for index, layer in enumerate(layers):
        layer._random_generator = _KeyedDropout(keys, index)
    return keys
