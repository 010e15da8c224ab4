"""Task mixtures: which member dataset each training example comes from, as a function of (seed, step) alone.

`--mixture-rates 0.5 0.3 0.2` gives each member its share (normalised to sum to 1); `--mixture-rates
examples` gives each a share proportional to its number of examples (SeqIO's `rate_num_examples`),
with `--mixture-temperature T` flattening them (each size raised to 1/T, as SeqIO does; T = 1 keeps
them proportional). The example at position i of step s's global batch comes from the member drawn
from a uniform number keyed by (seed, MIXTURE, s, i): no state to save, so a resumed run draws the
same members from its step on, and knows how many examples each member gave before it (`taken_before`).
"""

import math
from typing import List, Sequence, Union

import numpy as np
import tensorflow as tf

from mlm_tpu.errors import UserError

MIXTURE = 4  # keeps the mixture's keys apart from the data order's, the masks' and dropout's
BY_SIZE = "examples"


def mixture_rates(rates: Union[str, Sequence[float]], sizes: Sequence[int], temperature: float = 1.0) -> List[float]:
    """Each member's share of the examples, summing to 1; bad rates refused in one line."""
    if not temperature > 0 or not math.isfinite(temperature):
        raise UserError(f"--mixture-temperature must be above 0, not {temperature}")
    if isinstance(rates, str):
        if rates != BY_SIZE:
            raise UserError(f"--mixture-rates takes one number per --train-dataset, or '{BY_SIZE}', not '{rates}'")
        weights = [size ** (1 / temperature) for size in sizes]
    else:
        if len(rates) != len(sizes):
            raise UserError(f"--mixture-rates has {len(rates)} rates for {len(sizes)} --train-dataset folders; give "
                            f"one rate per folder, in the same order, or '{BY_SIZE}'")
        bad = [rate for rate in rates if not (rate >= 0 and math.isfinite(rate))]
        if bad:
            raise UserError(f"--mixture-rates {bad[0]}: a rate is a share of the examples, 0 or more")
        if temperature != 1.0:
            raise UserError(f"--mixture-temperature applies to --mixture-rates {BY_SIZE}; with rates given, give "
                            "the rates you want")
        weights = list(rates)
    total = sum(weights)
    if total <= 0:
        raise UserError("--mixture-rates are all 0: give at least one member a share above 0")
    return [weight / total for weight in weights]


def _key(seed: int) -> tf.Tensor:
    return tf.random.experimental.stateless_fold_in(tf.constant([seed, MIXTURE], tf.int64), 0)


def members_of_step(step: tf.Tensor, rates: Sequence[float], global_batch_size: int, seed: int) -> tf.Tensor:
    """[global_batch_size] int32: the member each example of step `step` comes from."""
    key = tf.random.experimental.stateless_fold_in(_key(seed), tf.cast(step, tf.int64))
    draws = tf.random.stateless_uniform([global_batch_size], seed=key, dtype=tf.float32)
    bounds = tf.constant(np.cumsum(rates)[:-1], tf.float32)
    return tf.cast(tf.searchsorted(bounds, draws, side="right"), tf.int32)


def member_order(rates: Sequence[float], global_batch_size: int, seed: int, start_step: int = 0) -> tf.data.Dataset:
    """The member of every example from `start_step` on, one int64 at a time (for choose_from_datasets)."""
    return tf.data.Dataset.counter(start_step).map(
        lambda step: tf.cast(members_of_step(step, rates, global_batch_size, seed), tf.int64)).unbatch()


def taken_before(step: int, rates: Sequence[float], global_batch_size: int, seed: int,
                 chunk: int = 4096) -> List[int]:
    """How many examples each member gave in the steps before `step` (where a resumed run starts each member)."""
    counts = np.zeros(len(rates), np.int64)
    for first in range(0, step, chunk):
        steps = tf.range(first, min(first + chunk, step), dtype=tf.int64)
        members = tf.map_fn(lambda s: members_of_step(s, rates, global_batch_size, seed), steps,
                            fn_output_signature=tf.int32)
        counts += np.bincount(members.numpy().ravel(), minlength=len(rates))
    return counts.tolist()


def mixed(members: Sequence[tf.data.Dataset], rates: Sequence[float], global_batch_size: int, seed: int,
          start_step: int = 0) -> tf.data.Dataset:
    """The members' examples (each an endless stream already started where `taken_before` says) mixed in the
    keyed order, from `start_step` on."""
    return tf.data.Dataset.choose_from_datasets(list(members), member_order(rates, global_batch_size, seed,
                                                                             start_step))
