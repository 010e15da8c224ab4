"""ELECTRA's scores over a split, each epoch and in `python -m mlm_tpu.evaluate`: the generator's masked-LM loss and
accuracy over the masked tokens, the discriminator's loss and accuracy over every real token, and the precision and
recall of its "replaced" class.

Only sums leave the device. `replaced_share` is the share of real tokens the generator replaced: an accuracy of
1 - replaced_share is what a discriminator that calls every token original gets, the floor a trained one must beat.
`loss` is the training loss, generator loss + λ x discriminator loss.
"""

from typing import Dict

import tensorflow as tf

from mlm_tpu.electra.model import discriminator_token_losses, generator_token_losses
from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.training.evaluation import ShardRunner
from mlm_tpu.training.task import Scores, Validation


SCORE_NAMES = {"loss": "loss", "generator_loss": "generator loss", "generator_accuracy": "generator accuracy",
               "discriminator_loss": "discriminator loss", "discriminator_accuracy": "discriminator accuracy",
               "replaced_precision": "replaced precision", "replaced_recall": "replaced recall"}  # the card's, in words


def replaced_token_sums(model, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The sums the scores are made of, for one batch (`model`: an ElectraPretrainer)."""
    outputs = model.on_batch(batch, training=False)
    labels = tf.cast(batch["labels"], tf.int32)
    masked = tf.cast(tf.not_equal(labels, IGNORE_INDEX), tf.float32)
    real = tf.cast(batch["attention_mask"], tf.float32)
    predicted = tf.argmax(outputs.generator_logits, axis=-1, output_type=tf.int32)
    replaced = tf.cast(outputs.replaced, tf.float32) * real
    called_replaced = tf.cast(outputs.logits > 0, tf.float32) * real
    return {"masked_tokens": tf.reduce_sum(masked),
            "generator_loss": tf.reduce_sum(generator_token_losses(labels, outputs.generator_logits)),
            "generator_hits": tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.float32) * masked),
            "tokens": tf.reduce_sum(real),
            "discriminator_loss": tf.reduce_sum(discriminator_token_losses(outputs.replaced, outputs.logits,
                                                                           batch["attention_mask"])),
            "discriminator_hits": tf.reduce_sum(real - tf.abs(replaced - called_replaced)),
            "replaced": tf.reduce_sum(replaced), "called_replaced": tf.reduce_sum(called_replaced),
            "rightly_called_replaced": tf.reduce_sum(replaced * called_replaced)}


def _ratio(numerator: float, denominator: float) -> float:
    return float(numerator) / float(denominator) if denominator else 0.0


def replaced_token_scores(sums: Dict[str, float], discriminator_weight: float) -> Scores:
    """The scores from the sums over a split."""
    generator_loss = _ratio(sums["generator_loss"], sums["masked_tokens"])
    discriminator_loss = _ratio(sums["discriminator_loss"], sums["tokens"])
    return {"tokens": int(sums["tokens"]), "masked_tokens": int(sums["masked_tokens"]),
            "loss": generator_loss + discriminator_weight * discriminator_loss,
            "generator_loss": generator_loss,
            "generator_accuracy": _ratio(sums["generator_hits"], sums["masked_tokens"]),
            "discriminator_loss": discriminator_loss,
            "discriminator_accuracy": _ratio(sums["discriminator_hits"], sums["tokens"]),
            "replaced_precision": _ratio(sums["rightly_called_replaced"], sums["called_replaced"]),
            "replaced_recall": _ratio(sums["rightly_called_replaced"], sums["replaced"]),
            "replaced_share": _ratio(sums["replaced"], sums["tokens"])}


class ReplacedTokenValidation(Validation):
    """The generator's and the discriminator's scores over every example of a split."""

    def __init__(self, strategy, model, shards, per_replica_batch_size: int, make_transform, seed: int, *,
                 jit_compile: bool):
        self.discriminator_weight = model.discriminator_weight
        self.runner = ShardRunner(strategy, shards, per_replica_batch_size, make_transform, seed,
                                  lambda batch: replaced_token_sums(model, batch), vocab_size=model.config.vocab_size,
                                  jit_compile=jit_compile, gather=False)

    def run(self, show_progress: bool = False) -> Scores:
        return replaced_token_scores(self.runner.run(show_progress), self.discriminator_weight)

    def describe(self, scores: Scores) -> str:
        return (f"loss {scores['loss']:.4f}; generator loss {scores['generator_loss']:.4f}, accuracy "
                f"{scores['generator_accuracy']:.2%}; discriminator loss {scores['discriminator_loss']:.4f}, accuracy "
                f"{scores['discriminator_accuracy']:.2%} (all original: {1 - scores['replaced_share']:.2%}), replaced "
                f"precision {scores['replaced_precision']:.2%}, recall {scores['replaced_recall']:.2%}")
