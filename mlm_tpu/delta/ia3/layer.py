"""The Keras layer that scales a frozen Dense layer as IA3 does: its output (keys, values), or for a feed-forward
layer its input, by a learned vector that starts at 1."""

import tensorflow as tf
import tf_keras as keras


class Ia3Dense(keras.layers.Layer):
    def __init__(self, base: keras.layers.Dense, feedforward: bool, **kwargs):
        super().__init__(name=f"{base.name}_ia3", **kwargs)
        self.base_layer = base
        self.feedforward = feedforward
        fan_in, fan_out = base.kernel.shape
        self.ia3_l = self.add_weight("ia3_l", shape=(fan_in if feedforward else fan_out,), initializer="ones")

    @property
    def delta_weights(self):
        return [self.ia3_l]

    def call(self, inputs):
        scale = tf.cast(self.ia3_l, inputs.dtype)
        if self.feedforward:
            return self.base_layer(inputs * scale)
        return self.base_layer(inputs) * scale
