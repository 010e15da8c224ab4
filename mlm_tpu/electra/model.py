"""ELECTRA's two models trained as one (Clark et al. 2020, "ELECTRA: Pre-training Text Encoders as Discriminators
Rather Than Generators"): a small masked LM, the generator, fills the masked positions with tokens sampled from its
softmax; the discriminator reads the result and tells, for every token, whether it was replaced.

The generator is transformers' TFElectraForMaskedLM and the discriminator its TFElectraForPreTraining, so each
saves as the 🤗 folder of its class. They share their embeddings as google-research/electra does: one embeddings
layer (token, position and type embeddings and their LayerNorm) that both read, whose token table is also the
generator's output layer; each projects it to its own width. The loss is the generator's masked-LM loss (the mean
over the masked tokens) plus `discriminator_weight` (λ, 50 in the paper) times the discriminator's binary
cross-entropy (the mean over every real, non-padding token). The sampling takes no gradient: the discriminator's loss
reaches the generator only through the shared embeddings.

The replacement at each masked position is drawn by inverse transform sampling from the generator's softmax with a
uniform draw that the batch brings (`replacement_draws`, made in tf.data with the masks: replacements.py), so it is a
function of (seed, step, virtual input pipeline) as masks and dropout are, whatever the replicas, and in validation
too.
"""

from dataclasses import dataclass
from typing import Optional

import tensorflow as tf
import tf_keras as keras
from transformers import TFElectraForMaskedLM, TFElectraForPreTraining
from transformers.utils import ModelOutput

from mlm_tpu.electra.replacements import sample_from_draws
from mlm_tpu.shards.format import IGNORE_INDEX

DEFAULT_DISCRIMINATOR_WEIGHT = 50.0  # λ of the paper


@dataclass
class ElectraPretrainingOutput(ModelOutput):
    """What ElectraPretrainer returns: `loss` is [the generator's loss, λ x the discriminator's] (the trainer weighs
    each by the replica's share of its tokens), `logits` the discriminator's [batch, length]."""

    loss: Optional[tf.Tensor] = None
    logits: Optional[tf.Tensor] = None
    generator_logits: Optional[tf.Tensor] = None  # [batch, length, vocabulary]
    discriminator_input_ids: Optional[tf.Tensor] = None  # the originals, with the generator's samples where masked
    replaced: Optional[tf.Tensor] = None  # [batch, length] bool: where a sample differs from the original


def tie_embeddings(generator: TFElectraForMaskedLM, discriminator: TFElectraForPreTraining) -> None:
    """Make the generator read (and predict through) the discriminator's embeddings layer: one set of variables,
    saved into both folders. Both must be built (a built Electra main layer would build a shared layer again, making
    new variables)."""
    shared = discriminator.electra.embeddings
    generator.electra.embeddings = shared
    generator.generator_lm_head.input_embeddings = shared


def generator_logits(generator: TFElectraForMaskedLM, input_ids, attention_mask, training: bool) -> tf.Tensor:
    """The generator's logits at every position (the one place its head is called: a sparse head would gather the
    masked positions here)."""
    return generator(input_ids=input_ids, attention_mask=attention_mask, training=training).logits


def generator_token_losses(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """[batch, length] each masked position's cross-entropy (0 elsewhere)."""
    masked = tf.not_equal(labels, IGNORE_INDEX)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.where(masked, labels, 0),
                                                            logits=tf.cast(logits, tf.float32))
    return tf.where(masked, losses, 0.0)


def discriminator_token_losses(replaced: tf.Tensor, logits: tf.Tensor, attention_mask: tf.Tensor) -> tf.Tensor:
    """[batch, length] each real token's binary cross-entropy of "replaced" (0 at padding)."""
    losses = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(replaced, tf.float32),
                                                     logits=tf.cast(logits, tf.float32))
    return losses * tf.cast(attention_mask, tf.float32)


class ElectraPretrainer(keras.Model):
    """The generator and the discriminator as one Keras model, called on a masked batch (`input_ids`,
    `attention_mask`, `labels`, `replacement_draws`). `config` is the discriminator's, the model the output folder
    holds; `generator` and `discriminator` are saved as 🤗 folders of their own."""

    def __init__(self, generator: TFElectraForMaskedLM, discriminator: TFElectraForPreTraining,
                 discriminator_weight: float = DEFAULT_DISCRIMINATOR_WEIGHT):
        super().__init__(name="electra_pretrainer")
        self.generator = generator
        self.discriminator = discriminator
        self.discriminator_weight = discriminator_weight
        self.config = discriminator.config

    @classmethod
    def from_configs(cls, generator_config, discriminator_config,
                     discriminator_weight: float = DEFAULT_DISCRIMINATOR_WEIGHT) -> "ElectraPretrainer":
        """Both models new, built, their embeddings tied."""
        generator = TFElectraForMaskedLM(generator_config)
        discriminator = TFElectraForPreTraining(discriminator_config)
        model = cls(generator, discriminator, discriminator_weight)
        model.build_in_name_scope()
        tie_embeddings(generator, discriminator)
        return model

    def build_in_name_scope(self) -> None:
        """Build both models, each in its own name scope, as their folders name their weights."""
        self.generator.build_in_name_scope()
        self.discriminator.build_in_name_scope()
        self.built = True

    def call(self, input_ids, attention_mask, labels, replacement_draws, training=False) -> ElectraPretrainingOutput:
        masked = tf.not_equal(labels, IGNORE_INDEX)
        originals = tf.where(masked, labels, input_ids)
        logits_of_generator = generator_logits(self.generator, input_ids, attention_mask, training)
        sampled = sample_from_draws(tf.stop_gradient(logits_of_generator), replacement_draws)
        discriminator_input = tf.where(masked, tf.cast(sampled, input_ids.dtype), originals)
        replaced = tf.not_equal(discriminator_input, originals)  # a sample of the original token is no replacement
        logits = self.discriminator(input_ids=discriminator_input, attention_mask=attention_mask,
                                    training=training).logits
        masked_count = tf.reduce_sum(tf.cast(masked, tf.float32))
        real_count = tf.reduce_sum(tf.cast(attention_mask, tf.float32))
        generator_loss = tf.reduce_sum(generator_token_losses(labels, logits_of_generator)) / tf.maximum(masked_count,
                                                                                                         1.0)
        discriminator_loss = (tf.reduce_sum(discriminator_token_losses(replaced, logits, attention_mask))
                              / tf.maximum(real_count, 1.0))
        return ElectraPretrainingOutput(loss=tf.stack([generator_loss, self.discriminator_weight * discriminator_loss]),
                                        logits=logits, generator_logits=logits_of_generator,
                                        discriminator_input_ids=discriminator_input, replaced=replaced)
