"""A run is never failed by a figure: a diverged run's validation perplexity, exp(loss), is past what TensorBoard's
float32 scalars hold (from a loss of about 89), and was a ValueError that ended the run after its first epoch."""

import math
import re

import pytest

from conftest import REPO_ROOT, run_train

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "made-by-0.2"


@pytest.mark.slow  # trains two steps
def test_a_run_whose_validation_loss_is_in_the_hundreds_ends_and_logs_an_infinite_perplexity(tmp_path):
    from mlm_tpu.training.run_logs import read_scalars

    output_dir = tmp_path / "model"
    result = run_train("--train-dataset", FIXTURES / "shards" / "train", "--eval-dataset",
                       FIXTURES / "shards" / "validation", "--tokenizer", FIXTURES / "tokenizer", "--model-config",
                       "tiny", "--config-overrides", "initializer_range=30", "--per-replica-batch-size", 8,
                       "--max-steps", 2, "--output-dir", output_dir)  # weights drawn 1,500 times too wide
    assert result.returncode == 0, result.stderr[-3000:]
    validation = read_scalars(str(output_dir / "logs" / "validation"))
    (loss,), (perplexity,) = validation["loss"].values(), validation["perplexity"].values()
    assert loss > 100 and perplexity == math.inf, (loss, perplexity)
    assert re.search(r"Epoch 1 validation: loss \d+\.\d{4}, perplexity (\d\.\d\de\+\d+|inf), ", result.stderr), \
        result.stderr[-3000:]  # a figure, not the hundreds of digits of exp(loss)
