"""T5 on packed rows (`--pack`, shards/text2text_packing.py): each example attends only to itself.

From the rows' segment ids (1, 2, ... per example, 0 for padding) come three block-diagonal masks,
handed to TF T5 as 3-D attention masks ([batch, query, key]): encoder self-attention (an input token
sees its example's input tokens), encoder-decoder attention (a target token sees its example's input
tokens) and decoder self-attention (a target token sees its example's earlier target tokens). TFT5
hands one `attention_mask` to both the encoder and the cross-attention, so the encoder is run first
with its own mask and the model then with the cross-attention mask. Each example's decoder inputs
start from the decoder start token, as alone. The loss is the mean over every target token of the
batch, as unpacked; an empty batch (only padding rows) has loss 0.
"""

from types import SimpleNamespace
from typing import Dict

import tensorflow as tf
import tf_keras as keras

from mlm_tpu.shards.format import IGNORE_INDEX


def block_mask(query_segments: tf.Tensor, key_segments: tf.Tensor) -> tf.Tensor:
    """[batch, query, key] 1 where the query and key tokens belong to the same example, else 0."""
    same = tf.equal(query_segments[:, :, None], key_segments[:, None, :])
    return tf.cast(tf.logical_and(same, query_segments[:, :, None] > 0), tf.float32)


def decoder_inputs(labels: tf.Tensor, segments: tf.Tensor, start_id: int, pad_id: int) -> tf.Tensor:
    """The labels shifted right within each example, each example starting with `start_id`; padding `pad_id`."""
    previous = tf.pad(labels[:, :-1], [[0, 0], [1, 0]], constant_values=start_id)
    previous_segments = tf.pad(segments[:, :-1], [[0, 0], [1, 0]])
    shifted = tf.where(tf.equal(segments, previous_segments), previous, start_id)
    return tf.where(tf.equal(shifted, IGNORE_INDEX), pad_id, shifted)


def packed_outputs(model, batch: Dict[str, tf.Tensor], training: bool):
    """(loss, logits) of a TFT5ForConditionalGeneration on a batch of packed rows."""
    inputs, targets = batch["input_segments"], batch["target_segments"]
    labels = batch["labels"]
    causal = tf.linalg.band_part(tf.ones([tf.shape(targets)[1]] * 2), -1, 0)
    encoder_outputs = model.encoder(batch["input_ids"], attention_mask=block_mask(inputs, inputs), training=training)
    outputs = model(batch["input_ids"], encoder_outputs=encoder_outputs, attention_mask=block_mask(targets, inputs),
                    decoder_input_ids=decoder_inputs(labels, targets, model.config.decoder_start_token_id,
                                                     model.config.pad_token_id),
                    decoder_attention_mask=block_mask(targets, targets) * causal[None], training=training)
    return SimpleNamespace(loss=target_loss(labels, outputs.logits), logits=outputs.logits)


def token_losses(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """[batch, targets] each target token's cross-entropy (0 where the label is -100)."""
    scored = tf.not_equal(labels, IGNORE_INDEX)
    losses = keras.losses.sparse_categorical_crossentropy(tf.where(scored, labels, 0), tf.cast(logits, tf.float32),
                                                          from_logits=True)
    return tf.where(scored, losses, 0.0)


def target_loss(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """The mean cross-entropy over the batch's target tokens (0 for a batch without any)."""
    scored = tf.reduce_sum(tf.cast(tf.not_equal(labels, IGNORE_INDEX), tf.float32))
    return tf.reduce_sum(token_losses(labels, logits)) / tf.maximum(scored, 1.0)
