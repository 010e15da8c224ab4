"""Bottleneck adapters applied to a T5: after every block's feed-forward (and, Houlsby, its self-attention),
AdapterHub's key names (`encoder.block.0.layer.1.adapters.mlm_tpu.adapter_down.0.weight` [b, d], `.bias`,
`adapter_up.weight` [d, b], `.bias`) in `adapter.safetensors`, its adapter_config.json beside."""

from typing import Dict

import numpy as np

from mlm_tpu.delta.adapter.config import ADAPTER_NAME, KINDS, AdapterSettings, adapter_config
from mlm_tpu.delta.adapter.layer import AdaptedFeedForward, AdaptedSelfAttention, Bottleneck
from mlm_tpu.delta.method import DeltaMethod, freeze_base
from mlm_tpu.model_folder.configs import T5_MODEL_TYPES


class BottleneckAdapters(DeltaMethod):
    supported_model_types = T5_MODEL_TYPES
    weights_file = "adapter.safetensors"

    def __init__(self, settings: AdapterSettings):
        super().__init__(settings)
        self.modules: Dict[str, Bottleneck] = {}


    def apply(self, model) -> None:
        self.check_model(model)
        _, fields = KINDS[self.settings.kind]
        width = model.config.d_model
        bottleneck_width = max(width // self.settings.reduction, 1)

        def bottleneck():
            return Bottleneck(width, bottleneck_width, fields["non_linearity"])

        for stack_name in ("encoder", "decoder"):
            for index, block in enumerate(getattr(model, stack_name).block):
                # A new list, not items replaced in place: TensorFlow checkpoints (the trainer's backups) refuse a
                # tracked list whose items were replaced.
                layers = list(block.layer)
                last = len(layers) - 1
                layer = bottleneck()
                layers[last] = AdaptedFeedForward(layers[last], layer, fields["original_ln_before"])
                self.modules[f"{stack_name}.block.{index}.layer.{last}"] = layer
                self.delta_layers.append(layers[last])
                if fields["mh_adapter"]:
                    layer = bottleneck()
                    layers[0] = AdaptedSelfAttention(layers[0], layer)
                    self.modules[f"{stack_name}.block.{index}.layer.0"] = layer
                    self.delta_layers.append(layers[0])
                block.layer = layers
        freeze_base(model, self.delta_layers)

    def state_dict(self, model) -> Dict[str, np.ndarray]:
        state = {}
        for module, layer in self.modules.items():
            key = f"{module}.adapters.{ADAPTER_NAME}"
            state[f"{key}.adapter_down.0.weight"] = np.ascontiguousarray(layer.adapter_down.kernel.numpy().T)
            state[f"{key}.adapter_down.0.bias"] = layer.adapter_down.bias.numpy()
            state[f"{key}.adapter_up.weight"] = np.ascontiguousarray(layer.adapter_up.kernel.numpy().T)
            state[f"{key}.adapter_up.bias"] = layer.adapter_up.bias.numpy()
        return state

    def load_state_dict(self, model, state: Dict[str, np.ndarray]) -> None:
        for module, layer in self.modules.items():
            key = f"{module}.adapters.{ADAPTER_NAME}"
            layer.adapter_down.kernel.assign(state[f"{key}.adapter_down.0.weight"].T)
            layer.adapter_down.bias.assign(state[f"{key}.adapter_down.0.bias"])
            layer.adapter_up.kernel.assign(state[f"{key}.adapter_up.weight"].T)
            layer.adapter_up.bias.assign(state[f"{key}.adapter_up.bias"])

    def adapter_config(self, model, base_model: str) -> dict:
        return adapter_config(self.settings, model, base_model)


METHOD = BottleneckAdapters
