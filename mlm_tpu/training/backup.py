"""The resumable backup in <output-dir>/backup: everything a killed run needs to go on exactly where it was.

A backup is written at an exact optimizer step N: the model's weights and the optimizer's state
(its step counter included) as a TensorFlow checkpoint `step-N` (`.index` and `.data-*` files), and
then `step-N.json`: the training loop's own state at that step (the epoch's running sums, the best
epoch so far, the logging interval), the run's settings that decide its result (run_settings.py),
and each checkpoint file's size and CRC32. The data position needs no record: the input pipeline
restarts at step N (shards/pipeline.py), and dropout and masks are keyed by the step.

The JSON is written last, so a backup without one is incomplete (a kill or a full disk while
writing it), and one whose files do not match their sizes and checksums is damaged. The previous
backup is deleted only once the next one is complete; `find_backup()` takes the newest backup that checks
out, and says so when it falls back past a damaged one.
"""

import glob
import os
import re
import shutil
import zlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import tensorflow as tf

from mlm_tpu.console import log, warn
from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json
from mlm_tpu.output_dir import make_owned_folder, write_json

CHECKPOINT_NAME = "step"
STATE_FILE = re.compile(rf"{CHECKPOINT_NAME}-(\d+)\.json$")
FORMAT = 2  # step-N.json of mlm_tpu 0.3 held the loop state alone, beside a CheckpointManager's files
READ_SIZE = 1 << 22


@dataclass
class BackupRecord:
    """What step-N.json says of its backup."""

    step: int
    loop: dict  # the training loop's state (loop.LoopState as a dict)
    settings: Optional[dict] = None  # the run's settings that decide its result (None: a backup of mlm_tpu 0.3)
    setting_changes: List[dict] = field(default_factory=list)  # settings changed on resume, with their step
    files: Dict[str, dict] = field(default_factory=dict)  # checkpoint file name -> {"bytes", "crc32"}


def tensorflow_reason(error: BaseException) -> str:
    """What went wrong, in the operating system's words where it gave them, without TensorFlow's op names."""
    text = getattr(error, "message", None) or getattr(error, "strerror", None) or str(error)
    for number in (28, 122, 13, 30):  # ENOSPC, EDQUOT, EACCES, EROFS: say them as the OS does
        if os.strerror(number) in text:
            return os.strerror(number)
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text.splitlines()[0] if text else "")
    return re.sub(r"\s*\[Op:\w+\]", "", text).strip() or type(error).__name__


def _file_facts(path: str) -> dict:
    checksum, size = 0, 0
    with open(path, "rb") as stream:
        while chunk := stream.read(READ_SIZE):
            checksum, size = zlib.crc32(chunk, checksum), size + len(chunk)
    return {"bytes": size, "crc32": checksum}


def _prefix(folder: str, step: int) -> str:
    return os.path.join(folder, f"{CHECKPOINT_NAME}-{step}")


def backup_steps(folder: str) -> List[int]:
    """The steps that have a step-N.json (written last: the backup is complete, if not checked), newest first."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return sorted((int(found.group(1)) for found in map(STATE_FILE.match, names) if found), reverse=True)


def find_backup(folder: str) -> Optional[BackupRecord]:
    """The newest complete, undamaged backup in `folder` (None if there is none); refuses a folder with only damaged
    ones. It needs no model: a run reads its data order from the backup before it builds one."""
    if os.path.isdir(os.path.join(folder, "chief")):
        raise UserError(f"{folder} holds a backup written by mlm_tpu 0.2 (Keras BackupAndRestore), which this version "
                        "cannot resume: finish that run with mlm_tpu 0.2, or delete the folder to start over")
    problems = []
    incomplete = _incomplete_step(folder)
    if incomplete is not None:
        problems.append(f"the backup of step {incomplete} in {folder} is incomplete: its checkpoint is there but not "
                        f"{CHECKPOINT_NAME}-{incomplete}.json, which is written last (the run was stopped while "
                        "writing it, or the file was deleted)")
    for step in backup_steps(folder):
        record, problem = check_backup(folder, step)
        if record is None:
            problems.append(problem)
            continue
        if problems:
            warn(f"{problems[0]}; falling back to the previous backup, at step {step}")
        return record
    if problems:
        raise UserError(f"{problems[0]}, and there is no earlier backup to fall back to; restore the folder from a "
                        f"copy, or delete {folder} to start the run over")
    return None


def _incomplete_step(folder: str) -> Optional[int]:
    """The newest step whose checkpoint was written but not its JSON, if it is newer than every JSON."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    steps = [int(found.group(1)) for found in (re.match(rf"{CHECKPOINT_NAME}-(\d+)\.index$", name)
                                               for name in names) if found]
    newest = max(steps, default=None)
    return newest if newest is not None and newest > max(backup_steps(folder), default=-1) else None


