"""Loading a trained model and its tokenizer (a save_pretrained folder or a Hub name) for any command."""

import os

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
