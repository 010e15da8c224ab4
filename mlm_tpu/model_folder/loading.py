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
from typing import Callable, Dict, Optional, Tuple

from mlm_tpu.errors import UserError, reason_of
from mlm_tpu.model_folder.pooling import follow_classifier_pooling
from mlm_tpu.model_folder.pytorch import TF_POSITION_PADDING_IDX
from mlm_tpu.tokenizer.load import load_tokenizer

# An ELECTRA run's folder (mlm_tpu/electra/folders.py): the discriminator, whose head tells replaced tokens from
# original ones and fills no masks, and in GENERATOR_FOLDER the masked LM trained beside it.
DISCRIMINATOR_ARCHITECTURE = "ElectraForPreTraining"
GENERATOR_FOLDER = "generator"
WEIGHT_FILES = ("tf_model*.h5", "model*.safetensors", "pytorch_model*.bin")  # what save_pretrained writes, sharded too
# Masked-LM heads whose PyTorch classes tie the decoder's bias to the head's own (transformers 5's _tied_weights_keys)
TIED_DECODER_BIAS_HEADS = ("predictions", "lm_head")
# The task heads transformers puts on an encoder in place of its masked-LM head.
TASK_HEAD_SUFFIXES = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
                      "ForMultipleChoice")
# The T5 family, by model type, and the TensorFlow class of each: T5 and T5 1.1 (t5), and mT5 (mt5: T5 1.1 with a
# large SentencePiece vocabulary). Wherever mlm_tpu takes a T5 it takes any of them, and keeps its type.
T5_CLASSES = {"t5": "TFT5ForConditionalGeneration", "mt5": "TFMT5ForConditionalGeneration"}
T5_MODEL_TYPES = tuple(T5_CLASSES)


def check_model_folder(name_or_path: str, flag: str) -> None:
    """A local path must be a saved model; anything else is taken for a Hub name."""
    if os.path.exists(name_or_path) or name_or_path.startswith((".", "/", "~")):
        if not os.path.isfile(os.path.join(name_or_path, "config.json")):
            raise UserError(f"{flag} {name_or_path}: not a saved model (no config.json there); give the --output-dir "
                            "of `python train.py`, or any save_pretrained folder")



def longest_input(config) -> Optional[int]:
    """The most tokens a model reads at once: its learned positions, less those a RoBERTa-style TensorFlow model
    never gives a token (it numbers positions from its padding index + 1, TF_POSITION_PADDING_IDX); None for a model
    without learned positions (T5's relative attention takes any length)."""
    positions = getattr(config, "max_position_embeddings", None)
    if config.model_type in T5_MODEL_TYPES or not positions:
        return None
    padding_idx = TF_POSITION_PADDING_IDX.get(config.model_type)
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

    def get_tensor(self, name: str):
        with self._damage_named():
            return self._file.get_tensor(self._aliases.get(name, name))


def decoder_bias_tied_to(name: str) -> Optional[str]:
    """The decoder bias a head's bias stands for (`predictions.bias` -> `predictions.decoder.bias`): PyTorch ties the
    two, and transformers 5 saves them once, under the head's name, where ALBERT's TensorFlow head adds the
    decoder's."""
    head, _, leaf = name.rpartition(".")
    return f"{head}.decoder.bias" if leaf == "bias" and head.endswith(TIED_DECODER_BIAS_HEADS) else None


def pytorch_checkpoint_files(folder: str):
    """The folder's PyTorch-layout safetensors files (the shards, when sharded), when it has no TensorFlow weights."""
    if not os.path.isdir(folder) or glob.glob(os.path.join(folder, "tf_model*.h5")):
        return []
    return sorted(glob.glob(os.path.join(folder, "model*.safetensors")))


