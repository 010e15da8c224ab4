"""ModernBERT as a model family: what the model folder's registry (model_folder/families.py) asks of a family, answered
from this folder's config, model, weights, presets and FLOP count, so no stage branches on `modernbert`.

A config.json or a preset is this family's when its model_type is `modernbert` or it names one of presets.py's
shapes; a model is when it is one of model.py's classes. Its folders hold transformers 5's files only (config.json
in transformers 5's spelling, model.safetensors in PyTorch's names and layout): transformers 4.57 has no ModernBERT
to read a tf_model.h5 with, and transformers 5 loads these with no missing or unexpected keys.
"""

import os
from typing import Optional

from mlm_tpu.errors import UserError
from mlm_tpu.hub import hub_folder
from mlm_tpu.modernbert import config as configs
from mlm_tpu.modernbert import flops, presets, weights

MODEL_TYPE = configs.MODEL_TYPE


def parse_overrides(overrides: Optional[str]) -> dict:
    """--config-overrides ("name=value,...") as values, read as transformers' update_from_string reads them."""
    values = {}
    for pair in filter(None, (overrides or "").split(",")):
        name, equals, text = pair.partition("=")
        if not equals:
            raise UserError(f"--config-overrides '{overrides}': write name=value pairs, comma separated")
        lowered = text.strip().lower()
        if lowered in ("true", "false"):
            values[name.strip()] = lowered == "true"
            continue
        for kind in (int, float):
            try:
                values[name.strip()] = kind(text)
                break
            except ValueError:
                continue
        else:
            values[name.strip()] = text
    return values


