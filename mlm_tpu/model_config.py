"""Model configurations: local presets by name (RoBERTa and T5 shapes), a config.json path, or a Hub name.

Whatever the source, the vocabulary and special-token ids (and RoBERTa's position table) are set
from the tokenizer and --max-length, so the model always matches the shards it trains on.
"""

import os
from typing import Callable, Dict

from transformers import AutoConfig, RobertaConfig, T5Config

from mlm_tpu.errors import UserError

PRESETS = {  # hidden size, layers, attention heads, feed-forward size
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256),
    "small": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
}
T5_PRESETS = {  # the shapes of T5's own sizes (small, base), and a tiny one for tests and demos
    "t5-tiny": dict(d_model=64, d_kv=16, d_ff=256, num_layers=2, num_heads=4),
    "t5-small": dict(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8),
    "t5-base": dict(d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12),
}


def load_config(name_or_path: str, presets: Dict[str, dict] = PRESETS, config_class: Callable = RobertaConfig):
    """A preset, a folder or config.json file, or a Hub model name."""
    if name_or_path in presets:
        return config_class(**presets[name_or_path])
    try:
        if os.path.isfile(name_or_path):
            return AutoConfig.from_pretrained(os.path.dirname(os.path.abspath(name_or_path)) or ".")
        return AutoConfig.from_pretrained(name_or_path)
    except (OSError, ValueError):
        raise UserError(f"--model-config '{name_or_path}' is not a preset ({', '.join(presets)}), a config.json, "
                        "nor a reachable Hub model") from None


def config_for(name_or_path: str, tokenizer, max_length: int):
    """The RoBERTa configuration, fitted to the tokenizer and the example length."""
    config = load_config(name_or_path)
    config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id
    config.bos_token_id = tokenizer.cls_token_id
    config.eos_token_id = tokenizer.sep_token_id
    # RoBERTa numbers positions from pad_token_id + 1, so the table needs that many extra rows.
    config.max_position_embeddings = max(getattr(config, "max_position_embeddings", 0) or 0,
                                         max_length + tokenizer.pad_token_id + 1)
    config.type_vocab_size = 1
    return config


def t5_config_for(name_or_path: str, tokenizer):
    """The T5 configuration, fitted to the tokenizer: its vocabulary, and decoding starting from <pad>, as T5's."""
    config = load_config(name_or_path, T5_PRESETS, T5Config)
    if config.model_type != "t5":
        raise UserError(f"--model-config '{name_or_path}' is a {config.model_type} configuration; --head t5 needs a "
                        f"T5 one ({', '.join(T5_PRESETS)}, a T5 config.json or Hub name)")
    if tokenizer.pad_token_id is None or tokenizer.eos_token_id is None:
        raise UserError("the tokenizer has no pad or eos token, which T5 needs; make one with "
                        "`python -m mlm_tpu.tokenizer train --template t5`")
    config.vocab_size = len(tokenizer)
    config.pad_token_id = config.decoder_start_token_id = tokenizer.pad_token_id
    config.eos_token_id = tokenizer.eos_token_id
    return config
