"""T5 shapes by name, and fitting any T5 configuration to the tokenizer."""

from typing import Optional

from transformers import T5Config

from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.loading import load_config

PRESETS = {  # the shapes of T5's own sizes (small, base), and a tiny one for tests and demos
    "t5-tiny": dict(d_model=64, d_kv=16, d_ff=256, num_layers=2, num_heads=4),
    "t5-small": dict(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8),
    "t5-base": dict(d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12),
}
DEFAULT_PRESET = "t5-small"


def config_for(name_or_path: str, tokenizer, overrides: Optional[str] = None):
    """The T5 configuration (with --config-overrides), fitted to the tokenizer: its vocabulary, and decoding
    starting from <pad>, as T5's."""
    config = load_config(name_or_path, PRESETS, T5Config, overrides=overrides)
    if config.model_type != "t5":
        raise UserError(f"--model-config '{name_or_path}' is a {config.model_type} configuration; T5 tasks need a "
                        f"T5 one ({', '.join(PRESETS)}, a T5 config.json or Hub name)")
    if tokenizer.pad_token_id is None or tokenizer.eos_token_id is None:
        raise UserError("the tokenizer has no pad or eos token, which T5 needs; make one with "
                        "`python -m mlm_tpu.tokenizer train --template t5`")
    config.vocab_size = len(tokenizer)
    config.pad_token_id = config.decoder_start_token_id = tokenizer.pad_token_id
    config.eos_token_id = tokenizer.eos_token_id
    return config
