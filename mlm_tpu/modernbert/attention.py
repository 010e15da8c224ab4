"""ModernBERT's attention without a [length x length] tensor, so a row of 8,192 tokens costs what its window (local
layers) or its query chunks (global layers) cost, not the square of the row (DESIGN.md's "Long rows").

Who attends to whom is transformers 5's rule (masking_utils.py): query q sees key k when k is a real token, on a
local layer also when |q - k| <= local_attention // 2, and in a packed row when both lie in the same document. Both
functions take the rule as per-token vectors: `key_mask` [batch, length] (the attention mask) and `document_ids`
[batch, length] (None for one document per row), and build their masks per block from them.

- `local_attention`: the row is cut into blocks of half_window tokens; each query block attends to its own block
  and its two neighbours (3 x half_window keys, enough for any key within the window), under a band mask that is
  one static [block, 3 x block] constant, since a key's offset from its query block is the same in every block
  (BigBird's blocked attention; Longformer's sliding chunks). Scores, probabilities and their gradients are
  [batch, heads, blocks, block, 3 x block]: linear in the row.
- `global_attention`: queries in chunks; each chunk's scores against every key are [batch, heads, chunk, length],
  summed into its output and thrown away. A tf.custom_gradient recomputes them chunk by chunk in the backward pass
  (Rabe & Staats 2021, "Self-attention does not need O(n²) memory"), so nothing of size chunks x length is kept
  for the gradient. A chunk's row of scores is whole, so its softmax is the exact one.
Both loop in TensorFlow (tf.while_loop), never in Python, and every shape follows from the row's, so XLA compiles
one program per row length. Softmax runs in float32 whatever the compute type, as transformers' eager attention.
Attention dropout, where configured, drops the same probabilities in the backward pass as in the forward one (a
stateless draw from a seed per row and the chunk's number).
"""

from typing import Optional

import numpy as np
import tensorflow as tf

MASKED = -1e9  # added to a masked score before the softmax: exp() of it is 0 in float32, and never NaN
QUERY_CHUNK = 256  # global layers: scores of this many queries at a time ([batch, heads, 256, length] float32)


def padded_to(values: tf.Tensor, multiple: int, value=0, before: int = 0) -> tf.Tensor:
    """`values` [batch, length, ...] padded along the row to a multiple of `multiple` (after `before` extra)."""
    length = tf.shape(values)[1]
    after = (-length) % multiple
    paddings = [[0, 0], [before, after]] + [[0, 0]] * (len(values.shape) - 2)
    return tf.pad(values, paddings, constant_values=value)


def band(block: int, half_window: int) -> np.ndarray:
    """[block, 3 x block]: whether a query of a block sees a key of the block before, its own or the one after,
    by their distance alone (the same for every block)."""
    queries = np.arange(block)[:, None] + block
    keys = np.arange(3 * block)[None, :]
    return np.abs(queries - keys) <= half_window


def neighbours(blocks: tf.Tensor) -> tf.Tensor:
    """[batch, blocks + 2, block, ...] (padded by a block each side) to [batch, blocks, 3 x block, ...]: each
    block's previous, own and next block, side by side."""
    previous, own, following = blocks[:, :-2], blocks[:, 1:-1], blocks[:, 2:]
    return tf.concat([previous, own, following], axis=2)


def in_blocks(values: tf.Tensor, block: int) -> tf.Tensor:
    """[batch, length, ...] (length a multiple of block) as [batch, length / block, block, ...]."""
    shape = tf.shape(values)
    return tf.reshape(values, tf.concat([[shape[0], -1, block], shape[2:]], axis=0))


def local_attention(query: tf.Tensor, key: tf.Tensor, value: tf.Tensor, key_mask: tf.Tensor,
                    document_ids: Optional[tf.Tensor], half_window: int, dropout=None) -> tf.Tensor:
    """Windowed attention [batch, length, heads, head_dim] of query, key, value of that shape (query scaled
    already): blocks of half_window queries against their own and neighbouring blocks. `dropout` (a function
    of the probabilities, or None) drops some of them."""
    block = max(half_window, 1)
    length = tf.shape(query)[1]
    queries = in_blocks(padded_to(query, block), block)  # [batch, blocks, block, heads, head_dim]
    keys, values = (neighbours_with_end(tensor, block) for tensor in (key, value))
    allowed = neighbours_with_end(tf.cast(key_mask, tf.bool), block, value=False)[:, :, None, :]
    allowed = allowed & tf.constant(band(block, half_window))[None, None]  # [batch, blocks, block, 3 x block]
    if document_ids is not None:
        query_documents = in_blocks(padded_to(document_ids, block, value=-1), block)
        key_documents = neighbours_with_end(document_ids, block, value=-1)
        allowed = allowed & tf.equal(query_documents[..., :, None], key_documents[..., None, :])
    scores = tf.cast(tf.einsum("bnqhd,bnkhd->bhnqk", queries, keys), tf.float32)
    probabilities = tf.nn.softmax(scores + tf.where(allowed, 0.0, MASKED)[:, None], axis=-1)
    probabilities = tf.cast(probabilities, value.dtype)
    if dropout is not None:
        probabilities = dropout(probabilities)
    output = tf.einsum("bhnqk,bnkhd->bnqhd", probabilities, values)
    shape = tf.shape(query)
    return tf.reshape(output, tf.concat([[shape[0], -1], shape[2:]], axis=0))[:, :length]


