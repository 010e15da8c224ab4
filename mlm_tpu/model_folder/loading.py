"""Reading model folders (a `save_pretrained` folder or a Hub name) and model configurations, with clear errors.

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
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.pooling import follow_classifier_pooling
from mlm_tpu.model_folder.pytorch import TF_POSITION_PADDING_IDX, WEIGHTS_INDEX_NAME
from mlm_tpu.tokenizer.load import load_tokenizer

# An ELECTRA run's folder (mlm_tpu/electra/folders.py): the discriminator, whose head tells replaced tokens from
# original ones and fills no masks, and in GENERATOR_FOLDER the masked LM trained beside it.
DISCRIMINATOR_ARCHITECTURE = "ElectraForPreTraining"
GENERATOR_FOLDER = "generator"
WEIGHT_FILES = ("tf_model*.h5", "model*.safetensors", "pytorch_model*.bin")  # what save_pretrained writes, sharded too
# Masked-LM heads whose PyTorch classes tie the decoder's bias to the head's own (transformers 5's _tied_weights_keys)
TIED_DECODER_BIAS_HEADS = ("predictions", "lm_head")
# transformers' maps of its TensorFlow classes whose models hold a masked-LM head (a BERT's pretraining heads hold one
# too), or no head at all (a bare encoder, which gets a new one): any other class of theirs has a task head instead
MASKED_LM_HEAD_MAPS = ("TF_MODEL_FOR_MASKED_LM_MAPPING_NAMES", "TF_MODEL_FOR_PRETRAINING_MAPPING_NAMES",
                       "TF_MODEL_MAPPING_NAMES")
# The T5 family, by model type, and the TensorFlow class of each: T5 and T5 1.1 (t5), and mT5 (mt5: T5 1.1 with a
# large SentencePiece vocabulary). Wherever mlm_tpu takes a T5 it takes any of them, and keeps its type.
T5_CLASSES = {"t5": "TFT5ForConditionalGeneration", "mt5": "TFMT5ForConditionalGeneration"}
T5_MODEL_TYPES = tuple(T5_CLASSES)


def is_local(name_or_path: str) -> bool:
    """Whether `name_or_path` names a local path (anything else is taken for a Hub name)."""
    return os.path.exists(name_or_path) or name_or_path.startswith((".", "/", "~"))


def check_model_folder(name_or_path: str, flag: str) -> None:
    """A local path must be a saved model; anything else is taken for a Hub name."""
    if is_local(name_or_path) and not os.path.isfile(os.path.join(name_or_path, "config.json")):
        if _is_unsaved_run(name_or_path):
            raise UserError(f"{flag} {name_or_path} is the output folder of a training run that has saved no model yet "
                            "(no config.json: it stopped before its first save); run its command again to resume it "
                            "and let it save, or give a folder that holds a saved model")
        raise UserError(f"{flag} {name_or_path}: not a saved model (no config.json there); give the --output-dir "
                        "of `python train.py`, or any save_pretrained folder")


def _is_unsaved_run(folder: str) -> bool:
    """Whether `folder` is a training run's output folder that holds no model yet: what a run writes before its first
    save (its settings, its backups, its logs) is there."""
    from mlm_tpu.output_dir import RUN_INFO_FILE

    return os.path.isdir(folder) and any(os.path.exists(os.path.join(folder, name))
                                         for name in (RUN_INFO_FILE, "backup", "logs"))



def longest_input(config) -> Optional[int]:
    """The most tokens a model reads at once: its learned positions, less those a RoBERTa-style TensorFlow model
    never gives a token (it numbers positions from its padding index + 1, TF_POSITION_PADDING_IDX); None for a model
    without learned positions (T5's relative attention takes any length)."""
    positions, model_type = getattr(config, "max_position_embeddings", None), families.model_type(config)
    if model_type in T5_MODEL_TYPES or not positions:
        return None
    padding_idx = TF_POSITION_PADDING_IDX.get(model_type)
    return positions if padding_idx is None else positions - padding_idx - 1

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
        if _hub_file(name_or_path, "tf_model.h5") or _hub_file(name_or_path, "tf_model.h5.index.json"):
            return []

        def fetch(name: str) -> Optional[str]:
            return _hub_file(name_or_path, name)
    index = fetch(WEIGHTS_INDEX_NAME)
    if index:
        return _listed_shards(index, fetch, f"{flag} {name_or_path}")
    if is_local(name_or_path):
        return sorted(glob.glob(os.path.join(name_or_path, "model*.safetensors")))
    single = fetch("model.safetensors")
    return [single] if single else []


def _hub_file(name: str, filename: str) -> Optional[str]:
    """The local path of a Hub model's file, from the Hub cache or downloaded into it; None when the model has no
    such file, or it cannot be had (offline and not cached: the load that follows says so)."""
    from transformers.utils.hub import cached_file

    try:
        return cached_file(name, filename, _raise_exceptions_for_missing_entries=False,
                           _raise_exceptions_for_connection_errors=False, _raise_exceptions_for_gated_repo=False)
    except (OSError, ValueError):
        return None


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


def check_position_padding(config, where: str) -> None:
    """A RoBERTa-family PyTorch checkpoint whose pad_token_id is not the padding index transformers' TensorFlow class
    numbers positions from (TF_POSITION_PADDING_IDX, hard-coded): its PyTorch class numbers them from pad_token_id,
    so every token would read another position's embedding in TensorFlow; refused in one line."""
    padding_idx = TF_POSITION_PADDING_IDX.get(config.model_type)
    if padding_idx is None or config.pad_token_id in (None, padding_idx):
        return
    shift = abs(config.pad_token_id - padding_idx)
    raise UserError(f"{where} is a {config.model_type} checkpoint whose pad_token_id is {config.pad_token_id}: its "
                    f"PyTorch class numbers positions from that id, transformers' TensorFlow class always from "
                    f"{padding_idx}, so every token would read a position embedding {shift} row(s) off; mlm_tpu "
                    f"reads PyTorch {config.model_type} checkpoints that pad with id {padding_idx} (as roberta-base "
                    "and xlm-roberta-base): give one of those")


def _check_weights_there(folder: str, flag: str) -> None:
    """A local folder with a config but no weights (copied without its large files) named as such: transformers
    says only which files it looked for."""
    if os.path.isdir(folder) and not any(glob.glob(os.path.join(folder, pattern)) for pattern in WEIGHT_FILES):
        raise UserError(f"{flag} {folder} holds no weights (no tf_model.h5, model.safetensors or pytorch_model.bin "
                        "beside its config.json); copy the folder again with its weights")


def tensorflow_config(name_or_path: str):
    """The saved model's config, as transformers 4's TensorFlow class must read it (a T5 that transformers 5 saved:
    untied_t5_output_of_transformers_5), whatever its weights' layout."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(name_or_path)
    untied_t5_output_of_transformers_5(config)
    return config


def untied_t5_output_of_transformers_5(config) -> Dict[str, str]:
    """A T5 config transformers 5 saved says in `scale_decoder_outputs` whether the decoder's output is scaled by
    d_model^-0.5 before the output layer (T5: yes; T5 1.1: no), and writes `tie_word_embeddings` true always, as it
    ties the output layer to the embeddings; an mT5 config it saved says the same of mT5, whose output it never scales;
    transformers 4 reads both from `tie_word_embeddings`. So a T5 1.1 or mT5 saved by transformers 5 is set untied
    (unscaled), and its output layer, which the file may hold only as the embeddings, read from them where it is
    absent: the aliases for SafetensorsWeights."""
    if _scaled_by_transformers_5(config) in (None, True):
        return {}
    config.tie_word_embeddings = False
    return {"lm_head.weight": "shared.weight"}


def _scaled_by_transformers_5(config) -> Optional[bool]:
    """Whether transformers 5 scales the decoder's output of the T5 it saved with this config (None: not a T5 that
    transformers 5 saved)."""
    if config.model_type == "mt5":
        saved_by = str(getattr(config, "transformers_version", None) or "0").split(".")[0]
        return False if saved_by.isdigit() and int(saved_by) >= 5 else None
    return getattr(config, "scale_decoder_outputs", None) if config.model_type == "t5" else None


def _check_tensorflow_weights(folder: str, flag: str) -> None:
    """A local tf_model.h5 that HDF5 cannot open (cut short by a copy or a full disk) named as such: transformers
    says only "Unable to load weights from h5 file", and suggests from_pt=True."""
    import h5py

    path = os.path.join(folder, "tf_model.h5")
    if not os.path.isfile(path):
        return
    try:
        h5py.File(path, "r").close()
    except OSError as error:
        raise UserError(f"{flag} {folder}: its tf_model.h5 cannot be read ({reason_of(error)}; it may have been cut "
                        "short); copy the model folder again") from None



def check_overrides_keep_shapes(name_or_path: str, model_class, config, overrides: Optional[str], flag: str) -> None:
    """--config-overrides on a checkpoint may change what changes no weight (dropout, ...). One that changes a
    weight's shape, or how many there are (hidden_size, intermediate_size, num_hidden_layers), would load the
    checkpoint into a model it does not fit, its weights re-initialised or reshaped into noise: refused in one line,
    naming the flag. The two shapes are compared on the models built from the saved config and from `config`."""
    from transformers import AutoConfig

    if not overrides:
        return
    saved = AutoConfig.from_pretrained(name_or_path)
    if saved.to_diff_dict() == config.to_diff_dict():
        return
    before, after = _weight_shapes(model_class, saved), _weight_shapes(model_class, config)
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    if changed:
        raise UserError(f"--config-overrides '{overrides}' changes {len(changed)} weights of {flag} {name_or_path} "
                        f"({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''}): their shapes, or how many "
                        "there are, so the checkpoint would not load into it; override only settings that change no "
                        "weight (hidden_dropout_prob, attention_probs_dropout_prob, ...), or train this shape from "
                        "scratch with --model-config")


def _weight_shapes(model_class, config) -> Dict[str, tuple]:
    """The shape of every weight of `model_class` built from `config`, by its PyTorch name."""
    from mlm_tpu.model_folder.pytorch import pytorch_name_and_transpose

    model = model_class.from_config(config)
    model.build_in_name_scope()
    return {pytorch_name_and_transpose(variable)[0]: tuple(variable.shape) for variable in model.weights}


def load_with_new_head(name_or_path: str, model_class, config, flag: str, overrides: Optional[str] = None):
    """`model_class` with `config` (the saved model's, with other settings of its head, or `overrides`: checked to
    change no weight), its weights read from the folder (TensorFlow or PyTorch layout) or Hub name; the weights it
    lacks, or holds in other shapes (a head of other labels), are new. Returns (model, the PyTorch names of the new
    weights); a missing weight of the encoder itself is one error line."""
    check_model_folder(name_or_path, flag)
    _check_weights_there(name_or_path, flag)
    _check_tensorflow_weights(name_or_path, flag)
    check_overrides_keep_shapes(name_or_path, model_class, config, overrides, flag)
    model, new_weights = read_checkpoint(name_or_path, model_class, config, flag)
    refuse_missing_encoder_weights(model, new_weights, f"{flag} {name_or_path}")
    return follow_classifier_pooling(model), new_weights


def load_with_head_settings(name_or_path: str, model_class, settings: dict, where: str):
    """(model, the PyTorch names of its new weights): a saved model as `model_class`, its config given a head's
    settings its own lacks (a classifier's labels and pooling), new weights where the folder has none of their shape;
    a hand-written family reads its own folders (families.py)."""
    family = families.of_folder(name_or_path)
    if family is not families.GENERIC:
        check_model_folder(name_or_path, where)
        config = family.with_settings(family.read_config(name_or_path), settings)
        model, info = family.load(name_or_path, families.head_of_class(model_class), where, config)
        refuse_missing_encoder_weights(model, info["missing"], where)
        return model, info["missing"]
    config = read_model_config(name_or_path, where)
    config.update(settings)
    return load_with_new_head(name_or_path, model_class, config, where)


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


def refuse_missing_encoder_weights(model, new_weights, where: str) -> None:
    """New weights may be a head's (a classifier's, a masked LM's; the pooler a BERT classifier puts on its encoder,
    which a masked LM has no use for and saves without, as transformers counts it): any other weight of the encoder
    is one error line."""
    prefix = f"{model.base_model_prefix}."
    encoder = [name for name in new_weights if name.startswith(prefix) and not name.startswith(f"{prefix}pooler.")]
    if encoder:
        raise UserError(f"{where} lacks {len(encoder)} weights of the {families.model_type(model.config)} encoder "
                        f"({', '.join(encoder[:3])}{', ...' if len(encoder) > 3 else ''}); is it a checkpoint of this "
                        "model?")


def new_modules(new_weights) -> str:
    """The modules of a model's new weights, for the log ("cls.predictions, cls.predictions.transform.dense")."""
    return ", ".join(sorted({name.rsplit(".", 1)[0] for name in new_weights}))


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


