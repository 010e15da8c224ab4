"""Keras callbacks of the trainer: save_pretrained each epoch (or the best one), push it, stop at an exact step."""

import json
import os
from typing import Optional

import tf_keras as keras
from transformers import PushToHubCallback

from mlm_tpu.cli import log
from mlm_tpu.output_dir import staged_output_dir

BEST_RECORD = "best_model.json"


class SavePretrained(keras.callbacks.Callback):
    """`save_pretrained` of model and tokenizer into the output folder at each epoch's end.

    With `monitor` (a validation score in the epoch's logs, higher is better) only an epoch that
    beats the best so far is saved, so the folder always holds the best model; `best_model.json`
    beside it says which epoch and score that was, and a run resumed from its backup keeps
    comparing against it. Written through a staging folder, so a kill mid-save leaves the
    previous save intact.
    """

    def __init__(self, output_dir: str, tokenizer, monitor: Optional[str] = None):
        super().__init__()
        self.output_dir = output_dir
        self.tokenizer = tokenizer
        self.monitor = monitor
        self.best: Optional[dict] = None

    def on_train_begin(self, logs=None):  # after BackupAndRestore, which comes first in the list
        record = os.path.join(self.output_dir, BEST_RECORD)
        resumed = int(self.model.optimizer.iterations.numpy()) > 0
        if self.monitor and resumed and os.path.isfile(record):
            with open(record, encoding="utf-8") as stream:
                self.best = json.load(stream)

    def on_epoch_end(self, epoch, logs=None):  # also runs for an epoch cut short by StopAtStep
        value = (logs or {}).get(self.monitor) if self.monitor else None
        if value is not None and self.best is not None and value <= self.best["value"]:
            log(f"{self.monitor} {value:.4f} is not above epoch {self.best['epoch']}'s {self.best['value']:.4f}: "
                f"{self.output_dir} keeps that model")
            return
        with staged_output_dir(self.output_dir) as staging:
            self.model.save_pretrained(staging)
            self.tokenizer.save_pretrained(staging)
            if value is not None:
                self.best = {"metric": self.monitor, "value": float(value), "epoch": epoch + 1,
                             "step": int(self.model.optimizer.iterations.numpy())}
                with open(os.path.join(staging, BEST_RECORD), "w", encoding="utf-8") as stream:
                    json.dump(self.best, stream, indent=2)
        if value is not None:
            log(f"{self.monitor} {value:.4f} is the best so far: model saved to {self.output_dir}")


class _AlreadySaved:
    """The model as the push callback sees it: everything the model has, except that saving is
    left to `SavePretrained`, which has written the folder already (maybe an earlier, better epoch)."""

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name):
        return getattr(self._model, name)

    def save_pretrained(self, *args, **kwargs):
        pass


class PushSavedToHub(PushToHubCallback):
    """transformers' `PushToHubCallback`, pushing the output folder as `SavePretrained` left it
    instead of saving the current weights over it; give it no tokenizer (SavePretrained saves it)."""

    def set_model(self, model):
        super().set_model(_AlreadySaved(model))


class StopAtStep(keras.callbacks.Callback):
    """End training once the optimizer has taken `total_steps` steps (--max-steps inside an epoch).

    Also notes the step training (re)started from: above 0 when a backup was restored.
    """

    def __init__(self, total_steps: int):
        super().__init__()
        self.total_steps = total_steps
        self.start_step = 0

    def _step(self) -> int:
        return int(self.model.optimizer.iterations.numpy())

    def on_train_begin(self, logs=None):  # runs after BackupAndRestore, which comes first in the list
        self.start_step = self._step()
        if self.start_step:
            log(f"Resuming from the backup at step {self.start_step} of {self.total_steps}")

    def on_train_batch_end(self, batch, logs=None):
        if self._step() >= self.total_steps:
            self.model.stop_training = True
