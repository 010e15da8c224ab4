"""ModernBERT's building blocks in Keras 2, each named after transformers 5's module (modeling_modernbert.py), so
that a weight's place in the model is its PyTorch name (weights.py's table): `embeddings` (`tok_embeddings`,
`norm`), an encoder layer (`attn_norm`, `attn` with `Wqkv` and `Wo`, `mlp_norm`, `mlp` with `Wi` and `Wo`), and
the prediction `head` (`dense`, `norm`).

Attention runs in blocks (local layers) and query chunks (global layers), attention.py: every shape is static, so
XLA compiles it for TPUs, and nothing grows with the square of the row. Softmax and the rotary embedding run in
float32 whatever the compute type, as transformers' eager attention does.
"""

import math
from typing import Callable, Optional

import numpy as np
import tensorflow as tf
import tf_keras as keras

from mlm_tpu.modernbert.attention import global_attention, local_attention
from mlm_tpu.modernbert.config import LOCAL, ModernBertConfig


class CutoffNormal(keras.initializers.Initializer):
    """A normal distribution cut at ±cutoff standard deviations and not renormalised, as transformers'
    `init.trunc_normal_(std, a=-cutoff*std, b=cutoff*std)` draws ModernBERT's weights (Keras' TruncatedNormal
    always cuts at 2): the inverse normal CDF of a uniform draw between the two cut points' probabilities."""

    def __init__(self, stddev: float, cutoff: float = 2.0, seed: Optional[int] = None):
        self.stddev = stddev
        self.cutoff = cutoff
        self.seed = seed

    def __call__(self, shape, dtype=None, **kwargs):
        low = 0.5 * math.erfc(self.cutoff / math.sqrt(2.0))
        # Keras' own draw, which (unlike tf.random.uniform unseeded) runs under op determinism (evaluate's)
        uniform = keras.initializers.RandomUniform(low, 1.0 - low, seed=self.seed)(shape, dtype=tf.float32)
        return tf.cast(tf.math.ndtri(uniform) * self.stddev, dtype or tf.float32)

    def get_config(self):
        return {"stddev": self.stddev, "cutoff": self.cutoff, "seed": self.seed}


def activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """transformers' ACT2FN for the names config.py accepts: "gelu" is the exact (erf) GELU."""
    if name == "gelu":
        return lambda x: tf.nn.gelu(x, approximate=False)
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return lambda x: tf.nn.gelu(x, approximate=True)
    return tf.nn.relu if name == "relu" else tf.nn.silu


def initializer_stds(config: ModernBertConfig) -> dict:
    """The standard deviations of ModernBertPreTrainedModel._init_weights: inputs of a block, its outputs (scaled
    by the depth), the embeddings and a classifier's last layer."""
    return {"in": config.initializer_range,
            "out": config.initializer_range / math.sqrt(2.0 * config.num_hidden_layers),
            "embedding": config.initializer_range,
            "final_out": config.hidden_size ** -0.5}


def initializer(config: ModernBertConfig, kind: str) -> CutoffNormal:
    return CutoffNormal(initializer_stds(config)[kind], config.initializer_cutoff_factor)


def dense(config: ModernBertConfig, units: int, use_bias: bool, kind: str, name: str, **kwargs) -> keras.layers.Dense:
    return keras.layers.Dense(units, use_bias=use_bias, kernel_initializer=initializer(config, kind), name=name,
                              **kwargs)


def layer_norm(config: ModernBertConfig, name: str) -> keras.layers.LayerNormalization:
    """nn.LayerNorm(eps=norm_eps, bias=norm_bias): its weight is Keras' gamma, its bias (if any) beta."""
    return keras.layers.LayerNormalization(epsilon=config.norm_eps, center=config.norm_bias, name=name)