def check_masked_lm_head(name_or_path: str, model_class, flag: str, use: str = "use") -> None:
    """A masked LM (`model_class`) loaded from an ELECTRA discriminator or a fine-tuned classifier or tagger would
    get a new, untrained head, and guess every piece at about 1/vocabulary: refused, pointing to the masked LM (`use`
    it: "continue", "fill masks with")."""
    if not model_class.__name__.endswith("ForMaskedLM"):
        return
    saved = architecture(name_or_path) or ""
    if has_task_head(saved):
        raise UserError(f"{flag} {name_or_path} is a fine-tuned {saved} (it has no masked-LM head); {use} the masked "
                        "LM it was fine-tuned from")
    if saved != DISCRIMINATOR_ARCHITECTURE:
        return
    generator = os.path.join(name_or_path, GENERATOR_FOLDER)
    use = (f"use its generator: {generator}" if os.path.isfile(os.path.join(generator, "config.json")) else
           "use its generator, the masked LM trained beside it")
    raise UserError(f"{flag} {name_or_path} is an ELECTRA discriminator (it has no masked-LM head); {use}")


def has_task_head(architecture_name: str) -> bool:
    """Whether a saved model of this class (its config's `architectures`) holds a task head in place of a masked-LM
    head (a classifier, a tagger, a question answerer...), as transformers' own maps of its TensorFlow classes say:
    one of its classes, and none with a masked-LM head or no head (MASKED_LM_HEAD_MAPS)."""
    from transformers.models.auto import modeling_tf_auto

    def classes(map_name: str) -> set:
        values = getattr(modeling_tf_auto, map_name).values()
        return {name.removeprefix("TF") for value in values for name in ((value,) if isinstance(value, str) else value)}

    known = set().union(*(classes(name) for name in dir(modeling_tf_auto) if name.endswith("_MAPPING_NAMES")
                          and name != "CONFIG_MAPPING_NAMES"))
    return architecture_name in known - set().union(*map(classes, MASKED_LM_HEAD_MAPS))


