"""What a training run writes under <output-dir>/logs for TensorBoard, and reading it back (the loss plot).

logs/train: `loss`, the mean training loss over each logging interval (--logging-steps, else each
epoch), and the epoch's training accuracy, both at the optimizer step reached. logs/validation:
each validation score (`loss`, `perplexity`, `accuracy`, ...) at the step of the epoch's end.
Runs of mlm_tpu 0.2 (Keras' TensorBoard callback) wrote `batch_loss` (running means since the
epoch began), `epoch_loss` per epoch index and `evaluation_loss_vs_iterations`; they are read too.
"""

import os
from typing import Dict, List

from mlm_tpu.errors import UserError

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
    """Every scalar in one TensorBoard run folder: {tag: {step: value}} (a step written twice: the later value).

    Every record's checksum is checked: a damaged events file is one clear error, never a plot missing
    points without a word (TensorBoard's own reader stops at the damage silently).
    """
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.util.tensor_util import make_ndarray

    if not os.path.isdir(log_dir):
        return {}
    try:
        names = sorted(os.listdir(log_dir))
    except OSError as error:
        raise UserError(f"cannot read the TensorBoard logs in {log_dir}: {error.strerror or error}; fix the "
                        "folder's permissions") from None
    scalars: Dict[str, Dict[int, float]] = {}
    for name in names:
        if ".tfevents." not in name:
            continue
        for record in _records(os.path.join(log_dir, name)):
            event = Event.FromString(record)
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    scalars.setdefault(value.tag, {})[event.step] = value.simple_value
                elif value.HasField("tensor") and not value.tensor.tensor_shape.dim:
                    scalars.setdefault(value.tag, {})[event.step] = float(make_ndarray(value.tensor))
    return scalars


def _records(path: str) -> List[bytes]:
    from mlm_tpu.shards.tfrecord import iter_records

    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as error:
        raise UserError(f"cannot read the TensorBoard events file {path}: {error.strerror or error}; fix its "
                        "permissions") from None
    try:
        return list(iter_records(data, path))
    except UserError as error:
        raise UserError(f"the TensorBoard events file {path} is damaged ({str(error).split(' is ', 1)[-1]}), so the "
                        "plot would miss points; restore it from a copy, or move it away to plot without it") from None
