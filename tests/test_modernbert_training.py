"""ModernBERT (mlm_tpu/modernbert/) trains as every family does (issue 50): a run from scratch, packed rows on (its
default), killed after a backup and started again ends bit for bit as the uninterrupted run, in float32 and in a
TPU's settings (mixed bfloat16, each step compiled by XLA); two workers under `mlm-tpu launch` train what one process
trains at the same global batch; and its whole training step (forward, the sparse masked-LM loss, gradients, the
optimizer's update) and its validation compile under XLA with static shapes, in float32 and in mixed bfloat16, as a
TPU compiles them.

The end-to-end runs take test_multi_worker.py's flags (a tiny masked LM, global batch 16, 12 steps, a backup every
two) with ModernBERT's tiny shape and dropout on, and its tolerance (1e-6) for two workers against one process; what
they compare is test_resume.py's."""

import re

import numpy as np
import pytest

from conftest import MAX_LENGTH, run_train
from test_multi_worker import STEPS, launch, largest_difference, mlm_flags
from test_resume import assert_same_run, resumed_at, step_losses, train_and_kill_after_backup

PACKED = "Packed rows: each document attends only to itself"  # the family's default for pretraining, in the log
# ModernBERT's tiny preset, its dropout on (the preset has none), so that resuming must draw the same dropout again
MODERNBERT = ("--model-config", "modernbert-tiny", "--config-overrides",
              "embedding_dropout=0.1,attention_dropout=0.1,mlp_dropout=0.1")


def modernbert_flags(shards, tokenizer, output_dir, per_replica=8):
    """test_multi_worker.py's masked-LM run, with ModernBERT's tiny shape (the last --model-config given wins)."""
    return mlm_flags(shards, tokenizer, output_dir, per_replica, *MODERNBERT)


@pytest.fixture(scope="module")
def uninterrupted(shards, wikitext_tokenizer, tmp_path_factory):
    """The run in one process with one replica (global batch 16), uninterrupted: the folder."""
    output_dir = tmp_path_factory.mktemp("modernbert-uninterrupted") / "model"
    result = run_train(*modernbert_flags(shards, wikitext_tokenizer[0], output_dir, 16))
    assert result.returncode == 0, result.stderr[-3000:]
    assert PACKED in result.stderr and len(step_losses(output_dir)) == STEPS
    return output_dir


def assert_resumes_exactly(flags_of, uninterrupted, tmp_path) -> None:
    """The run of `flags_of(output_dir)`, killed (SIGKILL) after its backup of step 4 and started again, ends with
    the weights of `uninterrupted` bit for bit and the same loss at every step."""
    resumed = tmp_path / "resumed"
    train_and_kill_after_backup(flags_of(resumed), 4, tmp_path / "killed.log")
    finished = run_train(*flags_of(resumed))
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert 4 <= resumed_at(finished.stderr) < STEPS and PACKED in finished.stderr
    assert_same_run(resumed, uninterrupted)


@pytest.mark.slow
def test_a_modernbert_killed_after_a_backup_ends_as_the_uninterrupted_run(uninterrupted, shards, wikitext_tokenizer,
                                                                          tmp_path):
    """Dropout, masks and the packed rows' documents are all drawn from (seed, step) alone."""
    assert_resumes_exactly(lambda output_dir: modernbert_flags(shards, wikitext_tokenizer[0], output_dir, 16),
                           uninterrupted, tmp_path)


@pytest.mark.slow
def test_in_bfloat16_under_xla_a_modernbert_killed_after_a_backup_ends_as_the_uninterrupted_run(
        uninterrupted, shards, wikitext_tokenizer, tmp_path):
    """A TPU's settings on this CPU: mixed bfloat16 (--bf16) and each replica's step compiled by XLA
    (--jit-compile). Its losses are near the float32 run's, and not the same (so bfloat16 did compute them)."""
    def flags_of(output_dir):
        return [*modernbert_flags(shards, wikitext_tokenizer[0], output_dir, 16), "--bf16", "--jit-compile"]

    reference = tmp_path / "uninterrupted"
    result = run_train(*flags_of(reference))
    assert result.returncode == 0, result.stderr[-3000:]
    mixed, exact = step_losses(reference), step_losses(uninterrupted)
    assert mixed != exact and all(abs(mixed[step] - exact[step]) < 0.05 for step in exact)
    assert_resumes_exactly(flags_of, reference, tmp_path)


