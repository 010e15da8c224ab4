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


def load_tokenizer(name_or_path: str, flag: str = "--tokenizer", fast: bool = False):
    """`AutoTokenizer.from_pretrained` (a folder, a gs:// folder or a Hub name); with `fast`, refuse a slow (Python)
    tokenizer."""
    from transformers import AutoTokenizer

    source = _local_copy(name_or_path, flag) if cloud_storage.is_gcs(name_or_path) else name_or_path
    if os.path.isdir(source) and not holds_tokenizer(source):
        raise UserError(f"{flag} '{name_or_path}' holds no tokenizer (no tokenizer.json); pass the folder of one "
                        f"(a model folder saved by mlm_tpu holds its tokenizer), or {MAKE_ONE}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
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


def tokenizer_fingerprint(tokenizer) -> str:
    """What names a tokenizer in a shard manifest: a hash of its tokenizer.json, without the truncation and
    padding settings that transformers changes on a loaded tokenizer."""
    import hashlib

    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    return hashlib.sha256(backend.to_str().encode()).hexdigest()[:16]
