"""Keras layers around T5's encoder and decoder for prompt tuning: the encoder reads the virtual tokens before
the input's embeddings (attended like any token), and the decoder's cross-attention sees them too, as PEFT runs
a T5 (`inputs_embeds` with the prompt first, the attention mask extended with ones)."""

import tensorflow as tf
import tf_keras as keras


def with_ones_before(mask, count: int):
    """A [batch, length] attention mask with `count` ones before it."""
    return tf.concat([tf.ones([tf.shape(mask)[0], count], mask.dtype), mask], axis=1)


class PromptedEncoder(keras.layers.Layer):
    """T5's encoder (frozen) with `prompt_embeddings` [virtual tokens, d_model] before every input."""

    def __init__(self, base, embeddings, num_virtual_tokens: int, **kwargs):
        super().__init__(name="prompted_encoder", **kwargs)
        self.base_layer = base
        self.num_virtual_tokens = num_virtual_tokens
        self.prompt_embeddings = self.add_weight("prompt_embeddings", shape=embeddings.shape,
                                                 initializer=keras.initializers.Constant(embeddings))

    @property
    def delta_weights(self):
        return [self.prompt_embeddings]

    def call(self, input_ids=None, attention_mask=None, inputs_embeds=None, training=False, **kwargs):
        if inputs_embeds is None:
            inputs_embeds = self.base_layer.embed_tokens(input_ids)
        batch = tf.shape(inputs_embeds)[0]
        prompt = tf.tile(tf.cast(self.prompt_embeddings, inputs_embeds.dtype)[None], [batch, 1, 1])
        if attention_mask is None:
            attention_mask = tf.ones(tf.shape(inputs_embeds)[:2], tf.int32)
        return self.base_layer(None, attention_mask=with_ones_before(attention_mask, self.num_virtual_tokens),
                               inputs_embeds=tf.concat([prompt, inputs_embeds], axis=1), training=training, **kwargs)


class PromptAwareDecoder(keras.layers.Layer):
    """T5's decoder (frozen), its cross-attention mask extended over the encoder's virtual tokens."""

    def __init__(self, base, num_virtual_tokens: int, **kwargs):
        super().__init__(name="prompt_aware_decoder", **kwargs)
        self.base_layer = base
        self.num_virtual_tokens = num_virtual_tokens

    delta_weights = ()

    def call(self, input_ids=None, encoder_attention_mask=None, training=False, **kwargs):
        if encoder_attention_mask is not None:
            encoder_attention_mask = with_ones_before(encoder_attention_mask, self.num_virtual_tokens)
        return self.base_layer(input_ids, encoder_attention_mask=encoder_attention_mask, training=training, **kwargs)