class ModernBertEmbeddings(keras.layers.Layer):
    """Token embeddings, a norm and dropout; no position table (positions enter through the rotary embedding)."""

    def __init__(self, config: ModernBertConfig, **kwargs):
        super().__init__(name="embeddings", **kwargs)
        self.tok_embeddings = keras.layers.Embedding(config.vocab_size, config.hidden_size,
                                                     embeddings_initializer=initializer(config, "embedding"),
                                                     name="tok_embeddings")
        self.norm = layer_norm(config, "norm")
        self.drop = keras.layers.Dropout(config.embedding_dropout, name="drop")

    def call(self, input_ids, training=False):
        return self.drop(self.norm(self.tok_embeddings(input_ids)), training=training)


def rotary_cos_sin(position_ids: tf.Tensor, head_dim: int, theta: float):
    """cos and sin [batch, length, head_dim] of ModernBertRotaryEmbedding (default type) at `position_ids`, in
    float32: inverse frequencies theta^(-2i/d), each used for both halves of the head."""
    inverse = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    frequencies = tf.cast(position_ids, tf.float32)[..., None] * tf.constant(inverse, tf.float32)
    angles = tf.concat([frequencies, frequencies], axis=-1)
    return tf.cos(angles), tf.sin(angles)


def rotate(x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor) -> tf.Tensor:
    """apply_rotary_pos_emb on x [batch, length, heads, head_dim] in float32, cast back to x's type."""
    values = tf.cast(x, tf.float32)
    first, second = tf.split(values, 2, axis=-1)
    rotated = values * cos[:, :, None, :] + tf.concat([-second, first], axis=-1) * sin[:, :, None, :]
    return tf.cast(rotated, x.dtype)


class ModernBertAttention(keras.layers.Layer):
    """Fused query, key and value (`Wqkv`: [q | k | v], each heads x head_dim), rotary positions on q and k, the
    layer type's attention (attention.py: blocked within the window, or chunked over the row) under the attention
    mask and the row's documents, and the output projection `Wo`."""

    def __init__(self, config: ModernBertConfig, attention_type: str, **kwargs):
        super().__init__(name="attn", **kwargs)
        self.heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.attention_type = attention_type
        self.sliding_window = config.sliding_window
        self.dropout_rate = config.attention_dropout
        self.Wqkv = dense(config, 3 * config.hidden_size, config.attention_bias, "in", "Wqkv")
        self.Wo = dense(config, config.hidden_size, config.attention_bias, "out", "Wo")
        self.attention_drop = keras.layers.Dropout(config.attention_dropout, name="attention_drop")
        self.out_drop = keras.layers.Dropout(config.attention_dropout, name="out_drop")

    def call(self, hidden_states, cos, sin, key_mask, document_ids=None, training=False):
        length = tf.shape(hidden_states)[1]
        qkv = tf.reshape(self.Wqkv(hidden_states), [-1, length, 3, self.heads, self.head_dim])
        query, key, value = tf.unstack(qkv, axis=2)
        query, key = rotate(query, cos, sin), rotate(key, cos, sin)
        query = query * tf.cast(self.head_dim ** -0.5, query.dtype)
        if self.attention_type == LOCAL:
            dropout = (lambda probabilities: self.attention_drop(probabilities, training=training))
            output = local_attention(query, key, value, key_mask, document_ids, self.sliding_window,
                                     dropout if training and self.dropout_rate else None)
        else:
            dropping = bool(training and self.dropout_rate)
            output = global_attention(query, key, value, key_mask, document_ids,
                                      self.dropout_rate if dropping else 0.0,
                                      self.dropout_seeds(tf.shape(query)[0]) if dropping else None)
        output = tf.reshape(output, [-1, length, self.heads * self.head_dim])
        return self.out_drop(self.Wo(output), training=training)

    def dropout_seeds(self, rows: tf.Tensor) -> tf.Tensor:
        """Seeds [rows, 2] for the global layer's dropped probabilities: 62 fair bits per row drawn by the dropout
        layer's own generator, so each row gets what training/dropout.py keys it by (a resumed run, or one on more
        workers, drops what the uninterrupted run dropped)."""
        generator = self.attention_drop._random_generator
        generator._maybe_init()
        bits = generator.dropout(tf.ones(tf.stack([rows, 2, 31])), 0.5) > 0
        return tf.reduce_sum(tf.cast(bits, tf.int32) * tf.constant(2 ** np.arange(31), tf.int32), axis=-1)


