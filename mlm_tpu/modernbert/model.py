"""ModernBERT's encoder and its heads as Keras 2 models, the functions transformers 5's `ModernBertModel`,
`ModernBertForMaskedLM`, `ModernBertForSequenceClassification` and `ModernBertForTokenClassification` compute, on
the same weights (weights.py maps them by name).

`build(config, head)` makes one of them; `HEADS` names the heads as a family registry asks for them. Each model
takes transformers' inputs (`input_ids`, `attention_mask`), plus:
- `document_ids` [batch, length] for packed rows: attention stays within each document and its rotary positions
  restart (masks.py);
- `position_ids`, to give the positions outright, as transformers' models take them;
- the masked LM's `masked_positions` [batch, slots]: the head and decoder run at those positions only (the sparse
  prediction of mlm/sparse_head.py and ModernBERT's own `sparse_prediction`), giving logits [batch, slots, vocab];
- `labels`: the loss transformers' TF classes compute (their hf_compute_loss), in `.loss`.
Outputs are transformers' TF output classes (`.logits`, `.hidden_states`: the embeddings' output, then each
layer's, the last one after the final norm, as transformers 5 records them).
"""

from typing import Dict, Optional

import tensorflow as tf
import tf_keras as keras
from transformers.modeling_tf_outputs import (TFBaseModelOutput, TFMaskedLMOutput, TFSequenceClassifierOutput,
                                              TFTokenClassifierOutput)
from transformers.modeling_tf_utils import (TFMaskedLanguageModelingLoss, TFSequenceClassificationLoss,
                                            TFTokenClassificationLoss)

from mlm_tpu.modernbert import masks
from mlm_tpu.modernbert.config import GLOBAL, ModernBertConfig
from mlm_tpu.modernbert.layers import (ModernBertDecoder, ModernBertEmbeddings, ModernBertEncoderLayer,
                                       ModernBertPredictionHead, dense, layer_norm, rotary_cos_sin)

INPUTS = ("input_ids", "attention_mask", "document_ids", "position_ids")


class ModernBertModel(keras.layers.Layer):
    """Embeddings, the encoder layers (`layers.i`; `encoder_layers` here, `layers` being Keras' own word) and the
    final norm. Each layer type's rotary table is made once per call and shared by its layers; the attention mask and
    document ids go to every layer as they are (attention.py builds its masks per block from them)."""

    def __init__(self, config: ModernBertConfig, **kwargs):
        super().__init__(name="model", **kwargs)
        self.config = config
        self.embeddings = ModernBertEmbeddings(config)
        self.encoder_layers = [ModernBertEncoderLayer(config, index) for index in range(config.num_hidden_layers)]
        self.final_norm = layer_norm(config, "final_norm")

    def call(self, input_ids, attention_mask=None, document_ids=None, position_ids=None, training=False,
             output_hidden_states=False):
        config = self.config
        if attention_mask is None:
            attention_mask = tf.ones_like(input_ids)
        if position_ids is None:
            position_ids = masks.position_ids(input_ids, document_ids)
        rotary = {kind: rotary_cos_sin_of(config, position_ids, kind) for kind in set(config.layer_types)}
        hidden_states = self.embeddings(input_ids, training=training)
        all_hidden_states = [hidden_states]
        for layer in self.encoder_layers:
            cos, sin = rotary[layer.attention_type]
            hidden_states = layer(hidden_states, cos, sin, attention_mask, document_ids, training=training)
            all_hidden_states.append(hidden_states)
        last_hidden_state = self.final_norm(hidden_states)
        all_hidden_states[-1] = last_hidden_state  # transformers 5's capture_outputs ties the last to it
        return TFBaseModelOutput(last_hidden_state=last_hidden_state,
                                 hidden_states=tuple(all_hidden_states) if output_hidden_states else None)


def rotary_cos_sin_of(config: ModernBertConfig, position_ids, kind: str):
    theta = config.global_rope_theta if kind == GLOBAL else config.local_rope_theta
    return rotary_cos_sin(position_ids, config.head_dim, theta)


class ModernBertPreTrainedModel(keras.Model):
    """What the heads share: the encoder as `model` (transformers' `base_model_prefix`), its inputs, and the class
    name transformers 5 loads the saved folder with (`architecture`)."""

    architecture = "ModernBertModel"
    base_model_prefix = "model"

    def __init__(self, config: ModernBertConfig, **kwargs):
        super().__init__(name=self.architecture, **kwargs)
        self.config = config
        self.model = ModernBertModel(config)

    def encode(self, inputs: Dict[str, tf.Tensor], training: bool, output_hidden_states: bool) -> TFBaseModelOutput:
        return self.model(inputs["input_ids"], **{name: inputs.get(name) for name in INPUTS[1:]},
                          training=training, output_hidden_states=output_hidden_states)

    def loss_of(self, inputs: Dict[str, tf.Tensor], logits: tf.Tensor) -> Optional[tf.Tensor]:
        """The head's transformers TF loss (its hf_compute_loss) where the inputs hold labels."""
        return None if inputs.get("labels") is None else self.hf_compute_loss(inputs["labels"], logits)

    def dummy_inputs_for_build(self) -> Dict[str, tf.Tensor]:
        return {"input_ids": tf.zeros([1, 2], tf.int32), "attention_mask": tf.ones([1, 2], tf.int32)}

    def build_in_name_scope(self) -> None:
        """Make the weights, as transformers' TF models' method of this name does (the trainer calls it)."""
        if not self.built:
            self(self.dummy_inputs_for_build(), training=False)


