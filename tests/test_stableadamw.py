"""--optimizer stableadamw and --lr-schedule wsd|cosine|constant: each schedule equals its formula, StableAdamW equals
a NumPy transcription of optimi's `_single_param_stableadamw` step for step, a gradient spike is cut back, and its
state goes through a checkpoint (the backup's) and on as if never stopped."""

import math

import numpy as np
import pytest

from mlm_tpu.errors import UserError

STEPS = (0, 1, 9, 10, 11, 40, 79, 80, 81, 99)  # across the warm-up's end (10) and wsd's decay's start (80)


def formula(kind, step, peak=1e-3, warmup=10, total=100, minimum=1e-5, decay=20, shape="linear"):
    """The schedules as the module's docstring writes them, in Python floats."""
    if step < warmup:
        return peak * step / warmup
    if kind == "constant":
        return peak
    if kind == "cosine":
        done = (step - warmup) / (total - warmup)
        return minimum + (peak - minimum) * (1 + math.cos(math.pi * done)) / 2
    done = min(max((step - (total - decay)) / decay, 0.0), 1.0)
    return peak - (peak - minimum) * (math.sqrt(done) if shape == "1-sqrt" else done)


@pytest.mark.parametrize("kind, shape", [("wsd", "linear"), ("wsd", "1-sqrt"), ("cosine", None), ("constant", None)])
def test_each_schedule_equals_its_formula(kind, shape):
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.optimizers import make_optimizer, with_schedule_defaults

    config = with_schedule_defaults(TrainingConfig(
        "s", "o", lr_schedule=kind, learning_rate=1e-3, warmup_steps=10, min_learning_rate=1e-5 if kind != "constant"
        else 0.0, decay_ratio=0.2, decay_shape=shape or "1-sqrt"))
    schedule = make_optimizer(config, total_steps=100)._get_hyper("learning_rate")
    for step in STEPS:
        assert abs(float(schedule(step)) - formula(kind, step, shape=shape)) < 1e-7, (kind, shape, step)


def test_wsd_before_its_decay_is_the_constant_schedule_so_a_stopped_run_continues_into_a_decay():
    """A run of 100 steps stopped at 60, continued to 150 with its decay over the last 30: the same rates until the
    decay starts (the point of WSD)."""
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.optimizers import make_optimizer, with_schedule_defaults

    def rates(total, **settings):
        config = with_schedule_defaults(TrainingConfig("s", "o", learning_rate=1e-3, warmup_steps=10, **settings))
        schedule = make_optimizer(config, total)._get_hyper("learning_rate")
        return [float(schedule(step)) for step in range(total)]

    held, continued = rates(100, lr_schedule="constant"), rates(150, lr_schedule="wsd", decay_ratio=0.2)
    assert continued[:120] == held + held[-1:] * 20
    assert continued[120] == pytest.approx(1e-3) and continued[-1] < 2e-4


def test_bad_schedule_settings_are_refused():
    from mlm_tpu.configuration import check_ranges
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.optimizers import with_schedule_defaults

    with pytest.raises(UserError, match="--min-learning-rate 0.01 is above the peak --learning-rate 0.001"):
        with_schedule_defaults(TrainingConfig("s", "o", lr_schedule="cosine", learning_rate=1e-3,
                                              min_learning_rate=1e-2))
    for ratio in (0.0, 1.5):
        with pytest.raises(UserError, match="--decay-ratio"):
            check_ranges(TrainingConfig("s", "o", lr_schedule="wsd", decay_ratio=ratio))


def optimi_stableadamw(param, grads, rates, beta1, beta2, eps, weight_decay):
    """optimi's `_single_param_stableadamw` (warner-benjamin/optimi, optimi/stableadamw.py; decouple_lr=False, no
    Kahan summation) in NumPy, float64: the debiased betas, the per-tensor RMS of g^2 / max(v, eps^2), the rate
    divided by max(1, RMS), weight decay 1 - rate x weight_decay before the Adam step."""
    param, exp_avg, exp_avg_sq = param.astype(np.float64), np.zeros(param.shape), np.zeros(param.shape)
    for step, (grad, lr) in enumerate(zip(grads, rates), start=1):
        grad = grad.astype(np.float64)
        beta1_hat = (beta1 ** step - beta1) / (beta1 ** step - 1)  # optimi.utils.debias_beta
        beta2_hat = (beta2 ** step - beta2) / (beta2 ** step - 1)
        exp_avg = exp_avg + (1 - beta1_hat) * (grad - exp_avg)  # lerp_
        exp_avg_sq = exp_avg_sq * beta2_hat + (1 - beta2_hat) * grad * grad
        rms = np.sqrt(np.mean(grad ** 2 / np.maximum(exp_avg_sq, eps ** 2)))
        lr = lr / max(1, rms)
        param = param * (1 - lr * weight_decay)
        param = param - lr * exp_avg / (np.sqrt(exp_avg_sq) + eps)
    return param


