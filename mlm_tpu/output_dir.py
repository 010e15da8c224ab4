"""Output folders: the one rule for writing them, and the record that lets every command keep to it.

The rule: a command writes only what it makes. A file already in its output folder is replaced only
with --overwrite, and even then only if mlm_tpu wrote it and it is still as written; a file mlm_tpu
did not write, or one changed since it did, is never replaced or deleted, with or without
--overwrite. A command checks this before its slow work, and stops with one line naming the files.
Going on with one's own unfinished work needs no --overwrite: a training run over its own
--output-dir, a sharding job finishing its own split.

How mlm_tpu knows what it wrote: every folder its commands write holds a record, `.mlm_tpu.json`,
listing each file written there with its size and crc32c (and its modification time, so that an
unchanged file is not read again), and the sub-folders a command owns whole (a training run's
backup/ and logs/). A shard split's record is its manifest (shards/writer.py). Folders written
before there were records (mlm_tpu 0.1 to 0.3) are recognised by what those versions always wrote
there (EARLIER_VERSIONS), and get a record the next time a command writes in them.

Files are written into a hidden staging folder and moved into place once all of them exist; the
record is rewritten around the move, first accepting each file's old and new contents, then only the
new, so a crash at any moment leaves every file either as recorded or as it was.
"""

import base64
import contextlib
import fnmatch
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import google_crc32c

from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import encode_json, read_json

RECORD = ".mlm_tpu.json"
CARD_PHRASE = "trained with mlm_tpu"  # in every README.md mlm_tpu writes (model and tokenizer cards)


@dataclass(frozen=True)
class Layout:
    """What one kind of output folder holds: its files (fnmatch patterns) and the sub-folders a run owns."""

    files: Tuple[str, ...]
    folders: Tuple[str, ...] = ()

    def names(self) -> Tuple[str, ...]:
        return self.files + self.folders


RUN_INFO_FILE = "training_args.json"  # a training run's config (replayable with --config) and what it computed
BEST_RECORD = "best_model.json"  # a training run's best epoch: its step and scores
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "spiece.model", "vocab.json", "merges.txt", "vocab.txt")  # the last three: RoBERTa's and BERT's
TOKENIZER_FOLDER = Layout((*TOKENIZER_FILES, "tokenizer_training.json", "tokenizer_extension.json", "README.md"))
MODEL_FOLDER = Layout(("config.json", "generation_config.json", "tf_model*.h5", "tf_model.h5.index.json",
                       "model*.safetensors", "model.safetensors.index.json", *TOKENIZER_FILES, "README.md",
                       "loss.png", RUN_INFO_FILE, BEST_RECORD,
                       # a delta-tuning run's adapter folder (mlm_tpu/delta/folder.py): PEFT's or AdapterHub's files
                       "adapter_config.json", "adapter_model.safetensors", "adapter.safetensors",
                       "mlm_tpu_delta.json",
                       # a mean-pooled classifier's PyTorch class and sentence-transformers' files
                       # (mlm_tpu/model_folder/pooling.py), with its 1_Pooling/
                       "modeling_mean_pooling.py", "modules.json", "sentence_bert_config.json",
                       "config_sentence_transformers.json"),  # an embedding model's (mlm_tpu/embedding)
                      ("backup", "logs", "generator", "1_Pooling"))  # generator/: an ELECTRA run's generator
# Earlier versions wrote no record: a folder without one that holds the marker was made by them, and its
# entries of the layout count as mlm_tpu's (a README.md only if it is one of mlm_tpu's cards).
EARLIER_VERSIONS = (("tokenizer_training.json", TOKENIZER_FOLDER), (RUN_INFO_FILE, MODEL_FOLDER),
                    ("README.md", MODEL_FOLDER))


def crc32c_base64(data: bytes) -> str:
    """The checksum GCS keeps for every object (base64 of the big-endian crc32c), used for local files too."""
    return base64.b64encode(google_crc32c.Checksum(data).digest()).decode()


