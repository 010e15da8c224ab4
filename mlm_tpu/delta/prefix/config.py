"""Prefix tuning's settings and the adapter_config.json PEFT reads (no reparameterisation: `prefix_projection`
false, the prefix table is the weight itself)."""

from mlm_tpu.delta.prompt.config import VirtualTokenSettings, model_shape


def adapter_config(settings: VirtualTokenSettings, model_config, task_type: str, base_model: str) -> dict:
    """`token_dim` is what a key or value row holds, heads x head size (PEFT views each table row as [2 x layers,
    heads, token_dim // heads]): T5's num_heads x d_kv, which is not d_model in t5-3b (32 x 128 against 1024)."""
    token_dim = model_config.num_heads * model_config.d_kv
    return {"peft_type": "PREFIX_TUNING", "task_type": task_type, "base_model_name_or_path": base_model,
            "num_virtual_tokens": settings.num_virtual_tokens, "num_transformer_submodules": 2,
            **model_shape(model_config), "token_dim": token_dim, "encoder_hidden_size": token_dim,
            "prefix_projection": False, "inference_mode": True}
