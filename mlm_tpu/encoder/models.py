"""The encoder under a task head: any model type transformers' TensorFlow Auto classes build with a masked-LM head
(BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT, DeBERTa...), pretrained (a folder mlm_tpu made, any save_pretrained
folder, or a Hub name), or a RoBERTa shape from scratch, the baseline a pretrained encoder must beat.

A masked-LM folder (mlm_tpu's own pretraining) gives its encoder; the head is new, initialised as transformers
initialises it, and the log names its weights. What the head predicts goes into the model's config the way
transformers keeps it (`num_labels`, `id2label`, `label2id`, `problem_type`), so the saved folder runs in the
text-classification and token-classification pipelines of transformers 4 and 5 alike.
"""

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.configs import T5_MODEL_TYPES
from mlm_tpu.model_folder.pooling import follow_classifier_pooling
from mlm_tpu.shards.format import REGRESSION

SCORE_NAME = "score"  # the one output of a regression head, as its config names it


@dataclass(frozen=True)
class Labels:
    """What a head predicts: the label names in id order (empty for a regression's one score), and transformers'
    problem_type ("single_label_classification", "regression"; None for token classification)."""

    names: Sequence[str]
    problem_type: Optional[str] = None

    @property
    def regression(self) -> bool:
        return self.problem_type == REGRESSION

    @property
    def count(self) -> int:
        return 1 if self.regression else len(self.names)

    def config_settings(self) -> Dict[str, object]:
        """The config values transformers' heads and pipelines read."""
        names = [SCORE_NAME] if self.regression else list(self.names)
        settings = {"num_labels": len(names), "id2label": dict(enumerate(names)),
                    "label2id": {name: index for index, name in enumerate(names)}}
        if self.problem_type:
            settings["problem_type"] = self.problem_type
        return settings

    @classmethod
    def of_config(cls, config, token_level: bool) -> "Labels":
        """The labels a saved model's config says its head predicts."""
        problem_type = None if token_level else (getattr(config, "problem_type", None) or
                                                 (REGRESSION if config.num_labels == 1 else
                                                  "single_label_classification"))
        if problem_type == REGRESSION:
            return cls((), problem_type)
        return cls(tuple(config.id2label[index] for index in range(config.num_labels)), problem_type)


def encoder_types() -> List[str]:
    """The model types that are encoders: those transformers' TensorFlow classes give a masked-LM head."""
    from transformers.models.auto.modeling_tf_auto import TF_MODEL_FOR_MASKED_LM_MAPPING_NAMES

    return sorted(TF_MODEL_FOR_MASKED_LM_MAPPING_NAMES)


def check_encoder(config, head_class, where: str) -> None:
    """Refuse a model that is no encoder (T5, GPT-2...) or has no TensorFlow head of this kind, in one line; a family
    the registry builds by hand answers for itself."""
    from mlm_tpu.model_folder import families

    model_type = families.model_type(config)
    if families.of_values({"model_type": model_type}).builds(families.head_of_class(head_class)):
        return
    if getattr(config, "is_encoder_decoder", False) or model_type not in encoder_types():
        what = ("an encoder-decoder (T5 fine-tunes with --task classification or generation)"
                if getattr(config, "is_encoder_decoder", False) or model_type in T5_MODEL_TYPES else
                "not an encoder (a causal or other language model)")
        raise UserError(f"{where} is a {model_type} model, {what}; sequence and token classification fine-tune an "
                        "encoder: one mlm_tpu pretrained (--task mlm), or a Hub encoder such as roberta-base, "
                        "bert-base-uncased or google/electra-small-discriminator")
    try:
        head_class._model_mapping[type(config)]
    except KeyError:
        raise UserError(f"{where} is a {model_type} model, for which transformers has no TensorFlow "
                        f"{head_class.__name__.removeprefix('TFAutoModelFor')} head") from None


def feeds_token_types(model_config, tokenizer) -> bool:
    """Whether the model is given token_type_ids (the shards always hold them): when its tokenizer makes them for
    it (BERT's, ELECTRA's; not RoBERTa's) and it has more than one type to embed."""
    return "token_type_ids" in tokenizer.model_input_names and (getattr(model_config, "type_vocab_size", 0) or 0) > 1


