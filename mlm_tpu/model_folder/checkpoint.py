"""Reading a checkpoint's weights into a TensorFlow model, whichever layout it holds them in.

A folder may hold its weights as TensorFlow's `tf_model.h5` (ours hold it beside `model.safetensors`),
or only as a PyTorch checkpoint (`model.safetensors`, maybe sharded), as transformers 5 and most Hub
models now save them. transformers 4.57's TensorFlow `from_pretrained` reads `model.safetensors`
first, and fails on a PyTorch-format one: its PyTorch-checkpoint loader iterates over the opened
file, which no safetensors release allows (huggingface/transformers#40028). So `tf_model.h5` is read
whenever there is one (`use_safetensors=False`), and a PyTorch checkpoint is handed to transformers'
own loader (`load_pytorch_state_dict_in_tf2_model`: names mapped, kernels transposed; no PyTorch
needed) as the mapping it expects.
"""

import glob
import os
from collections.abc import Mapping
from contextlib import contextmanager
from typing import Callable, Dict, List, Optional, Tuple

from mlm_tpu.errors import UserError, reason_of
from mlm_tpu.hub import hub_file, is_local
from mlm_tpu.model_folder.checks import check_position_padding
from mlm_tpu.model_folder.configs import untied_t5_output_of_transformers_5
from mlm_tpu.model_folder.pytorch import WEIGHTS_INDEX_NAME

# Masked-LM heads whose PyTorch classes tie the decoder's bias to the head's own (transformers 5's _tied_weights_keys)
TIED_DECODER_BIAS_HEADS = ("predictions", "lm_head")


class SafetensorsWeights(Mapping):
    """A safetensors file as a mapping of names to arrays (what transformers' loader iterates over), read as it is
    used; a damaged file (cut short, or not safetensors) is one line naming it: `what` says whose file it is, `fix`
    what to do."""

    def __init__(self, path: str, what: str, fix: str, aliases: Optional[Dict[str, str]] = None):
        from safetensors import safe_open

        self._path, self._what, self._fix = path, what, fix
        with self._damage_named():
            self._file = safe_open(path, framework="numpy")
        names = set(self._file.keys())
        # a weight the file does not hold, read from another it does (`aliases`: name -> the one it is read from;
        # and a decoder bias transformers 5 saved once, as the head's own bias: decoder_bias_tied_to)
        tied = {tied: name for name in names for tied in [decoder_bias_tied_to(name)] if tied}
        self._aliases = {name: source for name, source in {**tied, **(aliases or {})}.items()
                         if name not in names and source in names}

    @contextmanager
    def _damage_named(self):
        """A safetensors error (its header, or a tensor past the end of a file cut short) as one line."""
        from safetensors import SafetensorError

        try:
            yield
        except (SafetensorError, OSError) as error:
            raise UserError(f"{self._what}: its {os.path.basename(self._path)} is not a readable safetensors file "
                            f"({reason_of(error)}; it may have been cut short); {self._fix}") from None

    def __iter__(self):
        return iter([*self._file.keys(), *self._aliases])

    def __len__(self) -> int:
        return len(self._file.keys()) + len(self._aliases)

    def __getitem__(self, name: str):
        return self.get_tensor(name)

    def holds(self, name: str) -> bool:
        """Whether the file holds `name` itself (not as an alias of another weight)."""
        return name not in self._aliases

    def get_tensor(self, name: str):
        with self._damage_named():
            return self._file.get_tensor(self._aliases.get(name, name))


def decoder_bias_tied_to(name: str) -> Optional[str]:
    """The decoder bias a head's bias stands for (`predictions.bias` -> `predictions.decoder.bias`): PyTorch ties the
    two, and transformers 5 saves them once, under the head's name, where ALBERT's TensorFlow head adds the
    decoder's."""
    head, _, leaf = name.rpartition(".")
    return f"{head}.decoder.bias" if leaf == "bias" and head.endswith(TIED_DECODER_BIAS_HEADS) else None


class CheckpointWeights(Mapping):
    """The safetensors files of one checkpoint (its shards) as one mapping of names to arrays: transformers' loader
    then matches every weight once, over all of them; a weight one file holds wins over another's alias for it."""

    def __init__(self, files: List[SafetensorsWeights]):
        self._files: Dict[str, SafetensorsWeights] = {}
        for weights in files:
            for name in weights:
                if name not in self._files or weights.holds(name):
                    self._files[name] = weights

    def __iter__(self):
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def __getitem__(self, name: str):
        return self.get_tensor(name)

    def get_tensor(self, name: str):
        return self._files[name].get_tensor(name)


