"""ELECTRA's shapes by name (the discriminator's, as in Clark et al. 2020, table 6), and the generator's shape
derived from the discriminator's as google-research/electra derives it.

The generator is the discriminator's shape with a share of its hidden size (--generator-size-ratio: the paper's
1/4 for Small and Large, 1/3 for Base), a feed-forward four times that, one attention head per 64 units, and the
same layers and embedding size: the two share their embeddings, and each projects them to its own width
(`embeddings_project`) where they differ.
"""

from typing import Optional

from transformers import ElectraConfig

from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.configs import load_config

PRESETS = {  # the discriminator: embedding size, hidden size, layers, attention heads, feed-forward size
    "electra-tiny": dict(embedding_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=256),
    "electra-small": dict(embedding_size=128, hidden_size=256, num_hidden_layers=12, num_attention_heads=4,
                          intermediate_size=1024),
    "electra-base": dict(embedding_size=768, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                         intermediate_size=3072),
    "electra-large": dict(embedding_size=1024, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                          intermediate_size=4096),
}
GENERATOR_SIZE_RATIOS = {"electra-tiny": 0.5, "electra-small": 0.25, "electra-base": 1 / 3, "electra-large": 0.25}
DEFAULT_PRESET = "electra-base"
DEFAULT_GENERATOR_SIZE_RATIO = 0.25  # for a discriminator given as a config.json or a Hub name
HEAD_WIDTH = 64  # the generator's units per attention head


def discriminator_config(name_or_path: str, tokenizer, max_length: int, overrides: Optional[str] = None):
    """The discriminator's configuration (with --config-overrides), fitted to the tokenizer and the example length."""
    config = load_config(name_or_path, PRESETS, ElectraConfig, overrides=overrides)
    if config.model_type != "electra":
        raise UserError(f"--model-config '{name_or_path}' is a {config.model_type} configuration; --task electra "
                        f"trains ELECTRA ({', '.join(PRESETS)}, or an ELECTRA config.json)")
    config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id  # PyTorch's embedding gives the pad no gradient when fine-tuning
    config.max_position_embeddings = max(config.max_position_embeddings, max_length)
    return config


def generator_config(discriminator: ElectraConfig, ratio: float) -> ElectraConfig:
    """The generator's configuration: `ratio` of the discriminator's hidden size, the rest as google-research/electra
    makes it (`get_generator_config`), with a head count that divides the width."""
    config = ElectraConfig(**discriminator.to_dict())
    config.hidden_size = max(1, round(discriminator.hidden_size * ratio))
    config.intermediate_size = 4 * config.hidden_size
    heads = max(1, config.hidden_size // HEAD_WIDTH)
    while config.hidden_size % heads:
        heads -= 1
    config.num_attention_heads = heads
    config.architectures = None
    return config


def generator_size_ratio(name_or_path: str, given: Optional[float]) -> float:
    """--generator-size-ratio, else the preset's."""
    return given or GENERATOR_SIZE_RATIOS.get(name_or_path, DEFAULT_GENERATOR_SIZE_RATIO)
