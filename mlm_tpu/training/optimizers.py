"""The optimizer and its learning-rate schedule: `--optimizer adamw|adafactor`, `--lr-schedule linear|rsqrt`.

- adamw (the default): transformers' `create_optimizer`, AdamW with decoupled weight decay (none on LayerNorm
  weights, biases, and what the task names: a delta's IA3 scales and virtual-token tables, as PEFT's recipes).
- adafactor: Adafactor as T5X runs it (t5x/adafactor.py with T5's gin settings): second moments factored into a
  row and a column mean for every weight whose two largest dimensions are both at least 128, full for the others;
  no first moment; decay rate 0.8 (beta2 at step t is 1 - t^-0.8); updates clipped to an RMS of 1.0; the step
  scaled by the weight's own RMS (at least 1e-3); relative step size off: the rate is the schedule's. tf-keras 2.21
  has an `Adafactor`, but it does not run T5's: it keeps a full-size second moment beside the factored one (no
  memory saved), factors every matrix, and caps any rate at 1/sqrt(step) whatever the schedule says.
- linear (`create_optimizer`'s): warm up from 0 over the warm-up steps (--warmup-steps, else --warmup-ratio of the
  steps), then decay linearly to 0 at the last step; peak --learning-rate (default 1e-4).
- rsqrt: T5's inverse square root: --learning-rate for the first W = --warmup-steps steps (T5: 10,000), then
  --learning-rate x sqrt(W / step). Without --learning-rate the peak is 1/sqrt(W): T5's 0.01 then 1/sqrt(step).
  T5X's gin files give this schedule as factors 'constant * rsqrt_decay' with a base_learning_rate B (1.0 in
  t5x/configs/runs/pretrain.gin): the rate B / sqrt(max(step, W)), whose peak is B / sqrt(W). --base-learning-rate
  takes B in T5X's meaning; a --learning-rate above RSQRT_HIGHEST_PEAK (10 times T5's peak) can only be such a
  base given as a peak (1.0 would train at 100 times T5X's rate while warming up), and is refused with the fix.

Both optimizers are tf-keras (legacy) optimizers whose state lives in slot variables, which the backup's checkpoint
holds: a resumed run goes on with exactly the state it stopped with.
"""

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
import tf_keras as keras

from mlm_tpu.errors import UserError
from mlm_tpu.training.config import OPTIMIZERS, SCHEDULES

LINEAR_LEARNING_RATE = 1e-4  # --lr-schedule linear's default peak
RSQRT_WARMUP_STEPS = 10_000  # T5's
RSQRT_HIGHEST_PEAK = 0.1  # ten times T5's 0.01: a higher --learning-rate with rsqrt is a T5X base given as a peak


def with_schedule_defaults(config):
    """`config` (a TrainingConfig) with its learning rate and warm-up as the schedule takes them, so that
    training_args.json and the backup's settings say the numbers the run used; a combination the schedule cannot
    take is refused in one line."""
    for flag, value, allowed in (("--optimizer", config.optimizer, OPTIMIZERS),
                                 ("--lr-schedule", config.lr_schedule, SCHEDULES)):
        if value not in allowed:
            raise UserError(f"{flag} must be one of {', '.join(allowed)}, not '{value}'")
    if config.lr_schedule == "linear":
        if config.base_learning_rate is not None:
            raise UserError("--base-learning-rate is T5X's base of --lr-schedule rsqrt (the rate base / sqrt(max(step, "
                            "warm-up))); with --lr-schedule linear give the peak rate as --learning-rate")
        return dataclasses.replace(config, learning_rate=config.learning_rate or LINEAR_LEARNING_RATE)
    warmup = RSQRT_WARMUP_STEPS if config.warmup_steps is None else config.warmup_steps
    if warmup == 0:
        raise UserError(f"--lr-schedule rsqrt cannot take --warmup-steps 0: its rate is --learning-rate x "
                        f"sqrt(W / max(step, W)) for W warm-up steps, which has no value at W = 0 (T5's rate, "
                        f"1/sqrt(step), is infinite at step 0); give --warmup-steps {RSQRT_WARMUP_STEPS} (T5's) or any "
                        "number above 0")
    return dataclasses.replace(config, warmup_steps=warmup, learning_rate=_rsqrt_peak(config, warmup))


