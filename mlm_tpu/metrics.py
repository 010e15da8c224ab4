"""Metrics that count only the positions where a loss is taken."""

import tensorflow as tf
import tf_keras as keras

from mlm_tpu.labels import IGNORE_INDEX


class MaskedAccuracy(keras.metrics.Metric):
    """Share of masked tokens predicted right; Keras' plain "accuracy" would count every position."""

    def __init__(self, name: str = "masked_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.correct = self.add_weight(name="correct", initializer="zeros", dtype=tf.float32)
        self.counted = self.add_weight(name="counted", initializer="zeros", dtype=tf.float32)

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = tf.cast(y_true, tf.int64)
        scored = tf.not_equal(labels, IGNORE_INDEX)
        hits = tf.logical_and(scored, tf.equal(tf.argmax(y_pred, axis=-1, output_type=tf.int64), labels))
        self.correct.assign_add(tf.reduce_sum(tf.cast(hits, tf.float32)))
        self.counted.assign_add(tf.reduce_sum(tf.cast(scored, tf.float32)))

    def result(self):
        return tf.math.divide_no_nan(self.correct, self.counted)

    def reset_state(self):
        self.correct.assign(0.0)
        self.counted.assign(0.0)