def load_model(name_or_path: str, model_class, flag: str = "--model", use: str = "use"):
    """`model_class` from `python train.py`'s --output-dir, any save_pretrained folder (TensorFlow or PyTorch
    weights), or a Hub name, every weight of it the checkpoint's (one it lacks is one error line: a model to use as
    it is would run with it random); a classifier pooling as its config says (pooling.py), as wherever a model is
    loaded."""
    check_model_folder(name_or_path, flag)
    check_masked_lm_head(name_or_path, model_class, flag, use)
    family = families.of_folder(name_or_path)
    if family is not families.GENERIC:  # a hand-written family reads its own folders (families.py)
        model, info = family.load(name_or_path, families.head_of_class(model_class), f"{flag} {name_or_path}")
        missing = info["missing"]
    else:
        model, missing = _read_transformers_model(name_or_path, model_class, flag)
    if missing:
        raise UserError(f"{flag} {name_or_path} lacks {len(missing)} weights of {model_class.__name__}, or holds them "
                        f"in other shapes ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); is it a "
                        "checkpoint of this model?")
    return model if family.pools_natively else follow_classifier_pooling(model)


def _read_transformers_model(name_or_path: str, model_class, flag: str):
    """(model, weights the checkpoint lacks) of transformers' TF class `model_class`."""
    _check_tensorflow_weights(name_or_path, flag)
    try:
        config = tensorflow_config(name_or_path)
    except (OSError, ValueError) as error:
        problem = (config_problem(name_or_path, flag, error) if is_local(name_or_path) else
                   f"{flag} {name_or_path}: cannot load {model_class.__name__} from it ({reason_of(error)})")
        raise UserError(problem) from None
    return read_checkpoint(name_or_path, model_class, config, flag)