class ModernBertMLP(keras.layers.Layer):
    """GeGLU: `Wi` gives the input half then the gate half; act(input) * gate, dropout, `Wo`."""

    def __init__(self, config: ModernBertConfig, **kwargs):
        super().__init__(name="mlp", **kwargs)
        self.Wi = dense(config, 2 * config.intermediate_size, config.mlp_bias, "in", "Wi")
        self.act = activation(config.hidden_activation)
        self.drop = keras.layers.Dropout(config.mlp_dropout, name="drop")
        self.Wo = dense(config, config.hidden_size, config.mlp_bias, "out", "Wo")

    def call(self, hidden_states, training=False):
        values, gate = tf.split(self.Wi(hidden_states), 2, axis=-1)
        return self.Wo(self.drop(self.act(values) * gate, training=training))


class ModernBertEncoderLayer(keras.layers.Layer):
    """Pre-norm: x + attn(attn_norm(x)), then x + mlp(mlp_norm(x)); layer 0's attn_norm is the identity (None
    here: it has no weights), since the embeddings end with a norm."""

    def __init__(self, config: ModernBertConfig, index: int, **kwargs):
        super().__init__(name=f"layers.{index}", **kwargs)
        self.attention_type = config.layer_types[index]
        self.attn_norm = layer_norm(config, "attn_norm") if index else None
        self.attn = ModernBertAttention(config, self.attention_type)
        self.mlp_norm = layer_norm(config, "mlp_norm")
        self.mlp = ModernBertMLP(config)

    def call(self, hidden_states, cos, sin, key_mask, document_ids=None, training=False):
        normed = self.attn_norm(hidden_states) if self.attn_norm is not None else hidden_states
        hidden_states = hidden_states + self.attn(normed, cos, sin, key_mask, document_ids, training=training)
        return hidden_states + self.mlp(self.mlp_norm(hidden_states), training=training)


class ModernBertPredictionHead(keras.layers.Layer):
    """dense (bias if classifier_bias), the classifier activation, norm: before the decoder of the masked LM and
    before the classifier of the classification heads."""

    def __init__(self, config: ModernBertConfig, **kwargs):
        super().__init__(name="head", **kwargs)
        self.dense = dense(config, config.hidden_size, config.classifier_bias, "out", "dense")
        self.act = activation(config.classifier_activation)
        self.norm = layer_norm(config, "norm")

    def call(self, hidden_states):
        return self.norm(self.act(self.dense(hidden_states)))


class ModernBertDecoder(keras.layers.Layer):
    """The projection onto the vocabulary: the token embeddings' transpose when tie_word_embeddings (transformers
    5 ties `decoder.weight` to them), else its own kernel; then its bias when decoder_bias. The logits are float32
    under mixed precision too (the loss's softmax over the vocabulary wants it)."""

    def __init__(self, config: ModernBertConfig, embeddings: keras.layers.Embedding, **kwargs):
        super().__init__(name="decoder", **kwargs)
        self.config = config
        self.embeddings = embeddings if config.tie_word_embeddings else None

    def build(self, input_shape):
        config = self.config
        self.kernel = None if self.embeddings is not None else self.add_weight(
            "weight", shape=[config.vocab_size, config.hidden_size], initializer=initializer(config, "out"))
        self.bias = self.add_weight("bias", shape=[config.vocab_size], initializer="zeros",
                                    experimental_autocast=False) if config.decoder_bias else None
        super().build(input_shape)

    def call(self, hidden_states):
        weight = self.embeddings.embeddings if self.embeddings is not None else self.kernel
        # one 2-D matmul: einsum's "...h,vh->...v" would broadcast the weight's gradient over every position
        flat = tf.reshape(hidden_states, [-1, self.config.hidden_size])
        logits = tf.matmul(flat, tf.cast(weight, flat.dtype), transpose_b=True)
        logits = tf.reshape(tf.cast(logits, tf.float32),
                            tf.concat([tf.shape(hidden_states)[:-1], [self.config.vocab_size]], axis=0))
        return logits + self.bias if self.bias is not None else logits