def load_from_pytorch_checkpoint(folder: str, model_class, files, flag: str):
    """`model_class` built from the folder's config, its weights read from PyTorch-layout safetensors files."""
    from transformers import AutoConfig
    from transformers.modeling_tf_pytorch_utils import load_pytorch_state_dict_in_tf2_model

    config = AutoConfig.from_pretrained(folder)
    aliases = untied_t5_output_of_transformers_5(config)
    model = model_class.from_config(config)
    model.build_in_name_scope()
    loaded = set()
    for path in files:
        weights = SafetensorsWeights(path, f"{flag} {folder}", "copy the checkpoint again", aliases)
        _, info = load_pytorch_state_dict_in_tf2_model(model, weights, tf_inputs=False,
                                                       allow_missing_keys=True, output_loading_info=True,
                                                       skip_logger_warnings=True)
        loaded.add(frozenset(info["missing_keys"]))
    missing = sorted(frozenset.intersection(*loaded))
    if missing:
        raise UserError(f"{flag} {folder}: its model.safetensors lacks {len(missing)} weights of "
                        f"{model_class.__name__} ({', '.join(missing[:3])}, ...); is it a checkpoint of this model?")
    return model


def _check_weights_there(folder: str, flag: str) -> None:
    """A local folder with a config but no weights (copied without its large files) named as such: transformers
    says only which files it looked for."""
    if os.path.isdir(folder) and not any(glob.glob(os.path.join(folder, pattern)) for pattern in WEIGHT_FILES):
        raise UserError(f"{flag} {folder} holds no weights (no tf_model.h5, model.safetensors or pytorch_model.bin "
                        "beside its config.json); copy the folder again with its weights")


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


def load_with_new_head(name_or_path: str, model_class, config, flag: str):
    """`model_class` with `config` (the saved model's, with other settings of its head), its weights read from the
    folder (TensorFlow or PyTorch layout) or Hub name; the weights it lacks, or holds in other shapes (a head of
    other labels), are new. Returns (model, the PyTorch names of the new weights); a missing weight of the encoder
    itself is one error line."""
    check_model_folder(name_or_path, flag)
    _check_weights_there(name_or_path, flag)
    _check_tensorflow_weights(name_or_path, flag)
    try:
        files = pytorch_checkpoint_files(name_or_path)
        if files:
            from transformers.modeling_tf_pytorch_utils import load_pytorch_state_dict_in_tf2_model

            model = model_class.from_config(config)
            model.build_in_name_scope()
            infos = [load_pytorch_state_dict_in_tf2_model(model, SafetensorsWeights(path, f"{flag} {name_or_path}",
                                                                                     "copy the checkpoint again"),
                                                          tf_inputs=False,
                                                          allow_missing_keys=True, output_loading_info=True,
                                                          ignore_mismatched_sizes=True, skip_logger_warnings=True)[1]
                     for path in files]
            missing = frozenset.intersection(*(frozenset(info["missing_keys"]) for info in infos))
            mismatched = {key for info in infos for key, *_ in info["mismatched_keys"]}
        else:
            model, info = model_class.from_pretrained(name_or_path, config=config, use_safetensors=False,
                                                      output_loading_info=True, ignore_mismatched_sizes=True)
            missing, mismatched = set(info["missing_keys"]), {key for key, *_ in info["mismatched_keys"]}
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"{flag} {name_or_path}: cannot load {model_class.__name__} from it "
                        f"({reason_of(error)})") from None
    encoder = [key for key in missing if key.split(".")[0] == model.base_model_prefix or
               f"/{model.base_model_prefix}/" in key]
    if encoder:
        raise UserError(f"{flag} {name_or_path} lacks {len(encoder)} weights of the {config.model_type} encoder "
                        f"({', '.join(sorted(encoder)[:3])}, ...); is it a checkpoint of this model?")
    return follow_classifier_pooling(model), new_weight_names(model, set(missing) | mismatched)


def new_modules(new_weights) -> str:
    """The modules of a model's new weights, for the log ("cls.predictions, cls.predictions.transform.dense")."""
    return ", ".join(sorted({name.rsplit(".", 1)[0] for name in new_weights}))