def load_pretrained(name_or_path: str, model_class, flag: str = "--model", use: str = "use"):
    """(model, tokenizer), both from the same folder or Hub name; the quick checks first."""
    check_model_folder(name_or_path, flag)
    tokenizer = load_tokenizer(name_or_path, flag)
    model = load_model(name_or_path, model_class, flag, use)
    keep_inputs_the_model_takes(tokenizer, model)
    return model, tokenizer


def keep_inputs_the_model_takes(tokenizer, model) -> None:
    """A BERT tokenizer gives token_type_ids, which a family without token types (DistilBERT, continued with its
    BERT tokenizer) refuses: the tokenizer then gives none."""
    import inspect

    if "token_type_ids" not in inspect.signature(model.call).parameters:
        tokenizer.model_input_names = [name for name in tokenizer.model_input_names if name != "token_type_ids"]


def read_model_config(name_or_path: str, flag: str):
    """The config of a saved model (a folder or a Hub name), without loading its weights; what is wrong with a local
    folder's config.json said as such."""
    from transformers import AutoConfig

    check_model_folder(name_or_path, flag)
    try:
        return AutoConfig.from_pretrained(name_or_path)
    except (OSError, ValueError) as error:
        if is_local(name_or_path):
            raise UserError(config_problem(name_or_path, flag, error)) from None
        raise UserError(f"{flag} '{name_or_path}' is neither a model folder here nor a reachable Hub model "
                        f"({reason_of(error)}); check the name") from None


