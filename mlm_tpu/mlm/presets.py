"""Masked-LM shapes by name (RoBERTa's, and BERT's of Turc et al. 2019), and fitting any masked-LM configuration of
any family transformers' TensorFlow classes build (BERT, RoBERTa, XLM-R, DistilBERT, ALBERT, DeBERTa-v2, ...) to
the tokenizer and the example length."""

from typing import Optional

from mlm_tpu.console import warn
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.configs import T5_MODEL_TYPES, load_config
from mlm_tpu.model_folder.pytorch import TF_POSITION_PADDING_IDX, align_positions_with_pytorch
from mlm_tpu.tokenizer.word_starts import family_of


def bert_shape(layers: int, hidden: int) -> dict:
    """A BERT of Turc et al. 2019 ("Well-Read Students Learn Better"): heads of 64 dimensions, feed-forward 4H."""
    return dict(model_type="bert", hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=hidden // 64,
                intermediate_size=4 * hidden)


PRESETS = {  # hidden size, layers, attention heads, feed-forward size; RoBERTa's unless a model_type says
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256),
    "small": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "bert-tiny": bert_shape(2, 128),
    "bert-mini": bert_shape(4, 256),
    "bert-small": bert_shape(4, 512),
    "bert-medium": bert_shape(8, 512),
    "bert-base": bert_shape(12, 768),
}
DEFAULT_PRESET = "base"
# Masked-LM families whose TensorFlow class takes no labels and computes no loss (TFXLMWithLMHeadModel)
WITHOUT_LOSS = ("xlm", "flaubert")


def masked_lm_config(model_type: str = "roberta", **values):
    """The configuration of a preset, or of a config.json that names no model_type: RoBERTa's unless it names one."""
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, **values)


def check_masked_lm_type(config, where: str) -> None:
    """A configuration of a family transformers' TensorFlow classes build no masked LM of (a GPT-2, an XLNet), or
    build one of that computes no masked-LM loss (XLM's and FlauBERT's take no labels), is refused."""
    from transformers.models.auto.modeling_tf_auto import TF_MODEL_FOR_MASKED_LM_MAPPING_NAMES

    if config.model_type in WITHOUT_LOSS:
        raise UserError(f"{where} is a {config.model_type} model, whose TensorFlow class "
                        f"({TF_MODEL_FOR_MASKED_LM_MAPPING_NAMES[config.model_type]}) computes no masked-LM loss: "
                        "--task mlm cannot train it; continue it with PyTorch's tools")
    if config.model_type not in TF_MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise UserError(f"{where} is a {config.model_type} model; --task mlm trains masked LMs of the families "
                        "transformers' TensorFlow classes build (bert, roberta, xlm-roberta, distilbert, albert, "
                        f"deberta-v2, electra, ...; presets: {', '.join(PRESETS)})")


def config_for(name_or_path: str, tokenizer, max_length: int, overrides: Optional[str] = None):
    """The masked-LM configuration (with --config-overrides), fitted to the tokenizer and the example length."""
    config = load_config(name_or_path, PRESETS, masked_lm_config, overrides=overrides)
    if config.model_type in T5_MODEL_TYPES:
        raise UserError(f"--model-config '{name_or_path}' is a T5 configuration; --task mlm trains masked LMs "
                        f"({', '.join(PRESETS)}, or a config.json of a masked LM's family); T5 pretrains with "
                        "--task span-corruption")
    config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id
    config.bos_token_id = tokenizer.cls_token_id
    config.eos_token_id = tokenizer.sep_token_id
    if align_positions_with_pytorch(config):  # TF RoBERTa's positions are those of pad id 1, whatever the tokenizer's
        warn(f"the tokenizer pads with id {tokenizer.pad_token_id}, but {config.model_type} takes id 1 "
             f"({tokenizer.convert_ids_to_tokens(1)} here) for padding: TensorFlow gives it no position and PyTorch "
             "no gradient when fine-tuning. Tokenizers made by `python -m mlm_tpu.tokenizer train` since mlm_tpu 0.3 "
             "pad with id 1")
    config.max_position_embeddings = max(getattr(config, "max_position_embeddings", 0) or 0,
                                         max_length + positions_before_the_first(config))
    # BERT's WordPiece frames a pair [CLS] A [SEP] B [SEP] with token types 0 and 1; RoBERTa's tokenizers give none.
    # A family without token types (DistilBERT; DeBERTa-v2 with type_vocab_size 0) keeps none.
    if getattr(config, "type_vocab_size", 0):
        config.type_vocab_size = 2 if family_of(tokenizer) == "wordpiece" else 1
    return config


def positions_before_the_first(config) -> int:
    """Rows of the position table before the first token's: RoBERTa's family numbers positions from its padding
    index + 1 (TF_POSITION_PADDING_IDX); BERT, ALBERT, DistilBERT, DeBERTa-v2 and ELECTRA from 0."""
    return 0 if config.model_type not in TF_POSITION_PADDING_IDX else config.pad_token_id + 1
