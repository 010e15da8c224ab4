"""Keras callbacks of the trainer: save_pretrained each epoch, and stop at an exact step."""

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
    """End training once the optimizer has taken `total_steps` steps (--max-steps inside an epoch)."""

    def __init__(self, total_steps: int):
        super().__init__()
        self.total_steps = total_steps

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.total_steps:
            self.model.stop_training = True
