"""The encoder of an embedding model, with no head: any folder that holds an encoder (a masked LM, a classifier, a
mean-pooled one, a sentence-transformers BertModel, ELECTRA's discriminator, a ModernBERT), or a shape from scratch;
and the text's vector it gives (loss.pool).

transformers' bare TF classes (TFRobertaModel...) carry a pooler, which neither pooling reads (sentence-transformers'
mean and cls read the last hidden states): a folder without one (a masked LM, a mean-pooled classifier) loads, and the
log says the pooler is new and unused."""

from typing import Optional

import tensorflow as tf

from mlm_tpu.console import log
from mlm_tpu.embedding.loss import pool
from mlm_tpu.encoder.models import check_encoder, saved_config
from mlm_tpu.model_folder.pooling import MEAN, POOLING_WORDS

BASE_CLASS = "TFAutoModel"  # transformers' bare encoders; a hand-written family's "base" head


def base_class():
    import transformers

    return getattr(transformers, BASE_CLASS)


def pretrained_encoder(name_or_path: str, flag: str = "--model-name-or-path"):
    """The bare encoder of a saved folder, its own weights; a missing pooler (unread) is new, and said."""
    from mlm_tpu.model_folder.loading import load_with_head_settings

    where = f"{flag} {name_or_path}"
    check_encoder(saved_config(name_or_path, flag), base_class(), where)
    model, new_weights = load_with_head_settings(name_or_path, base_class(), {}, where)
    unread = [name for name in new_weights if "pooler" in name]
    if unread:
        log(f"{name_or_path} has no pooler ({', '.join(sorted(unread))}); the bare encoder's is new and stays "
            "unused: a text's vector is pooled from the last hidden states")
    return model


def encoder_from_scratch(preset: str, tokenizer, max_length: int, overrides: Optional[str]):
    """A bare encoder of a shape (a RoBERTa preset, any encoder's config.json, a ModernBERT preset) with random
    weights: the baseline a pretrained encoder must beat."""
    from mlm_tpu.mlm.presets import config_for
    from mlm_tpu.model_folder import families

    family = families.of_model_config(preset)
    if family:
        config = family.fitted_config(family.read_config(preset, overrides), tokenizer, max_length)
        return family.from_config(config, "base")
    config = config_for(preset, tokenizer, max_length, overrides)
    check_encoder(config, base_class(), f"--model-config {preset}")
    return base_class().from_config(config)


class TextEmbedder:
    """A model's texts as vectors: its last hidden states, pooled (`pooling`: mean or cls)."""

    def __init__(self, model, pooling: Optional[str]):
        self.model = model
        self.pooling = pooling or MEAN

    @property
    def words(self) -> str:
        return POOLING_WORDS[self.pooling]

    def __call__(self, input_ids: tf.Tensor, attention_mask: tf.Tensor, training: bool = False) -> tf.Tensor:
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, training=training)
        hidden = outputs.last_hidden_state if hasattr(outputs, "last_hidden_state") else outputs[0]
        return pool(hidden, attention_mask, self.pooling)
