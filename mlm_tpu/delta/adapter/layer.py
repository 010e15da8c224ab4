"""Keras layers adding a bottleneck adapter to T5's sub-layers, computing what AdapterHub's T5 does: with h the
sub-layer's output (after its dropout) and x its input, x + h + up(act(down(z))), z = x + h for Pfeiffer
(`original_ln_before`), z = h for Houlsby."""

import tensorflow as tf
import tf_keras as keras

ACTIVATIONS = {"relu": tf.nn.relu, "swish": tf.nn.silu}


def linear_start():
    """PyTorch Linear's start, uniform within sqrt(3 x 1/3 / fan in); a new instance for each layer (Keras gives an
    unseeded instance's every call the same values)."""
    return keras.initializers.VarianceScaling(1 / 3, "fan_in", "uniform")


class Bottleneck(keras.layers.Layer):
    """down (d -> d / reduction, bias), the activation, up (back to d, bias, zero at first: the adapter adds
    nothing until trained). Started as AdapterHub's `mam_adapter`: down as PyTorch's Linear (kaiming_uniform_ with
    a = sqrt(5): uniform within 1/sqrt(d)), its bias 0."""

    def __init__(self, width: int, bottleneck: int, activation: str, **kwargs):
        super().__init__(name="bottleneck", **kwargs)
        self.activation = ACTIVATIONS[activation]
        self.adapter_down = keras.layers.Dense(bottleneck, name="adapter_down",
                                               kernel_initializer=linear_start())
        self.adapter_up = keras.layers.Dense(width, name="adapter_up", kernel_initializer="zeros")
        self.adapter_down.build([None, None, width])
        self.adapter_up.build([None, None, bottleneck])

    def call(self, inputs):
        return self.adapter_up(self.activation(self.adapter_down(inputs)))


class AdaptedFeedForward(keras.layers.Layer):
    """TFT5LayerFF (frozen) followed by an adapter."""

    def __init__(self, base, bottleneck: Bottleneck, input_in_adapter: bool, **kwargs):
        super().__init__(name=f"{base.name}_adapted", **kwargs)
        self.base_layer, self.bottleneck, self.input_in_adapter = base, bottleneck, input_in_adapter

    @property
    def delta_weights(self):
        return self.bottleneck.trainable_weights

    def call(self, hidden_states, training=False):
        base = self.base_layer
        output = base.dropout(base.DenseReluDense(base.layer_norm(hidden_states), training=training),
                              training=training)
        adapted = self.bottleneck(hidden_states + output if self.input_in_adapter else output)
        return hidden_states + output + adapted


class AdaptedSelfAttention(keras.layers.Layer):
    """TFT5LayerSelfAttention (frozen) followed by an adapter (Houlsby's first one)."""

    def __init__(self, base, bottleneck: Bottleneck, **kwargs):
        super().__init__(name=f"{base.name}_adapted", **kwargs)
        self.base_layer, self.bottleneck = base, bottleneck

    @property
    def delta_weights(self):
        return self.bottleneck.trainable_weights

    def call(self, hidden_states, attention_mask=None, position_bias=None, layer_head_mask=None, past_key_value=None,
             use_cache=False, output_attentions=False, training=False):
        base = self.base_layer
        attention = base.SelfAttention(base.layer_norm(hidden_states), mask=attention_mask,
                                       position_bias=position_bias, layer_head_mask=layer_head_mask,
                                       past_key_value=past_key_value, use_cache=use_cache,
                                       output_attentions=output_attentions, training=training)
        output = base.dropout(attention[0], training=training)
        return (hidden_states + output + self.bottleneck(output),) + tuple(attention[1:])