def pytorch_checkpoint_files(name_or_path: str, flag: str) -> List[str]:
    """The checkpoint's PyTorch-layout safetensors files (every shard its index lists), when it holds no TensorFlow
    weights: a local folder's, or a Hub model's (read from the Hub cache, or downloaded into it, as transformers
    reads any Hub file). [] when it holds TensorFlow weights, which transformers' TensorFlow loader reads."""
    if is_local(name_or_path):
        if not os.path.isdir(name_or_path) or glob.glob(os.path.join(name_or_path, "tf_model*.h5")):
            return []

        def fetch(name: str) -> Optional[str]:
            path = os.path.join(name_or_path, name)
            return path if os.path.isfile(path) else None
    else:
        if hub_file(name_or_path, "tf_model.h5") or hub_file(name_or_path, "tf_model.h5.index.json"):
            return []

        def fetch(name: str) -> Optional[str]:
            return hub_file(name_or_path, name)
    index = fetch(WEIGHTS_INDEX_NAME)
    if index:
        return _listed_shards(index, fetch, f"{flag} {name_or_path}")
    if is_local(name_or_path):
        return sorted(glob.glob(os.path.join(name_or_path, "model*.safetensors")))
    single = fetch("model.safetensors")
    return [single] if single else []


def _listed_shards(index: str, fetch: Callable[[str], Optional[str]], where: str) -> List[str]:
    """The shards a sharded checkpoint's index lists, each there: a missing one is named (what a copy or a download
    left out), where transformers would say only which weights it lacks."""
    from mlm_tpu.jsonfiles import read_json

    listed = read_json(index, f"{where}'s {WEIGHTS_INDEX_NAME}", "copy the checkpoint again")
    names = sorted(set((listed.get("weight_map") or {}).values()) if isinstance(listed, dict) else ())
    files = {name: fetch(name) for name in names}
    missing = [name for name, path in files.items() if path is None]
    if missing:
        raise UserError(f"{where}: {', '.join(missing)}, {'one' if len(missing) == 1 else 'some'} of the {len(names)} "
                        f"files its {WEIGHTS_INDEX_NAME} lists, {'is' if len(missing) == 1 else 'are'} missing; copy "
                        "the checkpoint again with all its files")
    return list(files.values())


def read_pytorch_checkpoint(model_class, config, files, where: str) -> Tuple[object, set]:
    """(`model_class` built from `config`, the PyTorch names of its weights the checkpoint lacks or holds in other
    shapes), its weights read from PyTorch-layout safetensors files by transformers' own loader."""
    from transformers.modeling_tf_pytorch_utils import load_pytorch_state_dict_in_tf2_model

    check_position_padding(config, where)
    aliases = untied_t5_output_of_transformers_5(config)
    model = model_class.from_config(config)
    model.build_in_name_scope()
    weights = CheckpointWeights([SafetensorsWeights(path, where, "copy the checkpoint again", aliases)
                                 for path in files])
    _, info = load_pytorch_state_dict_in_tf2_model(model, weights, tf_inputs=False, allow_missing_keys=True,
                                                   output_loading_info=True, ignore_mismatched_sizes=True,
                                                   skip_logger_warnings=True)
    return model, {*info["missing_keys"], *(key for key, *_ in info["mismatched_keys"])}


def read_checkpoint(name_or_path: str, model_class, config, flag: str) -> Tuple[object, List[str]]:
    """(`model_class` with `config`, the PyTorch names of the weights the checkpoint lacks or holds in other shapes,
    left as built), its weights read from whichever layout it holds them in: PyTorch-only safetensors (a folder's or
    a Hub model's) or transformers' TensorFlow weights."""
    where = f"{flag} {name_or_path}"
    files = pytorch_checkpoint_files(name_or_path, flag)
    try:
        if files:
            model, reported = read_pytorch_checkpoint(model_class, config, files, where)
        else:
            model, info = model_class.from_pretrained(name_or_path, config=config, use_safetensors=False,
                                                      output_loading_info=True, ignore_mismatched_sizes=True)
            reported = {*info["missing_keys"], *(key for key, *_ in info["mismatched_keys"])}
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"{where}: cannot load {model_class.__name__} from it ({reason_of(error)})") from None
    return model, new_weight_names(model, reported)


def new_weight_names(model, reported) -> list:
    """The PyTorch names (`bert.pooler.dense.weight`) of the model's weights transformers reported as not loaded, in
    every spelling it reports them: PyTorch names from a PyTorch checkpoint, with the model's prefix or without it
    (a checkpoint of the bare encoder, saved without `bert.`), or from tf_model.h5 TensorFlow names below the model's
    scope (`bert/pooler/dense/bias:0`) or the layer holding them (`classifier`)."""
    from mlm_tpu.model_folder.pytorch import pytorch_name_and_transpose

    new = set()
    for variable in model.weights:
        name, _ = pytorch_name_and_transpose(variable)
        scoped = variable.name.split("/", 1)[-1]
        if ({name, name.removeprefix(f"{model.base_model_prefix}.")} & set(reported) or
                any(scoped == key or scoped.startswith(f"{key}/") for key in reported)):
            new.add(name)
    return sorted(new)


def new_modules(new_weights) -> str:
    """The modules of a model's new weights, for the log ("cls.predictions, cls.predictions.transform.dense")."""
    return ", ".join(sorted({name.rsplit(".", 1)[0] for name in new_weights}))
