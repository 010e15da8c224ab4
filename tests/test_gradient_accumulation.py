"""--gradient-accumulation-steps and --max-grad-norm: a step of N micro-batches is the step of one batch of all their
rows (masked LM with the sparse and the dense head, ELECTRA, DeBERTa-v3, sequence classification; on 1 and 2
replicas), a run
with both resumes bit for bit, and clipping scales the update by limit / norm."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import MAX_LENGTH, REPO_ROOT, run_train
from mlm_tpu.training.task import Task
from test_encoder import shard as shard_encoder_task
from test_resume import assert_same_run, train_and_kill_after_backup

NO_DROPOUT = "hidden_dropout_prob=0,attention_probs_dropout_prob=0"


def micro_batch_runs(name: str, settings: dict, folder: Path) -> list:
    """The run `settings` describes three ways: 20 steps of one batch of 32 on one replica (the reference), and of
    micro-batches of 8 rows: 4 on one replica, 2 on each of 2 replicas. (ELECTRA samples its replacements from the
    generator's softmax: micro-batches of 4 rows, whose products round otherwise in the last bit, once sampled another
    token at an interval's edge, and that run parted from the reference by 2e-3.)"""
    ways = {"batch": dict(per_replica_batch_size=32),
            "accumulated": dict(per_replica_batch_size=8, gradient_accumulation_steps=4),
            "two-replicas": dict(per_replica_batch_size=8, gradient_accumulation_steps=2,
                                 hardware={"cpu_replicas": 2})}
    return [{"name": f"{name} {way}", "reference": None if way == "batch" else f"{name} batch",
             "settings": {**settings, **more, "output_dir": str(folder / f"{name}-{way}"), "max_steps": 20,
                          "learning_rate": 1e-3, "config_overrides": NO_DROPOUT}}
            for way, more in ways.items()]


@pytest.mark.slow
def test_micro_batches_train_as_one_batch(shards, wikitext_tokenizer, tmp_path):
    """Max abs weight difference within 1e-5 after 20 steps, float32, dropout off. The classifier and DeBERTa-v3
    (replaced-token detection with GDES: its generator's E_G and its discriminator's E_G + E_delta both compared) are
    clipped hard (--max-grad-norm 0.05), so they match only if the norm is the global batch's, over the replicas'
    sum."""
    tokenizer = str(wikitext_tokenizer[0])
    masked_lm = dict(train_dataset=str(shards / "train"), tokenizer=tokenizer, max_length=MAX_LENGTH)
    classifier = shard_encoder_task(wikitext_tokenizer[0], tmp_path, "single") / "train"
    tasks = {"sparse": dict(masked_lm, model_config="tiny"),
             "dense": dict(masked_lm, model_config="tiny", dense_mlm_head=True),
             "electra": dict(masked_lm, task="electra", model_config="electra-tiny"),
             "deberta-v3": dict(masked_lm, task="electra", model_config="deberta-v3-tiny", max_grad_norm=0.05),
             "classifier": dict(train_dataset=str(classifier), tokenizer=tokenizer, task="sequence-classification",
                                model_config="tiny", max_grad_norm=0.05)}
    differences, logs = {}, ""
    for name, settings in tasks.items():  # a process each: one MirroredStrategy per process (their collectives')
        spec = tmp_path / f"{name}.json"
        spec.write_text(json.dumps({"runs": micro_batch_runs(name, settings, tmp_path)}))
        result = subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "accumulation_check.py"), str(spec)],
                                capture_output=True, text=True, cwd=REPO_ROOT, timeout=600,
                                env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"})
        assert result.returncode == 0, result.stderr[-3000:]
        differences.update(json.loads(result.stdout.strip().splitlines()[-1]))
        logs += result.stderr
    assert len(differences) == 10, differences
    assert all(difference < 1e-5 for difference in differences.values()), differences
    clipped = re.findall(r"Epoch \d+ gradient clipping: (\d+) of (\d+) steps clipped to --max-grad-norm 0.05", logs)
    assert clipped and all(count == steps for count, steps in clipped), clipped  # every step of every clipped run


