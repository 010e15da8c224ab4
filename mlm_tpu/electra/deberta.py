"""DeBERTa-v3 on the ELECTRA line (He, Gao, Chen, ICLR 2023, arXiv 2111.09543): the discriminator is a DeBERTa-v2
encoder (transformers' TFDebertaV2Model, the class the released checkpoints load as) with DeBERTa's replaced-token
head, the generator a TFDebertaV2ForMaskedLM of the discriminator's width and half its depth.

The shapes are microsoft/DeBERTa's `experiments/language_model/rtd_{xsmall,small,base,large}.json` (relative
attention with 256 log buckets, shared attention keys, `p2c|c2p`, no absolute positions, no token types, LayerNorm
eps 1e-7); the head is `DeBERTa/apps/models/replaced_token_detection_model.py`'s LMMaskPredictionHead: LayerNorm of
each token's state plus the first token's, a dense layer, the activation, one logit. transformers has no class for
it, so the discriminator's folder holds the encoder as a DebertaV2Model (what fine-tuning and transformers 5 load)
and the head apart, in HEAD_FILE, under the names microsoft/DeBERTa gives it: a run continues from its own output
with its head, and every other reader ignores the file.
"""

import os
from dataclasses import dataclass
from typing import Optional

import numpy as np
import tensorflow as tf
import tf_keras as keras
from transformers import DebertaV2Config, TFDebertaV2ForMaskedLM, TFDebertaV2Model
from transformers.modeling_tf_utils import get_initializer
from transformers.utils import ModelOutput

from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.configs import load_config

MODEL_TYPE = "deberta-v2"  # DeBERTa-v3's checkpoints are of transformers' deberta-v2 type
HEAD_FILE = "replaced_token_head.safetensors"
HEAD_PREFIX = "mask_predictions"  # microsoft/DeBERTa's name of the head (ReplacedTokenDetectionModel)

V3 = dict(relative_attention=True, position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True,
          pos_att_type=["p2c", "c2p"], position_biased_input=False, type_vocab_size=0, layer_norm_eps=1e-7,
          max_relative_positions=-1, max_position_embeddings=512, hidden_act="gelu")
PRESETS = {  # the discriminator's hidden size, layers, heads and feed-forward (rtd_*.json; the generator: half depth)
    "deberta-v3-tiny": dict(V3, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
                            position_buckets=32),
    "deberta-v3-xsmall": dict(V3, hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
                              intermediate_size=1536),
    "deberta-v3-small": dict(V3, hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
                             intermediate_size=3072),
    "deberta-v3-base": dict(V3, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                            intermediate_size=3072),
    "deberta-v3-large": dict(V3, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                             intermediate_size=4096),
}


def is_deberta_preset(name: Optional[str]) -> bool:
    return bool(name) and name in PRESETS


def discriminator_config(name_or_path: str, tokenizer, max_length: int, overrides: Optional[str] = None):
    """The discriminator's configuration (a preset or a deberta-v2 config.json, with --config-overrides), fitted to
    the tokenizer and the example length."""
    config = load_config(name_or_path, PRESETS, DebertaV2Config, overrides=overrides)
    config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id
    config.max_position_embeddings = max(config.max_position_embeddings, max_length)
    return config