def _file_crc32c(path: str) -> str:
    checksum = google_crc32c.Checksum()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 22), b""):
            checksum.update(chunk)
    return base64.b64encode(checksum.digest()).decode()


def _state(path: str, checksum: bool = True) -> dict:
    """What the record keeps of a file as written (the checksum may wait until the record is saved)."""
    stat = os.stat(path)
    return {"bytes": stat.st_size, "crc32c": _file_crc32c(path) if checksum else None, "mtime_ns": stat.st_mtime_ns}


def _is_card(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as stream:
            return CARD_PHRASE in stream.read(1 << 20)
    except (OSError, UnicodeDecodeError):
        return False


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


class Record:
    """What mlm_tpu wrote in one folder: each file as written, and the sub-folders it owns whole."""

    def __init__(self, folder: str, recognise: bool = True):
        self.folder = folder
        self.path = os.path.join(folder, RECORD)
        self.files: Dict[str, List[dict]] = {}  # name -> the states it may be in (two while it is being replaced)
        self.folders: List[str] = []
        if os.path.isfile(self.path):
            self._load()
        elif recognise and os.path.isdir(folder):
            self._recognise_earlier_version()

    def _load(self) -> None:
        record = read_json(self.path, "mlm_tpu's record of the files it wrote", "mlm_tpu cannot tell which "
                           "files there it wrote: choose another output folder, or delete the record to have "
                           "the files of earlier versions recognised by their names")
        if not isinstance(record, dict):
            raise UserError(f"{self.path} is not a record of mlm_tpu's; choose another output folder")
        self.files = {name: list(states) for name, states in record.get("files", {}).items()}
        self.folders = list(record.get("folders", []))

    def _recognise_earlier_version(self) -> None:
        names = os.listdir(self.folder)
        for marker, layout in EARLIER_VERSIONS:
            if marker not in names or (marker == "README.md" and not _is_card(os.path.join(self.folder, marker))):
                continue
            for name in names:
                path = os.path.join(self.folder, name)
                if os.path.isdir(path):
                    if name in layout.folders:
                        self.folders.append(name)
                elif _matches(name, layout.files) and (name != "README.md" or _is_card(path)):
                    self.files[name] = [_state(path, checksum=False)]  # read only if it is saved
            return

    def owns(self, name: str) -> bool:
        """Whether `name` in the folder is as mlm_tpu wrote it (a file it recorded, unchanged; a folder it owns)."""
        path = os.path.join(self.folder, name)
        if name in self.folders:
            return os.path.isdir(path) and not os.path.islink(path)
        if name not in self.files or not os.path.isfile(path) or os.path.islink(path):
            return False
        stat = os.stat(path)
        states = [state for state in self.files[name] if state["bytes"] == stat.st_size]
        if any(state["mtime_ns"] == stat.st_mtime_ns for state in states):
            return True
        crc = _file_crc32c(path) if states else None
        for state in states:
            if state["crc32c"] == crc:
                state["mtime_ns"] = stat.st_mtime_ns  # a copied folder: read once, then known again
                return True
        return False

    def others(self, names: Iterable[str]) -> List[str]:
        """Those of `names` that exist in the folder and that mlm_tpu did not write (or that changed since)."""
        return [name for name in names if os.path.lexists(os.path.join(self.folder, name)) and not self.owns(name)]

    def unrecognised(self) -> List[str]:
        """Everything in the folder mlm_tpu did not write, hidden entries (mlm_tpu's bookkeeping) aside."""
        return self.others(sorted(name for name in os.listdir(self.folder) if not name.startswith(".")))

    def save(self) -> None:
        for name, states in self.files.items():
            path = os.path.join(self.folder, name)
            for state in states:
                if state["crc32c"] is None:  # a file of an earlier version, recognised by its name
                    state["crc32c"] = _file_crc32c(path) if os.path.isfile(path) else "gone"
        payload = {"files": self.files, "folders": sorted(set(self.folders))}
        _write_atomically(self.path, (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode())

    def replace(self, staged: Dict[str, str], folders: Sequence[str] = ()) -> None:
        """Move the staged files (name -> path in the same file system) into the folder, the record kept in step;
        `folders`: sub-folders of the folder that the command made and owns from now on."""
        new = {name: _state(path) for name, path in staged.items()}
        for name, state in new.items():
            self.files[name] = (self.files.get(name, []) if self.owns(name) else []) + [state]
        self.folders += [name for name in folders if os.path.isdir(os.path.join(self.folder, name))]
        self.save()  # first: either contents of each file is recorded
        for name, path in staged.items():
            os.replace(path, os.path.join(self.folder, name))
        for name, state in new.items():
            self.files[name] = [state]
        self.save()

    def remove_written(self) -> None:
        """Delete what mlm_tpu wrote in the folder (and the folder, if that leaves it empty); keep everything else."""
        for name in list(self.files):
            if self.owns(name):
                os.remove(os.path.join(self.folder, name))
            del self.files[name]
        for name in self.folders:
            if self.owns(name):
                shutil.rmtree(os.path.join(self.folder, name))
        self.folders = []
        if set(os.listdir(self.folder)) - {RECORD}:
            self.save()  # what is left is not mlm_tpu's, and the record says so
        else:
            shutil.rmtree(self.folder)


def check_replacing(where: str, others: Sequence[str], ours: Sequence[str], overwrite: bool,
                    instead: str = "choose another --output-dir") -> None:
    """The rule: refuse to replace `others` (files mlm_tpu did not write) ever, and `ours` without --overwrite;
    `where` names the folder in the message, `instead` says what else the user can do (write elsewhere)."""
    if others:
        raise UserError(f"{where} holds {_names(others)}, which mlm_tpu did not write (or which changed since "
                        f"it did); it never replaces such files, even with --overwrite: move them elsewhere, or "
                        f"{instead}")
    if ours and not overwrite:
        raise UserError(f"{where} already holds {_names(ours)} from an earlier mlm_tpu command; pass "
                        f"--overwrite to replace {'it' if len(ours) == 1 else 'them'}, or {instead}")


def check_output_dir(path: str, names: Iterable[str], overwrite: bool, flag: str = "--output-dir",
                     where: Optional[str] = None, instead: Optional[str] = None) -> None:
    """Before the slow work (after what the command reads is checked): refuse a destination that is a file, or one
    holding files that the command would replace (those matching `names`, fnmatch patterns) against the rule (see
    `check_replacing`). `flag` chooses the folder; `where` names it as the user gave it, when that is not `flag`
    (export in place: --model), and `instead` then says what else to do."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"{flag} '{path}' is a file, not a folder; choose another {flag}")
    if not os.path.isdir(path):
        return
    patterns = tuple(names)
    present = [name for name in sorted(os.listdir(path)) if _matches(name, patterns)]
    others = Record(path).others(present)
    check_replacing(where or f"{flag} {path}", others, [name for name in present if name not in others], overwrite,
                    instead or f"choose another {flag}")


def _umask() -> int:
    umask = os.umask(0o077)  # reading it means setting one: a private one, for that instant
    os.umask(umask)
    return umask


def give_umask_mode(path: str) -> None:
    """Give a file about to be published the mode the umask gives new files (0666 less the umask), as every other
    file of its folder has: mkstemp, and the writers built on it (safetensors' save_file), make private ones
    (0600), which a team's shared folder or a web server cannot read, and a rename keeps the mode."""
    os.chmod(path, 0o666 & ~_umask())


@contextlib.contextmanager
def _written_beside(path: str, data: bytes) -> Iterator[str]:
    """A hidden temporary file holding `data` beside `path`, for the caller to move into place."""
    folder = os.path.dirname(os.path.abspath(path))
    temporary = None
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=folder)
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
        give_umask_mode(temporary)
        yield temporary
    except OSError as error:
        raise UserError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        if temporary and os.path.exists(temporary):
            os.remove(temporary)


def _write_atomically(path: str, data: bytes) -> None:
    with _written_beside(path, data) as temporary:
        os.replace(temporary, path)


def write_file(path: str, data: bytes, start_record: bool = False) -> None:
    """Write one file atomically. In a folder with a record (or with `start_record`) it is recorded, and a file of
    that name mlm_tpu did not write is refused; elsewhere (a staging folder, an earlier version's) it is just
    written."""
    folder, name = os.path.split(os.path.abspath(path))
    if not start_record and not os.path.isfile(os.path.join(folder, RECORD)):
        _write_atomically(path, data)
        return
    record = Record(folder)
    check_replacing(folder, record.others([name]), [], overwrite=True)
    with _written_beside(path, data) as temporary:
        record.replace({name: temporary})



def make_owned_folder(path: str) -> None:
    """Make the sub-folder `path` if it is not there and, in a folder with a record, record it as mlm_tpu's: a run
    whose first backup/ comes after its first save (a stop just after epoch 1's best model) owns it when started
    again, as one whose backup/ was there at that save does."""
    if os.path.isdir(path):
        return
    os.makedirs(path)
    folder, name = os.path.split(os.path.abspath(path))
    if os.path.isfile(os.path.join(folder, RECORD)):
        record = Record(folder)
        record.folders.append(name)
        record.save()


def write_json(path: str, payload: Any) -> None:
    """Write `payload` to the local file `path` as mlm_tpu writes JSON (jsonfiles.py), atomically and, in a folder
    with a record, recorded (`write_file`)."""
    write_file(path, encode_json(payload))


@contextlib.contextmanager
def staged_output_dir(path: str, folders: Sequence[str] = ()) -> Iterator[str]:
    """Yield a staging folder for the files of `path`; on success they replace those of the same names there (a
    file mlm_tpu did not write is refused, and nothing is moved) and are recorded. A new `path` appears whole, once
    complete. `folders`: sub-folders of `path` that the command made and owns whole. A sub-folder made in the
    staging folder (one of `folders`: ELECTRA's generator/) is published with it, its files into that sub-folder of
    `path`, recorded there: the whole save is written before any of it is published, which is only renames."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.partial-", dir=parent)
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp's private 0700 would stick to the result
    except OSError as error:
        raise UserError(f"cannot write in '{parent}': {error.strerror or error}") from None
    try:
        yield staging
        _publish(staging, path, folders)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _publish(staging: str, path: str, folders: Sequence[str]) -> None:
    """Move what `staging` holds into `path` (see staged_output_dir): every folder's refusals first, then the staged
    sub-folders' files, then those of `path` itself."""
    names = sorted(os.listdir(staging))
    subfolders = [name for name in names if os.path.isdir(os.path.join(staging, name))]
    if set(subfolders) - set(folders):
        raise ValueError(f"staged sub-folders {subfolders} that {path} does not own (it owns {list(folders)})")
    # where (relative to path: "" is path itself) -> the files staged for it
    staged = {"": [name for name in names if name not in subfolders],
              **{name: sorted(os.listdir(os.path.join(staging, name))) for name in subfolders}}
    for where, files in staged.items():
        for name in files:
            give_umask_mode(os.path.join(staging, where, name))
    if not os.path.exists(path):
        for where, files in staged.items():
            record = Record(os.path.join(staging, where), recognise=False)
            record.files = {name: [_state(os.path.join(staging, where, name))] for name in files}
            record.folders = [] if where else subfolders
            record.save()
        os.replace(staging, path)
        return
    records = {where: Record(os.path.join(path, where)) for where in staged}
    for where, files in staged.items():
        check_replacing(os.path.join(path, where) if where else path,
                        records[where].others(files if where else files + subfolders), [], overwrite=True)
    for where in [*subfolders, ""]:  # the sub-folders first, then the folder that owns them
        os.makedirs(os.path.join(path, where), exist_ok=True)
        records[where].replace({name: os.path.join(staging, where, name) for name in staged[where]},
                               () if where else folders)
