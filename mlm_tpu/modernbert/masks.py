"""Who attends to whom, as additive biases on static shapes, and the positions the rotary embedding reads.

transformers 5 (masking_utils.py) lets query q see key k when k is not padding, and on a sliding layer also when
|q - k| <= local_attention // 2. Packed rows (several documents in one fixed-length row) add a third rule: q and k
belong to the same document, and each document's positions restart at 0. That is what ModernBERT's unpadding
computes on variable-length sequences, here on a [length x length] mask that XLA compiles with the row's shape:
a document in a packed row gets the logits it gets alone (tests/test_modernbert.py).

A row's documents are given by `document_ids` [batch, length]: any integers, equal along a document, changing at
each boundary (`document_ids_from_starts` makes them from a 0/1 mark of each document's first token).
"""

from typing import Optional, Tuple

import tensorflow as tf

MASKED = -1e9  # added to a masked score before the softmax: exp() of it is 0 in float32, and never NaN


def document_ids_from_starts(starts: tf.Tensor) -> tf.Tensor:
    """Document numbers from a 0/1 mark of each document's first token (the row's first token starts one)."""
    return tf.cumsum(tf.cast(starts, tf.int32), axis=-1)


def same_document(document_ids: tf.Tensor) -> tf.Tensor:
    """[batch, length, length]: whether query and key lie in the same document."""
    return tf.equal(document_ids[:, :, None], document_ids[:, None, :])


def position_ids(input_ids: tf.Tensor, document_ids: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Each token's position [batch, length]: its index in the row, or, in a packed row, how many tokens of its
    document come before it (documents are contiguous, so that is its index in the document)."""
    length = tf.shape(input_ids)[1]
    if document_ids is None:
        return tf.broadcast_to(tf.range(length)[None, :], tf.shape(input_ids))
    earlier = tf.range(length)[None, :, None] > tf.range(length)[None, None, :]  # key before query
    return tf.reduce_sum(tf.cast(same_document(document_ids) & earlier, tf.int32), axis=-1)


def attention_biases(attention_mask: tf.Tensor, sliding_window: int,
                     document_ids: Optional[tf.Tensor] = None) -> Tuple[tf.Tensor, tf.Tensor]:
    """(global, local) float32 biases [batch, 1, length, length]: 0 where the query may see the key, MASKED
    elsewhere. Global: the key is a real token (and of the query's document); local: also within the window."""
    length = tf.shape(attention_mask)[1]
    allowed = tf.cast(attention_mask, tf.bool)[:, None, :]  # [batch, 1 (query), length (key)]
    if document_ids is not None:
        allowed = allowed & same_document(document_ids)
    distance = tf.abs(tf.range(length)[:, None] - tf.range(length)[None, :])
    window = (distance <= sliding_window)[None, :, :]
    return bias(allowed), bias(allowed & window)


def bias(allowed: tf.Tensor) -> tf.Tensor:
    """[batch, 1, queries, keys] additive bias of a boolean mask [batch, queries or 1, keys]."""
    return tf.where(allowed, 0.0, MASKED)[:, None, :, :]
