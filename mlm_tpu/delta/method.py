"""What every delta-tuning method does (the folders lora/, ia3/, prompt/, prefix/, adapter/ implement it).

A method wraps layers of a built transformers TF model in place (`apply`), so the model's own
`call`, `generate`, validation and prediction run through the delta unchanged; freezes every base
weight, so `model.trainable_variables` are the delta's alone (and the optimizer holds state for
them only); and names its weights as PEFT (or AdapterHub) saves them (`state_dict`). LoRA and IA3
also train and save whole the modules PEFT's `modules_to_save` names (a classifier's new head:
modules_to_save.py).
"""

from typing import Dict, List, Sequence, Tuple

import numpy as np
import tf_keras as keras

from mlm_tpu.configuration import settings_of
from mlm_tpu.delta.registry import REGISTERED, method_class, registration_of
from mlm_tpu.errors import UserError
from mlm_tpu.delta.modules_to_save import load_saved_state_dict, saved_layers, saved_state_dict
from mlm_tpu.delta.targets import dense_layers, walk
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.configs import T5_MODEL_TYPES


class DeltaMethod:
    """One method with its settings, applied to one model."""

    supported_model_types = (*T5_MODEL_TYPES, "roberta")
    weights_file = "adapter_model.safetensors"  # PEFT's names; AdapterHub's differ
    no_weight_decay: Tuple[str, ...] = ()  # its weights (names) AdamW must not pull toward 0, as PEFT's recipes
    why_not_packed = ""  # why --pack's rows could not score as their examples alone do, where they could not
    config_file = "adapter_config.json"
    trains_heads = False  # whether it can train a classifier's new head beside the delta (PEFT's modules_to_save)

    def __init__(self, settings):
        self.settings = settings  # the method's config dataclass (its config.py)
        self.modules_to_save: Tuple[str, ...] = ()  # PEFT's names of the modules that train and save whole
        self.delta_layers: List[keras.layers.Layer] = []
        self.saved_layers: List[keras.layers.Layer] = []  # the layers of modules_to_save, once applied
        self.places: List[tuple] = []  # (parent, attribute, wrapper) of each base layer a wrapper replaced

    @property
    def name(self) -> str:
        """The --delta word it registered (its folder's __init__.py)."""
        return registration_of(type(self)).name

    @classmethod
    def of(cls, config) -> "DeltaMethod":
        """The method with the settings of a TrainingConfig (or any object with its settings' flags as attributes)."""
        return cls(settings_of(config, registration_of(cls).settings))

    @classmethod
    def from_record(cls, settings: dict, modules_to_save: Sequence[str] = ()) -> "DeltaMethod":
        """The method with the settings an adapter folder records (mlm_tpu_delta.json)."""
        method = cls(registration_of(cls).settings(**{name: tuple(value) if isinstance(value, list) else value
                                                      for name, value in settings.items()}))
        method.modules_to_save = tuple(modules_to_save)
        return method

    @classmethod
    def supported_types(cls) -> Tuple[str, ...]:
        """The model types it applies to."""
        return tuple(cls.supported_model_types)

    def check_model(self, model) -> None:
        self.check_model_type(families.model_type(model.config))

    def check_model_type(self, model_type: str) -> None:
        """Refuse a model type the method does not apply to, naming the methods that do."""
        if model_type in self.supported_types():
            return
        others = [name for name in REGISTERED if model_type in method_class(name).supported_types()]
        instead = f"; --delta {' or '.join(others)} {'do' if len(others) > 1 else 'does'}" if others else ""
        raise UserError(f"--delta {self.name} does not support {model_type} models (only "
                        f"{', '.join(self.supported_types())}){instead}; give another --model-name-or-path or --delta")

    def apply(self, model) -> None:
        """Wrap the model's layers (the model is built); record the delta layers in `delta_layers`."""
        raise NotImplementedError

    def state_dict(self, model) -> Dict[str, np.ndarray]:
        """The delta's weights under the names and in the shapes the PyTorch library saves them."""
        raise NotImplementedError

    def load_state_dict(self, model, state: Dict[str, np.ndarray]) -> None:
        """Set the delta's weights from a saved `state_dict` (every key used, none missing)."""
        raise NotImplementedError

    def adapter_config(self, model, base_model: str) -> dict:
        raise NotImplementedError

    mergeable = False  # whether the delta can be folded into the base weights (LoRA and IA3)

    def merge(self, model) -> None:
        """Fold the delta into the base weights, then put the base layers back in place of the wrappers: the model
        is the base model's class and shape again, with merged weights (LoRA and IA3 only)."""
        raise UserError(f"--delta {self.name} adds to the model; it cannot be folded into its weights (only lora "
                        "and ia3 can be merged)")

    def unwrap(self) -> None:
        """Put each wrapped base layer back where `apply` put its wrapper."""
        for parent, attribute, wrapper in self.places:
            setattr(parent, attribute, wrapper.base_layer)
        self.places, self.delta_layers = [], []

    def delta_variables(self) -> list:
        """What trains: the delta's weights, and those of the modules saved whole."""
        return ([variable for layer in self.delta_layers for variable in layer.delta_weights] +
                [variable for layer in self.saved_layers for variable in layer.weights])