def _rsqrt_peak(config, warmup: int) -> float:
    """The rsqrt schedule's peak: --learning-rate, or --base-learning-rate / sqrt(W) (both may be given when they
    agree: a run's training_args.json records both), or T5's 1 / sqrt(W)."""
    peak, base = config.learning_rate, config.base_learning_rate
    if base is not None:
        if peak is not None and not math.isclose(peak, base / math.sqrt(warmup), rel_tol=1e-9):
            raise UserError(f"--learning-rate {peak:g} (the peak) and --base-learning-rate {base:g} (T5X's base, the "
                            f"peak being base / sqrt({warmup:,} warm-up steps) = {base / math.sqrt(warmup):g}) say "
                            "different things; give one of them")
        return base / math.sqrt(warmup)
    if peak is not None and peak > RSQRT_HIGHEST_PEAK:
        raise UserError(f"--lr-schedule rsqrt --learning-rate {peak:g} is its peak, held for the {warmup:,} warm-up "
                        f"steps: {peak / 0.01:g} times T5's 0.01. T5X's gin files give a base_learning_rate instead "
                        f"(1.0; the rate base / sqrt(max(step, warm-up))): pass it as --base-learning-rate {peak:g} "
                        f"(a peak of {peak / math.sqrt(warmup):g} here), or give a peak of at most "
                        f"{RSQRT_HIGHEST_PEAK:g} as --learning-rate")
    return peak or 1 / math.sqrt(warmup)


class InverseSquareRoot(keras.optimizers.schedules.LearningRateSchedule):
    """peak x sqrt(warmup / max(step, warmup)): constant while warming up, then falling as 1/sqrt(step)."""

    def __init__(self, peak: float, warmup_steps: int):
        self.peak, self.warmup_steps = peak, warmup_steps

    def __call__(self, step):
        step = tf.maximum(tf.cast(step, tf.float32), float(self.warmup_steps))
        return self.peak * tf.sqrt(float(self.warmup_steps) / step)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps}


def warmup_steps_of(config, total_steps: int) -> int:
    """The linear schedule's warm-up: --warmup-steps, else --warmup-ratio of the steps (never past the last)."""
    return min(config.warmup_steps if config.warmup_steps is not None else int(total_steps * config.warmup_ratio),
               total_steps)


NO_DECAY = ("LayerNorm", "layer_norm", "bias")  # create_optimizer's: weights AdamW leaves undecayed (substrings)


def make_optimizer(config, total_steps: int, no_decay: Sequence[str] = ()):
    """The optimizer `config` (with_schedule_defaults applied) asks for, over `total_steps` steps; AdamW decays
    every weight but those whose names hold one of NO_DECAY or `no_decay` (the task's: a delta's scales and
    virtual tokens, whose no-op values are not 0)."""
    from transformers import AdamWeightDecay, create_optimizer

    moments = {"adam_beta1": config.adam_beta1, "adam_beta2": config.adam_beta2, "adam_epsilon": config.adam_epsilon}
    adam, schedule = create_optimizer(init_lr=config.learning_rate, num_train_steps=total_steps,
                                      num_warmup_steps=warmup_steps_of(config, total_steps),
                                      weight_decay_rate=config.weight_decay_rate, **moments)
    if config.lr_schedule == "rsqrt":
        schedule = InverseSquareRoot(config.learning_rate, config.warmup_steps)
    if config.optimizer == "adafactor":
        return Adafactor(schedule)
    if config.lr_schedule == "linear" and not config.weight_decay_rate:
        return adam  # create_optimizer's plain Adam: nothing decays
    return AdamWeightDecay(learning_rate=schedule, weight_decay_rate=config.weight_decay_rate,
                           beta_1=config.adam_beta1, beta_2=config.adam_beta2, epsilon=config.adam_epsilon,
                           exclude_from_weight_decay=[*NO_DECAY, *no_decay])


def create_state(optimizer, variables) -> None:
    """Create the optimizer's state for `variables` now (it would be at the first step), so that its size is known
    at start and a backup restores into it."""
    if hasattr(optimizer, "_create_all_weights"):  # tf-keras' legacy optimizers (AdamWeightDecay, Adafactor)
        optimizer._create_all_weights(variables)
    else:
        optimizer.build(variables)


def factored_dims(shape: Tuple[int, ...], min_dim_size_to_factor: int = 128) -> Optional[Tuple[int, int]]:
    """(second largest, largest) dimension of a weight whose second moments are factored, or None (T5X's rule)."""
    if len(shape) < 2:
        return None
    order = np.argsort(shape, kind="stable")
    if shape[order[-2]] < min_dim_size_to_factor:
        return None
    return int(order[-2]), int(order[-1])


