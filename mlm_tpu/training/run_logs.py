"""What a training run writes under <output-dir>/logs for TensorBoard, and reading it back (the loss plot).

logs/train: `loss`, the mean training loss over each logging interval (--logging-steps, else each
epoch), and the epoch's training accuracy and speed (`examples_per_second`, `tokens_per_second`,
`tokens_per_second_per_replica`, `model_tflops_per_second`, `mfu` where the device's peak is known:
throughput.py; `targets_left_out` where a transform left some out), all at the optimizer step reached. logs/validation:
each validation score (`loss`, `perplexity`, `accuracy`, ...) at the step of the epoch's end.
Runs of mlm_tpu 0.2 (Keras' TensorBoard callback) wrote `batch_loss` (running means since the
epoch began), `epoch_loss` per epoch index and `evaluation_loss_vs_iterations`; they are read too.
"""

import math
import os
from typing import Dict, Iterator, List

from mlm_tpu.errors import UserError

TRAIN, VALIDATION = "train", "validation"
LOSS = "loss"
FLOAT32_MAX = 3.4028234663852886e38  # TensorBoard keeps float32 scalars: a larger value is infinity there


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
                tf.summary.scalar(name, loggable(value))
        self._writers[which].flush()


def loggable(value: float) -> float:
    """`value` as TensorBoard can keep it: past float32's range, infinity of its sign (TensorFlow refuses to convert
    it, and a run must not fail over a figure: a validation loss of 90 has a perplexity of 1.2e39)."""
    value = float(value)
    return math.copysign(math.inf, value) if math.isfinite(value) and abs(value) > FLOAT32_MAX else value


def events_files(log_dir: str) -> List[str]:
    """The TensorBoard events files in one run folder, in name order (none when the folder is missing)."""
    if not os.path.isdir(log_dir):
        return []
    try:
        names = sorted(os.listdir(log_dir))
    except OSError as error:
        raise UserError(f"cannot read the TensorBoard logs in {log_dir}: {error.strerror or error}; fix the "
                        "folder's permissions") from None
    return [os.path.join(log_dir, name) for name in names if ".tfevents." in name]


def read_scalars(log_dir: str) -> Dict[str, Dict[int, float]]:
    """Every scalar in one TensorBoard run folder: {tag: {step: value}} (a step written twice: the later value).

    Every record's checksum is checked and every record must be a TensorBoard event: a damaged events
    file is one clear error naming it, never a plot missing points without a word (TensorBoard's own
    reader stops at the damage silently).
    """
    from tensorboard.util.tensor_util import make_ndarray

    scalars: Dict[str, Dict[int, float]] = {}
    for path in events_files(log_dir):
        for event in _events(path):
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    scalars.setdefault(value.tag, {})[event.step] = value.simple_value
                elif value.HasField("tensor") and not value.tensor.tensor_shape.dim:
                    try:
                        scalars.setdefault(value.tag, {})[event.step] = float(make_ndarray(value.tensor))
                    except (TypeError, ValueError):
                        raise _damaged(path, f"the value of '{value.tag}' at step {event.step} is not a number")
    return scalars


def _damaged(path: str, what: str) -> UserError:
    return UserError(f"the TensorBoard events file {path} is damaged ({what}), so the plot would miss points; "
                     "restore it from a copy, or move it away to plot without it")


def _events(path: str) -> Iterator:
    """The events of one file; a record that is not one (garbage behind a valid checksum, or empty) is damage."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event

    records = _records(path)
    if not records:
        raise _damaged(path, "it is empty, without even the header TensorFlow writes first")
    for number, record in enumerate(records, start=1):
        try:
            event = Event.FromString(record)
        except DecodeError:
            raise _damaged(path, f"record {number} is not a TensorBoard event") from None
        if not event.ByteSize():  # every event TensorFlow writes has at least its wall time
            raise _damaged(path, f"record {number} is empty")
        yield event


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
        raise _damaged(path, str(error).split(" is ", 1)[-1]) from None
