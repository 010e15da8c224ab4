"""Prefix tuning (Li & Liang, 2021): learned keys and values before those of T5's decoder self-attention."""

from mlm_tpu.delta.prompt.config import VirtualTokenSettings
from mlm_tpu.delta.registry import register_delta_method

register_delta_method("prefix", settings=VirtualTokenSettings, model="mlm_tpu.delta.prefix.model")