@pytest.mark.slow
def test_a_batch_warmup_killed_during_its_ramp_resumes_bit_identical(shards, wikitext_tokenizer, tmp_path):
    """Dropout on (the tiny preset's 0.1), 4 micro-batches of 4 rows, clipping at 1.0, and the batch warming up from
    4 to 16 over 4,096 tokens (4 rows for 3 steps, 8 for 3, 12 for 3): killed after its backup at step 4, in the
    ramp, the same command resumes there and ends with the uninterrupted run's weights and losses, bit for bit."""
    flags = ["--train-dataset", shards / "validation", "--tokenizer", wikitext_tokenizer[0], "--max-length",
             MAX_LENGTH, "--model-config", "tiny", "--learning-rate", "3e-3", "--per-replica-batch-size", 4,
             "--gradient-accumulation-steps", 4, "--max-grad-norm", "1.0", "--batch-size-warmup-min-size", 4,
             "--batch-size-warmup-tokens", 4096, "--max-steps", 12, "--backup-steps", 4, "--logging-steps", 1]
    uninterrupted = run_train(*flags, "--output-dir", tmp_path / "uninterrupted")
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    assert "global batch 16 = 4 per replica x 1 x 4 micro-batches accumulated" in uninterrupted.stderr
    growth = [int(line.split("global batch of ")[1].split()[0]) for line in uninterrupted.stderr.splitlines()
              if line.startswith("Batch-size warm-up: step ")]
    assert growth == [4, 8, 12, 16], uninterrupted.stderr[-3000:]
    clipping = re.search(r"Epoch 1 gradient clipping: (\d+) of 12 steps clipped", uninterrupted.stderr)
    assert clipping and int(clipping.group(1)) > 0, uninterrupted.stderr[-3000:]
    resumed_dir = tmp_path / "resumed"
    train_and_kill_after_backup([*flags, "--output-dir", resumed_dir], 4, tmp_path / "killed.log")
    resumed = run_train(*flags, "--output-dir", resumed_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resuming from the backup at step 4" in resumed.stderr
    assert "Batch-size warm-up: step 5 trains a global batch of 8" in resumed.stderr
    assert_same_run(resumed_dir, tmp_path / "uninterrupted")


class SquaredError(Task):
    """A task of one term: the mean over rows of the squared error of a linear model (the trainer's default counts
    each row with a label as a position)."""

    def training_outputs(self, model, batch, training):
        import tensorflow as tf

        return SimpleNamespace(loss=tf.reduce_sum(tf.square(model(batch["x"]) - batch["y"]), axis=1))

    def training_counts(self, outputs, batch):
        return 0.0, 0.0


class NoDropout:
    def start_step(self, step, micro_batch=None):
        pass


@pytest.mark.parametrize("accumulation", [1, 2])
def test_clipping_scales_the_update_by_the_limit_over_the_norm(accumulation):
    """One SGD step (rate 1: the update is minus the gradient) clipped at a quarter of the gradient's norm moves the
    weights by the unclipped step x limit / norm; under a limit above the norm, by the unclipped step exactly."""
    import tensorflow as tf
    import tf_keras as keras

    from mlm_tpu.training.step import make_train_steps

    rng = np.random.default_rng(0)
    rows = {"x": rng.normal(size=(8, 5)).astype(np.float32), "y": rng.normal(size=(8, 3)).astype(np.float32),
            "labels": np.zeros(8, np.int32)}
    model = keras.Sequential([keras.layers.Dense(3, input_shape=(5,))])
    start = [weight.copy() for weight in model.get_weights()]

    def step(limit):
        model.set_weights(start)
        optimizer = keras.optimizers.legacy.SGD(learning_rate=1.0)
        steps = make_train_steps(tf.distribute.get_strategy(), model, optimizer, NoDropout(),
                                 task=SquaredError("squared-error"),
                                 accumulation=accumulation, max_grad_norm=limit)
        results = steps(iter(tf.data.Dataset.from_tensors(rows).repeat()), tf.constant(1)).numpy()[0]
        return [after - before for after, before in zip(model.get_weights(), start)], results

    plain, results = step(None)
    norm = float(np.sqrt(sum(np.sum(update.astype(np.float64) ** 2) for update in plain)))
    assert results[4:].tolist() == [0, 0]  # no clipping: neither the norm nor a count
    limit = norm / 4
    clipped, results = step(limit)
    assert results[4] == pytest.approx(norm, rel=1e-6) and results[5] == 1
    for got, unclipped in zip(clipped, plain):
        np.testing.assert_allclose(got, unclipped * limit / norm, atol=1e-6, rtol=0)
    under, results = step(norm * 2)
    assert results[5] == 0
    assert all(np.array_equal(got, unclipped) for got, unclipped in zip(under, plain))
