"""The optimizer and its learning-rate schedule: `--optimizer adamw|adafactor|stableadamw`, `--lr-schedule
linear|rsqrt|wsd|cosine|constant`.

- adamw (the default): transformers' `create_optimizer`, AdamW with decoupled weight decay on the weights
  training/weight_decay.py's rule picks: every weight of rank 2 or more (none on biases and norms, whatever their
  names, as ModernBERT's trainer and Cramming), but not what the task names (a delta's IA3 scales and virtual-token
  tables, as PEFT's recipes).
- stableadamw: StableAdamW (Wortsman et al. 2023, "Stable and low-precision training for large-scale vision-language
  models"), as optimi implements it (warner-benjamin/optimi, optimi/stableadamw.py, `_single_param_stableadamw`;
  ModernBERT's src/optimizer.py is a copy of it): Adam's moments kept with optimi's debiased betas
  (beta_t = beta (1 - beta^(t-1)) / (1 - beta^t), so m and v are the bias-corrected means themselves), and each weight
  tensor's rate divided by max(1, RMS(g^2 / max(v, eps^2))): a step where the gradient jumps far above its running
  scale is cut back, which stands in for gradient clipping. Weight decay is optimi's default (decouple_lr=False):
  the weight is multiplied by 1 - rate x --weight-decay-rate, the rate being that tensor's clipped rate, before the
  Adam step (on the same weights as AdamW's). ModernBERT's `decoupled_stableadamw` is optimi's
  decouple_lr=True, the factor 1 - (rate / peak) x its weight decay, the peak being the run's: its 1e-5 is
  1e-5 / --learning-rate here, 0.0125 at 8e-4 (training/recipes.py's modernbert does that sum).
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

- wsd: warm-up-stable-decay (Hägele et al. 2024; MiniCPM's, ModernBERT's): warm up linearly from 0, hold the peak,
  then over the last D = round(--decay-ratio x steps) steps fall to --min-learning-rate, as 1 - p (linear) or
  1 - sqrt(p) (1-sqrt) of the way, p the share of the decay done. Before its decay it is constant's schedule: a run
  stopped there continues into a decay with a longer --max-steps (docs: Training, schedules).
- cosine: warm up, then min + (peak - min) x (1 + cos(pi p)) / 2, p the share of the steps after warm-up done.
- constant: warm up, then the peak.
Warm-up, for all but rsqrt: the rate peak x step / W for the W = --warmup-steps (else --warmup-ratio of the steps)
first steps, as create_optimizer's; step counts from 0, the first update's.

The optimizers are tf-keras (legacy) optimizers whose state lives in slot variables, which the backup's checkpoint
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

LINEAR_LEARNING_RATE = 1e-4  # the default peak of every schedule but rsqrt
DECAYING_TO_MINIMUM = ("wsd", "cosine")  # the schedules that end at --min-learning-rate
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
    check_schedule_settings(config)
    if config.lr_schedule != "rsqrt":
        if config.base_learning_rate is not None:
            raise UserError("--base-learning-rate is T5X's base of --lr-schedule rsqrt (the rate base / sqrt(max(step, "
                            f"warm-up))); with --lr-schedule {config.lr_schedule} give the peak rate as "
                            "--learning-rate")
        peak = config.learning_rate or LINEAR_LEARNING_RATE
        if config.lr_schedule in DECAYING_TO_MINIMUM and config.min_learning_rate > peak:
            raise UserError(f"--min-learning-rate {config.min_learning_rate:g} is above the peak --learning-rate "
                            f"{peak:g}: --lr-schedule {config.lr_schedule} decays from the peak down to it")
        return dataclasses.replace(config, learning_rate=peak)
    warmup = RSQRT_WARMUP_STEPS if config.warmup_steps is None else config.warmup_steps
    if warmup == 0:
        raise UserError(f"--lr-schedule rsqrt cannot take --warmup-steps 0: its rate is --learning-rate x "
                        f"sqrt(W / max(step, W)) for W warm-up steps, which has no value at W = 0 (T5's rate, "
                        f"1/sqrt(step), is infinite at step 0); give --warmup-steps {RSQRT_WARMUP_STEPS} (T5's) or any "
                        "number above 0")
    return dataclasses.replace(config, warmup_steps=warmup, learning_rate=_rsqrt_peak(config, warmup))


# The settings only some schedules read: (setting, the schedules that read it, what it does there)
SCHEDULE_SETTINGS = (("decay_ratio", ("wsd",), "the share of the steps, at the end, that decay under"),
                     ("decay_shape", ("wsd",), "the shape of the decay of"),
                     ("min_learning_rate", DECAYING_TO_MINIMUM, "the rate at the end of the decay of"))


def check_schedule_settings(config) -> None:
    """Refuse, in one line, a schedule setting given away from its default to a schedule that does not read it (the
    run would go on as if it had not been given: `--lr-schedule linear --min-learning-rate 1e-4` still decays to 0)."""
    defaults = type(config).__dataclass_fields__
    for name, schedules, meaning in SCHEDULE_SETTINGS:
        value = getattr(config, name)
        if config.lr_schedule in schedules or value == defaults[name].default:
            continue
        flag, shown, readers = "--" + name.replace("_", "-"), f"{value:g}" if isinstance(value, float) else value, \
            " or ".join(schedules)
        raise UserError(f"{flag} {shown} sets {meaning} --lr-schedule {readers}; --lr-schedule {config.lr_schedule} "
                        f"does not read it, so it would change nothing: drop {flag}, or choose --lr-schedule {readers}")


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


class WarmupThen(keras.optimizers.schedules.LearningRateSchedule):
    """wsd, cosine and constant (see the module's docstring): peak x step / warmup while warming up, then the
    schedule's shape over the `total` steps; `decay`, wsd's decay steps."""

    def __init__(self, kind: str, peak: float, warmup: int, total: int, minimum: float = 0.0, decay: int = 1,
                 shape: str = "linear"):
        self.kind, self.peak, self.warmup, self.total = kind, peak, warmup, total
        self.minimum, self.decay, self.shape = minimum, decay, shape

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warming = self.peak * step / max(self.warmup, 1)
        if self.kind == "constant":
            after = tf.constant(self.peak, tf.float32)
        elif self.kind == "cosine":
            done = tf.clip_by_value((step - self.warmup) / max(self.total - self.warmup, 1), 0.0, 1.0)
            after = self.minimum + (self.peak - self.minimum) * 0.5 * (1.0 + tf.cos(math.pi * done))
        else:  # wsd
            done = tf.clip_by_value((step - (self.total - self.decay)) / self.decay, 0.0, 1.0)
            fallen = tf.sqrt(done) if self.shape == "1-sqrt" else done
            after = self.peak - (self.peak - self.minimum) * fallen
        return tf.where(step < self.warmup, warming, after)

    def describe(self) -> str:
        """What follows the warm-up, in words (for the log)."""
        if self.kind == "wsd":
            return (f", held until step {self.total - self.decay:,}, then a {self.shape} decay over the last "
                    f"{self.decay:,} steps to {self.minimum:g}")
        return f", then a cosine down to {self.minimum:g}" if self.kind == "cosine" else ", then held"

    def get_config(self):
        return {"kind": self.kind, "peak": self.peak, "warmup": self.warmup, "total": self.total,
                "minimum": self.minimum, "decay": self.decay, "shape": self.shape}


def decay_steps_of(config, total_steps: int) -> int:
    """wsd's decay: the last --decay-ratio of the steps, at least one."""
    return max(round(total_steps * config.decay_ratio), 1)


def schedule_of(config, total_steps: int):
    """The learning-rate schedule `config` asks for (create_optimizer makes linear's)."""
    if config.lr_schedule == "rsqrt":
        return InverseSquareRoot(config.learning_rate, config.warmup_steps)
    return WarmupThen(config.lr_schedule, config.learning_rate, warmup_steps_of(config, total_steps), total_steps,
                      config.min_learning_rate, decay_steps_of(config, total_steps), config.decay_shape)


def warmup_steps_of(config, total_steps: int) -> int:
    """The linear schedule's warm-up: --warmup-steps, else --warmup-ratio of the steps (never past the last)."""
    return min(config.warmup_steps if config.warmup_steps is not None else int(total_steps * config.warmup_ratio),
               total_steps)


def make_optimizer(config, total_steps: int, no_decay: Sequence[str] = ()):
    """The optimizer `config` (with_schedule_defaults applied) asks for, over `total_steps` steps; AdamW and
    StableAdamW decay the weights training/weight_decay.py's rule picks, leaving out those whose names hold one of
    `no_decay` (the task's)."""
    from transformers import create_optimizer

    from mlm_tpu.training.weight_decay import AdamW

    moments = {"adam_beta1": config.adam_beta1, "adam_beta2": config.adam_beta2, "adam_epsilon": config.adam_epsilon}
    adam, schedule = create_optimizer(init_lr=config.learning_rate, num_train_steps=total_steps,
                                      num_warmup_steps=warmup_steps_of(config, total_steps),
                                      weight_decay_rate=config.weight_decay_rate, **moments)
    if config.lr_schedule != "linear":
        schedule = schedule_of(config, total_steps)
    if config.optimizer == "adafactor":
        return Adafactor(schedule)
    if config.optimizer == "stableadamw":
        return StableAdamW(schedule, beta_1=config.adam_beta1, beta_2=config.adam_beta2, epsilon=config.adam_epsilon,
                           weight_decay_rate=config.weight_decay_rate, exclude_from_weight_decay=list(no_decay))
    if config.lr_schedule == "linear" and not config.weight_decay_rate:
        return adam  # create_optimizer's plain Adam: nothing decays
    return AdamW(learning_rate=schedule, weight_decay_rate=config.weight_decay_rate, beta_1=config.adam_beta1,
                 beta_2=config.adam_beta2, epsilon=config.adam_epsilon, exclude_from_weight_decay=list(no_decay))


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


class StableAdamW(keras.optimizers.legacy.Optimizer):
    """StableAdamW as optimi's `_single_param_stableadamw` runs it (see the module's docstring); its state: per
    weight the debiased first and second moments `m` and `v` (slots, so a backup holds them)."""

    def __init__(self, learning_rate, beta_1: float = 0.9, beta_2: float = 0.99, epsilon: float = 1e-6,
                 weight_decay_rate: float = 0.0, exclude_from_weight_decay: Sequence[str] = (),
                 name: str = "StableAdamW", **kwargs):
        super().__init__(name, **kwargs)
        self._set_hyper("learning_rate", learning_rate)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self.weight_decay_rate, self.exclude_from_weight_decay = weight_decay_rate, list(exclude_from_weight_decay)

    def _create_slots(self, var_list: List[tf.Variable]) -> None:
        for var in var_list:
            self.add_slot(var, "m")
            self.add_slot(var, "v")

    def _decays(self, var) -> bool:
        from mlm_tpu.training.weight_decay import decays

        return bool(self.weight_decay_rate) and decays(var, self.exclude_from_weight_decay)

    def _resource_apply_dense(self, grad, var, apply_state=None):
        grad = tf.cast(grad, tf.float32)
        step = tf.cast(self.iterations, tf.float32) + 1.0
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        beta_1, beta_2 = (debiased_beta(beta, step) for beta in (self.beta_1, self.beta_2))
        new_m = m + (1.0 - beta_1) * (grad - m)  # torch's lerp
        new_v = beta_2 * v + (1.0 - beta_2) * tf.square(grad)
        rms = tf.sqrt(tf.reduce_mean(tf.square(grad) / tf.maximum(new_v, self.epsilon ** 2)))
        rate = self._decayed_lr(tf.float32) / tf.maximum(1.0, rms)
        weight = tf.cast(var.read_value(), tf.float32)
        if self._decays(var):
            weight = weight * (1.0 - rate * self.weight_decay_rate)
        weight = weight - rate * new_m / (tf.sqrt(new_v) + self.epsilon)
        return tf.group(m.assign(new_m, use_locking=self._use_locking), v.assign(new_v, use_locking=self._use_locking),
                        var.assign(tf.cast(weight, var.dtype), use_locking=self._use_locking))

    def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
        """Rows of an embedding: the tensor's RMS needs the whole gradient, so it is made dense."""
        dense = tf.math.unsorted_segment_sum(grad, indices, tf.shape(var, out_type=indices.dtype)[0])
        return self._resource_apply_dense(dense, var, apply_state)

    def get_config(self):
        return {**super().get_config(), "learning_rate": self._serialize_hyperparameter("learning_rate"),
                "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon,
                "weight_decay_rate": self.weight_decay_rate,
                "exclude_from_weight_decay": self.exclude_from_weight_decay}


def debiased_beta(beta: float, step):
    """optimi's debias_beta: beta (1 - beta^(t-1)) / (1 - beta^t), the decay under which the running mean is its own
    bias correction (0 at the first step)."""
    power = tf.pow(beta, step)
    return (power - beta) / (power - 1.0)


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
    schedule = optimizer._get_hyper("learning_rate") if hasattr(optimizer, "_get_hyper") else None
    after = schedule.describe() if isinstance(schedule, WarmupThen) else ""
    return (f"Optimizer: {config.optimizer}, {config.lr_schedule} schedule ({start}{base}peak "
            f"{config.learning_rate:g}, {warmup}{after}); its state: {state:,} bytes ({state / max(weights, 1):.2f} x "
            f"the trainable weights' {weights:,})")