@pytest.mark.slow
def test_two_workers_train_the_modernbert_one_process_trains(uninterrupted, shards, wikitext_tokenizer, tmp_path):
    result = launch(modernbert_flags(shards, wikitext_tokenizer[0], tmp_path / "workers"), tmp_path / "tmp")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "over 2 workers with 2 replica(s): global batch 16 = 8 per replica x 2" in result.stderr
    assert f"[worker 0] {PACKED}" in result.stderr and f"[worker 1] {PACKED}" in result.stderr
    assert largest_difference(tmp_path / "workers", uninterrupted) <= 1e-6
    workers, alone = step_losses(tmp_path / "workers"), step_losses(uninterrupted)
    assert len(workers) == STEPS and all(abs(workers[step] - alone[step]) < 1e-5 for step in alone)


def dynamic_dimensions(hlo: str) -> list:
    """The shapes of an HLO module's text that XLA left dynamic (`f32[<=8,64]`: a bound, not a size)."""
    return re.findall(r"\w+\[[^\]]*<=[^\]]*\]", hlo)


@pytest.mark.slow  # two XLA compilations of the step and of validation each
@pytest.mark.parametrize("precision, optimizer", [("float32", "adamw"), ("mixed_bfloat16", "stableadamw")])
def test_a_whole_training_step_and_validation_compile_under_xla_with_static_shapes(precision, optimizer, shards,
                                                                                   wikitext_tokenizer):
    """What a TPU compiles: the replica's step (forward on packed rows with dropout keyed by the step as the trainer
    keys it, the sparse head's loss, gradients and the optimizer's update: AdamW, or ModernBERT's recipe's
    StableAdamW) as one XLA function whose every shape is fixed, on a batch made by the run's own masker (its document
    ids and prediction slots); it trains (the loss falls, every weight changes), and the dense validation compiled by
    XLA scores what it scores without XLA."""
    import tensorflow as tf
    import tf_keras as keras

    from mlm_tpu.cli.train import build_config, build_parser
    from mlm_tpu.shards.layout import BatchLayout
    from mlm_tpu.shards.pipeline import evaluation_batches
    from mlm_tpu.tasks import training_task
    from mlm_tpu.training.dropout import key_dropout_by_step
    from mlm_tpu.training.input import find_training_shards
    from mlm_tpu.training.optimizers import create_state, make_optimizer, with_schedule_defaults

    flags = ["--train-dataset", shards / "train", "--eval-dataset", shards / "validation", "--tokenizer",
             wikitext_tokenizer[0], "--max-length", MAX_LENGTH, *MODERNBERT, "--optimizer", optimizer,
             "--learning-rate", "1e-2", "--warmup-ratio", "0", "--output-dir", "unused"]
    config = with_schedule_defaults(build_config(build_parser("train.py").parse_args(list(map(str, flags)))))
    task = training_task(config)
    train, validation_shards = find_training_shards(config, task)
    tokenizer = task.load_tokenizer(config)
    task.prepare(config, tokenizer, train, validation_shards)
    keras.mixed_precision.set_global_policy(precision)
    try:
        model = task.build_model(config, tokenizer, train)
        model.build_in_name_scope()
        optimizer = make_optimizer(config, 10)
        create_state(optimizer, model.trainable_variables)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    batch = next(iter(evaluation_batches(train, 8, task.make_transform(tokenizer)(config.seed), len(tokenizer))))
    assert {"document_ids", "masked_lm_positions"} <= batch.keys()
    assert all(values.shape.is_fully_defined() for values in batch.values())
    variables = model.trainable_variables
    dropout_keys = key_dropout_by_step(model, config.seed, BatchLayout(2, 8, hosts=1, replicas=1))

    @tf.function(jit_compile=True)
    def step(batch):
        dropout_keys.start_step(optimizer.iterations)  # the trainer's dropout, keyed by the step
        with tf.GradientTape() as tape:
            outputs = task.training_outputs(model, batch, True)
            loss = tf.reduce_mean(outputs.loss)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss, outputs.logits

    assert dynamic_dimensions(step.experimental_get_compiler_ir(batch)(stage="hlo")) == []
    before = [variable.numpy() for variable in variables]
    losses = [float(step(batch)[0]) for _ in range(3)]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0], losses
    loss, logits = step(batch)
    assert logits.dtype == tf.float32 and logits.shape == (8, task.prediction_slots, len(tokenizer))
    assert all(not np.array_equal(old, new.numpy()) for old, new in zip(before, variables))

    def validation_loss(jit_compile: bool) -> float:
        return task.validation(tf.distribute.get_strategy(), model, tokenizer, validation_shards, 50, config.seed,
                               on_tpu=jit_compile).run()["loss"]

    assert abs(validation_loss(True) - validation_loss(False)) < (1e-5 if precision == "float32" else 1e-2)
