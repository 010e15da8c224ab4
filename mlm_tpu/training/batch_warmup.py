"""Batch-size warm-up (ModernBERT's `batch_size_warmup_min_size` and `batch_size_warmup_tokens`, its
src/sequence_packer.py BatchSizeWarmupScheduler): the global batch grows from a start size to the full one over the
first tokens of the run, then stays full.

ModernBERT grows its batch one row at a time, each size lasting an equal number of steps, until the warm-up's tokens
are spent. Here the batch must stay a whole number of micro-batches (the micro-batch is fixed: TPUs need static
shapes), so it grows in steps of the start size S: S, 2S, ... up to the full batch G = K x S, each size again for an
equal share of the steps (ModernBERT's rule: stage k ends once the tokens seen reach its cumulative share
(1 + ... + k) / (1 + ... + K-1) of the warm-up's). Tokens are counted as rows x their length, padding included.
S must divide G, and the micro-batches of all replicas together must divide S.

The data order of such a run is defined over units of S examples (shards/layout.py, with a global batch of S): unit
u is what a run with a batch of S would train at its step u, masks and all, and step s trains the next k(s) units.
So it is a function of (seed, S, unit) on any number of workers, and a run resumed during the ramp starts its input
at the unit its step begins with. Each replica gets the full batch's rows every step, the units of the step first
and rows that take no loss after them, and trains only the micro-batches that hold the step's units
(training/step.py): the shapes stay the full batch's.
"""

import bisect
import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

from mlm_tpu.errors import UserError