def check_backup(folder: str, step: int):
    """(record, None) for the backup of `step` if it is there and checks out, else (None, what is wrong with it)."""
    state_path = f"{_prefix(folder, step)}.json"
    if not os.path.isfile(state_path):
        return None, f"there is no backup of step {step} in {folder} ({os.path.basename(state_path)} is missing)"
    try:
        payload = read_json(state_path, "the backup's state", "")
    except UserError:
        return None, f"the backup of step {step} in {folder} is damaged ({os.path.basename(state_path)} is not " \
                     "valid JSON)"
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        return _check_of_0_3(folder, step, payload)
    record = BackupRecord(step=step, loop=payload["loop"], settings=payload.get("settings"),
                          setting_changes=payload.get("setting_changes", []), files=payload.get("files", {}))
    for name, expected in record.files.items():
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            return None, f"the backup of step {step} in {folder} is damaged ({name} is missing)"
        found = _file_facts(path)
        if found != expected:
            what = (f"{name} holds {found['bytes']:,} bytes, not {expected['bytes']:,}"
                    if found["bytes"] != expected["bytes"] else f"{name} does not match its checksum")
            return None, f"the backup of step {step} in {folder} is damaged ({what})"
    return record, None


def _check_of_0_3(folder: str, step: int, payload):
    """mlm_tpu 0.3 wrote the loop state alone, and no checksums: it is used as it is, its settings unknown."""
    if not isinstance(payload, dict) or not os.path.isfile(f"{_prefix(folder, step)}.index"):
        return None, f"the backup of step {step} in {folder} is damaged (no checkpoint beside its JSON)"
    return BackupRecord(step=step, loop=payload), None


class Backup:
    """Saves and restores (model, optimizer, loop state, settings) in `folder` at exact steps."""

    def __init__(self, folder: str, model, optimizer):
        self.folder = folder
        self.optimizer = optimizer
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)

    def _checkpoint_files(self, step: int) -> List[str]:
        prefix = _prefix(self.folder, step)
        return sorted(os.path.basename(path) for path in glob.glob(f"{glob.escape(prefix)}.*")
                      if not path.endswith(".json"))

    def restore(self, record: BackupRecord) -> None:
        """Put the model and optimizer back as they were at `record`'s step."""
        prefix = _prefix(self.folder, record.step)
        try:
            self.checkpoint.read(prefix).expect_partial()
        except (tf.errors.OpError, ValueError, AssertionError, IndexError) as error:
            if record.files:  # its files check out, so they hold another model's variables
                raise UserError(f"the backup {prefix} does not fit this run's model ({tensorflow_reason(error)[:200]}):"
                                f" it was written by a run of another model; give another --output-dir, or delete "
                                f"{self.folder} to start over") from None
            raise UserError(f"the backup {prefix} cannot be read ({tensorflow_reason(error)[:200]}): it is damaged, "
                            f"or was written for another model; delete {self.folder} to start over") from None
        restored = int(self.optimizer.iterations.numpy())
        if restored != record.step:
            raise UserError(f"the backup {prefix} holds the optimizer at step {restored}, not {record.step}; delete "
                            f"{self.folder} to start over")

    def save(self, record: BackupRecord) -> None:
        """Write the backup of `record.step` (the optimizer must have taken exactly that many steps), then delete the
        older ones."""
        prefix = _prefix(self.folder, record.step)
        try:
            make_owned_folder(self.folder)
            self.checkpoint.write(prefix)
            record.files = {name: _file_facts(os.path.join(self.folder, name))
                            for name in self._checkpoint_files(record.step)}
            write_json(f"{prefix}.json", {"format": FORMAT, "step": record.step, "loop": record.loop,
                                          "settings": record.settings, "setting_changes": record.setting_changes,
                                          "files": record.files})
        except (tf.errors.OpError, OSError, UserError) as error:
            for name in os.listdir(self.folder) if os.path.isdir(self.folder) else ():
                if _of_step(name, record.step):  # no half-written backup for a later run to trip over
                    _remove(os.path.join(self.folder, name))
            raise UserError(f"cannot write the backup of step {record.step} in {self.folder} "
                            f"({tensorflow_reason(error)}); free some disk space and run the same command again: it "
                            "resumes from the previous backup") from None
        for name in os.listdir(self.folder):
            if not _of_step(name, record.step) or name.endswith(".partial"):
                _remove(os.path.join(self.folder, name))
        log(f"Backup written at step {record.step}")

    def remove(self) -> None:
        """Delete the backup once the run is finished and saved."""
        shutil.rmtree(self.folder, ignore_errors=True)


def _of_step(name: str, step: int) -> bool:
    """Whether `name` is a file of the backup of `step` (its checkpoint, TensorFlow's temporary folder, its JSON)."""
    return re.match(rf"{CHECKPOINT_NAME}-{step}([._]|$)", name) is not None


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)
