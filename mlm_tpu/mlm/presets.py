"""RoBERTa shapes by name, and fitting any masked-LM configuration to the tokenizer and the example length."""

from typing import Optional

from transformers import RobertaConfig

from mlm_tpu.console import warn
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.loading import load_config
from mlm_tpu.model_folder.pytorch import align_positions_with_pytorch
from mlm_tpu.tokenizer.word_starts import family_of

PRESETS = {  # hidden size, layers, attention heads, feed-forward size
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256),
    "small": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
}
DEFAULT_PRESET = "base"


def config_for(name_or_path: str, tokenizer, max_length: int, overrides: Optional[str] = None):
    """The masked-LM configuration (with --config-overrides), fitted to the tokenizer and the example length."""
    config = load_config(name_or_path, PRESETS, RobertaConfig, overrides=overrides)
    if config.model_type == "t5":
        raise UserError(f"--model-config '{name_or_path}' is a T5 configuration; --task mlm trains RoBERTa-style "
                        f"masked LMs ({', '.join(PRESETS)}, or a RoBERTa config.json); T5 pretrains with "
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
    # RoBERTa numbers positions from pad_token_id + 1, so the table needs that many extra rows.
    config.max_position_embeddings = max(getattr(config, "max_position_embeddings", 0) or 0,
                                         max_length + config.pad_token_id + 1)
    # BERT's WordPiece frames a pair [CLS] A [SEP] B [SEP] with token types 0 and 1; RoBERTa's tokenizers give none
    config.type_vocab_size = 2 if family_of(tokenizer) == "wordpiece" else 1
    return config
