"""Prompt tuning's settings and the adapter_config.json PEFT reads (T5: the prompt goes to the encoder only,
`num_transformer_submodules: 1`)."""

from dataclasses import dataclass

from mlm_tpu.configuration import setting
from mlm_tpu.model_folder.configs import T5_MODEL_TYPES


@dataclass(frozen=True)
class VirtualTokenSettings:
    """Prompt and prefix tuning's one setting: how many virtual tokens."""

    num_virtual_tokens: int = setting(20, low=1, group="delta-tuning",
                                      help="Prompt and prefix tuning: virtual tokens (default: 20).")


def model_shape(model_config) -> dict:
    """PEFT's token_dim, num_layers and num_attention_heads of a T5 or RoBERTa configuration."""
    if model_config.model_type in T5_MODEL_TYPES:
        return {"token_dim": model_config.d_model, "num_layers": model_config.num_decoder_layers,
                "num_attention_heads": model_config.num_heads}
    return {"token_dim": model_config.hidden_size, "num_layers": model_config.num_hidden_layers,
            "num_attention_heads": model_config.num_attention_heads}


def adapter_config(settings: VirtualTokenSettings, model_config, task_type: str, base_model: str) -> dict:
    return {"peft_type": "PROMPT_TUNING", "task_type": task_type, "base_model_name_or_path": base_model,
            "num_virtual_tokens": settings.num_virtual_tokens, "num_transformer_submodules": 1,
            **model_shape(model_config), "prompt_tuning_init": "SAMPLE_VOCAB", "inference_mode": True}
