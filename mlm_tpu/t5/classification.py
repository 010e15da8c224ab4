"""Classification cast as text: each class is one target token, predicted in one decoder step.

The model reads the input once, takes one decoder step from the start token, and the argmax
over the label tokens' logits (not the whole vocabulary) is the class: on a TPU this runs on the
device, so only one integer per example leaves it. Scores are accuracy and each class's
precision, recall and F1, with their macro average.
"""

from dataclasses import dataclass
from typing import Dict, List, Sequence

import numpy as np
import tensorflow as tf

from mlm_tpu.errors import UserError
from mlm_tpu.shards.format import IGNORE_INDEX

NO_EXAMPLE = -1  # the class of a padding row: not an example, not scored


@dataclass(frozen=True)
class LabelSet:
    """The class names, in order, and the one token each is written as."""

    names: List[str]
    token_ids: List[int]

    @classmethod
    def from_names(cls, names: Sequence[str], tokenizer) -> "LabelSet":
        """Check that every label is exactly one token (as the sharder encodes targets) and that no two share one."""
        if len(names) < 2:
            raise UserError(f"classification needs at least two labels, not {list(names)}")
        token_ids = []
        for name in names:
            ids = tokenizer(name, add_special_tokens=False)["input_ids"]
            if len(ids) != 1:
                pieces = " ".join(tokenizer.convert_ids_to_tokens(ids))
                raise UserError(f"label '{name}' is {len(ids)} tokens ({pieces}), but classification predicts one "
                                "token per label: rename it to a word the tokenizer has whole, or train with "
                                "--task generation")
            token_ids.append(ids[0])
        if len(set(token_ids)) < len(token_ids):
            raise UserError(f"labels {list(names)} do not all have tokens of their own; rename them")
        return cls(list(names), token_ids)

    def as_config(self) -> Dict[str, object]:
        return {"labels": self.names, "label_token_ids": self.token_ids}


def label_logits(model, input_ids: tf.Tensor, attention_mask: tf.Tensor, label_token_ids: tf.Tensor) -> tf.Tensor:
    """[batch, labels]: the logits of each label's token at the first decoder step."""
    start = tf.fill([tf.shape(input_ids)[0], 1], tf.cast(model.config.decoder_start_token_id, input_ids.dtype))
    logits = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=start,
                   training=False).logits[:, 0, :]
    return tf.gather(tf.cast(logits, tf.float32), label_token_ids, axis=-1)


def predict_classes(model, input_ids: tf.Tensor, attention_mask: tf.Tensor, label_token_ids: tf.Tensor) -> tf.Tensor:
    """[batch] int32: the predicted class of each example, the argmax taken where the model runs."""
    return tf.argmax(label_logits(model, input_ids, attention_mask, label_token_ids), axis=-1, output_type=tf.int32)


def true_classes(labels: tf.Tensor, label_token_ids: tf.Tensor) -> tf.Tensor:
    """[batch] int32: each row's class from its first target token; len(labels) for a target outside the
    label set, NO_EXAMPLE for a padding row."""
    first = tf.cast(labels[:, 0], tf.int32)
    matches = tf.equal(first[:, None], tf.cast(label_token_ids, tf.int32)[None, :])
    classes = tf.where(tf.reduce_any(matches, axis=-1), tf.argmax(tf.cast(matches, tf.int32), axis=-1,
                                                                  output_type=tf.int32), tf.shape(label_token_ids)[0])
    return tf.where(tf.equal(first, IGNORE_INDEX), NO_EXAMPLE, classes)


def classification_scores(predicted: np.ndarray, truth: np.ndarray, names: Sequence[str]) -> Dict[str, float]:
    """Accuracy, macro F1, and each class's precision, recall and F1, over the rows that are examples."""
    keep = truth != NO_EXAMPLE
    predicted, truth = predicted[keep], truth[keep]
    scores = {"accuracy": float(np.mean(predicted == truth)) if len(truth) else 0.0}
    f1s = []
    for index, name in enumerate(names):
        hits = float(np.sum((predicted == index) & (truth == index)))
        precision = hits / max(np.sum(predicted == index), 1)
        recall = hits / max(np.sum(truth == index), 1)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        key = "_".join(name.split())
        scores.update({f"{key}_precision": precision, f"{key}_recall": recall, f"{key}_f1": f1})
        f1s.append(f1)
    scores["macro_f1"] = float(np.mean(f1s))
    return scores


class ClassificationScorer:
    """What validation runs on the device for classification (class ids) and how the host scores them."""

    best_metric = "accuracy"

    def __init__(self, labels: LabelSet):
        self.labels = labels
        self.label_token_ids = tf.constant(labels.token_ids, dtype=tf.int32)

    def on_device(self, model, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        return {"predicted": predict_classes(model, batch["input_ids"], batch["attention_mask"], self.label_token_ids),
                "truth": true_classes(batch["labels"], self.label_token_ids)}

    def score(self, outputs: Dict[str, np.ndarray]) -> Dict[str, float]:
        return classification_scores(outputs["predicted"], outputs["truth"], self.labels.names)

    def describe(self, scores: Dict[str, float]) -> str:
        per_class = ", ".join(f"{name} P/R/F1 {scores[f'{key}_precision']:.2f}/{scores[f'{key}_recall']:.2f}/"
                              f"{scores[f'{key}_f1']:.2f}" for name, key in
                              ((name, "_".join(name.split())) for name in self.labels.names))
        return f"accuracy {scores['accuracy']:.2%}, macro F1 {scores['macro_f1']:.3f} ({per_class})"
