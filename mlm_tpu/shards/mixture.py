"""Task mixtures: which member dataset each training example comes from, as a function of (seed, step) alone.

`--mixture-rates 0.5 0.3 0.2` gives each member its share (normalised to sum to 1); `--mixture-rates
examples` gives each a share proportional to its number of examples (SeqIO's `rate_num_examples`),
`--mixture-maximum K` counting a member of more than K examples as K (T5's "examples-proportional mixing
with limit K"), and `--mixture-temperature T` flattening them (each size raised to 1/T, as SeqIO does; T = 1
keeps them proportional). The example at position i of step s's global batch comes from the member drawn
from a uniform number keyed by (seed, MIXTURE, s, i), so a resumed run draws the same members from its step
on. How many examples each member gave before the step is the one thing to keep (MemberCounts): every
backup holds it, so a resumed run does not draw every earlier step again to count them.
Each virtual input pipeline v of V (layout.py) gives rows [v G/V, (v+1) G/V) of each global batch of G
by mixing its own share of every member (the v-th of V equal parts of each, ShardSet.share; V is at most the
shards of the member with fewest);
it reads member m's share in its own keyed order (pipeline.TrainingOrder, keyed by (seed,
v x MEMBER_KEYS + m)), epoch after epoch, independently of the others, and a resumed run starts each
where its count says, skipping whole files. So every step's examples are the same on any number of
workers or replicas. The loop's "epoch" over a mixture is as many steps as all members' examples make.
"""

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.shards.layout import BatchLayout
from mlm_tpu.shards.pipeline import HostOrders, TrainingOrder, decoder, host_batches
from mlm_tpu.shards.reading import ShardSet

MIXTURE = 4  # keeps the mixture's keys apart from the data order's, the masks' and dropout's
MEMBER_KEYS = 1 << 16  # a member's records are ordered by the key (seed, pipeline x MEMBER_KEYS + member)
BY_SIZE = "examples"


def mixture_rates(rates: Union[str, Sequence[float]], sizes: Sequence[int], temperature: float = 1.0,
                  maximum: Optional[int] = None) -> List[float]:
    """Each member's share of the examples, summing to 1; bad rates refused in one line. By size: SeqIO's
    rate_num_examples, min(size, maximum) ** (1 / temperature)."""
    if not temperature > 0 or not math.isfinite(temperature):
        raise UserError(f"--mixture-temperature must be above 0, not {temperature}")
    if isinstance(rates, str):
        if rates != BY_SIZE:
            raise UserError(f"--mixture-rates takes one number per --train-dataset, or '{BY_SIZE}', not '{rates}'")
        weights = [min(size, maximum or size) ** (1 / temperature) for size in sizes]
    else:
        if len(rates) != len(sizes):
            raise UserError(f"--mixture-rates has {len(rates)} rates for {len(sizes)} --train-dataset folders; give "
                            f"one rate per folder, in the same order, or '{BY_SIZE}'")
        bad = [rate for rate in rates if not (rate >= 0 and math.isfinite(rate))]
        if bad:
            raise UserError(f"--mixture-rates {bad[0]}: a rate is a share of the examples, 0 or more")
        for flag, value, unset in (("--mixture-temperature", temperature, 1.0), ("--mixture-maximum", maximum, None)):
            if value != unset:
                raise UserError(f"{flag} applies to --mixture-rates {BY_SIZE}; with rates given, give the rates you "
                                "want")
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


def member_order(rates: Sequence[float], global_batch_size: int, seed: int, start_step: int = 0,
                 pipelines: int = 1, pipeline=0) -> tf.data.Dataset:
    """The member of every example of virtual pipeline `pipeline` of `pipelines` (its rows of each global batch; a
    tensor, or all rows by default) from `start_step` on, one int64 at a time (for choose_from_datasets)."""
    rows = global_batch_size // pipelines
    first = tf.cast(pipeline, tf.int32) * rows
    return tf.data.Dataset.counter(start_step).map(lambda step: tf.cast(
        members_of_step(step, rates, global_batch_size, seed)[first:first + rows], tf.int64)).unbatch()


class MemberCounts:
    """How many examples each of `pipelines` virtual pipelines has taken from each member before a step, kept up to
    date as the run goes: every backup stores them (loop.LoopState.mixture_taken), so a resumed run starts each
    member where it was without drawing the members of every step before it again. `taken` holds the counts before
    `step`; the steps between two calls are counted in one traced loop (about 16 us a step for 256 rows, 2 cores)."""

    def __init__(self, rates: Sequence[float], global_batch_size: int, seed: int, pipelines: int = 1,
                 step: int = 0, taken: Optional[Sequence[Sequence[int]]] = None):
        """`taken`: the counts at `step` (a backup's); None counts the steps before `step` now."""
        shape = [pipelines, len(rates)]

        @tf.function
        def count(first, last):
            def add_step(step, counts):
                members = tf.reshape(members_of_step(step, rates, global_batch_size, seed), [pipelines, -1])
                return step + 1, counts + tf.reduce_sum(tf.one_hot(members, len(rates), dtype=tf.int64), axis=1)

            return tf.while_loop(lambda step, _: step < last, add_step, (first, tf.zeros(shape, tf.int64)))[1]

        self._count = count
        self.step, self.taken = 0, np.zeros(shape, np.int64)
        if taken is not None:
            self.step, self.taken = step, np.array(taken, np.int64).reshape(shape)
        self.at(step)

    def at(self, step: int) -> List[List[int]]:
        """The counts before `step` (no earlier than the last step asked for)."""
        if step < self.step:
            raise ValueError(f"the counts are at step {self.step}, past {step}")
        if step > self.step:
            self.taken = self.taken + self._count(tf.constant(self.step, tf.int64),
                                                  tf.constant(step, tf.int64)).numpy()
            self.step = step
        return self.taken.tolist()


