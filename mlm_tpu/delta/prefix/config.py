"""Prefix tuning's settings and the adapter_config.json PEFT reads (no reparameterisation: `prefix_projection`
false, the prefix table is the weight itself)."""

from mlm_tpu.delta.prompt.config import VirtualTokenSettings, model_shape


def adapter_config(settings: VirtualTokenSettings, model_config, task_type: str, base_model: str) -> dict:
    shape = model_shape(model_config)
    return {"peft_type": "PREFIX_TUNING", "task_type": task_type, "base_model_name_or_path": base_model,
            "num_virtual_tokens": settings.num_virtual_tokens, "num_transformer_submodules": 2, **shape,
            "encoder_hidden_size": shape["token_dim"], "prefix_projection": False, "inference_mode": True}
