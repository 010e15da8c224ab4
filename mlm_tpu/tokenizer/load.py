"""Loading a saved tokenizer for any command, with a clear error for a folder that holds none."""

from mlm_tpu.errors import UserError


def load_tokenizer(name_or_path: str, flag: str = "--tokenizer", fast: bool = False):
    """`AutoTokenizer.from_pretrained`; with `fast`, refuse a slow (Python) tokenizer."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    except (OSError, ValueError):
        raise UserError(f"{flag} '{name_or_path}' is not a tokenizer folder nor a reachable Hub name "
                        "(make one with `python -m mlm_tpu.tokenizer train`)") from None
    if fast and not tokenizer.is_fast:
        raise UserError(f"{flag} '{name_or_path}' is a slow (Python) tokenizer; a fast one (a folder with "
                        "tokenizer.json) is needed")
    return tokenizer
