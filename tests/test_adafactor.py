"""--optimizer adafactor and --lr-schedule rsqrt: T5X's Adafactor step for step, T5's schedule, a state that is a
fraction of AdamW's, a tiny T5 that learns with it, and a killed run that resumes bit for bit."""

from pathlib import Path

import numpy as np
import pytest

from conftest import assert_user_error, run_train
from mlm_tpu.errors import UserError

FIXTURES = Path(__file__).parent / "fixtures" / "made-by-0.2"


def t5x_adafactor(param, grads, rates, decay_rate=0.8, clip=1.0, eps1=1e-30, eps2=1e-3, factored=True):
    """T5X's Adafactor update (t5x/adafactor.py, T5's gin: no momentum, no weight decay), in NumPy: 2-D weights
    factored over (rows, columns) when `factored`, the rest with a full second moment."""
    param = param.astype(np.float64)
    v_row = v_col = v = None
    for step, (grad, rate) in enumerate(zip(grads, rates)):
        grad = grad.astype(np.float64)
        decay = 1.0 - (step + 1.0) ** -decay_rate
        squared = grad * grad + eps1
        if factored:
            new_row, new_col = squared.mean(axis=1), squared.mean(axis=0)  # rows are the largest dimension here
            v_row = new_row if v_row is None else decay * v_row + (1 - decay) * new_row
            v_col = new_col if v_col is None else decay * v_col + (1 - decay) * new_col
            update = grad * (v_row / v_row.mean())[:, None] ** -0.5 * v_col[None, :] ** -0.5
        else:
            v = squared if v is None else decay * v + (1 - decay) * squared
            update = grad / np.sqrt(v)
        update /= max(1.0, np.sqrt(np.mean(update * update)) / clip)
        param = param - rate * max(np.sqrt(np.mean(param * param)), eps2) * update
    return param


@pytest.mark.parametrize("shape", [(256, 128), (48,), (300, 16)])
def test_each_step_is_t5x_adafactor_and_the_state_is_factored(shape):
    import tensorflow as tf

    from mlm_tpu.training.optimizers import Adafactor, InverseSquareRoot, create_state, state_bytes

    rng = np.random.default_rng(0)
    start = rng.normal(size=shape).astype(np.float32) * 0.05
    grads = [rng.normal(size=shape).astype(np.float32) * scale for scale in (1.0, 0.01, 3.0, 0.5)]
    schedule = InverseSquareRoot(0.01, 2)  # 0.01, 0.01, then 0.01 * sqrt(2/2), 0.01 * sqrt(2/3)
    variable = tf.Variable(start)
    optimizer = Adafactor(schedule)
    create_state(optimizer, [variable])
    for grad in grads:
        optimizer.apply_gradients([(tf.constant(grad), variable)])
    rates = [float(schedule(step)) for step in range(len(grads))]
    assert rates == pytest.approx([0.01, 0.01, 0.01, 0.01 * np.sqrt(2 / 3)])
    factored = len(shape) == 2 and min(shape) >= 128
    expected = t5x_adafactor(start, grads, rates, factored=factored)
    np.testing.assert_allclose(variable.numpy(), expected, rtol=2e-5, atol=1e-8)
    slots = state_bytes(optimizer) - 8  # less the step counter
    assert slots == 4 * (sum(shape) if factored else np.prod(shape))


def test_t5s_rsqrt_schedule_and_its_defaults():
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.optimizers import InverseSquareRoot, with_schedule_defaults

    config = with_schedule_defaults(TrainingConfig("shards", "out", lr_schedule="rsqrt"))
    assert (config.learning_rate, config.warmup_steps) == (0.01, 10_000)
    schedule = InverseSquareRoot(config.learning_rate, config.warmup_steps)
    for step in (0, 1, 9_999, 10_000, 40_000, 1_000_000):
        assert float(schedule(step)) == pytest.approx(1 / np.sqrt(max(step, 10_000)), rel=1e-6)
    assert with_schedule_defaults(TrainingConfig("shards", "out")).learning_rate == 1e-4  # linear, as before


