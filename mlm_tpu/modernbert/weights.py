"""The table between the Keras model's variables and transformers 5's PyTorch state-dict names, and the
safetensors files on both sides of it.

Each row is (PyTorch name, Keras variable, transposed?). The names follow from the modules (layers.py names each
Keras layer after transformers 5's): a Dense kernel is a Linear weight transposed ([in, out] against [out, in]),
a LayerNormalization's gamma and beta are a LayerNorm's weight and bias, an Embedding's table is its weight.
Layer 0 has no `attn_norm`, and a tied decoder has no `decoder.weight`: transformers 5 writes neither, and loads
the tied one from the token embeddings.

Loading reads `model.safetensors` (or the shards its index names, float32 or bfloat16) of a folder saved by
transformers 5, or by `save_pretrained` here; a weight whose shape is not the config's is one error line. A bare
`ModernBertModel` checkpoint (no `model.` prefix) loads into a head's encoder, and a masked LM's into a classifier
(its `head` too, as transformers loads it), leaving the new weights as drawn.
"""

import json
import os
from typing import Dict, List, Mapping, Tuple

import numpy as np

from mlm_tpu.errors import UserError
from mlm_tpu.modernbert.config import read_config, write_config

WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
CONFIG_NAME = "config.json"
TIED_DECODER = "decoder.weight"


def dense_rows(name: str, layer) -> List[Tuple[str, object, bool]]:
    rows = [(f"{name}.weight", layer.kernel, True)]
    return rows + ([(f"{name}.bias", layer.bias, False)] if layer.use_bias else [])


def norm_rows(name: str, layer) -> List[Tuple[str, object, bool]]:
    rows = [(f"{name}.weight", layer.gamma, False)]
    return rows + ([(f"{name}.bias", layer.beta, False)] if layer.center else [])


def weight_table(model) -> List[Tuple[str, object, bool]]:
    """(PyTorch name, Keras variable, transposed?) of every weight of a built model, in transformers' order."""
    prefix = f"{model.base_model_prefix}." if model.base_model_prefix else ""
    encoder = model.model
    rows = [(f"{prefix}embeddings.tok_embeddings.weight", encoder.embeddings.tok_embeddings.embeddings, False)]
    rows += norm_rows(f"{prefix}embeddings.norm", encoder.embeddings.norm)
    for index, layer in enumerate(encoder.encoder_layers):
        name = f"{prefix}layers.{index}"
        if layer.attn_norm is not None:
            rows += norm_rows(f"{name}.attn_norm", layer.attn_norm)
        rows += dense_rows(f"{name}.attn.Wqkv", layer.attn.Wqkv) + dense_rows(f"{name}.attn.Wo", layer.attn.Wo)
        rows += norm_rows(f"{name}.mlp_norm", layer.mlp_norm)
        rows += dense_rows(f"{name}.mlp.Wi", layer.mlp.Wi) + dense_rows(f"{name}.mlp.Wo", layer.mlp.Wo)
    rows += norm_rows(f"{prefix}final_norm", encoder.final_norm)
    if hasattr(model, "head"):
        rows += dense_rows("head.dense", model.head.dense) + norm_rows("head.norm", model.head.norm)
    if hasattr(model, "decoder"):
        rows += [(TIED_DECODER, model.decoder.kernel, False)] if model.decoder.kernel is not None else []
        rows += [("decoder.bias", model.decoder.bias, False)] if model.decoder.bias is not None else []
    if hasattr(model, "classifier"):
        rows += dense_rows("classifier", model.classifier)
    return rows


def pytorch_state_dict(model) -> Dict[str, np.ndarray]:
    """Every weight under its transformers 5 name, in PyTorch's layout (float32)."""
    return {name: np.ascontiguousarray(variable.numpy().T if transpose else variable.numpy())
            for name, variable, transpose in weight_table(model)}


def load_state_dict(model, state: Mapping[str, np.ndarray], source: str) -> Dict[str, List[str]]:
    """Assign the checkpoint's arrays to the model's variables; returns its `missing` names (left as drawn) and
    `unexpected` ones (not used). A bare encoder's names (no `model.` prefix) match a head's encoder."""
    state = dict(state)
    if model.base_model_prefix and not any(name.startswith(f"{model.base_model_prefix}.") for name in state):
        state = {f"{model.base_model_prefix}.{name}" if not name.startswith(("head.", "decoder.", "classifier."))
                 else name: array for name, array in state.items()}
    if not model.base_model_prefix and any(name.startswith("model.") for name in state):  # a head's, into a bare one
        state = {name[len("model."):] if name.startswith("model.") else name: array for name, array in state.items()}
    if model.config.tie_word_embeddings:
        state.pop(TIED_DECODER, None)  # a copy of the token embeddings, where a checkpoint holds it
    missing, used = [], set()
    for name, variable, transpose in weight_table(model):
        if name not in state:
            missing.append(name)
            continue
        array = np.asarray(state[name], dtype=np.float32)
        array = array.T if transpose else array
        if tuple(array.shape) != tuple(variable.shape):
            expected = tuple(variable.shape)[::-1] if transpose else tuple(variable.shape)
            raise UserError(f"{source}: {name} has shape {list(state[name].shape)}, but its config.json makes it "
                            f"{list(expected)}; the weights and the config do not belong together")
        variable.assign(array)
        used.add(name)
    return {"missing": missing, "unexpected": sorted(set(state) - used)}


def read_safetensors(folder: str) -> Dict[str, np.ndarray]:
    """The weights of a folder: model.safetensors, or the shards its index names; bfloat16 read as float32."""
    from safetensors import SafetensorError, safe_open

    index_path = os.path.join(folder, WEIGHTS_INDEX_NAME)
    if os.path.isfile(index_path):
        with open(index_path, encoding="utf-8") as file:
            files = sorted(set(json.load(file)["weight_map"].values()))
    elif os.path.isfile(os.path.join(folder, WEIGHTS_NAME)):
        files = [WEIGHTS_NAME]
    else:
        raise UserError(f"{folder}: no {WEIGHTS_NAME} (a ModernBERT folder as transformers 5 saves it holds one)")
    state = {}
    for filename in files:
        try:
            with safe_open(os.path.join(folder, filename), framework="tf") as file:
                for name in file.keys():
                    state[name] = file.get_tensor(name).numpy().astype(np.float32)
        except (SafetensorError, OSError) as error:  # cut short by a copy or a full disk, or not safetensors
            raise UserError(f"{folder}: its {filename} is not a readable safetensors file ({error}; it may have been "
                            "cut short); copy the folder again") from None
    return state


def from_pretrained(folder: str, head: str = "masked_lm"):
    """(model, loading info) of a folder saved by transformers 5 (config.json in either spelling, safetensors)."""
    from mlm_tpu.modernbert.model import build

    model = build(read_config(os.path.join(folder, CONFIG_NAME)), head)
    return model, load_state_dict(model, read_safetensors(folder), folder)


def save_pretrained(model, folder: str) -> List[str]:
    """config.json (transformers 5's spelling, `architectures` naming the head's class) and model.safetensors
    (transformers 5's names, metadata {"format": "pt"}), so transformers 5 loads the folder with no missing or
    unexpected keys. Returns the files written."""
    from safetensors.numpy import save

    from mlm_tpu.output_dir import write_file

    os.makedirs(folder, exist_ok=True)
    write_config(model.config, os.path.join(folder, CONFIG_NAME), model.architecture)
    write_file(os.path.join(folder, WEIGHTS_NAME), save(pytorch_state_dict(model), metadata={"format": "pt"}))
    return [CONFIG_NAME, WEIGHTS_NAME]
