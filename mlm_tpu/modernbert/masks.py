"""The documents of a packed row and the positions the rotary embedding reads, as vectors along the row: nothing here
grows with the square of the row (attention.py builds its masks per block from these vectors).

transformers 5 (masking_utils.py) lets query q see key k when k is not padding, and on a sliding layer also when
|q - k| <= local_attention // 2. Packed rows (several documents in one fixed-length row) add a third rule: q and k
belong to the same document, and each document's positions restart at 0. That is what ModernBERT's unpadding
computes on variable-length sequences: a document in a packed row gets the logits it gets alone
(tests/test_modernbert.py).

A row's documents are given by `document_ids` [batch, length]: any integers, equal along a document, changing at
each boundary (`document_ids_from_starts` makes them from a 0/1 mark of each document's first token).
"""

from typing import Optional

import tensorflow as tf


def document_ids_from_starts(starts: tf.Tensor) -> tf.Tensor:
    """Document numbers from a 0/1 mark of each document's first token (the row's first token starts one)."""
    return tf.cumsum(tf.cast(starts, tf.int32), axis=-1)


def position_ids(input_ids: tf.Tensor, document_ids: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Each token's position [batch, length]: its index in the row, or, in a packed row, its index minus that of
    its document's first token. Documents are numbered along the row by a cumulative sum of their starts (a start:
    the row's first token, or an id unlike the one before), and each number's first index is a segment minimum."""
    shape = tf.shape(input_ids)
    index = tf.broadcast_to(tf.range(shape[1])[None, :], shape)
    if document_ids is None:
        return index
    starts = tf.concat([tf.ones_like(document_ids[:, :1], tf.bool),
                        tf.not_equal(document_ids[:, 1:], document_ids[:, :-1])], axis=1)
    numbers = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1  # 0, 1, ... along each row
    numbers += tf.range(shape[0])[:, None] * shape[1]  # distinct across rows
    first = tf.math.unsorted_segment_min(index, numbers, num_segments=shape[0] * shape[1])
    return index - tf.gather(first, numbers)
