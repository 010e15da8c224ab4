"""PEFT's `modules_to_save`: whole layers that train beside the delta and are saved with it.

PEFT's task types SEQ_CLS and TOKEN_CLS add `classifier` and `score` (a classifier's head, new on a pretrained
encoder); any other weight the base lacked (BERT's pooler, under a masked-LM base) is named before them, as a PEFT
user lists their own. PEFT saves such a module's weights under `base_model.model.` + their PyTorch names
(`base_model.model.classifier.out_proj.weight` [out, in]), loads them into its ModulesToSaveWrapper
(peft/utils/other.py), and wraps no layer under them with the delta. The base PeftModel loads onto must have the
head's shape already: built with the head's `num_labels` (the card says how).
"""

from typing import Dict, List, Sequence, Tuple

import numpy as np

from mlm_tpu.delta.peft_names import PREFIX, head_task_type
from mlm_tpu.delta.targets import under, walk

HEAD_MODULES = ("classifier", "score")  # what PeftModelForSequenceClassification and ...TokenClassification add


def modules_to_save(model, new_weights: Sequence[str]) -> Tuple[str, ...]:
    """PEFT's modules_to_save for `model` with these new weights (PyTorch names): none but for a classifier; for one,
    the modules of the new weights outside the head, then HEAD_MODULES."""
    if not head_task_type(type(model).__name__):
        return ()
    modules = {name.rsplit(".", 1)[0] for name in new_weights}
    return (*sorted(module for module in modules if not under(module, HEAD_MODULES)), *HEAD_MODULES)


def saved_layers(model, names: Sequence[str], pytorch: Dict[int, Tuple[str, bool]]) -> List:
    """The outermost layers whose weights are all under `names` (RoBERTa's `classifier` head whole, BERT's
    `classifier` Dense): between them, every weight under `names`; `pytorch`: the model's weights' PyTorch names
    (its family's pytorch_names)."""
    if not names:
        return []
    saved = {key for key, (name, _) in pytorch.items() if under(name.rsplit(".", 1)[0], names)}
    found, covered = [], set()
    for _, _, layer in walk(model):
        ids = {id(variable) for variable in layer.weights}
        if ids and ids <= saved and not ids & covered:
            found.append(layer)
            covered |= ids
    if covered != saved:
        raise ValueError(f"modules_to_save {', '.join(names)}: some of their weights are held by layers that hold "
                         "other weights too")
    return found


def saved_state_dict(layers: Sequence, pytorch: Dict[int, Tuple[str, bool]]) -> Dict[str, np.ndarray]:
    """The layers' weights as PEFT saves modules_to_save: PyTorch names after PREFIX, PyTorch's layout."""
    state = {}
    for layer in layers:
        for variable in layer.weights:
            name, transpose = pytorch[id(variable)]
            array = variable.numpy()
            state[PREFIX + name] = np.ascontiguousarray(array.T if transpose else array)
    return state


def load_saved_state_dict(layers: Sequence, state: Dict[str, np.ndarray],
                          pytorch: Dict[int, Tuple[str, bool]]) -> None:
    """Set the layers' weights from a saved state (KeyError for one it lacks, ValueError for another shape)."""
    for layer in layers:
        for variable in layer.weights:
            name, transpose = pytorch[id(variable)]
            array = state[PREFIX + name]
            variable.assign(array.T if transpose else array)
