"""T5 shapes by name, offline, and fitting any T5 configuration to the tokenizer.

The presets are the shapes of the published checkpoints' config.json files (the same figures as T5X's
gin files): T5 1.0 small to 11B, T5 1.1 and mT5 small to XXL. Their vocabulary is always the tokenizer's.
Their dropout is transformers' default 0.1, as the published configs have it; T5X pretrains T5 1.1 without
dropout: pass `--config-overrides dropout_rate=0` for that.
"""

from typing import Optional

from transformers import T5Config

from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.configs import T5_MODEL_TYPES, load_config

# T5 1.1 and mT5: gated-GELU feed-forward, output layer untied from the embeddings (T5X's t5_1_1/*.gin, mt5/*.gin).
# mT5 has T5 1.1's shapes; only its 250,112-piece vocabulary differs, and every preset takes the tokenizer's.
_T5_1_1 = dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)


def _shape(d_model: int, d_ff: int, num_heads: int, num_layers: int, d_kv: int = 64, **more) -> dict:
    """A T5 shape as the published config.json files write it (as many decoder layers as encoder layers)."""
    return dict(d_model=d_model, d_ff=d_ff, num_heads=num_heads, d_kv=d_kv, num_layers=num_layers,
                num_decoder_layers=num_layers, **more)


_T5_1_1_SIZES = {"small": (512, 1024, 6, 8), "base": (768, 2048, 12, 12), "large": (1024, 2816, 16, 24),
                 "xl": (2048, 5120, 32, 24), "xxl": (4096, 10240, 64, 24)}  # d_model, d_ff, heads, layers

PRESETS = {  # T5 1.0 (ReLU, tied output layer: transformers' T5Config defaults), T5 1.1, mT5, and a tiny one for tests
    "t5-tiny": _shape(64, 256, 4, 2, d_kv=16),
    "t5-small": _shape(512, 2048, 8, 6),
    "t5-base": _shape(768, 3072, 12, 12),
    "t5-large": _shape(1024, 4096, 16, 24),
    "t5-3b": _shape(1024, 16384, 32, 24, d_kv=128),
    "t5-11b": _shape(1024, 65536, 128, 24, d_kv=128),
    **{f"t5-v1_1-{size}": _shape(*figures, **_T5_1_1) for size, figures in _T5_1_1_SIZES.items()},
    **{f"mt5-{size}": _shape(*figures, **_T5_1_1) for size, figures in _T5_1_1_SIZES.items()},
}
DEFAULT_PRESET = "t5-small"


def config_for(name_or_path: str, tokenizer, overrides: Optional[str] = None):
    """The T5 configuration (with --config-overrides), fitted to the tokenizer: its vocabulary, and decoding
    starting from <pad>, as T5's."""
    config = load_config(name_or_path, PRESETS, T5Config, overrides=overrides)
    if config.model_type not in T5_MODEL_TYPES:
        raise UserError(f"--model-config '{name_or_path}' is a {config.model_type} configuration; T5 tasks need a "
                        f"T5 or mT5 one ({', '.join(PRESETS)}, a T5 config.json or Hub name)")
    if tokenizer.pad_token_id is None or tokenizer.eos_token_id is None:
        raise UserError("the tokenizer has no pad or eos token, which T5 needs; make one with "
                        "`python -m mlm_tpu.tokenizer train --template t5`")
    config.vocab_size = len(tokenizer)
    config.pad_token_id = config.decoder_start_token_id = tokenizer.pad_token_id
    config.eos_token_id = tokenizer.eos_token_id
    return config
