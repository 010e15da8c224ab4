"""RoBERTa configurations: local presets by name, a config.json path, or a Hub name.

Whatever the source, the vocabulary, special-token ids and position table are set from the
tokenizer and --max-length, so the model always matches the shards it trains on.
"""

import os

from transformers import AutoConfig, RobertaConfig

from mlm_tpu.errors import UserError

PRESETS = {  # hidden size, layers, attention heads, feed-forward size
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256),
    "small": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
}


def load_config(name_or_path: str):
    """A preset, a folder or config.json file, or a Hub model name."""
    if name_or_path in PRESETS:
        return RobertaConfig(**PRESETS[name_or_path])
    try:
        if os.path.isfile(name_or_path):
            return AutoConfig.from_pretrained(os.path.dirname(os.path.abspath(name_or_path)) or ".")
        return AutoConfig.from_pretrained(name_or_path)
    except (OSError, ValueError) as error:
        raise UserError(f"--model-config '{name_or_path}' is not a preset ({', '.join(PRESETS)}), a config.json, "
                        "nor a reachable Hub model") from None


def config_for(name_or_path: str, tokenizer, max_length: int):
    """The configuration, fitted to the tokenizer and the example length."""
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
