"""LoRA applied to a model: each target Dense layer replaced by a LoraDense around it; PEFT's key names
(`base_model.model.<module>.lora_A.weight` [r, in], `lora_B.weight` [out, r]); merging folds B·A into the kernel.
A classifier's head trains and is saved whole beside it (modules_to_save.py)."""

from typing import Dict

import numpy as np

from mlm_tpu.delta.lora.config import adapter_config, supported_types
from mlm_tpu.delta.lora.layer import LoraDense
from mlm_tpu.delta.method import WrapsDenseLayers
from mlm_tpu.delta.peft_names import PREFIX, task_type
from mlm_tpu.model_folder import families


class Lora(WrapsDenseLayers):
    @classmethod
    def supported_types(cls):
        return supported_types()
    targets_flag = "--lora-targets"

    def wrap(self, model, dense, module: str) -> LoraDense:
        return LoraDense(dense, self.settings.rank, self.settings.scaling, self.settings.dropout)

    def delta_state_dict(self, model) -> Dict[str, np.ndarray]:
        state = {}
        for module, layer in self.modules.items():
            state[f"{PREFIX}{module}.lora_A.weight"] = np.ascontiguousarray(layer.lora_A.numpy().T)
            state[f"{PREFIX}{module}.lora_B.weight"] = np.ascontiguousarray(layer.lora_B.numpy().T)
        return state

    def load_delta_state_dict(self, model, state: Dict[str, np.ndarray]) -> None:
        for module, layer in self.modules.items():
            layer.lora_A.assign(state[f"{PREFIX}{module}.lora_A.weight"].T)
            layer.lora_B.assign(state[f"{PREFIX}{module}.lora_B.weight"].T)

    def adapter_config(self, model, base_model: str) -> dict:
        return adapter_config(self.settings, self.settings.targets_for(families.model_type(model.config)),
                              task_type(model, self.name), base_model, self.modules_to_save)

    def merge(self, model) -> None:
        for layer in self.modules.values():
            base = layer.base_layer
            update = np.matmul(layer.lora_A.numpy(), layer.lora_B.numpy()) * layer.scaling
            base.kernel.assign(base.kernel.numpy() + update)
        self.unwrap()


METHOD = Lora
