"""ELECTRA's two models trained as one (Clark et al. 2020, "ELECTRA: Pre-training Text Encoders as Discriminators
Rather Than Generators"): a small masked LM, the generator, fills the masked positions with tokens sampled from its
softmax; the discriminator reads the result and tells, for every token, whether it was replaced.

The generator is transformers' TFElectraForMaskedLM and the discriminator its TFElectraForPreTraining, so each
saves as the 🤗 folder of its class; or, for DeBERTa-v3 (deberta.py), a TFDebertaV2ForMaskedLM and a DeBERTa-v2
encoder with DeBERTa's replaced-token head. By default ELECTRA's share their embeddings as google-research/electra
does: one embeddings layer (token, position and type embeddings and their LayerNorm) that both read, whose token
table is also the generator's output layer; each projects it to its own width. DeBERTa-v3's share them by GDES;
sharing.py has the three ways (--embedding-sharing). The loss is the generator's masked-LM loss (the mean
over the masked tokens) plus `discriminator_weight` (λ, 50 in the paper) times the discriminator's binary
cross-entropy (the mean over every real, non-padding token). The sampling takes no gradient: the discriminator's loss
reaches the generator only through shared embeddings (never under GDES).

The replacement at each masked position is drawn by inverse transform sampling from the generator's softmax with a
uniform draw that the batch brings (`replacement_draws`, made in tf.data with the masks: replacements.py), so it is a
function of (seed, step, virtual input pipeline) as masks and dropout are, whatever the replicas, and in validation
too.

The generator's head runs at the masked positions only where the batch brings the sparse head's prediction slots
(`masked_lm_positions`, mlm/prediction_slots.py; training's default), at every position otherwise (--dense-mlm-head,
and validation's batches); it samples there, with the draws of those positions, and its samples are put back in
place in the discriminator's input, every shape static. Both ways give the same loss, to float rounding.
"""

from dataclasses import dataclass
from typing import Dict, Optional

import tensorflow as tf
import tf_keras as keras
from transformers import TFElectraForMaskedLM, TFElectraForPreTraining
from transformers.utils import ModelOutput

from mlm_tpu.electra.replacements import REPLACEMENT_DRAWS, sample_from_draws
from mlm_tpu.electra.sharing import discriminator_inputs, start_from_scratch
from mlm_tpu.mlm.prediction_slots import MASKED_POSITIONS
from mlm_tpu.mlm.sparse_head import logits_at
from mlm_tpu.shards.format import IGNORE_INDEX

DEFAULT_DISCRIMINATOR_WEIGHT = 50.0  # λ of the paper


@dataclass
class ElectraPretrainingOutput(ModelOutput):
    """What ElectraPretrainer returns: `loss` is [the generator's loss, λ x the discriminator's] (the trainer weighs
    each by the replica's share of its tokens), `logits` the discriminator's [batch, length]."""

    loss: Optional[tf.Tensor] = None
    logits: Optional[tf.Tensor] = None
    generator_logits: Optional[tf.Tensor] = None  # [batch, length or slots, vocabulary], lined up with the labels
    discriminator_input_ids: Optional[tf.Tensor] = None  # the originals, with the generator's samples where masked
    replaced: Optional[tf.Tensor] = None  # [batch, length] bool: where a sample differs from the original


def generator_logits(generator: TFElectraForMaskedLM, input_ids, attention_mask, positions: Optional[tf.Tensor],
                     training: bool) -> tf.Tensor:
    """The generator's logits at `positions` [batch, slots] (the sparse head: [batch, slots, vocabulary]), or at
    every position (None: [batch, length, vocabulary])."""
    if positions is None:
        return generator(input_ids=input_ids, attention_mask=attention_mask, training=training).logits
    return logits_at(generator, input_ids, attention_mask, positions, training)


def in_place(values: tf.Tensor, positions: tf.Tensor, length: int) -> tf.Tensor:
    """[batch, slots] values put at their `positions` of [batch, length] rows, 0 elsewhere; slots that hold 0 add
    nothing where they point (the unused slots, all at position 0)."""
    positions = tf.cast(positions, tf.int32)
    rows = tf.broadcast_to(tf.range(tf.shape(positions)[0])[:, None], tf.shape(positions))
    return tf.scatter_nd(tf.stack([rows, positions], axis=-1), values, [tf.shape(positions)[0], length])