def neighbours_with_end(values: tf.Tensor, block: int, value=0) -> tf.Tensor:
    """`neighbours` of `values` [batch, length, ...] cut into blocks, with a block of `value` before the first
    block and after the last."""
    padded = padded_to(values, block, value=value, before=block)
    padded = tf.pad(padded, [[0, 0], [0, block]] + [[0, 0]] * (len(values.shape) - 2), constant_values=value)
    return neighbours(in_blocks(padded, block))


def global_attention(query: tf.Tensor, key: tf.Tensor, value: tf.Tensor, key_mask: tf.Tensor,
                     document_ids: Optional[tf.Tensor], dropout_rate: float = 0.0, seeds: Optional[tf.Tensor] = None,
                     chunk: int = QUERY_CHUNK) -> tf.Tensor:
    """Attention of every query to every allowed key, [batch, length, heads, head_dim], computed and
    differentiated `chunk` queries at a time (query scaled already). With `dropout_rate` (training), `seeds` (int32
    [batch, 2], one per row) seed the dropped probabilities."""
    length = tf.shape(query)[1]
    chunk = min(chunk, query.shape[1]) if query.shape[1] else chunk
    key_bias = tf.where(tf.cast(key_mask, tf.bool), 0.0, MASKED)[:, None, None, :]  # [batch, 1, 1, keys]
    chunks = chunked(padded_to(query, chunk), chunk)  # [chunks, batch, chunk, heads, head_dim]
    count = tf.shape(chunks)[0]
    documents = None if document_ids is None else chunked(padded_to(document_ids, chunk, value=-1), chunk)

    def probabilities_of(index, queries, keys):
        """The chunk's probabilities [batch, heads, chunk, keys] in float32, and after dropout."""
        scores = tf.cast(tf.einsum("bqhd,bkhd->bhqk", queries, keys), tf.float32) + key_bias
        if documents is not None:
            same = tf.equal(documents[index][:, None, :, None], document_ids[:, None, None, :])
            scores += tf.where(same, 0.0, MASKED)
        probabilities = tf.nn.softmax(scores, axis=-1)
        if not dropout_rate:
            return probabilities, probabilities
        kept = tf.map_fn(lambda row_seed: tf.random.stateless_uniform(tf.shape(probabilities)[1:],
                                                                      row_seed + tf.stack([0, index])),
                         seeds, fn_output_signature=tf.float32) >= dropout_rate
        return probabilities, tf.where(kept, probabilities / (1.0 - dropout_rate), 0.0)

    @tf.custom_gradient
    def attend(chunks, keys, values):
        def forward(index):
            _, dropped = probabilities_of(index, chunks[index], keys)
            return tf.einsum("bhqk,bkhd->bqhd", tf.cast(dropped, values.dtype), values)

        outputs = tf.map_fn(forward, tf.range(count), fn_output_signature=values.dtype)

        def backward(output_gradients):
            """Each chunk's probabilities again, and the softmax's gradient from them (float32)."""
            keys32, values32 = tf.cast(keys, tf.float32), tf.cast(values, tf.float32)
            gradients32 = tf.cast(output_gradients, tf.float32)

            def step(index, key_gradients, value_gradients, query_gradients):
                queries = chunks[index]
                probabilities, dropped = probabilities_of(index, queries, keys)
                value_gradients += tf.einsum("bhqk,bqhd->bkhd", dropped, gradients32[index])
                dropped_gradients = tf.einsum("bqhd,bkhd->bhqk", gradients32[index], values32)
                if dropout_rate:
                    dropped_gradients = tf.where(dropped > 0, dropped_gradients / (1.0 - dropout_rate), 0.0)
                score_gradients = probabilities * (
                    dropped_gradients - tf.reduce_sum(probabilities * dropped_gradients, axis=-1, keepdims=True))
                query_gradients = query_gradients.write(index, tf.einsum("bhqk,bkhd->bqhd", score_gradients, keys32))
                key_gradients += tf.einsum("bhqk,bqhd->bkhd", score_gradients, tf.cast(queries, tf.float32))
                return index + 1, key_gradients, value_gradients, query_gradients

            zeros = tf.zeros_like(keys32)
            _, key_gradients, value_gradients, query_gradients = tf.while_loop(
                lambda index, *_: index < count, step,
                (tf.constant(0), zeros, zeros, tf.TensorArray(tf.float32, size=count, element_shape=chunks.shape[1:])))
            return (tf.cast(query_gradients.stack(), chunks.dtype), tf.cast(key_gradients, keys.dtype),
                    tf.cast(value_gradients, values.dtype))

        return outputs, backward

    outputs = attend(chunks, key, value)  # [chunks, batch, chunk, heads, head_dim]
    return unchunked(outputs)[:, :length]


def chunked(values: tf.Tensor, chunk: int) -> tf.Tensor:
    """[batch, length, ...] (length a multiple of chunk) as [length / chunk, batch, chunk, ...]."""
    blocks = in_blocks(values, chunk)
    return tf.transpose(blocks, [1, 0] + list(range(2, len(blocks.shape))))


def unchunked(chunks: tf.Tensor) -> tf.Tensor:
    """The inverse of `chunked`: [chunks, batch, chunk, ...] as [batch, chunks x chunk, ...]."""
    blocks = tf.transpose(chunks, [1, 0] + list(range(2, len(chunks.shape))))
    shape = tf.shape(blocks)
    return tf.reshape(blocks, tf.concat([[shape[0], shape[1] * shape[2]], shape[3:]], axis=0))
