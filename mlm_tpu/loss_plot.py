"""`python -m mlm_tpu.loss_plot RUN_DIR`: a PNG of training and validation loss against steps.

Read from the TensorBoard logs `python train.py` writes under RUN_DIR/logs: the training loss
every --logging-steps steps, or once per epoch without it, and the validation loss at each
epoch's end, at the step it was reached. Keras logs the running mean since the epoch began; the
plot turns it back into the mean over each logging interval, so the curve shows the loss of
that moment rather than a sawtooth. A run resumed from its backup logs some steps twice (the
later value wins), and its first resumed epoch is drawn as running means.
"""

import argparse
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

from mlm_tpu.cli import add_flag, run_command
from mlm_tpu.errors import UserError

Curve = List[Tuple[int, float]]


def read_scalars(log_dir: str) -> Dict[str, Dict[int, float]]:
    """Every scalar in one TensorBoard run folder: {tag: {step: value}}."""
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


def loss_curves(run_dir: str) -> Tuple[Curve, Curve]:
    """(training, validation) loss as sorted (step, loss) points."""
    train = read_scalars(os.path.join(run_dir, "logs", "train"))
    validation = read_scalars(os.path.join(run_dir, "logs", "validation"))
    steps_per_epoch = _steps_per_epoch(run_dir)
    if train.get("batch_loss"):
        training = interval_means(sorted(train["batch_loss"].items()), steps_per_epoch)
    else:  # logged once per epoch: place each epoch at its last step
        training = sorted(((epoch + 1) * steps_per_epoch, loss) for epoch, loss in train.get("epoch_loss", {}).items())
    return training, sorted(validation.get("evaluation_loss_vs_iterations", {}).items())


def interval_means(running_means: Curve, steps_per_epoch: int) -> Curve:
    """From (step, mean of the epoch's losses so far) to (step, mean loss since the previous point)."""
    points, previous_step, previous_mean = [], 0, 0.0
    for step, mean in running_means:
        into_epoch = (step - 1) % steps_per_epoch + 1  # steps of this epoch taken, 1..steps_per_epoch
        since_previous = step - previous_step
        if since_previous >= into_epoch:  # first point of an epoch: its running mean is the interval's mean
            points.append((step, mean))
        else:
            points.append((step, (into_epoch * mean - (into_epoch - since_previous) * previous_mean) / since_previous))
        previous_step, previous_mean = step, mean
    return points


def _steps_per_epoch(run_dir: str) -> int:
    info_path = os.path.join(run_dir, "training_args.json")
    if os.path.isfile(info_path):
        with open(info_path, encoding="utf-8") as stream:
            return json.load(stream).get("steps_per_epoch", 1)
    return 1


def plot_losses(run_dir: str, output: str) -> Tuple[int, int]:
    """Draw the curves into `output` (PNG); returns how many training and validation points it drew."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    training, validation = loss_curves(run_dir)
    if not training and not validation:
        raise UserError(f"no loss logged under {run_dir}/logs; give the --output-dir of a `python train.py` run")
    figure, axes = plt.subplots(figsize=(8, 5), dpi=100)
    for points, label, style in ((training, "training loss", "-"), (validation, "validation loss", "o-")):
        if points:
            steps, losses = zip(*points)
            axes.plot(steps, losses, style, label=label)
    axes.set_xlabel("optimizer step")
    axes.set_ylabel("masked-LM loss (cross-entropy)")
    axes.set_title(f"Loss of {os.path.basename(os.path.abspath(run_dir))}")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    partial = f"{output}.partial.png"
    figure.savefig(partial, format="png")
    plt.close(figure)
    os.replace(partial, output)
    return len(training), len(validation)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mlm_tpu.loss_plot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", metavar="RUN_DIR", help="The --output-dir of a `python train.py` run.")
    add_flag(parser, "--output", default=None, help="Where to write the PNG (default: RUN_DIR/loss.png).")
    args = parser.parse_args(argv)
    output = args.output or os.path.join(args.run_dir, "loss.png")
    training, validation = plot_losses(args.run_dir, output)
    print(f"Loss plot ({training} training and {validation} validation points) written to {output}")


if __name__ == "__main__":
    run_command(main)