def test_t5xs_base_learning_rate_gives_t5xs_rates_and_a_t5x_base_given_as_a_peak_is_refused():
    """T5X's pretrain.gin: factors 'constant * rsqrt_decay', base_learning_rate 1.0, warmup_steps 10000, i.e. the
    rate base / sqrt(max(step, warm-up)). --base-learning-rate takes that meaning; --learning-rate 1.0 with rsqrt
    (a peak 100 times T5's) is refused with the fix; a run's training_args.json, which records both, replays."""
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.optimizers import InverseSquareRoot, with_schedule_defaults

    def t5x_rate(step, base, warmup):  # t5x.utils.create_learning_rate_scheduler's step_fn for those factors
        return base * 1 / np.sqrt(np.maximum(step, warmup))

    for base, warmup in ((1.0, None), (2.0, 1_000)):
        config = with_schedule_defaults(TrainingConfig("shards", "out", lr_schedule="rsqrt", base_learning_rate=base,
                                                       warmup_steps=warmup))
        steps = np.array([0, 1, 999, 1_000, 9_999, 10_000, 40_000, 1_000_000])
        rates = InverseSquareRoot(config.learning_rate, config.warmup_steps)(steps).numpy()
        np.testing.assert_allclose(rates, t5x_rate(steps, base, warmup or 10_000), rtol=1e-6)
        assert with_schedule_defaults(config) == config  # replayed from training_args.json: both agree
    assert config.learning_rate == pytest.approx(2 / np.sqrt(1000))
    refusals = {
        ("rsqrt", 1.0, None): ["--learning-rate 1 is its peak", "100 times T5's 0.01", "--base-learning-rate 1"],
        ("rsqrt", 0.01, 2.0): ["--learning-rate 0.01 (the peak) and --base-learning-rate 2", "0.02"],
        ("linear", None, 1.0): ["--base-learning-rate is T5X's base of --lr-schedule rsqrt", "--learning-rate"]}
    for (schedule, peak, base), phrases in refusals.items():
        with pytest.raises(UserError) as refused:
            with_schedule_defaults(TrainingConfig("shards", "out", lr_schedule=schedule, learning_rate=peak,
                                                  base_learning_rate=base))
        assert all(phrase in str(refused.value) for phrase in phrases) and "\n" not in str(refused.value), refused
    assert with_schedule_defaults(TrainingConfig("s", "o", lr_schedule="rsqrt", learning_rate=0.1)).learning_rate == 0.1


@pytest.mark.parametrize("schedule", ["linear", "rsqrt"])
def test_adamw_takes_its_moments_and_epsilon_from_the_flags(schedule):
    from mlm_tpu.cli.train import build_config, build_parser
    from mlm_tpu.training.optimizers import make_optimizer, with_schedule_defaults

    flags = ["--train-dataset", "shards", "--output-dir", "out", "--lr-schedule", schedule, "--adam-beta1", "0.8",
             "--adam_beta2", "0.98", "--adam-epsilon", "1e-6"]
    config = with_schedule_defaults(build_config(build_parser().parse_args(flags)))
    optimizer = make_optimizer(config, total_steps=100)
    assert optimizer.get_config()["beta_1"] == pytest.approx(0.8)
    assert optimizer.get_config()["beta_2"] == pytest.approx(0.98)
    assert optimizer.get_config()["epsilon"] == pytest.approx(1e-6)


def adafactor_flags(shards, output_dir, *more):
    """A tiny T5 (d_model 128, so that its matrices are factored) with Adafactor and T5's schedule, dropout on, on
    short examples packed several per row: 80 examples in about 30 rows, 7 steps per epoch, 28 steps."""
    return ["--task", "generation", "--train-dataset", shards, "--tokenizer", FIXTURES / "t5-tokenizer",
            "--model-config", "t5-tiny", "--config-overrides", "d_model=128,d_ff=256", "--optimizer", "adafactor",
            "--lr-schedule", "rsqrt", "--pack", "--per-replica-batch-size", 4, "--num-epochs", 4, "--backup-steps", 3,
            "--logging-steps", 1, "--output-dir", output_dir, *more]


@pytest.mark.slow
def test_adafactor_trains_a_packed_tiny_t5_and_a_killed_run_resumes_bit_for_bit(short_shards, tmp_path):
    from test_resume import assert_same_run, resumed_at, step_losses, train_and_kill_after_backup

    uninterrupted = tmp_path / "uninterrupted"
    result = run_train(*adafactor_flags(short_shards, uninterrupted))
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stderr.splitlines() if line.startswith("Optimizer: adafactor"))
    assert "rsqrt schedule (peak 0.01, 10,000 warm-up steps)" in line
    state, weights = (int(n.replace(",", "")) for n in __import__("re").findall(r"([\d,]{5,})", line)[:2])
    assert state < 0.6 * weights  # AdamW's would be 2x
    # 2 virtual pipelines (the default for a batch of 4 and 3 shards), each packing its half of the examples (40):
    # 14 or 15 rows each, 7 steps of 2
    assert "made by 2 input pipelines" in result.stderr and "7 steps per epoch, 28 steps in all" in result.stderr
    losses = step_losses(uninterrupted)
    first, last = np.mean([losses[s] for s in range(1, 5)]), np.mean([losses[s] for s in range(21, 25)])
    assert last < 0.7 * first, (first, last)

    # killed once, mid-epoch: Adafactor's factored state and the step its decay counts from come back from the backup.
    # (Its state is made before the backup is read (create_state), so a resumed run backs it up as a fresh run does;
    # a run killed again after resuming is test_resume.py's masked LM killed, then stopped.)
    resumed = tmp_path / "resumed"
    flags = adafactor_flags(short_shards, resumed)
    train_and_kill_after_backup(flags, 9, tmp_path / "killed.log")
    finished = run_train(*flags)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert 9 <= resumed_at(finished.stderr) < 28
    assert_same_run(resumed, uninterrupted)


def test_a_schedule_adafactor_cannot_take_is_one_line(tmp_path):
    result = run_train(*adafactor_flags(FIXTURES / "t5-shards" / "train", tmp_path / "out", "--warmup-steps", 0))
    assert_user_error(result, "--lr-schedule rsqrt cannot take --warmup-steps 0", "--warmup-steps 10000")
    assert not (tmp_path / "out").exists()
