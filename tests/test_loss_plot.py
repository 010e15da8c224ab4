"""The loss plot: recovering interval means from Keras' running means, and a real PNG from real logs."""

import re
from pathlib import Path

import pytest

from conftest import assert_user_error, run_module
from mlm_tpu.training.loss_plot import interval_means


def running_means(losses, steps_per_epoch):
    """What Keras logs after each step: the mean of the epoch's losses so far."""
    points = []
    for index in range(len(losses)):
        start = index // steps_per_epoch * steps_per_epoch
        points.append((index + 1, sum(losses[start:index + 1]) / (index + 1 - start)))
    return points


def test_interval_means_undo_the_running_mean():
    losses = [10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]
    logged = [point for point in running_means(losses, 10) if point[0] % 2 == 0]
    recovered = interval_means(logged, 10)
    expected = [(step, (losses[step - 2] + losses[step - 1]) / 2) for step in range(2, 21, 2)]
    assert [(s, round(v, 9)) for s, v in recovered] == expected


@pytest.mark.slow
def test_plot_of_a_real_run_is_a_png_with_every_logged_point(trained_mlm, tmp_path):
    model_dir, train_run = trained_mlm
    total_steps = int(re.search(r"(\d+) steps in all", train_run.stderr).group(1))
    output = tmp_path / "loss.png"
    result = run_module("mlm_tpu.loss_plot", str(model_dir), "--output", str(output))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"({total_steps // 5} training and 3 validation points) written to {output}" in result.stdout
    data = output.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    assert not list(tmp_path.glob("*.partial.png"))


def test_a_folder_without_logs_is_one_line(tmp_path):
    assert_user_error(run_module("mlm_tpu.loss_plot", str(tmp_path)), "no loss logged")


def test_a_run_made_by_mlm_tpu_0_2_is_still_drawn(tmp_path):
    """Keras' TensorBoard callback logged running means every 2 steps of a 6-step epoch, and one validation."""
    old_run = Path(__file__).parent / "fixtures" / "made-by-0.2" / "roberta"
    result = run_module("mlm_tpu.loss_plot", str(old_run), "--output", str(tmp_path / "old.png"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "(3 training and 1 validation points)" in result.stdout
