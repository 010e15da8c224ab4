"""What validation of an encoder runs, each epoch and in the evaluate command (through training/evaluation.py's
PredictionValidation): the model runs on the device, the argmax too (one class id per example, or per token), and
only those ids, the true labels and each row's loss leave it; the host scores them (metrics.py).

A split's label ids are the positions of its own label names (its manifest's); `remap` turns them into the model's
ids on the device, so a validation split holding fewer labels than the training split (its names sorted apart) is
scored right. Padding rows (the evaluation pipeline fills the last batch with them: no attention) are dropped.
"""

from typing import Dict, Sequence

import numpy as np
import tensorflow as tf

from mlm_tpu.encoder import metrics
from mlm_tpu.encoder.models import Labels
from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.training.task import Scores


def _logits(model, batch: Dict[str, tf.Tensor], inputs: Sequence[str]) -> tf.Tensor:
    return tf.cast(model(**{name: batch[name] for name in inputs}, training=False).logits, tf.float32)


def _model_ids(labels: tf.Tensor, remap: tf.Tensor) -> tf.Tensor:
    """The split's label ids as the model's (IGNORE_INDEX stays)."""
    scored = tf.not_equal(labels, IGNORE_INDEX)
    return tf.where(scored, tf.gather(remap, tf.maximum(labels, 0)), IGNORE_INDEX)


class SequenceScorer:
    """Classes (argmax on the device) or scores (regression) of whole examples; the model reads `inputs`."""

    def __init__(self, labels: Labels, remap: Sequence[int], inputs: Sequence[str]):
        self.labels = labels
        self.remap = tf.constant(list(remap) or [0], tf.int32)
        self.inputs = list(inputs)
        self.best_metric = "pearson" if labels.regression else "accuracy"

    def on_device(self, model, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        logits = _logits(model, batch, self.inputs)
        real = tf.cast(batch["attention_mask"][:, 0] > 0, tf.int32)
        if self.labels.regression:
            truth = tf.cast(batch["labels"][:, 0], tf.float32)
            return {"predicted": logits[:, 0], "truth": truth, "real": real}
        truth = _model_ids(tf.cast(batch["labels"][:, 0], tf.int32), self.remap)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.maximum(truth, 0), logits=logits)
        return {"predicted": tf.argmax(logits, axis=-1, output_type=tf.int32), "truth": truth, "real": real,
                "loss": losses}

    def score(self, outputs: Dict[str, np.ndarray]) -> Scores:
        real = outputs["real"] > 0
        if self.labels.regression:
            return metrics.regression_scores(outputs["predicted"][real].astype(np.float64),
                                             outputs["truth"][real].astype(np.float64))
        return metrics.classification_scores(outputs["predicted"][real], outputs["truth"][real],
                                             outputs["loss"][real], self.labels.count)

    def describe(self, scores: Scores) -> str:
        if self.labels.regression:
            return f"Pearson {scores['pearson']:.4f}, Spearman {scores['spearman']:.4f}, MSE {scores['loss']:.4f}"
        binary = f", F1 {scores['f1']:.3f}" if "f1" in scores else ""
        return (f"accuracy {scores['accuracy']:.2%}, macro F1 {scores['macro_f1']:.3f}{binary}, Matthews "
                f"{scores['matthews_correlation']:.3f}, loss {scores['loss']:.4f}")


class TokenScorer:
    """A tag per word (argmax on the device, per token), scored by entities (seqeval); the model reads `inputs`."""

    best_metric = "f1"

    def __init__(self, labels: Labels, remap: Sequence[int], inputs: Sequence[str]):
        self.labels = labels
        self.remap = tf.constant(list(remap), tf.int32)
        self.inputs = list(inputs)

    def on_device(self, model, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        logits = _logits(model, batch, self.inputs)
        truth = _model_ids(tf.cast(batch["labels"], tf.int32), self.remap)
        scored = tf.cast(tf.not_equal(truth, IGNORE_INDEX), tf.float32)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.maximum(truth, 0), logits=logits)
        return {"predicted": tf.argmax(logits, axis=-1, output_type=tf.int32), "truth": truth,
                "loss": tf.reduce_sum(losses * scored, axis=-1), "tags": tf.reduce_sum(scored, axis=-1)}

    def score(self, outputs: Dict[str, np.ndarray]) -> Scores:
        rows = outputs["tags"] > 0  # (padding rows tag nothing)
        true_rows, predicted_rows = metrics.tag_sequences(outputs["predicted"][rows], outputs["truth"][rows],
                                                          self.labels.names, IGNORE_INDEX)
        loss = float(outputs["loss"].sum() / max(outputs["tags"].sum(), 1.0))
        return metrics.entity_scores(true_rows, predicted_rows, loss)

    def describe(self, scores: Scores) -> str:
        return (f"entity F1 {scores['f1']:.3f} (precision {scores['precision']:.3f}, recall {scores['recall']:.3f}), "
                f"tag accuracy {scores['accuracy']:.2%}, loss {scores['loss']:.4f}")
