"""IA3 applied to a model: each target Dense layer replaced by an Ia3Dense around it; PEFT's key names
(`base_model.model.<module>.ia3_l` [out, 1], feed-forward modules [1, in]); merging scales the kernel (and bias)."""

from typing import Dict

import numpy as np

from mlm_tpu.delta.ia3.config import Ia3Settings, adapter_config
from mlm_tpu.delta.ia3.layer import Ia3Dense
from mlm_tpu.delta.method import DeltaMethod, freeze_base
from mlm_tpu.delta.peft_names import PREFIX, task_type
from mlm_tpu.delta.targets import dense_layers, matches


class Ia3(DeltaMethod):
    name = "ia3"
    mergeable = True
    settings_class = Ia3Settings

    def __init__(self, settings: Ia3Settings):
        super().__init__(settings)
        self.modules: Dict[str, Ia3Dense] = {}

    def apply(self, model) -> None:
        self.check_model(model)
        model_type = model.config.model_type
        feedforward = self.settings.feedforward_for(model_type)
        for parent, attribute, dense, module in dense_layers(model, self.settings.targets_for(model_type),
                                                             "--ia3-targets"):
            wrapped = Ia3Dense(dense, feedforward=matches(module, feedforward))
            setattr(parent, attribute, wrapped)
            self.places.append((parent, attribute, wrapped))
            self.modules[module] = wrapped
        self.delta_layers = list(self.modules.values())
        freeze_base(model, self.delta_layers)

    @staticmethod
    def _pytorch_shape(layer: Ia3Dense, vector: np.ndarray) -> np.ndarray:
        return vector[None, :] if layer.feedforward else vector[:, None]

    def state_dict(self, model) -> Dict[str, np.ndarray]:
        return {f"{PREFIX}{module}.ia3_l": np.ascontiguousarray(self._pytorch_shape(layer, layer.ia3_l.numpy()))
                for module, layer in self.modules.items()}

    def load_state_dict(self, model, state: Dict[str, np.ndarray]) -> None:
        for module, layer in self.modules.items():
            layer.ia3_l.assign(state[f"{PREFIX}{module}.ia3_l"].reshape(-1))

    def adapter_config(self, model, base_model: str) -> dict:
        return adapter_config(self.settings, model.config.model_type, task_type(model, self.name), base_model)

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
