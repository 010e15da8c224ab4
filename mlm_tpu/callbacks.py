"""Keras callbacks of the trainer: save_pretrained each epoch, and stop at an exact step."""

import sys

import tf_keras as keras

from mlm_tpu.output_dir import staged_output_dir


class SavePretrained(keras.callbacks.Callback):
    """`save_pretrained` of model and tokenizer into the output folder at each epoch's end.

    Written through a staging folder, so a kill mid-save leaves the previous save intact.
    """

    def __init__(self, output_dir: str, tokenizer):
        super().__init__()
        self.output_dir = output_dir
        self.tokenizer = tokenizer

    def on_epoch_end(self, epoch, logs=None):  # also runs for an epoch cut short by StopAtStep
        with staged_output_dir(self.output_dir) as staging:
            self.model.save_pretrained(staging)
            self.tokenizer.save_pretrained(staging)


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
            print(f"Resuming from the backup at step {self.start_step} of {self.total_steps}", file=sys.stderr,
                  flush=True)

    def on_train_batch_end(self, batch, logs=None):
        if self._step() >= self.total_steps:
            self.model.stop_training = True
