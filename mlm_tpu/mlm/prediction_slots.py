"""The sparse masked-LM head's inputs (sparse_head.py): each row's masked positions in a fixed number of prediction
slots, BERT's `max_predictions_per_seq`, so shapes stay static for XLA and TPUs.

Made in tf.data after the masking (masking.py), from the same stateless draws. A row with more masked positions
than slots keeps `slots` of them, chosen at random from the row's draws; the others are left unmasked (their
token restored, no label), as BERT's create_pretraining_data never masks more than it predicts: no masked position
goes unscored. How many were left out rides along in `targets_left_out`, which the trainer adds up and each epoch's
log line names: such rows train on fewer targets than the dense head would. The default number of slots makes that
rare: a row overflows with probability below 1e-6 (the binomial law of 🤗's masking, each token masked on its own).
Whole-word, span and ELECTRA's token masking never overflow: they mask within a budget that the slots cap
(word_masking.py). Whole-word and ELECTRA's masking never exceed the budget: their default slots are the budget of a
full row (masking.Masking.default_slots); span's are that and a few more, for the word that crosses it.
Slots beyond a row's masked positions point at position 0 with label -100, so they weigh nothing in the loss.
"""

import math
from typing import Dict

import tensorflow as tf

from mlm_tpu.mlm.word_masking import budget_of
from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.training.task import TARGETS_LEFT_OUT

MASKED_POSITIONS = "masked_lm_positions"  # [rows, slots]: where the head runs (BERT's feature name)
OVERFLOW_PROBABILITY = 1e-6  # the default slots: a row draws more masks than this rarely
# span masking: default slots beyond a full row's budget, for the word that crosses the budget (masked when at least
# half of it fits: word_masking.take_units), so that crossing words of up to 9 pieces stay masked
CROSSING_WORD_SLOTS = 4


def default_slots(mlm_probability: float, length: int, spans: bool = False) -> int:
    """The fewest slots that a row of `length` tokens, each masked with probability `mlm_probability`, overflows with
    probability below OVERFLOW_PROBABILITY (every token counted as maskable: rows have fewer, so it is rarer still);
    with `spans` (span masking), the budget of a row of `length` maskable tokens and CROSSING_WORD_SLOTS.

    >>> default_slots(0.15, 128), default_slots(0.15, 512), default_slots(0.15, 128, spans=True)
    (41, 118, 23)
    """
    if spans:
        return min(length, budget_of(mlm_probability, length) + CROSSING_WORD_SLOTS)
    def log_probability(masks: int) -> float:  # of `masks` masked tokens in the row
        return (math.lgamma(length + 1) - math.lgamma(masks + 1) - math.lgamma(length - masks + 1)
                + masks * math.log(mlm_probability) + (length - masks) * math.log1p(-mlm_probability))

    slots, beyond = length, 0.0  # beyond: the probability of more masks than `slots`
    while slots > 1 and beyond + math.exp(log_probability(slots)) < OVERFLOW_PROBABILITY:
        beyond += math.exp(log_probability(slots))
        slots -= 1
    return slots


def into_slots(batch: Dict[str, tf.Tensor], slots: int, draws: tf.Tensor) -> Dict[str, tf.Tensor]:
    """A masked batch {input_ids, attention_mask, labels [rows, length]} as the sparse head takes it:
    {input_ids, attention_mask, masked_lm_positions and labels [rows, slots], targets_left_out [rows, 1]}.
    `draws` [rows, length] (uniform in [0, 1)) choose which masks a row keeps when it has more than `slots`."""
    input_ids, labels = batch["input_ids"], batch["labels"]
    slots = min(slots, int(labels.shape[1]))
    masked = tf.not_equal(labels, IGNORE_INDEX)
    order = tf.argsort(tf.where(masked, draws, 2.0), axis=-1, stable=True)  # the masked positions first, shuffled
    kept = masked & (tf.argsort(order, axis=-1, stable=True) < slots)  # the first `slots` of that order
    left_out = masked & ~kept
    positions = tf.argsort(tf.cast(~kept, tf.int32), axis=-1, stable=True)[:, :slots]  # kept ones first, in order
    used = tf.gather(kept, positions, batch_dims=1)
    positions = tf.where(used, positions, 0)
    return {"input_ids": tf.where(left_out, labels, input_ids), "attention_mask": batch["attention_mask"],
            MASKED_POSITIONS: positions,
            "labels": tf.where(used, tf.gather(labels, positions, batch_dims=1), IGNORE_INDEX),
            TARGETS_LEFT_OUT: tf.reduce_sum(tf.cast(left_out, labels.dtype), axis=1, keepdims=True)}
