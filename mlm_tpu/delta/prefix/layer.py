"""The Keras layer around one of T5's decoder self-attention layers for prefix tuning: its keys and values begin
with the prefix's, every query attends to them, and the cache it hands back (generation) leaves them out, so the
decoder's own bookkeeping of lengths and masks is unchanged. Query positions count from the prefix's end, as
PyTorch T5 numbers them behind a cache of the prefix's length (TF T5 finds the same offset from the last filled
cache entry)."""

import tensorflow as tf
import tf_keras as keras


class PrefixedSelfAttention(keras.layers.Layer):
    def __init__(self, base, table, key_row: int, value_row: int, **kwargs):
        super().__init__(name=f"{base.name}_prefixed", **kwargs)
        self.base_layer = base
        self.table = table  # the PrefixTable layer holding every layer's prefix
        self.key_row, self.value_row = key_row, value_row

    delta_weights = ()

    def _prefix(self, row: int, batch, dtype):
        """[batch, heads, virtual tokens, head size]: row `row` of the table's [tokens, 2 x layers, heads, size]."""
        states = tf.transpose(tf.cast(self.table.rows(row), dtype), [1, 0, 2])
        return tf.tile(states[None], [batch, 1, 1, 1])

    def call(self, hidden_states, mask=None, past_key_value=None, training=False, **kwargs):
        batch, count = tf.shape(hidden_states)[0], self.table.num_virtual_tokens
        keys = self._prefix(self.key_row, batch, hidden_states.dtype)
        values = self._prefix(self.value_row, batch, hidden_states.dtype)
        if past_key_value is not None:
            keys = tf.concat([keys, past_key_value[0]], axis=2)
            values = tf.concat([values, past_key_value[1]], axis=2)
        if mask is not None:  # additive [batch, 1, queries, keys]: 0 lets the queries see the prefix
            mask = tf.pad(mask, [[0, 0], [0, 0], [0, 0], [count, 0]])
        if past_key_value is None and kwargs.get("position_bias") is None:
            kwargs["position_bias"] = self._position_bias(tf.shape(hidden_states)[1], count, mask)
        outputs = self.base_layer(hidden_states, mask=mask, past_key_value=(keys, values), training=training,
                                  **kwargs)
        present = outputs[1]
        if present is not None:
            present = (present[0][:, :, count:], present[1][:, :, count:])
        return (outputs[0], present) + tuple(outputs[2:])

    def _position_bias(self, length, count, mask):
        """The first layer's relative position bias (and the mask) for `length` queries after `count` prefix
        positions, computed here: T5's own way to find the offset (a dynamic slice) has no gradient.

        A query sees its own keys at their distance in the row, and the prefix as far away as from its position in
        its example: alone, PEFT's prefix comes right before the example's first token. In packed rows (--pack, the
        decoder's causal mask block-diagonal) a query's example starts at the first key the mask lets it see."""
        base = self.base_layer
        if not base.has_relative_attention_bias:
            bias = tf.zeros((1, base.n_heads, length, length + count))
            return bias if mask is None else tf.cast(bias, mask.dtype) + mask
        queries = tf.range(length)[None, :, None]  # [1, queries, 1]: each query's position in the row
        in_example = queries
        if mask is not None:  # additive [batch, 1, queries, prefix + keys]: 0 where the query sees the key
            seen = tf.cast(tf.equal(mask[:, 0, :, count:], 0), tf.int32)
            in_example = queries - tf.argmax(seen, axis=-1, output_type=tf.int32)[:, :, None]
        keys = tf.range(-count, length)[None, None, :]  # the prefix at -count .. -1, right before position 0
        relative = keys - tf.where(keys < 0, in_example, queries)
        bucket = base._relative_position_bucket(relative, bidirectional=False,
                                                num_buckets=base.relative_attention_num_buckets,
                                                max_distance=base.relative_attention_max_distance)
        bias = tf.transpose(tf.gather(base.relative_attention_bias, bucket), [0, 3, 1, 2])  # [b, heads, q, keys]
        return bias if mask is None else tf.cast(bias, mask.dtype) + mask


class PrefixTable(keras.layers.Layer):
    """PEFT's prefix weight, `prompt_embeddings` [virtual tokens, 2 x layers x heads x head size]."""

    def __init__(self, num_virtual_tokens: int, rows: int, heads: int, head_size: int, **kwargs):
        super().__init__(name="prefix_table", **kwargs)
        self.num_virtual_tokens, self.shape = num_virtual_tokens, (rows, heads, head_size)
        self.prompt_embeddings = self.add_weight("prompt_embeddings", shape=(num_virtual_tokens,
                                                                               rows * heads * head_size),
                                                 initializer=keras.initializers.RandomNormal(stddev=1.0))

    @property
    def delta_weights(self):
        return [self.prompt_embeddings]

    def rows(self, row: int):
        """[virtual tokens, heads, head size]."""
        return tf.reshape(self.prompt_embeddings, (self.num_virtual_tokens, *self.shape))[:, row]
