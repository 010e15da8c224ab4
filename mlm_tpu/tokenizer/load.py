"""Loading a saved tokenizer for any command, with a clear error for a folder that holds none or a damaged one."""

import atexit
import os
import shutil
import tempfile
from typing import Dict

from mlm_tpu import cloud_storage
from mlm_tpu.errors import UserError, reason_of

TOKENIZER_FILES = ("tokenizer.json", "spiece.model", "sentencepiece.bpe.model", "vocab.json", "vocab.txt")
MAKE_ONE = "make one with `python -m mlm_tpu.tokenizer train`"


_COPIES: Dict[str, str] = {}  # gs:// tokenizer folder -> its local copy, made once per process


def _local_copy(url: str, flag: str) -> str:
    """A gs:// tokenizer folder (what the workers of a Beam job on Dataflow read) copied to a temporary folder."""
    if url not in _COPIES:
        folder = tempfile.mkdtemp(prefix="mlm_tpu-tokenizer-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        if not cloud_storage.download_folder(url, folder):
            raise UserError(f"{flag} {url} holds no files; copy a tokenizer folder there "
                            f"(`gcloud storage cp -r TOKENIZER_FOLDER {url}`), or {MAKE_ONE}")
        _COPIES[url] = folder
    return _COPIES[url]


def holds_tokenizer(folder: str) -> bool:
    """Whether `folder` is a local folder with tokenizer files of its own (a model folder saved by mlm_tpu is)."""
    return os.path.isdir(folder) and any(os.path.isfile(os.path.join(folder, name)) for name in TOKENIZER_FILES)


# What transformers 5 writes in tokenizer_config.json about its own loading, which 4.57 has no use for.
TRANSFORMERS_5_BOOKKEEPING = ("tokenizer_class", "backend", "is_local", "local_files_only", "added_tokens_decoder",
                              "init_inputs")


def transformers_4_settings(config: dict) -> dict:
    """A tokenizer_config.json's settings as transformers 4.57 reads them: transformers 5 lists the extra special
    tokens (T5's sentinels) as `extra_special_tokens`, which 4.57 takes for a dict of named ones and fails on; they
    are 4.57's `additional_special_tokens`."""
    extra = config.get("extra_special_tokens")
    if not isinstance(extra, list):
        return {}
    return {"extra_special_tokens": {}, "additional_special_tokens": extra}


def from_tokenizer_json(source: str, config: dict):
    """A folder transformers 5 saved with its generic class `TokenizersBackend` (unknown to 4.57): its tokenizer.json
    (which carries the normalizer, pre-tokenizer, model and post-processor) with the special tokens and settings of
    its tokenizer_config.json (there is no special_tokens_map.json)."""
    from transformers import PreTrainedTokenizerFast
    from transformers.utils import cached_file

    settings = {key: value for key, value in config.items() if key not in TRANSFORMERS_5_BOOKKEEPING}
    settings = PreTrainedTokenizerFast.convert_added_tokens(settings)  # a special token saved with its flags
    return PreTrainedTokenizerFast(tokenizer_file=cached_file(source, "tokenizer.json"), name_or_path=source,
                                   **{**settings, **transformers_4_settings(config)})


def from_pretrained(source: str):
    """`AutoTokenizer.from_pretrained`, or, for a folder transformers 5 saved, what 4.57 reads the same way."""
    from transformers import AutoTokenizer
    from transformers.models.auto.tokenization_auto import get_tokenizer_config

    config = get_tokenizer_config(source)
    if config.get("tokenizer_class") == "TokenizersBackend":
        return from_tokenizer_json(source, config)
    return AutoTokenizer.from_pretrained(source, **transformers_4_settings(config))


def load_tokenizer(name_or_path: str, flag: str = "--tokenizer", fast: bool = False):
    """`AutoTokenizer.from_pretrained` (a folder, a gs:// folder or a Hub name; one saved by transformers 4 or 5);
    with `fast`, refuse a slow (Python) tokenizer."""
    source = _local_copy(name_or_path, flag) if cloud_storage.is_gcs(name_or_path) else name_or_path
    if os.path.isdir(source) and not holds_tokenizer(source):
        raise UserError(f"{flag} '{name_or_path}' holds no tokenizer (no tokenizer.json); pass the folder of one "
                        f"(a model folder saved by mlm_tpu holds its tokenizer), or {MAKE_ONE}")
    try:
        tokenizer = from_pretrained(source)
    except (OSError, ValueError):
        raise UserError(f"{flag} '{name_or_path}' is not a tokenizer folder nor a reachable Hub name "
                        f"({MAKE_ONE})") from None
    except Exception as error:  # the Rust tokenizers library raises a bare Exception for a damaged file
        raise UserError(f"{flag} '{name_or_path}': its tokenizer.json is not a valid tokenizer ({reason_of(error)}; "
                        f"it may have been cut short); copy it again, or {MAKE_ONE}") from None
    if fast and not tokenizer.is_fast:
        raise UserError(f"{flag} '{name_or_path}' is a slow (Python) tokenizer; a fast one (a folder with "
                        "tokenizer.json) is needed")
    return tokenizer


def tokenizer_fingerprint(tokenizer, as_saved: bool = False) -> str:
    """What names a tokenizer in a shard manifest: a hash of its tokenizer.json, without the truncation and
    padding settings that transformers changes on a loaded tokenizer, and written as transformers 4 writes it
    (`as_saved`: as it is, the hash that manifests recorded before transformers 5's folders were read alike)."""
    import hashlib

    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    if not as_saved:
        write_as_transformers_4(backend)
    return hashlib.sha256(backend.to_str().encode()).hexdigest()[:16]


def write_as_transformers_4(backend) -> None:
    """transformers 5 saves a BPE without a subword prefix or suffix with both "" (the same tokenizer), where
    transformers 4 and the tokenizers library write none: set them to none, so one vocabulary has one fingerprint
    whichever version saved it."""
    from tokenizers.models import BPE

    if isinstance(backend.model, BPE):
        if backend.model.continuing_subword_prefix == "":
            backend.model.continuing_subword_prefix = None
        if backend.model.end_of_word_suffix == "":
            backend.model.end_of_word_suffix = None
