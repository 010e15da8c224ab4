"""A PNG of training and validation loss against optimizer steps, from a run's TensorBoard logs
(`python -m mlm_tpu.loss_plot RUN_DIR`, `mlm-tpu plot`).

The training loss is the mean over each logging interval (--logging-steps, else each epoch) and
the validation loss is drawn at each epoch's end. Runs of mlm_tpu 0.2 logged Keras' running means
since the epoch began; the plot turns them back into the mean over each logging interval, so the
curve shows the loss of that moment rather than a sawtooth.
"""

import io
import os
from typing import List, Tuple

from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json
from mlm_tpu.model_folder.card import LOSS_PLOT
from mlm_tpu.output_dir import RUN_INFO_FILE, check_output_dir, write_file
from mlm_tpu.training.run_logs import LOSS, TRAIN, VALIDATION, events_files, read_scalars

Curve = List[Tuple[int, float]]


def loss_curves(run_dir: str) -> Tuple[Curve, Curve]:
    """(training, validation) loss as sorted (step, loss) points."""
    train = read_scalars(os.path.join(run_dir, "logs", TRAIN))
    validation = read_scalars(os.path.join(run_dir, "logs", VALIDATION))
    if LOSS in train or LOSS in validation:
        return sorted(train.get(LOSS, {}).items()), sorted(validation.get(LOSS, {}).items())
    steps_per_epoch = _steps_per_epoch_of_old_run(run_dir)  # mlm_tpu 0.2's Keras logs
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


def _steps_per_epoch_of_old_run(run_dir: str) -> int:
    path = os.path.join(run_dir, RUN_INFO_FILE)
    if not os.path.isfile(path):
        return 1
    info = read_json(path, "the run's settings", "the plot needs its steps_per_epoch")
    return info.get("steps_per_epoch", 1) if isinstance(info, dict) else 1


def is_runs_plot(run_dir: str, output: str) -> bool:
    """Whether `output` is the run's own plot, RUN_DIR/loss.png, which the trainer draws and `plot` redraws."""
    return os.path.abspath(output) == os.path.abspath(os.path.join(run_dir, LOSS_PLOT))


def plot_losses(run_dir: str, output: str, overwrite: bool = False) -> Tuple[int, int]:
    """Draw the curves into `output` (PNG); returns how many training and validation points it drew. The logs are
    read first, then where it writes is checked (output_dir.py's rule): the run's own plot is redrawn, as the
    trainer redraws it; another `output` already there is replaced only if mlm_tpu drew it, and only with
    `overwrite`. A file mlm_tpu did not draw is never replaced."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    training, validation = loss_curves(run_dir)
    if not training and not validation:
        files = [path for which in (TRAIN, VALIDATION) for path in events_files(os.path.join(run_dir, "logs", which))]
        if files:
            raise UserError(f"no loss logged in the TensorBoard events files under {run_dir}/logs ({len(files)}: "
                            f"{', '.join(os.path.relpath(path, run_dir) for path in files[:3])}); the run stopped "
                            "before its first logging step? Train it on, or plot a run that logged")
        raise UserError(f"no loss logged under {run_dir}/logs; give the --output-dir of a `python train.py` run")
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise UserError(f"cannot write the plot to {output}: the folder {folder} does not exist; create it or "
                        "choose another --output")
    own = is_runs_plot(run_dir, output)
    check_output_dir(folder, [os.path.basename(output)], overwrite or own, flag="--output",
                     where=f"the run folder {run_dir}" if own else None)
    figure, axes = plt.subplots(figsize=(8, 5), dpi=100)
    for points, label, style in ((training, "training loss", "-"), (validation, "validation loss", "o-")):
        if points:
            steps, losses = zip(*points)
            axes.plot(steps, losses, style, label=label)
    axes.set_xlabel("optimizer step")
    axes.set_ylabel("loss (cross-entropy)")
    axes.set_title(f"Loss of {os.path.basename(os.path.abspath(run_dir))}")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png")
    plt.close(figure)
    write_file(output, image.getvalue(), start_record=True)
    return len(training), len(validation)