def generator_token_losses(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """Each masked position's cross-entropy (0 elsewhere), lined up with `labels` ([batch, length or slots])."""
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
    """The generator and the discriminator (ELECTRA's or DeBERTa-v3's) as one Keras model, called on a masked batch
    (`input_ids`, `attention_mask`, `labels`, `replacement_draws`, the sparse head's `masked_lm_positions`:
    `on_batch`). `config` is the discriminator's, the model the output folder holds; `generator` and `discriminator`
    are saved as 🤗 folders of their own; `sharing` is how they share their embeddings (sharing.py)."""

    def __init__(self, generator, discriminator, discriminator_weight: float = DEFAULT_DISCRIMINATOR_WEIGHT,
                 sharing: str = "shared"):
        super().__init__(name="electra_pretrainer")
        self.generator = generator
        self.discriminator = discriminator
        self.discriminator_weight = discriminator_weight
        self.sharing = sharing  # --embedding-sharing (sharing.py)
        self.config = discriminator.config

    @classmethod
    def from_configs(cls, generator_config, discriminator_config,
                     discriminator_weight: float = DEFAULT_DISCRIMINATOR_WEIGHT,
                     sharing: str = "shared") -> "ElectraPretrainer":
        """ELECTRA's two models new, built, their embeddings shared by `sharing`."""
        return cls.from_models(TFElectraForMaskedLM(generator_config), TFElectraForPreTraining(discriminator_config),
                               discriminator_weight, sharing)

    @classmethod
    def from_models(cls, generator, discriminator, discriminator_weight: float, sharing: str) -> "ElectraPretrainer":
        """Two new models (ELECTRA's or DeBERTa-v3's) built, their embeddings shared by `sharing` from the start."""
        model = cls(generator, discriminator, discriminator_weight, sharing)
        model.build_in_name_scope()
        start_from_scratch(sharing, generator, discriminator)
        return model

    def build_in_name_scope(self) -> None:
        """Build both models, each in its own name scope, as their folders name their weights."""
        self.generator.build_in_name_scope()
        self.discriminator.build_in_name_scope()
        self.built = True

    def on_batch(self, batch: Dict[str, tf.Tensor], training: bool) -> ElectraPretrainingOutput:
        """The outputs on a batch of ELECTRA's transform: the masked LM's (in prediction slots or not) and the
        replacement draws; other features (the slots' `targets_left_out`) are not the model's."""
        return self(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"],
                    replacement_draws=batch[REPLACEMENT_DRAWS], masked_lm_positions=batch.get(MASKED_POSITIONS),
                    training=training)

    def call(self, input_ids, attention_mask, labels, replacement_draws, masked_lm_positions=None,
             training=False) -> ElectraPretrainingOutput:
        """`labels` lined up with `masked_lm_positions` [batch, slots] where given (the sparse head), else with
        `input_ids`."""
        scored = tf.not_equal(labels, IGNORE_INDEX)  # the generator's targets, at its slots or at every position
        logits_of_generator = generator_logits(self.generator, input_ids, attention_mask, masked_lm_positions,
                                               training)
        draws = (replacement_draws if masked_lm_positions is None else
                 tf.gather(replacement_draws, masked_lm_positions, batch_dims=1))
        sampled = tf.cast(sample_from_draws(tf.stop_gradient(logits_of_generator), draws), input_ids.dtype)
        targets = tf.where(scored, tf.cast(labels, input_ids.dtype), 0)
        if masked_lm_positions is None:
            masked = scored
        else:  # back to every position of the discriminator's input
            length = input_ids.shape[1]
            masked = in_place(tf.cast(scored, tf.int32), masked_lm_positions, length) > 0
            sampled, targets = (in_place(tf.where(scored, values, 0), masked_lm_positions, length)
                                for values in (sampled, targets))
        originals = tf.where(masked, targets, input_ids)
        discriminator_input = tf.where(masked, sampled, originals)
        replaced = tf.not_equal(discriminator_input, originals)  # a sample of the original token is no replacement
        logits = self.discriminator(**discriminator_inputs(self.sharing, self.generator, self.discriminator,
                                                           discriminator_input),
                                    attention_mask=attention_mask, training=training).logits
        masked_count = tf.reduce_sum(tf.cast(scored, tf.float32))
        real_count = tf.reduce_sum(tf.cast(attention_mask, tf.float32))
        generator_loss = tf.reduce_sum(generator_token_losses(labels, logits_of_generator)) / tf.maximum(masked_count,
                                                                                                         1.0)
        discriminator_loss = (tf.reduce_sum(discriminator_token_losses(replaced, logits, attention_mask))
                              / tf.maximum(real_count, 1.0))
        return ElectraPretrainingOutput(loss=tf.stack([generator_loss, self.discriminator_weight * discriminator_loss]),
                                        logits=logits, generator_logits=logits_of_generator,
                                        discriminator_input_ids=discriminator_input, replaced=replaced)
