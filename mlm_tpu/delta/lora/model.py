"""LoRA applied to a model: each target Dense layer replaced by a LoraDense around it; PEFT's key names
(`base_model.model.<module>.lora_A.weight` [r, in], `lora_B.weight` [out, r]); merging folds B·A into the kernel."""

from typing import Dict

import numpy as np

from mlm_tpu.delta.lora.config import LoraSettings, adapter_config
from mlm_tpu.delta.lora.layer import LoraDense
from mlm_tpu.delta.method import DeltaMethod, freeze_base
from mlm_tpu.delta.peft_names import PREFIX, task_type
from mlm_tpu.delta.targets import dense_layers


class Lora(DeltaMethod):
    name = "lora"
    mergeable = True
    settings_class = LoraSettings

    def __init__(self, settings: LoraSettings):
        super().__init__(settings)
        self.modules: Dict[str, LoraDense] = {}

    def apply(self, model) -> None:
        self.check_model(model)
        targets = self.settings.targets_for(model.config.model_type)
        for parent, attribute, dense, module in dense_layers(model, targets, "--lora-targets"):
            wrapped = LoraDense(dense, self.settings.rank, self.settings.scaling, self.settings.dropout)
            setattr(parent, attribute, wrapped)
            self.places.append((parent, attribute, wrapped))
            self.modules[module] = wrapped
        self.delta_layers = list(self.modules.values())
        freeze_base(model, self.delta_layers)

    def state_dict(self, model) -> Dict[str, np.ndarray]:
        state = {}
        for module, layer in self.modules.items():
            state[f"{PREFIX}{module}.lora_A.weight"] = np.ascontiguousarray(layer.lora_A.numpy().T)
            state[f"{PREFIX}{module}.lora_B.weight"] = np.ascontiguousarray(layer.lora_B.numpy().T)
        return state

    def load_state_dict(self, model, state: Dict[str, np.ndarray]) -> None:
        for module, layer in self.modules.items():
            layer.lora_A.assign(state[f"{PREFIX}{module}.lora_A.weight"].T)
            layer.lora_B.assign(state[f"{PREFIX}{module}.lora_B.weight"].T)

    def adapter_config(self, model, base_model: str) -> dict:
        return adapter_config(self.settings, self.settings.targets_for(model.config.model_type),
                              task_type(model, self.name), base_model)

    def merge(self, model) -> None:
        for layer in self.modules.values():
            base = layer.base_layer
            update = np.matmul(layer.lora_A.numpy(), layer.lora_B.numpy()) * layer.scaling
            base.kernel.assign(base.kernel.numpy() + update)
        self.unwrap()


METHOD = Lora