class Adafactor(keras.optimizers.legacy.Optimizer):
    """Adafactor with T5X's settings (see the module's docstring); its state: per weight either a row and a column
    mean of the squared gradients (`v_row`, `v_col`), or a full second moment `v`."""

    def __init__(self, learning_rate, decay_rate: float = 0.8, clipping_threshold: float = 1.0,
                 epsilon1: float = 1e-30, epsilon2: float = 1e-3, min_dim_size_to_factor: int = 128,
                 name: str = "Adafactor", **kwargs):
        super().__init__(name, **kwargs)
        self._set_hyper("learning_rate", learning_rate)
        self.decay_rate, self.clipping_threshold = decay_rate, clipping_threshold
        self.epsilon1, self.epsilon2, self.min_dim_size_to_factor = epsilon1, epsilon2, min_dim_size_to_factor

    def _dims(self, var) -> Optional[Tuple[int, int]]:
        return factored_dims(tuple(var.shape.as_list()), self.min_dim_size_to_factor)

    def _create_slots(self, var_list: List[tf.Variable]) -> None:
        for var in var_list:
            dims = self._dims(var)
            if dims is None:
                self.add_slot(var, "v")
                continue
            shape = var.shape.as_list()
            second, largest = dims
            self.add_slot(var, "v_row", shape=[size for axis, size in enumerate(shape) if axis != largest])
            self.add_slot(var, "v_col", shape=[size for axis, size in enumerate(shape) if axis != second])

    def _resource_apply_dense(self, grad, var, apply_state=None):
        grad = tf.cast(grad, tf.float32)
        step = tf.cast(self.iterations, tf.float32) + 1.0
        beta = 1.0 - tf.pow(step, -self.decay_rate)
        squared = tf.square(grad) + self.epsilon1
        dims = self._dims(var)
        updates = []
        if dims is None:
            v = self.get_slot(var, "v")
            new_v = beta * v + (1.0 - beta) * squared
            updates.append(v.assign(new_v, use_locking=self._use_locking))
            update = grad * tf.math.rsqrt(new_v)
        else:
            second, largest = dims
            v_row, v_col = self.get_slot(var, "v_row"), self.get_slot(var, "v_col")
            new_row = beta * v_row + (1.0 - beta) * tf.reduce_mean(squared, axis=largest)
            new_col = beta * v_col + (1.0 - beta) * tf.reduce_mean(squared, axis=second)
            updates += [v_row.assign(new_row, use_locking=self._use_locking),
                        v_col.assign(new_col, use_locking=self._use_locking)]
            second_in_row = second - 1 if largest < second else second
            row_factor = tf.math.rsqrt(new_row / tf.reduce_mean(new_row, axis=second_in_row, keepdims=True))
            update = grad * tf.expand_dims(row_factor, largest) * tf.expand_dims(tf.math.rsqrt(new_col), second)
        update /= tf.maximum(1.0, tf.sqrt(tf.reduce_mean(tf.square(update))) / self.clipping_threshold)
        scale = tf.maximum(tf.sqrt(tf.reduce_mean(tf.square(tf.cast(var, tf.float32)))), self.epsilon2)
        rate = self._decayed_lr(tf.float32) * scale
        updates.append(var.assign_sub(tf.cast(rate * update, var.dtype), use_locking=self._use_locking))
        return tf.group(*updates)

    def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
        """Rows of an embedding: Adafactor's factors need the whole gradient, so it is made dense."""
        dense = tf.math.unsorted_segment_sum(grad, indices, tf.shape(var, out_type=indices.dtype)[0])
        return self._resource_apply_dense(dense, var, apply_state)

    def get_config(self):
        return {**super().get_config(), "learning_rate": self._serialize_hyperparameter("learning_rate"),
                "decay_rate": self.decay_rate, "clipping_threshold": self.clipping_threshold,
                "epsilon1": self.epsilon1, "epsilon2": self.epsilon2,
                "min_dim_size_to_factor": self.min_dim_size_to_factor}


def state_bytes(optimizer) -> int:
    """Bytes of the optimizer's state (its slots and step counter), once created."""
    return sum(variable.shape.num_elements() * variable.dtype.size for variable in optimizer.variables())


def describe_optimizer(config, optimizer, model) -> str:
    """The optimizer, its schedule and the size of its state in words, for the log at start."""
    weights = sum(variable.shape.num_elements() * variable.dtype.size for variable in model.trainable_variables)
    state = state_bytes(optimizer)
    warmup = (f"{config.warmup_steps:,} warm-up steps" if config.warmup_steps is not None
              else f"warm-up {config.warmup_ratio:g} of the steps")
    base = f"T5X's base {config.base_learning_rate:g}: " if config.base_learning_rate is not None else ""
    # a run from a checkpoint starts its schedule at step 0 too (its optimizer state is new): --learning-rate the peak
    start = (f"from step 0 on the weights of --model-name-or-path {config.model_name_or_path}, "
             if config.model_name_or_path else "")
    return (f"Optimizer: {config.optimizer}, {config.lr_schedule} schedule ({start}{base}peak "
            f"{config.learning_rate:g}, {warmup}); its state: {state:,} bytes ({state / max(weights, 1):.2f} x the "
            f"trainable weights' {weights:,})")
