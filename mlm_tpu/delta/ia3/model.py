"""IA3 applied to a model: each target Dense layer replaced by an Ia3Dense around it; PEFT's key names
(`base_model.model.<module>.ia3_l` [out, 1], feed-forward modules [1, in]); merging scales the kernel (and bias).
A classifier's head trains and is saved whole beside it (modules_to_save.py)."""

from typing import Dict

import numpy as np

from mlm_tpu.delta.ia3.config import DEFAULT_TARGETS, adapter_config
from mlm_tpu.delta.ia3.layer import Ia3Dense
from mlm_tpu.delta.method import WrapsDenseLayers
from mlm_tpu.delta.peft_names import PREFIX, task_type
from mlm_tpu.delta.targets import matches


class Ia3(WrapsDenseLayers):
    supported_model_types = tuple(DEFAULT_TARGETS)
    targets_flag = "--ia3-targets"
    no_weight_decay = ("ia3_l",)  # scales whose no-op is 1

    def wrap(self, model, dense, module: str) -> Ia3Dense:
        return Ia3Dense(dense, feedforward=matches(module, self.settings.feedforward_for(model.config.model_type)))

    @staticmethod
    def _pytorch_shape(layer: Ia3Dense, vector: np.ndarray) -> np.ndarray:
        return vector[None, :] if layer.feedforward else vector[:, None]

    def delta_state_dict(self, model) -> Dict[str, np.ndarray]:
        return {f"{PREFIX}{module}.ia3_l": np.ascontiguousarray(self._pytorch_shape(layer, layer.ia3_l.numpy()))
                for module, layer in self.modules.items()}

    def load_delta_state_dict(self, model, state: Dict[str, np.ndarray]) -> None:
        for module, layer in self.modules.items():
            layer.ia3_l.assign(state[f"{PREFIX}{module}.ia3_l"].reshape(-1))

    def adapter_config(self, model, base_model: str) -> dict:
        return adapter_config(self.settings, model.config.model_type, task_type(model, self.name), base_model,
                              self.modules_to_save)

    def merge(self, model) -> None:
        for layer in self.modules.values():
            base, scale = layer.base_layer, layer.ia3_l.numpy()
            if layer.feedforward:  # (x * s) W + b: the rows of the [in, out] kernel
                base.kernel.assign(base.kernel.numpy() * scale[:, None])
            else:  # (x W + b) * s: the columns, and the bias
                base.kernel.assign(base.kernel.numpy() * scale[None, :])
                if base.use_bias:
                    base.bias.assign(base.bias.numpy() * scale)
        self.unwrap()


METHOD = Ia3
