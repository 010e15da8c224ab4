"""The Keras layer that wraps a frozen Dense layer with LoRA's path: base(x) + scaling · dropout(x)·A·B."""

import math

import tensorflow as tf
import tf_keras as keras


class LoraDense(keras.layers.Layer):
    """`base` (frozen) plus its low-rank update; A as PEFT initialises it (Kaiming-uniform), B zero, so the
    wrapped layer computes exactly what `base` does until B is trained."""

    def __init__(self, base: keras.layers.Dense, rank: int, scaling: float, dropout: float, **kwargs):
        super().__init__(name=f"{base.name}_lora", **kwargs)
        self.base_layer = base
        self.rank, self.scaling = rank, scaling
        self.lora_dropout = keras.layers.Dropout(dropout) if dropout else None
        fan_in, fan_out = base.kernel.shape
        bound = 1 / math.sqrt(fan_in)  # torch's kaiming_uniform_(a=sqrt(5)) on a [rank, fan_in] weight
        self.lora_A = self.add_weight("lora_A", shape=(fan_in, rank),
                                      initializer=keras.initializers.RandomUniform(-bound, bound))
        self.lora_B = self.add_weight("lora_B", shape=(rank, fan_out), initializer="zeros")

    @property
    def delta_weights(self):
        return [self.lora_A, self.lora_B]

    def call(self, inputs, training=False):
        x = self.lora_dropout(inputs, training=training) if self.lora_dropout else inputs
        update = tf.tensordot(tf.tensordot(x, tf.cast(self.lora_A, x.dtype), 1), tf.cast(self.lora_B, x.dtype), 1)
        return self.base_layer(inputs) + update * tf.cast(self.scaling, x.dtype)