class ModernBertFamily:
    """The registry's entry of ModernBERT (model_folder/families.py's Family)."""

    name = MODEL_TYPE
    tensorflow_layout = False  # transformers 4 has no ModernBERT
    pools_natively = True  # ModernBertForSequenceClassification reads classifier_pooling cls or mean

    def claims_values(self, values: dict) -> bool:
        return values.get("model_type") == MODEL_TYPE

    def claims_preset(self, name: str) -> bool:
        return name in presets.PRESETS

    def claims_config(self, config) -> bool:
        return isinstance(config, configs.ModernBertConfig)

    def claims_model(self, model) -> bool:
        from mlm_tpu.modernbert.model import ModernBertPreTrainedModel

        return isinstance(model, ModernBertPreTrainedModel)

    def model_class(self, head: str):
        from mlm_tpu.modernbert.model import HEADS

        return HEADS[head]

    def builds(self, head: str) -> bool:
        from mlm_tpu.modernbert.model import HEADS

        return head in HEADS

    def read_config(self, path: str, overrides: Optional[str] = None):
        """A preset by name, or a config.json (a file, or the folder holding one), with --config-overrides."""
        if self.claims_preset(path):
            config = presets.preset(path)
        else:
            path = hub_folder(path, f"'{path}'")  # a Hub name: its files in the Hub cache
            config = configs.read_config(os.path.join(path, weights.CONFIG_NAME) if os.path.isdir(path) else path)
        changes = parse_overrides(overrides)
        if not changes:
            return config
        return configs.overridden(config, changes, source=f"--config-overrides '{overrides}'")

    def with_settings(self, config, settings: dict):
        """`config` with a head's settings (num_labels, id2label, label2id, problem_type, classifier_pooling)."""
        return configs.from_dict({**config.to_dict(), **settings}, source="the classifier's settings")

    def fitted_config(self, config, tokenizer, max_length: int):
        """`config` fitted to the tokenizer (its vocabulary and special ids) and the example length."""
        return config.replace(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                              cls_token_id=tokenizer.cls_token_id, bos_token_id=tokenizer.cls_token_id,
                              sep_token_id=tokenizer.sep_token_id, eos_token_id=tokenizer.sep_token_id,
                              max_position_embeddings=max(config.max_position_embeddings, max_length))

    def from_config(self, config, head: str):
        from mlm_tpu.modernbert.model import build

        return build(config, head)

    def load(self, folder: str, head: str, where: str, config=None):
        """A model of `head` (of `config`: the folder's own by default) with a folder's weights (transformers 5's
        safetensors); returns (model, loading info: its missing and unexpected names)."""
        folder = hub_folder(folder, where)  # a Hub name: its files in the Hub cache
        if not os.path.isdir(folder):
            raise UserError(f"{where}: a ModernBERT is read from a folder transformers 5 saved (config.json and "
                            "model.safetensors)")
        from mlm_tpu.modernbert.model import build

        model = build(config or configs.read_config(os.path.join(folder, weights.CONFIG_NAME)), head)
        return model, weights.load_state_dict(model, weights.read_safetensors(folder), where)

    def save(self, model, folder: str, max_length: Optional[int] = None) -> None:
        weights.save_pretrained(model, folder)

    def max_positions(self, config) -> Optional[int]:
        return config.max_position_embeddings

    def model_type(self, config) -> str:
        return MODEL_TYPE

    def training_flops(self, config, length: int, head: str, head_positions: Optional[int]) -> Optional[float]:
        return flops.training_flops(config, length, head, head_positions)

    def memory_plan(self, model, optimizer_state: int, length: int, batch: int) -> str:
        """The start-up log's line of what a replica holds to train `model` at `batch` rows of `length` (memory.py),
        in the compute type Keras' policy sets; the head counted at every position (the sparse head needs less)."""
        import tf_keras as keras

        from mlm_tpu.modernbert import memory

        compute = keras.mixed_precision.global_policy().compute_dtype
        plan = memory.plan(model.config, length, batch, memory.BFLOAT16 if compute == "bfloat16" else memory.FLOAT32,
                           optimizer_state)
        return plan.describe(length, batch, compute)

    packs_documents = True  # pretraining's default: attention within each document of a packed row (masks.py)
    projection_modules = ("Wqkv", "Wo", "Wi")  # attn.Wqkv, attn.Wo, mlp.Wi, mlp.Wo: PEFT has no default for it

    def pytorch_names(self, model) -> dict:
        """weights.py's table: each weight's transformers 5 name, and whether it is transposed there."""
        return {id(variable): (name, transposed) for name, variable, transposed in weights.weight_table(model)}

    def architecture_class(self, name: str):
        from mlm_tpu.modernbert.model import ARCHITECTURES, HEADS

        return HEADS[ARCHITECTURES[name]]

    def document_ids(self, input_ids, separator_id: int):
        """[batch, length] document numbers of packed rows: a document starts at each row's first token and after
        each separator (the token that ends every document the shard command packs: [SEP], </s>)."""
        import tensorflow as tf

        from mlm_tpu.modernbert.masks import document_ids_from_starts

        after_separator = tf.equal(input_ids[:, :-1], tf.cast(separator_id, input_ids.dtype))
        return document_ids_from_starts(tf.concat([tf.ones_like(input_ids[:, :1], tf.bool), after_separator], 1))

    def vocabulary_weights(self, model) -> list:
        """The token embeddings (`model.embeddings.tok_embeddings.weight`, which the tied decoder reads), an untied
        decoder's own weight and the decoder's bias (`decoder.bias`)."""
        decoder = getattr(model, "decoder", None)
        own = [] if decoder is None else [weight for weight in (decoder.kernel, decoder.bias) if weight is not None]
        return [model.model.embeddings.tok_embeddings.embeddings, *own]

    def output_bias(self, model):
        """The masked LM's `decoder.bias` (None: a classifier, or a config with decoder_bias false)."""
        decoder = getattr(model, "decoder", None)
        return None if decoder is None else decoder.bias

    def with_vocabulary_size(self, model, size: int):
        grown = type(model)(model.config.replace(vocab_size=size))
        grown.build_in_name_scope()
        return grown

    def sparse_outputs(self, model, batch, training: bool):
        """The masked LM's own sparse prediction (`sparse_prediction`): its head at the batch's masked positions
        (BERT's feature `masked_lm_positions`, which mlm/prediction_slots.py makes), the loss over those holding a
        label."""
        return model(batch["input_ids"], attention_mask=batch["attention_mask"],
                     document_ids=batch.get("document_ids"), masked_positions=batch["masked_lm_positions"],
                     labels=batch["labels"], training=training)


FAMILY = ModernBertFamily()
