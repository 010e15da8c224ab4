"""LoRA (Hu et al., 2021): a low-rank update B·A beside chosen Dense layers, B = 0 at first."""

from mlm_tpu.delta.lora.config import LoraSettings
from mlm_tpu.delta.registry import register_delta_method

register_delta_method("lora", settings=LoraSettings, model="mlm_tpu.delta.lora.model")
