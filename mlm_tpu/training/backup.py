"""The resumable backup in <output-dir>/backup: everything a killed run needs to go on exactly where it was.

A backup is written at an exact optimizer step: the model's weights and the optimizer's state
(its step counter included) as a TensorFlow checkpoint `step-N`, and beside it `step-N.json`, the
training loop's own state at that step (the epoch's running sums, the best epoch so far, the
logging interval). The data position needs no record: the input pipeline restarts at step N
(pipeline.py), and dropout and masks are keyed by the step. The JSON is written first and the
checkpoint's index last, so the newest complete checkpoint always has its state beside it.
"""

import glob
import os
import re
import shutil
from typing import Optional, Tuple

import tensorflow as tf

from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json, write_json

CHECKPOINT_NAME = "step"
STEP = re.compile(r"step-(\d+)$")


def newest_state(folder: str) -> Optional[dict]:
    """The loop state of the newest backup in `folder` (None if there is none), read before any model exists."""
    latest = tf.train.latest_checkpoint(folder) if os.path.isdir(folder) else None
    if latest is None:
        return None
    return read_json(f"{latest}.json", "the backup's loop state", f"delete {folder} to start the run over")


class Backup:
    """Saves and restores (model, optimizer, loop state) in `folder` at exact steps, keeping the newest."""

    def __init__(self, folder: str, model, optimizer):
        self.folder = folder
        self.optimizer = optimizer
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
        self.manager = tf.train.CheckpointManager(self.checkpoint, folder, max_to_keep=1,
                                                  checkpoint_name=CHECKPOINT_NAME)

    def _state_path(self, step: int) -> str:
        return os.path.join(self.folder, f"{CHECKPOINT_NAME}-{step}.json")

    def restore(self) -> Optional[Tuple[int, dict]]:
        """(step, loop state) of the newest backup, with model and optimizer restored to it; None if there is none."""
        if os.path.isdir(os.path.join(self.folder, "chief")):
            raise UserError(f"{self.folder} holds a backup written by mlm_tpu 0.2 (Keras BackupAndRestore), which "
                            "this version cannot resume: finish that run with mlm_tpu 0.2, or delete the folder to "
                            "start over")
        latest = self.manager.latest_checkpoint
        if latest is None:
            return None
        step = int(STEP.search(latest).group(1))
        state = read_json(self._state_path(step), "the backup's loop state",
                          f"delete {self.folder} to start the run over")
        try:
            self.checkpoint.restore(latest).expect_partial()
        except (tf.errors.OpError, ValueError, AssertionError) as error:
            raise UserError(f"the backup {latest} does not fit this run's model ({str(error).splitlines()[0][:200]}); "
                            f"it was written with other settings (--model-config?): give another --output-dir, or "
                            f"delete {self.folder} to start over") from None
        restored = int(self.optimizer.iterations.numpy())
        if restored != step:
            raise UserError(f"the backup {latest} holds the optimizer at step {restored}, not {step}; delete "
                            f"{self.folder} to start over")
        return step, state

    def save(self, step: int, state: dict) -> None:
        """Write the backup of `step` (the optimizer must have taken exactly `step` steps)."""
        os.makedirs(self.folder, exist_ok=True)
        write_json(self._state_path(step), state)
        try:
            self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as error:
            message = getattr(error, "message", None) or getattr(error, "strerror", None) or str(error)
            raise UserError(f"cannot write the backup in {self.folder} ({message.splitlines()[0]}); free some disk "
                            "space and run the same command again: it resumes from the previous backup") from None
        for path in glob.glob(os.path.join(self.folder, f"{CHECKPOINT_NAME}-*.json")):
            if path != self._state_path(step):
                os.remove(path)

    def remove(self) -> None:
        """Delete the backup once the run is finished and saved."""
        shutil.rmtree(self.folder, ignore_errors=True)
