"""Finding the layers a method wraps, by the names PEFT gives modules: the PyTorch module path of each Keras
layer (its weights' PyTorch names, as the model's family maps them: model_folder/families.py `pytorch_names`),
matched as PEFT matches `target_modules`: the whole name, or its end after a dot (`q` matches
`encoder.block.0.layer.0.SelfAttention.q`)."""

import re
from typing import Dict, Iterator, List, Sequence, Tuple

import tf_keras as keras

from mlm_tpu.errors import UserError
from mlm_tpu.model_folder import families


def pytorch_module_name(layer: keras.layers.Layer, names: Dict[int, Tuple[str, bool]]) -> str:
    """`encoder.block.0.layer.0.SelfAttention.q` for the Keras layer that owns that module's weight; `names`: the
    model's weights' PyTorch names (its family's pytorch_names)."""
    return names[id(layer.weights[0])][0].rsplit(".", 1)[0]


def matches(module: str, targets: Sequence[str]) -> bool:
    """PEFT's rule (`check_target_module_exists` with a list)."""
    return module in targets or any(module.endswith(f".{target}") for target in targets)


def under(module: str, modules: Sequence[str]) -> bool:
    """PEFT's rule for modules_to_save (`check_target_module_exists`): the module is one of `modules`, or in one."""
    return any(re.match(rf"(^|.*\.){re.escape(name)}($|\..*)", module) for name in modules)


def child_layers(layer) -> Iterator[Tuple[object, str, object]]:
    """(parent, attribute, child) for the Keras layers held by `layer`'s attributes, lists included."""
    for attribute, value in list(vars(layer).items()):
        if attribute.startswith("_"):
            continue
        if isinstance(value, keras.layers.Layer):
            yield layer, attribute, value
        elif isinstance(value, (list, tuple)) or type(value).__name__ == "ListWrapper":
            for item in value:
                if isinstance(item, keras.layers.Layer):
                    yield value, None, item


def walk(layer, seen=None) -> Iterator[Tuple[object, str, object]]:
    """Every (parent, attribute, layer) under `layer`, depth first in attribute order, each layer once (T5's and
    RoBERTa's embeddings are held twice); attribute None: the layer is in a list."""
    seen = set() if seen is None else seen
    for parent, attribute, child in child_layers(layer):
        if id(child) not in seen:
            seen.add(id(child))
            yield parent, attribute, child
            yield from walk(child, seen)


def dense_layers(model, targets: Sequence[str], flag: str, pytorch: Dict[int, Tuple[str, bool]],
                 saved_whole: Sequence[str] = ()) -> List[Tuple[object, str, keras.layers.Dense, str]]:
    """(parent, attribute, Dense, PEFT module name) of each Dense layer matching `targets`, none in or under the
    modules `saved_whole` names (PEFT's modules_to_save, which it never wraps); refuses targets that match nothing,
    naming the modules there are. `pytorch`: the model's weights' PyTorch names (its family's pytorch_names)."""
    found, names = [], []
    for parent, attribute, layer in walk(model):
        if isinstance(layer, keras.layers.Dense) and attribute is not None and layer.weights:
            module = pytorch_module_name(layer, pytorch)
            if under(module, saved_whole):
                continue
            names.append(module)
            if matches(module, targets):
                found.append((parent, attribute, layer, module))
    unmatched = [target for target in targets if not any(matches(module, [target]) for module in names)]
    if unmatched:
        last = sorted({module.rsplit(".", 1)[-1] for module in names})
        raise UserError(f"{flag} {','.join(targets)}: {', '.join(unmatched)} matches no layer of this "
                        f"{families.model_type(model.config)} model; its Dense layers are named {', '.join(last)}")
    return found
