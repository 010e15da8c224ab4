"""Reading model folders (a `save_pretrained` folder or a Hub name) and model configurations, with clear errors."""

import os
from typing import Callable, Dict, Optional

from mlm_tpu.errors import UserError, reason_of
from mlm_tpu.tokenizer.load import load_tokenizer


def _check_model_folder(name_or_path: str, flag: str) -> None:
    """A local path must be a saved model; anything else is taken for a Hub name."""
    if os.path.exists(name_or_path) or name_or_path.startswith((".", "/", "~")):
        if not os.path.isfile(os.path.join(name_or_path, "config.json")):
            raise UserError(f"{flag} {name_or_path}: not a saved model (no config.json there); give the --output-dir "
                            "of `python train.py`, or any save_pretrained folder")


def load_model(name_or_path: str, model_class, flag: str = "--model"):
    """`model_class.from_pretrained` of `python train.py`'s --output-dir, any save_pretrained folder, or a Hub name."""
    _check_model_folder(name_or_path, flag)
    try:
        return model_class.from_pretrained(name_or_path)
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"{flag} {name_or_path}: cannot load {model_class.__name__} with TensorFlow weights "
                        f"from it ({reason_of(error)})") from None


def load_pretrained(name_or_path: str, model_class, flag: str = "--model"):
    """(model, tokenizer), both from the same folder or Hub name; the quick checks first."""
    _check_model_folder(name_or_path, flag)
    tokenizer = load_tokenizer(name_or_path, flag)
    return load_model(name_or_path, model_class, flag), tokenizer


def model_type(name_or_path: str) -> Optional[str]:
    """The saved model's type from its config (None when there is none to read: loading will say why)."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name_or_path).model_type
    except (OSError, ValueError):
        return None


def load_config(name_or_path: str, presets: Dict[str, dict], config_class: Callable, flag: str = "--model-config",
                overrides: Optional[str] = None):
    """A model configuration: a preset by name, a JSON file (any name) or a folder holding config.json, or a Hub
    name; then `overrides` ("hidden_dropout_prob=0,num_hidden_layers=4", as the 🤗 example scripts take them)."""
    config = _load_config(name_or_path, presets, config_class, flag)
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