def new_weight_names(model, reported) -> list:
    """The PyTorch names (`classifier.out_proj.weight`) of the model's weights transformers reported as not loaded:
    by their PyTorch names (from a PyTorch checkpoint), or from tf_model.h5 by their TF names below the model's
    scope (`bert/pooler/dense/bias:0`) or the layer holding them (`classifier`)."""
    from mlm_tpu.model_folder.pytorch import pytorch_name_and_transpose

    new = set()
    for variable in model.weights:
        name, _ = pytorch_name_and_transpose(variable)
        scoped = variable.name.split("/", 1)[-1]
        if name in reported or any(scoped == key or scoped.startswith(f"{key}/") for key in reported):
            new.add(name)
    return sorted(new)


def check_masked_lm_head(name_or_path: str, model_class, flag: str) -> None:
    """A masked LM (`model_class`) loaded from an ELECTRA discriminator or a fine-tuned classifier or tagger would
    get a new, untrained head, and guess every piece at about 1/vocabulary: refused, pointing to the masked LM."""
    if not model_class.__name__.endswith("ForMaskedLM"):
        return
    saved = architecture(name_or_path) or ""
    if saved.endswith(TASK_HEAD_SUFFIXES):
        raise UserError(f"{flag} {name_or_path} is a fine-tuned {saved} (it has no masked-LM head); fill masks "
                        "with the masked LM it was fine-tuned from")
    if saved != DISCRIMINATOR_ARCHITECTURE:
        return
    generator = os.path.join(name_or_path, GENERATOR_FOLDER)
    use = (f"use its generator: {generator}" if os.path.isfile(os.path.join(generator, "config.json")) else
           "use its generator, the masked LM trained beside it")
    raise UserError(f"{flag} {name_or_path} is an ELECTRA discriminator (it has no masked-LM head); {use}")


def load_model(name_or_path: str, model_class, flag: str = "--model"):
    """`model_class` from `python train.py`'s --output-dir, any save_pretrained folder (TensorFlow or PyTorch
    weights), or a Hub name; a classifier pooling as its config says (pooling.py), as wherever a model is loaded."""
    check_model_folder(name_or_path, flag)
    check_masked_lm_head(name_or_path, model_class, flag)
    _check_tensorflow_weights(name_or_path, flag)
    try:
        files = pytorch_checkpoint_files(name_or_path)
        if files:
            model = load_from_pytorch_checkpoint(name_or_path, model_class, files, flag)
        else:
            model = model_class.from_pretrained(name_or_path, use_safetensors=False)
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"{flag} {name_or_path}: cannot load {model_class.__name__} from it "
                        f"({reason_of(error)})") from None
    return follow_classifier_pooling(model)


def load_pretrained(name_or_path: str, model_class, flag: str = "--model"):
    """(model, tokenizer), both from the same folder or Hub name; the quick checks first."""
    check_model_folder(name_or_path, flag)
    tokenizer = load_tokenizer(name_or_path, flag)
    model = load_model(name_or_path, model_class, flag)
    keep_inputs_the_model_takes(tokenizer, model)
    return model, tokenizer


def keep_inputs_the_model_takes(tokenizer, model) -> None:
    """A BERT tokenizer gives token_type_ids, which a family without token types (DistilBERT, continued with its
    BERT tokenizer) refuses: the tokenizer then gives none."""
    import inspect

    if "token_type_ids" not in inspect.signature(model.call).parameters:
        tokenizer.model_input_names = [name for name in tokenizer.model_input_names if name != "token_type_ids"]


def read_model_config(name_or_path: str, flag: str):
    """The config of a saved model (a folder or a Hub name), without loading its weights."""
    from transformers import AutoConfig

    check_model_folder(name_or_path, flag)
    try:
        return AutoConfig.from_pretrained(name_or_path)
    except (OSError, ValueError) as error:
        raise UserError(f"{flag} '{name_or_path}' is neither a model folder here nor a reachable Hub model "
                        f"({reason_of(error)}); check the name") from None


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
    if found in types:
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