def generator_config(discriminator: DebertaV2Config) -> DebertaV2Config:
    """The generator's: the discriminator's width and half its layers, as rtd_*.json have it (6 of 12, 3 of 6,
    12 of 24)."""
    config = DebertaV2Config(**discriminator.to_dict())
    config.num_hidden_layers = max(1, discriminator.num_hidden_layers // 2)
    config.architectures = None
    return config


@dataclass
class DiscriminatorOutput(ModelOutput):
    """`logits` [batch, length]: each token's logit of having been replaced."""

    logits: Optional[tf.Tensor] = None
    last_hidden_state: Optional[tf.Tensor] = None


class ReplacedTokenHead(keras.layers.Layer):
    """microsoft/DeBERTa's LMMaskPredictionHead: LayerNorm(h + h[first token]), dense, activation, one logit."""

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        from transformers.modeling_tf_utils import get_tf_activation

        self.hidden_size = config.hidden_size
        self.LayerNorm = keras.layers.LayerNormalization(epsilon=config.layer_norm_eps, name="LayerNorm")
        self.dense = keras.layers.Dense(config.hidden_size, kernel_initializer=get_initializer(
            config.initializer_range), name="dense")
        self.activation = get_tf_activation(config.hidden_act)
        self.classifer = keras.layers.Dense(1, kernel_initializer=get_initializer(config.initializer_range),
                                            name="classifer")  # microsoft/DeBERTa's spelling, kept in the names

    def build(self, input_shape=None):
        for layer, width in ((self.LayerNorm, self.hidden_size), (self.dense, self.hidden_size),
                             (self.classifer, self.hidden_size)):
            with tf.name_scope(layer.name):
                layer.build([None, None, width])
        self.built = True

    def call(self, hidden_states):
        states = self.LayerNorm(hidden_states[:, :1] + hidden_states)
        return tf.squeeze(self.classifer(self.activation(self.dense(states))), -1)

    def named_weights(self):
        """{PyTorch name: (variable, transposed?)} as microsoft/DeBERTa names the head's weights."""
        return {f"{HEAD_PREFIX}.LayerNorm.weight": (self.LayerNorm.gamma, False),
                f"{HEAD_PREFIX}.LayerNorm.bias": (self.LayerNorm.beta, False),
                f"{HEAD_PREFIX}.dense.weight": (self.dense.kernel, True),
                f"{HEAD_PREFIX}.dense.bias": (self.dense.bias, False),
                f"{HEAD_PREFIX}.classifer.weight": (self.classifer.kernel, True),
                f"{HEAD_PREFIX}.classifer.bias": (self.classifer.bias, False)}


class DebertaDiscriminator(keras.Model):
    """A DeBERTa-v2 encoder and the replaced-token head, called as ELECTRA's discriminator is (input ids, or the
    embeddings GDES makes: `inputs_embeds`)."""

    def __init__(self, encoder: TFDebertaV2Model):
        super().__init__(name="deberta_discriminator")
        self.encoder = with_keyed_dropout(encoder)
        self.head = ReplacedTokenHead(encoder.config, name="replaced_token_head")
        self.config = encoder.config

    def get_input_embeddings(self):
        return self.encoder.get_input_embeddings()

    def build_in_name_scope(self) -> None:
        self.encoder.build_in_name_scope()
        with tf.name_scope(self.head.name):
            self.head.build()
        self.built = True

    def call(self, input_ids=None, attention_mask=None, inputs_embeds=None, training=False) -> DiscriminatorOutput:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
                              training=training).last_hidden_state
        return DiscriminatorOutput(logits=self.head(hidden), last_hidden_state=hidden)

    def save_head(self, folder: str) -> None:
        from safetensors.numpy import save_file

        save_file({name: np.ascontiguousarray(variable.numpy().T if transposed else variable.numpy())
                   for name, (variable, transposed) in self.head.named_weights().items()},
                  os.path.join(folder, HEAD_FILE))  # safetensors writes a transposed view's memory as it lies

    def load_head(self, folder: str) -> bool:
        """The head's weights from `folder`'s HEAD_FILE; False where it has none (the head stays new)."""
        path = os.path.join(folder, HEAD_FILE)
        if not os.path.isfile(path):
            return False
        from safetensors.numpy import load_file

        saved = load_file(path)
        for name, (variable, transposed) in self.head.named_weights().items():
            value = saved.get(name)
            value = None if value is None else (value.T if transposed else value)
            if value is None or tuple(value.shape) != tuple(variable.shape):
                raise UserError(f"{path} holds no {name} of shape {tuple(variable.shape)}: it is not the "
                                "replaced-token head of this discriminator; delete it to start a new head")
            variable.assign(value)
        return True


class TableDropout(keras.layers.Dropout):
    """Dropout of DeBERTa's relative-position table (`pos_dropout`), which has no rows of the batch: keyed by the
    step and the layer alone (training/dropout.py's seed_for_table, where the trainer keys dropout), the whole table
    at once, so a resumed run drops what the uninterrupted one dropped, and every replica what one replica drops."""

    def call(self, inputs, training=None):
        keys = getattr(self._random_generator, "keys", None)
        if not training or keys is None or not self.rate:
            return super().call(inputs, training=training)
        seed = keys.seed_for_table(self._random_generator.layer)
        return tf.nn.experimental.stateless_dropout(inputs, rate=self.rate, seed=seed)


def with_keyed_dropout(model):
    """`model` with every DeBERTa StableDropout replaced by a Keras Dropout of its rate (the same function: inverted
    dropout, its gradient masked alike). StableDropout draws from a stateful Bernoulli that no checkpoint holds, so a
    resumed run would drop other units than the uninterrupted one; a Keras Dropout is what training/dropout.py keys
    by (seed, step, pipeline, layer)."""
    from transformers.models.deberta_v2.modeling_tf_deberta_v2 import TFDebertaV2StableDropout

    for layer in list(model.submodules):
        for name, value in list(vars(layer).items()):
            if isinstance(value, TFDebertaV2StableDropout):
                dropout = TableDropout if name == "pos_dropout" else keras.layers.Dropout
                setattr(layer, name, dropout(value.drop_prob, name=value.name))
    return model


def new_discriminator(config) -> DebertaDiscriminator:
    return DebertaDiscriminator(TFDebertaV2Model(config))


def new_generator(config) -> TFDebertaV2ForMaskedLM:
    return with_keyed_dropout(TFDebertaV2ForMaskedLM(config))