class WrapsDenseLayers(DeltaMethod):
    """A method that wraps the Dense layers its targets match (LoRA, IA3), one wrapper per PEFT module name, and
    can be folded into their kernels."""

    mergeable = True
    trains_heads = True
    targets_flag: str  # the flag that names the targets, for the message when they match nothing

    def __init__(self, settings):
        super().__init__(settings)
        self.modules: Dict[str, keras.layers.Layer] = {}  # PEFT module name -> its wrapper
        self.pytorch_names: Dict[int, Tuple[str, bool]] = {}  # the model's weights' PyTorch names, before wrapping

    def wrap(self, model, dense: keras.layers.Dense, module: str) -> keras.layers.Layer:
        raise NotImplementedError

    def apply(self, model) -> None:
        self.check_model(model)
        self.pytorch_names = families.of_model(model).pytorch_names(model)  # the family's names, of the base layers
        targets = self.settings.targets_for(families.model_type(model.config))
        for parent, attribute, dense, module in dense_layers(model, targets, self.targets_flag, self.pytorch_names,
                                                             self.modules_to_save):
            wrapped = self.wrap(model, dense, module)
            setattr(parent, attribute, wrapped)
            self.places.append((parent, attribute, wrapped))
            self.modules[module] = wrapped
        self.delta_layers = list(self.modules.values())
        self.saved_layers = saved_layers(model, self.modules_to_save, self.pytorch_names)
        freeze_base(model, self.delta_layers + self.saved_layers)

    def delta_state_dict(self, model) -> Dict[str, np.ndarray]:
        """The wrappers' weights under PEFT's names."""
        raise NotImplementedError

    def load_delta_state_dict(self, model, state: Dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def state_dict(self, model) -> Dict[str, np.ndarray]:
        return {**self.delta_state_dict(model), **saved_state_dict(self.saved_layers, self.pytorch_names)}

    def load_state_dict(self, model, state: Dict[str, np.ndarray]) -> None:
        self.load_delta_state_dict(model, state)
        load_saved_state_dict(self.saved_layers, state, self.pytorch_names)


def freeze_base(model, delta_layers) -> None:
    """Make every base weight non-trainable and keep the delta layers' own weights trainable.

    Keras counts a layer's weights as trainable only if the layer and every parent are: layers holding no delta
    layer are switched off whole; a parent of a delta layer (T5's attention, which owns the relative position
    bias) stays on and hands its own weights to its non-trainable list."""
    delta_ids = {id(layer) for layer in delta_layers}
    holders = {id(layer) for layer in delta_layers}  # layers with a delta layer in or under them
    parents = {id(child): parent for parent, _, child in _with_owner(model)}
    for layer in delta_layers:
        node = parents.get(id(layer))
        while node is not None:
            holders.add(id(node))
            node = parents.get(id(node))
    delta_parts = set()  # layers a delta layer holds besides the base layer it wraps (its own sub-layers)
    for layer in delta_layers:
        base = getattr(layer, "base_layer", None)
        under_base = {id(child) for _, _, child in walk(base)} | {id(base)} if base is not None else set()
        delta_parts |= {id(child) for _, _, child in walk(layer)} - under_base
    for layer in [model] + [child for _, _, child in walk(model)]:
        if id(layer) in delta_parts and id(layer) not in delta_ids:
            continue
        if id(layer) in delta_ids:
            if getattr(layer, "base_layer", None) is not None:
                layer.base_layer.trainable = False  # the base layer a delta layer wraps
        elif id(layer) not in holders:
            layer.trainable = False
        else:
            own = list(layer._trainable_weights)
            layer._trainable_weights[:] = []
            layer._non_trainable_weights.extend(own)


def _with_owner(model):
    """(owning layer, attribute, child) for every layer under `model`; a list item's owner is the list's layer."""
    stack = [model]
    while stack:
        layer = stack.pop()
        for attribute, value in list(vars(layer).items()):
            if attribute.startswith("_"):
                continue
            items = value if isinstance(value, (list, tuple)) or type(value).__name__ == "ListWrapper" else [value]
            for item in items:
                if isinstance(item, keras.layers.Layer):
                    yield layer, attribute, item
                    stack.append(item)
