"""Model configurations: a saved model's config (a folder or a Hub name) read as transformers 4's TensorFlow classes
need it, what is wrong with one said in a line; presets, JSON files and --config-overrides for a new model."""

import os
from typing import Callable, Dict, Optional

from mlm_tpu.errors import UserError, reason_of
from mlm_tpu.model_folder import families
from mlm_tpu.hub import is_local
from mlm_tpu.model_folder.checks import check_config_names_no_code, check_model_folder
from mlm_tpu.model_folder.pytorch import TF_POSITION_PADDING_IDX

# The T5 family, by model type, and the TensorFlow class of each: T5 and T5 1.1 (t5), and mT5 (mt5: T5 1.1 with a
# large SentencePiece vocabulary). Wherever mlm_tpu takes a T5 it takes any of them, and keeps its type.
T5_CLASSES = {"t5": "TFT5ForConditionalGeneration", "mt5": "TFMT5ForConditionalGeneration"}
T5_MODEL_TYPES = tuple(T5_CLASSES)


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


def longest_input(config) -> Optional[int]:
    """The most tokens a model reads at once: its learned positions, less those a RoBERTa-style TensorFlow model
    never gives a token (it numbers positions from its padding index + 1, TF_POSITION_PADDING_IDX); None for a model
    without learned positions (T5's relative attention takes any length)."""
    positions, model_type = getattr(config, "max_position_embeddings", None), families.model_type(config)
    if model_type in T5_MODEL_TYPES or not positions:
        return None
    padding_idx = TF_POSITION_PADDING_IDX.get(model_type)
    return positions if padding_idx is None else positions - padding_idx - 1


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
    check_config_names_no_code(name_or_path, flag)
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
