"""A run is never failed by a figure: a diverged run's validation perplexity, exp(loss), is past what TensorBoard's
float32 scalars hold (from a loss of about 89), and was a ValueError that ended the run after its first epoch."""

import math
import os
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


# what a careless user types, answered before TensorFlow loads: (arguments of `mlm-tpu`, the error line's words)
TYPOS = [
    (["train", "--train-dataset", "{tmp}/DOES_NOT_EXIST", "--output-dir", "{tmp}/model"],
     "error: --train-dataset {tmp}/DOES_NOT_EXIST: no shards (*.tfrecord) found"),
    (["train", "--train-dataset", str(FIXTURES / "shards" / "train"), "--eval-dataset", "{tmp}/validaton",
      "--tokenizer", str(FIXTURES / "tokenizer"), "--output-dir", "{tmp}/model"],
     "error: --eval-dataset {tmp}/validaton: no shards (*.tfrecord) found"),
    (["evaluate", "--model", str(FIXTURES / "roberta"), "--eval-dataset", "{tmp}/validaton"],
     "error: --eval-dataset {tmp}/validaton: no shards (*.tfrecord) found"),
    (["predict", "text-classification", "--model", "{tmp}/classifier", "--max-length", "128", "A fine film."],
     "error: --max-length 128 makes 128-token inputs, longer than {tmp}/classifier reads (64 tokens); pass "
     "--max-length 64 or less"),
]
# each command run in one process, in turn, as the console script runs it: its exit code, what it printed on stderr,
# and whether TensorFlow was loaded by then
RUN_IN_TURN = """
import contextlib, io, json, sys
from mlm_tpu.cli import run_command
from mlm_tpu.cli.main import main
found = []
for argv in json.loads(sys.argv[1]):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            run_command(main, argv)
            code = 0
        except SystemExit as stop:
            code = stop.code
    found.append([code, stderr.getvalue(), "tensorflow" in sys.modules])
print(json.dumps(found))
"""


def test_typos_in_paths_and_lengths_are_answered_before_tensorflow_loads(tmp_path):
    """A missing shards folder (train, evaluate) and a --max-length past the classifier's positions (predict) are one
    error line each, exit 2, nothing written, with TensorFlow never imported: its start-up was 5 of the 6.6 CPU
    seconds a typo cost, where a missing --train-dataset is answered in 1.4."""
    import json
    import subprocess
    import sys

    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras)
    from transformers import RobertaConfig, TFRobertaForSequenceClassification

    classifier = TFRobertaForSequenceClassification(RobertaConfig(
        vocab_size=300, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=66, num_labels=2, architectures=["RobertaForSequenceClassification"]))
    classifier(classifier.dummy_inputs)
    classifier.save_pretrained(tmp_path / "classifier")
    for path in (FIXTURES / "tokenizer").iterdir():
        (tmp_path / "classifier" / path.name).write_bytes(path.read_bytes())
    before = sorted(path.name for path in tmp_path.rglob("*"))
    cases = [[argument.format(tmp=tmp_path) for argument in argv] for argv, _ in TYPOS]
    result = subprocess.run([sys.executable, "-c", RUN_IN_TURN, json.dumps(cases)], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO_ROOT),
                                                             "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    for (argv, words), (code, stderr, tensorflow) in zip(TYPOS, json.loads(result.stdout)):
        errors = [line for line in stderr.splitlines() if line.startswith("error:")]
        assert code == 2 and len(errors) == 1 and errors[0].startswith(words.format(tmp=tmp_path)), stderr
        assert "Traceback" not in stderr, stderr
        assert not tensorflow, f"{argv[0]} loaded TensorFlow before its error: {stderr}"
    assert sorted(path.name for path in tmp_path.rglob("*")) == before
