"""Task mixtures: which member dataset each training example comes from, as a function of (seed, step) alone.

`--mixture-rates 0.5 0.3 0.2` gives each member its share (normalised to sum to 1); `--mixture-rates
examples` gives each a share proportional to its number of examples (SeqIO's `rate_num_examples`),
with `--mixture-temperature T` flattening them (each size raised to 1/T, as SeqIO does; T = 1 keeps
them proportional). The example at position i of step s's global batch comes from the member drawn
from a uniform number keyed by (seed, MIXTURE, s, i): no state to save, so a resumed run draws the
same members from its step on, and knows how many examples each member gave before it (`taken_before`).
Each member is read from its own shards in its own keyed order (pipeline.TrainingOrder), epoch after
epoch, independently of the others; a resumed run starts each where its count says, skipping whole files.
The loop's "epoch" over a mixture is as many steps as all members' examples make.
"""

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.shards.pipeline import TrainingOrder, _decoder, _pipelines
from mlm_tpu.shards.reading import ShardSet

MIXTURE = 4  # keeps the mixture's keys apart from the data order's, the masks' and dropout's
MEMBER_KEYS = 1 << 16  # a member's records are ordered by the key (seed, pipeline x MEMBER_KEYS + member)
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


@dataclass(frozen=True)
class Mixture(ShardSet):
    """Several training splits mixed at `rates`: as a ShardSet, all their files (for counts, settings and checks);
    `members` and `names` (their --train-dataset folders) say what the input pipeline mixes."""

    members: Tuple[ShardSet, ...] = ()
    names: Tuple[str, ...] = ()
    rates: Tuple[float, ...] = ()

    def share(self, pipeline: int, pipelines: int) -> "Mixture":
        return dataclasses.replace(self, **_joined([member.share(pipeline, pipelines) for member in self.members]))

    def describe(self) -> List[dict]:
        """Each member's folder, examples and share, for the log and training_args.json."""
        return [{"dataset": name, "examples": member.records, "rate": round(rate, 6)}
                for name, member, rate in zip(self.names, self.members, self.rates)]


def _joined(members: Sequence[ShardSet]) -> dict:
    return {"files": [path for member in members for path in member.files],
            "counts": [count for member in members for count in member.counts], "members": tuple(members)}


def mix(members: Sequence[ShardSet], names: Sequence[str], rates: Union[str, Sequence[float]],
        temperature: float = 1.0) -> Mixture:
    """The mixture of `members` (found with find_shards, one per --train-dataset); they must hold examples of the
    same kind and lengths. Its manifest is the first member's, with every member's counted targets."""
    first = members[0]
    for name, member in zip(names[1:], members[1:]):
        if member.features != first.features or member.kind != first.kind:
            raise UserError(f"--train-dataset {name} holds examples of other lengths or kind ({member.features}) than "
                            f"{names[0]} ({first.features}); shard every member with the same lengths")
    manifest = dict(first.manifest or {})
    targets = {}
    for member in members:
        for target, count in ((member.manifest or {}).get("target_counts") or {}).items():
            targets[target] = targets.get(target, 0) + count
    if targets:
        manifest["target_counts"] = targets
    shares = mixture_rates(rates, [member.records for member in members], temperature)
    return Mixture(features=first.features, manifest=manifest, kind=first.kind, names=tuple(names),
                   rates=tuple(shares), **_joined(members))


def _member_records(member: ShardSet, seed: int, pipeline: int, member_index: int, window: int,
                    taken: int) -> tf.data.Dataset:
    """A member's records, epoch after epoch in its own keyed order, from its `taken`-th on."""
    order = TrainingOrder(member, seed, pipeline * MEMBER_KEYS + member_index, window)
    first_epoch, start = divmod(taken, member.records)
    return order.records(first_epoch, start).concatenate(
        tf.data.Dataset.counter(first_epoch + 1).flat_map(lambda epoch: order.records(epoch, 0)))


def mixture_batches(mixture: Mixture, batch_size: int, replicas: int, transform, *, seed: int, pipeline: int,
                    window: int, start_step: int = 0, vocab_size: Optional[int] = None) -> tf.data.Dataset:
    """This pipeline's batches of the mixture from `start_step` on: `replicas` batches of `batch_size` per step."""
    per_step = batch_size * replicas
    rates, key = list(mixture.rates), seed + pipeline
    taken = taken_before(start_step, rates, per_step, key)
    streams = [_member_records(member, seed, pipeline, index, window, taken[index])
               for index, member in enumerate(mixture.members)]
    records = mixed(streams, rates, per_step, key, start_step)
    batches = records.batch(batch_size, drop_remainder=True).enumerate(start=start_step * replicas)
    return batches.map(_decoder(mixture, transform, vocab_size),
                       num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def distributed_mixture_dataset(strategy: tf.distribute.Strategy, mixture: Mixture, per_replica_batch_size: int,
                                make_transform: Callable[[int], Optional[Callable]], *, seed: int, window: int,
                                start_step: int = 0, vocab_size: Optional[int] = None):
    """As pipeline.distributed_training_dataset, for a mixture: each pipeline mixes its share of every member."""
    _, replicas = _pipelines(strategy)

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        pipeline = context.input_pipeline_id
        return mixture_batches(mixture.share(pipeline, context.num_input_pipelines), per_replica_batch_size,
                               replicas, make_transform(seed + pipeline), seed=seed, pipeline=pipeline,
                               window=window, start_step=start_step, vocab_size=vocab_size)

    return strategy.distribute_datasets_from_function(dataset_fn)


def requested_rates(given: Optional[Sequence[Union[float, str]]]) -> Union[str, List[float]]:
    """--mixture-rates as mixture_rates takes them: numbers, or 'examples' (also when not given)."""
    if not given:
        return BY_SIZE
    words = [value for value in given if isinstance(value, str)]
    if words:
        return BY_SIZE if list(given) == [BY_SIZE] else " ".join(map(str, given))
    return [float(value) for value in given]


def find_training_mixture(config, found: Sequence[ShardSet]) -> ShardSet:
    """The training shards of `config` (a TrainingConfig): one split as found, or the mixture of several, each
    member's share logged; mixture flags without a mixture, or with --pack, refused in one line."""
    if len(found) == 1:
        if config.mixture_rates or config.mixture_temperature != 1.0:
            raise UserError("--mixture-rates and --mixture-temperature mix several --train-dataset folders; give "
                            "more than one, or drop them")
        return found[0]
    if config.pack:
        raise UserError("--pack does not take a mixture of --train-dataset folders yet; drop --pack, or train on "
                        "one folder")
    mixture = mix(found, config.train_datasets, requested_rates(config.mixture_rates), config.mixture_temperature)
    log("Mixture: " + ", ".join(f"{member['dataset']} {member['rate']:.1%} ({member['examples']:,} examples)"
                                for member in mixture.describe()))
    return mixture


def members_of(shards: ShardSet) -> Tuple[ShardSet, ...]:
    """The splits a training run reads: a mixture's members, or the one split."""
    return shards.members if isinstance(shards, Mixture) else (shards,)
