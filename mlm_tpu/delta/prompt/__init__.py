"""Prompt tuning (Lester et al., 2021): virtual token embeddings before every input, learned; the model frozen."""

from mlm_tpu.delta.prompt.config import VirtualTokenSettings
from mlm_tpu.delta.registry import register_delta_method

register_delta_method("prompt", settings=VirtualTokenSettings, model="mlm_tpu.delta.prompt.model")