def taken_before(step: int, rates: Sequence[float], global_batch_size: int, seed: int,
                 pipelines: int = 1) -> List[List[int]]:
    """How many examples of each member each of `pipelines` virtual pipelines took in the steps before `step`
    (where a resumed run starts each member in each pipeline), counted from step 0."""
    return MemberCounts(rates, global_batch_size, seed, pipelines).at(step)


def mixed(members: Sequence[tf.data.Dataset], rates: Sequence[float], global_batch_size: int, seed: int,
          start_step: int = 0, pipelines: int = 1, pipeline=0) -> tf.data.Dataset:
    """The members' examples (each an endless stream already started where MemberCounts says) mixed in the
    keyed order of virtual pipeline `pipeline`'s rows, from `start_step` on."""
    return tf.data.Dataset.choose_from_datasets(list(members), member_order(rates, global_batch_size, seed,
                                                                             start_step, pipelines, pipeline))


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
            "counts": [count for member in members for count in member.counts],
            "starts": [start for member in members for start in member.first_records],
            "totals": [total for member in members for total in member.file_records], "members": tuple(members)}


def mix(members: Sequence[ShardSet], names: Sequence[str], rates: Union[str, Sequence[float]],
        temperature: float = 1.0, maximum: Optional[int] = None) -> Mixture:
    """The mixture of `members` (found with find_shards, one per --train-dataset); they must hold examples of the
    same kind and lengths. Its manifest is the first member's, with every member's counted targets."""
    first = members[0]
    for name, member in zip(names[1:], members[1:]):
        if member.features != first.features or member.kind != first.kind or member.dtypes != first.dtypes:
            raise UserError(f"--train-dataset {name} holds examples of other lengths or kind ({member.features}) than "
                            f"{names[0]} ({first.features}); shard every member with the same lengths")
    manifest = dict(first.manifest or {})
    targets = {}
    for member in members:
        for target, count in ((member.manifest or {}).get("target_counts") or {}).items():
            targets[target] = targets.get(target, 0) + count
    if targets:
        manifest["target_counts"] = targets
    shares = mixture_rates(rates, [member.records for member in members], temperature, maximum)
    return Mixture(features=first.features, manifest=manifest, kind=first.kind, dtypes=first.dtypes,
                   names=tuple(names),
                   rates=tuple(shares), **_joined(members))


def _member_records(order: TrainingOrder, taken, size) -> tf.data.Dataset:
    """A member's records in `order`, epoch after epoch (`size` an epoch), from its `taken`-th on (tensors)."""
    first_epoch = taken // size
    return order.records(first_epoch, taken % size).concatenate(
        tf.data.Dataset.counter(first_epoch + 1).flat_map(lambda epoch: order.records(epoch, 0)))


def host_mixture_batches(mixture: Mixture, layout: BatchLayout, host: int,
                         make_transform: Callable[[int], Optional[Callable]], *, seed: int, window: int,
                         start_step: int = 0, taken: Optional[Sequence[Sequence[int]]] = None,
                         vocab_size: Optional[int] = None) -> tf.data.Dataset:
    """As pipeline.host_training_batches, for a mixture: each of the host's virtual pipelines mixes its share of
    every member in the keyed order of its rows, from `start_step` on, each member started where the steps before
    left it: `taken` (MemberCounts at `start_step`, for every virtual pipeline), else counted now."""
    pipelines, count = layout.pipelines_of_host(host), layout.input_pipelines
    rates, batch = list(mixture.rates), layout.global_batch_size
    if taken is None:
        taken = taken_before(start_step, rates, batch, seed, count)
    taken = tf.constant(list(taken)[pipelines.start:pipelines.stop], tf.int64)
    sizes = tf.constant([[member.share(pipeline, count).records for member in mixture.members]
                         for pipeline in pipelines], tf.int64)
    members = [HostOrders(member, layout, host, seed, window,
                          key_of=lambda pipeline, m=m: pipeline * MEMBER_KEYS + m)
               for m, member in enumerate(mixture.members)]

    def pipeline_parts(index):
        pipeline = pipelines.start + index
        streams = [_member_records(orders.order(index), taken[index, m], sizes[index, m])
                   for m, orders in enumerate(members)]
        records = mixed(streams, rates, batch, seed, start_step, count, pipeline)
        return records.batch(layout.rows_per_pipeline, drop_remainder=True).enumerate(start=start_step).map(
            decoder(mixture, make_transform(seed + pipeline), vocab_size), num_parallel_calls=tf.data.AUTOTUNE)

    return host_batches(layout, host, pipeline_parts)


def fewest_shards(shards: ShardSet) -> int:
    """The shards each virtual pipeline can have its own of: a mixture's member with the fewest decides."""
    return min(len(member.files) for member in members_of(shards))


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
        if config.mixture_rates or config.mixture_temperature != 1.0 or config.mixture_maximum:
            raise UserError("--mixture-rates, --mixture-maximum and --mixture-temperature mix several --train-dataset "
                            "folders; give more than one, or drop them")
        return found[0]
    if config.pack:
        raise UserError("--pack does not take a mixture of --train-dataset folders yet; drop --pack, or train on "
                        "one folder")
    mixture = mix(found, config.train_datasets, requested_rates(config.mixture_rates), config.mixture_temperature,
                  config.mixture_maximum)
    log("Mixture: " + ", ".join(f"{member['dataset']} {member['rate']:.1%} ({member['examples']:,} examples)"
                                for member in mixture.describe()))
    return mixture


def members_of(shards: ShardSet) -> Tuple[ShardSet, ...]:
    """The splits a training run reads: a mixture's members, or the one split."""
    return shards.members if isinstance(shards, Mixture) else (shards,)
