"""ModernBERT shapes by name: the published checkpoints' and a tiny one for CPUs.

- `modernbert-base`, `modernbert-large`: answerdotai/ModernBERT-base and -large's config.json (22 layers of 768 and
  28 of 1024, GeGLU widths 1152 and 2624, heads of 64, a window of 128, global every third layer, rotary bases
  160,000 global and 10,000 local, classifier_pooling mean; every other value the ModernBertConfig default).
- `ettin-encoder-17m`, `-32m`, `-68m`: the Ettin suite's smallest encoders (jhu-clsp), as their training configs
  say (JHU-CLSP/ettin-encoder-vs-decoder, pretraining/configs/standard/{very_tiny,tiny,mini}/ and the final
  prolong_decay phase): 7 x 256 (GeGLU 384, 4 heads), 10 x 384 (576, 6 heads), 19 x 512 (768, 8 heads); ModernBERT's
  vocabulary, window and layer pattern, bias-free norms of eps 1e-5, and a rotary base of 160,000 on local layers
  too after the long-context phase.
- `modernbert-tiny`: 3 layers of 64 (a global one, then two local ones with a window of 64, so 128-token rows use
  both kinds), 2 heads: trains in minutes on a CPU.
The vocabulary is ModernBERT's (50,368: the OLMo tokenizer, padded to a multiple of 64); a run from scratch fits it
to its tokenizer.
"""

from typing import Dict

from mlm_tpu.errors import UserError
from mlm_tpu.modernbert.config import ModernBertConfig

ETTIN = dict(global_rope_theta=160_000.0, local_rope_theta=160_000.0, max_position_embeddings=7999)

PRESETS: Dict[str, dict] = {
    "modernbert-tiny": dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=2, intermediate_size=96,
                            local_attention=64, max_position_embeddings=512, classifier_pooling="mean"),
    "ettin-encoder-17m": dict(hidden_size=256, num_hidden_layers=7, num_attention_heads=4, intermediate_size=384,
                              **ETTIN),
    "ettin-encoder-32m": dict(hidden_size=384, num_hidden_layers=10, num_attention_heads=6, intermediate_size=576,
                              **ETTIN),
    "ettin-encoder-68m": dict(hidden_size=512, num_hidden_layers=19, num_attention_heads=8, intermediate_size=768,
                              **ETTIN),
    "modernbert-base": dict(hidden_size=768, num_hidden_layers=22, num_attention_heads=12, intermediate_size=1152,
                            classifier_pooling="mean"),
    "modernbert-large": dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, intermediate_size=2624,
                             classifier_pooling="mean"),
}


def preset(name: str, **changes) -> ModernBertConfig:
    """The config of a preset, with `changes` (vocab_size fitted to a tokenizer, say)."""
    if name not in PRESETS:
        raise UserError(f"no ModernBERT preset {name!r}; the presets are {', '.join(PRESETS)}")
    return ModernBertConfig(**{**PRESETS[name], **changes})