@dataclass(frozen=True)
class BatchWarmup:
    """A run's batch-size warm-up: the global batch of each step, in units of `start` examples."""

    start: int  # S, examples (--batch-size-warmup-min-size)
    full: int  # G, the global batch after the warm-up
    stages: Tuple[Tuple[int, int], ...]  # (first step, global batch) of each size below the full one, in order
    end: int  # the first step of the full batch

    @property
    def units_per_step(self) -> int:
        """K: the units of a full step."""
        return self.full // self.start

    def batch_at(self, step: int) -> int:
        """The global batch of step `step` (0-based)."""
        if step >= self.end:
            return self.full
        return self.stages[bisect.bisect_right([first for first, _ in self.stages], step) - 1][1]

    def units_before(self, step: int) -> int:
        """The units the steps before `step` took: where the input of a run resumed at `step` starts."""
        return self.examples(0, step) // self.start

    def examples(self, first: int, last: int) -> int:
        """The examples of steps first, ..., last - 1."""
        total, bounds = 0, [*self.stages, (self.end, self.full)]
        for (begin, batch), (after, _) in zip(bounds, bounds[1:]):
            total += max(0, min(last, after) - max(first, begin)) * batch
        return total + max(0, last - max(first, self.end)) * self.full

    def steps_to_see(self, examples: int) -> int:
        """The fewest steps from the start whose batches hold `examples` examples, the warm-up's smaller batches
        counted as they are: where a setting given in tokens seen falls (ModernBERT's trainer counts tokens so)."""
        seen, bounds = 0, [*self.stages, (self.end, self.full)]
        for (begin, batch), (after, _) in zip(bounds, bounds[1:]):
            if seen + (after - begin) * batch >= examples:
                return begin + math.ceil((examples - seen) / batch)
            seen += (after - begin) * batch
        return self.end + math.ceil((examples - seen) / self.full)

    def units_of_steps(self) -> List[int]:
        """Units per step over the warm-up, step by step (for the input pipeline's grouping)."""
        return [self.batch_at(step) // self.start for step in range(self.end)]

    def ends_inside(self, total_steps: int) -> Optional[str]:
        """A line for a run of `total_steps` steps that ends before the full batch (whose every step trains fewer
        rows than the batch it was given), else None."""
        if total_steps > self.end:
            return None
        smallest, largest = self.batch_at(0), self.batch_at(total_steps - 1)
        rows = f"at {smallest}" if smallest == largest else f"at {smallest} to {largest}"
        return (f"The run ends inside its batch warm-up: every step trains {rows} of {self.full} rows (its "
                f"{total_steps:,} steps end before step {self.end + 1:,}, the first of the full batch); give more "
                "--max-steps or fewer --batch-size-warmup-tokens to train at the full batch")

    def describe(self, row_tokens: int, tokens: int) -> str:
        sizes = ", ".join(f"{batch} from step {first + 1}" for first, batch in self.stages)
        return (f"Batch-size warm-up: the global batch grows from {self.start} to {self.full} over the first "
                f"{tokens:,} tokens ({row_tokens} per example): {sizes}, then {self.full} from step {self.end + 1}")


def plan_warmup(config, full: int, micro_batch: int, row_tokens: int) -> Optional[BatchWarmup]:
    """The warm-up `config` asks for (--batch-size-warmup-min-size, --batch-size-warmup-tokens), to the full global
    batch `full` in micro-batches of `micro_batch` examples over all replicas, each example `row_tokens` tokens; None
    without one. A warm-up that cannot be is refused in one line."""
    start, tokens = config.batch_size_warmup_min_size, config.batch_size_warmup_tokens
    if start is None and tokens is None:
        return None
    if start is None or tokens is None:
        raise UserError("a batch-size warm-up needs both --batch-size-warmup-min-size (the batch it starts from) and "
                        "--batch-size-warmup-tokens (over how many tokens it grows to the full batch)")
    if start >= full or full % start:
        raise UserError(f"--batch-size-warmup-min-size {start} must divide the global batch of {full} (--per-replica-"
                        f"batch-size x replicas x --gradient-accumulation-steps) and be smaller: the batch grows in "
                        f"steps of it, up to the full one")
    if start % micro_batch:
        raise UserError(f"--batch-size-warmup-min-size {start}: the batch grows by whole micro-batches of "
                        f"{micro_batch} examples (--per-replica-batch-size over all replicas), which do not divide it; "
                        f"give a multiple of {micro_batch}, or a --gradient-accumulation-steps and "
                        "--per-replica-batch-size whose micro-batches divide it")
    if config.pack:
        raise UserError("--batch-size-warmup-tokens does not go with --pack, whose packed rows are counted per full "
                        "batch; drop one of them")
    if len(config.train_datasets) > 1:
        raise UserError("--batch-size-warmup-tokens does not go with a mixture of several --train-dataset folders yet; "
                        "give one folder, or drop the warm-up")
    return warmup_schedule(start, full, row_tokens, tokens)


def warmup_schedule(start: int, full: int, row_tokens: int, tokens: int) -> BatchWarmup:
    """ModernBERT's rule with sizes start, 2 start, ...: stage k lasts while the tokens seen are below
    tokens x (1 + ... + k) / (1 + ... + K-1)."""
    sizes = full // start
    total = sum(range(1, sizes))
    thresholds = [tokens * sum(range(1, k + 1)) / total for k in range(1, sizes)]
    stages, step, seen = [], 0, 0
    for k, threshold in enumerate(thresholds, start=1):
        if seen < threshold:
            stages.append((step, k * start))
        while seen < threshold:
            seen += k * start * row_tokens
            step += 1
    return BatchWarmup(start, full, tuple(stages), step)


def steps_of_units(dataset, warmup: BatchWarmup, replicas: int, start_step: int):
    """A machine's input pipeline of units (`dataset`: each replica's rows of a unit, `replicas` of them per unit, in
    turn), from step `start_step` on, as the full batch's shape: per step and replica, the rows of the step's units
    and after them rows that take no loss (labels IGNORE_INDEX, everything else 0), up to the full batch's rows."""
    import numpy as np
    import tensorflow as tf

    from mlm_tpu.shards.format import IGNORE_INDEX

    full = warmup.units_per_step
    per_step = warmup.units_of_steps()
    starts = tf.constant(np.concatenate([[0], np.cumsum(per_step)[:-1]]), tf.int64)  # each warm-up step's first unit
    sizes, after = tf.constant(per_step, tf.int64), warmup.units_before(warmup.end)

    def step_of(unit, _):
        in_warmup = tf.searchsorted(starts, tf.reshape(unit, [1]), side="right", out_type=tf.int64)[0] - 1
        return tf.where(unit < after, in_warmup, warmup.end + (unit - after) // full)

    def size_of(step):
        return tf.where(step < warmup.end, tf.gather(sizes, tf.minimum(step, warmup.end - 1)), full)

    def padded(name, values):  # [units, replicas, rows, ...] -> [replicas, full x rows, ...]
        filler = tf.cast(IGNORE_INDEX if name == "labels" else 0, values.dtype)
        rest = [[0, 0]] * (len(values.shape) - 1)
        values = tf.pad(values, [[0, full - tf.shape(values)[0]], *rest], constant_values=filler)
        values = tf.transpose(values, [1, 0, *range(2, len(values.shape))])
        return tf.reshape(values, [replicas, full * values.shape[2], *values.shape[3:]])

    units = dataset.batch(replicas, drop_remainder=True).enumerate(start=warmup.units_before(start_step))
    steps = units.group_by_window(step_of, lambda step, window: window.map(lambda unit, rows: rows).batch(full),
                                  window_size_func=size_of)
    return steps.map(lambda batch: {name: padded(name, values) for name, values in batch.items()}).unbatch()