def model_inputs(model_config, tokenizer) -> List[str]:
    """The features of a batch the model is called with."""
    return ["input_ids", "attention_mask", *(["token_type_ids"] if feeds_token_types(model_config, tokenizer) else [])]


def pretrained_encoder(name_or_path: str, head_class, labels: Labels, flag: str = "--model-name-or-path",
                       pooling: Optional[str] = None):
    """(model, the PyTorch names of its new weights): the pretrained encoder with a head for `labels` (a sequence
    classifier's reading `pooling`), the base's own weights, a new head where it has none (or one of other labels);
    the log says which."""
    from transformers import AutoConfig

    from mlm_tpu.model_folder import families
    from mlm_tpu.model_folder.checkpoint import new_modules
    from mlm_tpu.model_folder.loading import load_with_new_head

    family = families.of_folder(name_or_path)
    if family is not families.GENERIC:  # a hand-written family reads its own folders
        return _hand_written_encoder(family, name_or_path, head_class, labels, flag, pooling)
    base_config = saved_config(name_or_path, flag)
    check_encoder(base_config, head_class, f"{flag} {name_or_path}")
    config = AutoConfig.from_pretrained(name_or_path, **labels.config_settings())
    config.update(pooling_settings(pooling))  # from_pretrained drops a setting the base's config lacks
    model, new_weights = load_with_new_head(name_or_path, head_class, config, flag)
    base = (base_config.architectures or [base_config.model_type])[0]
    if new_weights:
        log(f"Loaded the encoder of {name_or_path} ({base}); a new head is initialised for "
            f"{labels.count} output{'s' * (labels.count != 1)}: {new_modules(new_weights)}")
    else:
        log(f"Loaded {name_or_path} ({base}) with its head, which has as many outputs already")
    return model, new_weights


def _hand_written_encoder(family, name_or_path: str, head_class, labels: Labels, flag: str, pooling: Optional[str]):
    """pretrained_encoder of a family the registry builds by hand (ModernBERT): its own classifier, which reads
    classifier_pooling itself."""
    from mlm_tpu.model_folder import families

    head = families.head_of_class(head_class)
    config = family.with_settings(family.read_config(name_or_path),
                                  {**labels.config_settings(), **pooling_settings(pooling)})
    model, info = family.load(name_or_path, head, f"{flag} {name_or_path}", config)
    if info["missing"]:
        log(f"Loaded the encoder of {name_or_path} ({family.name}); a new head is initialised for "
            f"{labels.count} output{'s' * (labels.count != 1)}: {', '.join(info['missing'])}")
    else:
        log(f"Loaded {name_or_path} ({type(model).__name__}) with its head, which has as many outputs already")
    return model, info["missing"]


def saved_config(name_or_path: str, flag: str):
    """A saved model's config (a folder or a Hub name), or one error line."""
    from mlm_tpu.model_folder.configs import read_model_config

    return read_model_config(name_or_path, flag)


def encoder_from_scratch(preset: str, tokenizer, max_length: int, overrides: Optional[str], head_class,
                         labels: Labels, pooling: Optional[str] = None):
    """A RoBERTa shape (a preset, or a config.json of any encoder) with random weights and a head for `labels` (a
    sequence classifier's reading `pooling`); a hand-written family's preset or config.json (ModernBERT's) builds its
    own classifier."""
    from mlm_tpu.mlm.presets import config_for
    from mlm_tpu.model_folder import families

    family = families.of_model_config(preset)
    if family:
        config = family.fitted_config(family.read_config(preset, overrides), tokenizer, max_length)
        config = family.with_settings(config, {**labels.config_settings(), **pooling_settings(pooling)})
        return family.from_config(config, families.head_of_class(head_class))
    config = config_for(preset, tokenizer, max_length, overrides)
    check_encoder(config, head_class, f"--model-config {preset}")
    config.update({**labels.config_settings(), **pooling_settings(pooling)})
    return follow_classifier_pooling(head_class.from_config(config))


def pooling_settings(pooling: Optional[str]) -> Dict[str, str]:
    """The config setting of a sequence classifier's pooling (model_folder/pooling.py; none for other heads)."""
    return {"classifier_pooling": pooling} if pooling else {}
