"""Bottleneck adapters (Houlsby et al., 2019; Pfeiffer et al., 2021), saved in AdapterHub's `adapters` format."""

from mlm_tpu.delta.adapter.config import AdapterSettings
from mlm_tpu.delta.registry import register_delta_method

register_delta_method("adapter", settings=AdapterSettings, model="mlm_tpu.delta.adapter.model")
