"""(IA)³ (Liu et al., 2022): learned vectors scaling keys, values and the feed-forward's input, 1 at first."""

from mlm_tpu.delta.ia3.config import Ia3Settings
from mlm_tpu.delta.registry import register_delta_method

register_delta_method("ia3", settings=Ia3Settings, model="mlm_tpu.delta.ia3.model")