def inputs_of(input_ids, **named) -> Dict[str, tf.Tensor]:
    """transformers' two calling conventions: a dict of inputs first, or keyword arguments."""
    if isinstance(input_ids, dict):
        return {**input_ids, **{name: value for name, value in named.items() if value is not None}}
    return {"input_ids": input_ids, **named}


class ModernBertEncoder(ModernBertPreTrainedModel):
    """The bare encoder (transformers' ModernBertModel, whose weights have no `model.` prefix)."""

    base_model_prefix = ""

    def call(self, input_ids=None, attention_mask=None, document_ids=None, position_ids=None, training=False,
             output_hidden_states=False):
        inputs = inputs_of(input_ids, attention_mask=attention_mask, document_ids=document_ids,
                           position_ids=position_ids)
        return self.encode(inputs, training, output_hidden_states)


class ModernBertForMaskedLM(TFMaskedLanguageModelingLoss, ModernBertPreTrainedModel):
    """The encoder, `head` and the `decoder` (tied to the token embeddings, with its bias); with `labels`, the loss
    of transformers' TF masked LMs (the mean over the labels that are not -100)."""

    architecture = "ModernBertForMaskedLM"

    def __init__(self, config: ModernBertConfig, **kwargs):
        super().__init__(config, **kwargs)
        self.head = ModernBertPredictionHead(config)
        self.decoder = ModernBertDecoder(config, self.model.embeddings.tok_embeddings)

    def lm_head(self, hidden_states: tf.Tensor) -> tf.Tensor:
        """The logits of encoder outputs at any positions: what mlm/sparse_head.py calls the head."""
        return self.decoder(self.head(hidden_states))

    def call(self, input_ids=None, attention_mask=None, document_ids=None, position_ids=None,
             masked_positions=None, labels=None, training=False, output_hidden_states=False):
        inputs = inputs_of(input_ids, attention_mask=attention_mask, document_ids=document_ids,
                           position_ids=position_ids, masked_positions=masked_positions, labels=labels)
        outputs = self.encode(inputs, training, output_hidden_states)
        hidden_states = outputs.last_hidden_state
        if inputs.get("masked_positions") is not None:
            hidden_states = tf.gather(hidden_states, inputs["masked_positions"], batch_dims=1)
        logits = self.lm_head(hidden_states)
        return TFMaskedLMOutput(loss=self.loss_of(inputs, logits), logits=logits, hidden_states=outputs.hidden_states)


class ModernBertClassifier(ModernBertPreTrainedModel):
    """The classification heads' shared part: what they classify (`classified`), `head`, dropout, then
    `classifier` (always with a bias, as nn.Linear's default; its weights drawn at hidden_size^-0.5; float32 under
    mixed precision too, as the decoder's logits are)."""

    output_class = TFSequenceClassifierOutput

    def __init__(self, config: ModernBertConfig, **kwargs):
        super().__init__(config, **kwargs)
        self.head = ModernBertPredictionHead(config)
        self.drop = keras.layers.Dropout(config.classifier_dropout, name="drop")
        self.classifier = dense(config, config.num_labels, True, "final_out", "classifier", dtype="float32")

    def classified(self, hidden_states: tf.Tensor, attention_mask: Optional[tf.Tensor]) -> tf.Tensor:
        raise NotImplementedError

    def call(self, input_ids=None, attention_mask=None, position_ids=None, labels=None, training=False,
             output_hidden_states=False):
        inputs = inputs_of(input_ids, attention_mask=attention_mask, position_ids=position_ids, labels=labels)
        outputs = self.encode(inputs, training, output_hidden_states)
        classified = self.classified(outputs.last_hidden_state, inputs.get("attention_mask"))
        logits = self.classifier(self.drop(self.head(classified), training=training))
        return self.output_class(loss=self.loss_of(inputs, logits), logits=logits,
                                 hidden_states=outputs.hidden_states)


class ModernBertForSequenceClassification(TFSequenceClassificationLoss, ModernBertClassifier):
    """classifier_pooling `cls` (the first position) or `mean` (over the attention mask), then the head."""

    architecture = "ModernBertForSequenceClassification"

    def classified(self, hidden_states, attention_mask):
        return pool(hidden_states, attention_mask, self.config.classifier_pooling)


def pool(hidden_states: tf.Tensor, attention_mask: Optional[tf.Tensor], pooling: str) -> tf.Tensor:
    """ModernBertForSequenceClassification's pooling: the first position, or the mean over the mask."""
    if pooling == "cls":
        return hidden_states[:, 0]
    if attention_mask is None:
        return tf.reduce_mean(hidden_states, axis=1)
    weights = tf.cast(attention_mask, hidden_states.dtype)[:, :, None]
    return tf.reduce_sum(hidden_states * weights, axis=1) / tf.reduce_sum(weights, axis=1)


class ModernBertForTokenClassification(TFTokenClassificationLoss, ModernBertClassifier):
    """The head and classifier at every position."""

    architecture = "ModernBertForTokenClassification"
    output_class = TFTokenClassifierOutput

    def classified(self, hidden_states, attention_mask):
        return hidden_states


HEADS = {"base": ModernBertEncoder, "masked_lm": ModernBertForMaskedLM,
         "sequence_classification": ModernBertForSequenceClassification,
         "token_classification": ModernBertForTokenClassification}
ARCHITECTURES = {model_class.architecture: head for head, model_class in HEADS.items()}


def build(config: ModernBertConfig, head: str = "masked_lm") -> ModernBertPreTrainedModel:
    """A model of `head` (a key of HEADS) with freshly drawn weights, built (its variables exist)."""
    model = HEADS[head](config)
    model(model.dummy_inputs_for_build(), training=False)
    return model