def config_problem(folder: str, flag: str, error: BaseException) -> str:
    """What is wrong with a local folder's config.json that transformers cannot read: not JSON (cut short, edited by
    hand), or a model type that transformers 4 does not know (a newer model's, or a typo)."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    from mlm_tpu.jsonfiles import read_json

    values = read_json(os.path.join(folder, "config.json"), f"{flag} {folder}'s config.json",
                       "copy the model folder again, or mend the file")
    found = values.get("model_type") if isinstance(values, dict) else None
    if not found:
        return (f"{flag} {folder}: its config.json names no model_type; copy the model folder again, or give a "
                "folder that save_pretrained wrote")
    if found not in CONFIG_MAPPING_NAMES:
        return (f"{flag} {folder}: its config.json names the model type '{found}', which transformers "
                f"{transformers.__version__} (the last with TensorFlow models) does not know; give a model of a type "
                "it builds (bert, roberta, xlm-roberta, electra, deberta-v2, t5, ...)")
    return f"{flag} {folder}: its config.json cannot be read ({reason_of(error)}); copy the model folder again"


def model_types(model_class) -> Tuple[str, ...]:
    """The model types `model_class` can be built as: its config's, or every one an Auto class maps."""
    mapping = getattr(model_class, "_model_mapping", None)
    if mapping is None:
        return (model_class.config_class.model_type,)
    return tuple(config_class.model_type for config_class in mapping.keys())


def check_model_type(base_config, model_class, where: str, needed_by: str) -> None:
    """Refuse a saved model (its config) of a type `model_class` cannot be (a T5 task given a RoBERTa: transformers
    would build a T5 from the RoBERTa's config and fail at the first step); `where` names it ("--model-name-or-path
    runs/x"), `needed_by` says who needs it ("--task generation")."""
    found = base_config.model_type
    types = model_types(model_class)
    if found in types or families.of_values({"model_type": found}).builds(families.head_of_class(model_class)):
        return
    wanted = (f"a {types[0]} base" if len(types) == 1 else
              f"a base of one of the types {', '.join(types[:5])}{', ...' if len(types) > 5 else ''}")
    raise UserError(f"{needed_by} needs {wanted}; {where} is a {found} model: give such a base, or the --task of a "
                    f"{found} model")


def saved_config(name_or_path: str):
    """The saved model's config (None when there is none to read: loading will say why)."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name_or_path)
    except (OSError, ValueError):
        return None


def model_type(name_or_path: str) -> Optional[str]:
    """The saved model's type from its config (None when there is none to read: loading will say why)."""
    config = saved_config(name_or_path)
    return config.model_type if config else None


def architecture(name_or_path: str) -> Optional[str]:
    """The saved model's class from its config (`RobertaForMaskedLM`; None when it names none)."""
    config = saved_config(name_or_path)
    return (config.architectures or [None])[0] if config else None


def load_config(name_or_path: str, presets: Dict[str, dict], config_class: Callable, flag: str = "--model-config",
                overrides: Optional[str] = None):
    """A model configuration: a preset by name, a JSON file (any name) or a folder holding config.json, or a Hub
    name; then `overrides` ("hidden_dropout_prob=0,num_hidden_layers=4", as the 🤗 example scripts take them)."""
    return with_overrides(_load_config(name_or_path, presets, config_class, flag), overrides)


def with_overrides(config, overrides: Optional[str]):
    """`config` changed by --config-overrides ("name=value,..."; None: as it is), or one error line."""
    if overrides:
        try:
            config.update_from_string(overrides)
        except ValueError as error:
            raise UserError(f"--config-overrides '{overrides}': {reason_of(error)}; write name=value pairs, comma "
                            f"separated, of settings the {config.model_type} configuration has") from None
    return config


def _load_config(name_or_path: str, presets: Dict[str, dict], config_class: Callable, flag: str):
    from transformers import AutoConfig

    if name_or_path in presets:
        return config_class(**presets[name_or_path])
    if os.path.isfile(name_or_path):
        from mlm_tpu.jsonfiles import read_json

        values = read_json(name_or_path, f"{flag} {name_or_path}", "give a model's config.json")
        if not isinstance(values, dict):
            raise UserError(f"{flag} {name_or_path} is not a model configuration (a JSON object of settings)")
        try:
            return AutoConfig.for_model(**values) if "model_type" in values else config_class(**values)
        except (ValueError, TypeError) as error:
            raise UserError(f"{flag} {name_or_path} is not a model configuration ({reason_of(error)})") from None
    try:
        return AutoConfig.from_pretrained(name_or_path)
    except (OSError, ValueError):
        raise UserError(f"{flag} '{name_or_path}' is not a preset ({', '.join(presets)}), a config.json, "
                        "nor a reachable Hub model") from None