def small_model_gradients(steps, optimizer):
    """A small Keras model (Dense 6 -> 16 -> 3) trained `steps` steps by `optimizer` on a fixed batch: each step's
    gradients and rate, and the weights before and after."""
    import tensorflow as tf
    import tf_keras as keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(3)])
    features, targets = tf.random.normal([32, 6]), tf.random.normal([32, 3])
    model.build([None, 6])
    start = [variable.numpy() for variable in model.trainable_variables]
    grads, rates = [], []
    for step in range(steps):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(features) - targets))
        gradients = tape.gradient(loss, model.trainable_variables)
        grads.append([gradient.numpy() for gradient in gradients])
        rates.append(float(optimizer._decayed_lr(tf.float32)))
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return model, start, grads, rates


def test_ten_steps_on_a_small_model_equal_optimis_stableadamw():
    from mlm_tpu.training.optimizers import StableAdamW, WarmupThen

    schedule = WarmupThen("wsd", 1e-2, 3, 10, 1e-3, 4, "1-sqrt")
    optimizer = StableAdamW(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-6, weight_decay_rate=0.1,
                            exclude_from_weight_decay=["bias"])
    model, start, grads, rates = small_model_gradients(10, optimizer)
    assert rates[0] == 0 and rates[5] == pytest.approx(1e-2) and rates[-1] < 1e-2
    for index, variable in enumerate(model.trainable_variables):
        decay = 0.0 if variable.shape.rank < 2 else 0.1
        expected = optimi_stableadamw(start[index], [step[index] for step in grads], rates, 0.9, 0.98, 1e-6, decay)
        assert np.abs(variable.numpy() - expected).max() < 1e-6, variable.name
        assert np.abs(variable.numpy() - start[index]).max() > 1e-3  # it moved


def test_a_gradient_spike_moves_the_weights_no_more_than_a_normal_step():
    """After 20 steps of gradients of one scale, a step of 100 times that scale: AdamW's step (its norm) grows with it,
    StableAdamW's is cut back below a normal step's."""
    import tensorflow as tf
    from transformers import AdamWeightDecay

    from mlm_tpu.training.optimizers import StableAdamW

    rng = np.random.default_rng(0)
    normal = [rng.normal(size=(64, 32)).astype(np.float32) for _ in range(21)]

    def moves(optimizer, spike):
        variable = tf.Variable(np.zeros((64, 32), np.float32))
        before = None
        for step, grad in enumerate(normal):
            before = variable.numpy()
            optimizer.apply_gradients([(tf.constant(grad * (spike if step == 20 else 1.0)), variable)])
        return np.linalg.norm(variable.numpy() - before)

    for make in (lambda: StableAdamW(1e-3, beta_1=0.9, beta_2=0.98), lambda: AdamWeightDecay(1e-3, beta_2=0.98)):
        step, spiked = moves(make(), 1.0), moves(make(), 100.0)
        if isinstance(make(), StableAdamW):
            assert spiked <= step, (spiked, step)
        else:
            assert spiked > 1.5 * step, (spiked, step)  # what the clipping prevents


def test_its_state_goes_through_a_checkpoint_and_the_run_goes_on_bit_for_bit(tmp_path):
    """As the backup holds it (tf.train.Checkpoint of model and optimizer): 4 steps, saved, restored into a new model
    and optimizer, 4 more, equal to 8 steps without a stop."""
    import tensorflow as tf
    import tf_keras as keras

    from mlm_tpu.training.optimizers import StableAdamW, WarmupThen, create_state

    def make():
        keras.utils.set_random_seed(1)
        model = keras.Sequential([keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(2)])
        model.build([None, 4])
        optimizer = StableAdamW(WarmupThen("cosine", 1e-2, 2, 8), weight_decay_rate=0.01)
        create_state(optimizer, model.trainable_variables)
        return model, optimizer

    features, targets = tf.random.stateless_normal([16, 4], [1, 2]), tf.random.stateless_normal([16, 2], [3, 4])

    def train(model, optimizer, steps):
        for _ in range(steps):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(features) - targets))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    uninterrupted = make()
    train(*uninterrupted, 8)
    first = make()
    train(*first, 4)
    path = tf.train.Checkpoint(model=first[0], optimizer=first[1]).write(str(tmp_path / "backup"))
    assert {name for name, _ in tf.train.list_variables(path) if "/m/" in name or "/v/" in name}  # slots saved
    resumed = make()
    tf.train.Checkpoint(model=resumed[0], optimizer=resumed[1]).read(path).assert_consumed()
    assert int(resumed[1].iterations) == 4
    train(*resumed, 4)
    for mine, theirs in zip(resumed[0].trainable_variables, uninterrupted[0].trainable_variables):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
