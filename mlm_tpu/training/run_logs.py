"""What a training run writes under <output-dir>/logs for TensorBoard, and reading it back (the loss plot).

logs/train: `loss`, the mean training loss over each logging interval (--logging-steps, else each
epoch), and the epoch's training accuracy, both at the optimizer step reached. logs/validation:
each validation score (`loss`, `perplexity`, `accuracy`, ...) at the step of the epoch's end.
Runs of mlm_tpu 0.2 (Keras' TensorBoard callback) wrote `batch_loss` (running means since the
epoch began), `epoch_loss` per epoch index and `evaluation_loss_vs_iterations`; they are read too.
"""

import os
from typing import Dict

TRAIN, VALIDATION = "train", "validation"
LOSS = "loss"


class RunLogs:
    """TensorBoard writers of one run; a resumed run appends to the same folders (the later value wins)."""

    def __init__(self, output_dir: str):
        import tensorflow as tf

        folder = os.path.join(output_dir, "logs")
        self._writers = {name: tf.summary.create_file_writer(os.path.join(folder, name)) for name in (TRAIN, VALIDATION)}

    def write(self, which: str, step: int, scalars: Dict[str, float]) -> None:
        import tensorflow as tf

        with self._writers[which].as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)
        self._writers[which].flush()


def read_scalars(log_dir: str) -> Dict[str, Dict[int, float]]:
    """Every scalar in one TensorBoard run folder: {tag: {step: value}} (a step written twice: the later value)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util.tensor_util import make_ndarray

    if not os.path.isdir(log_dir):
        return {}
    events = EventAccumulator(log_dir, size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    tags = events.Tags()
    scalars: Dict[str, Dict[int, float]] = {}
    for tag in tags.get("tensors", []):
        scalars[tag] = {event.step: float(make_ndarray(event.tensor_proto)) for event in events.Tensors(tag)}
    for tag in tags.get("scalars", []):
        scalars[tag] = {event.step: event.value for event in events.Scalars(tag)}
    return scalars
