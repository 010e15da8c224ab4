"""The training input: the shards found and checked against each other, the steps planned over them (the batch
layout, --pack's packed rows), and each machine's input pipeline, started at any step (shards/pipeline.py)."""

from dataclasses import dataclass
from typing import List, NamedTuple, Optional

import numpy as np

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.shards.layout import BatchLayout
from mlm_tpu.shards.mixture import (MemberCounts, Mixture, fewest_shards, find_training_mixture,
                                    host_mixture_batches)
from mlm_tpu.shards.packed_rows import packed_rows, steps_of
from mlm_tpu.shards.pipeline import host_training_batches, input_hosts, steps_per_epoch
from mlm_tpu.shards.reading import ShardSet, find_shards
from mlm_tpu.shards.text2text_packing import host_packed_batches
from mlm_tpu.training.backup import BackupRecord
from mlm_tpu.training.batch_warmup import BatchWarmup, plan_warmup, steps_of_units
from mlm_tpu.training.config import TrunkConfig
from mlm_tpu.training.data_order import choose_layout
from mlm_tpu.training.task import Task


@dataclass
class Plan:
    """How long the run is: the steps of an epoch, of the whole run, and the batch each step takes."""

    global_batch_size: int
    steps_per_epoch: int
    epochs: int
    total_steps: int


def find_training_shards(config: TrunkConfig, task: Task):
    """(training shards or mixture, validation shards or None), of the task's kind and lengths, checked alike."""
    features = task.features(config.max_length, config.max_target_length)
    kinds = task.shard_kinds
    train = find_training_mixture(config, [find_shards(name, kinds, task.shard_kind, features, "--train-dataset")
                                           for name in config.train_datasets])
    if not config.eval_dataset:
        return train, None
    evaluation = find_shards(config.eval_dataset, kinds, task.shard_kind, features, "--eval-dataset")
    if evaluation.features != train.features:
        raise UserError(f"--eval-dataset holds examples of other lengths ({evaluation.features}) than --train-dataset "
                        f"({train.features}); shard both with the same --max-length")
    return train, evaluation


def global_batch_of(config: TrunkConfig, replicas: int) -> int:
    """The examples of one optimizer step: per replica, on every replica, in every accumulated micro-batch."""
    return config.per_replica_batch_size * replicas * config.gradient_accumulation_steps


def plan_steps(config: TrunkConfig, shards: ShardSet, layout: BatchLayout, packing: Optional[dict] = None,
               units_per_step: int = 1) -> Plan:
    """Steps per epoch (every replica gets a whole batch), epochs and total steps; `packing`: --pack's count of
    packed rows (packed_rows.py); `units_per_step`: with a batch-size warm-up, the layout's batches (units) in a full
    step (batch_warmup.py)."""
    global_batch_size = layout.global_batch_size * units_per_step
    units = steps_of(packing, layout) if config.pack else steps_per_epoch(shards, layout)
    per_epoch = units // units_per_step
    if per_epoch == 0:
        raise UserError(f"--train-dataset has {shards.records} examples, fewer than one global batch of "
                        f"{global_batch_size}; lower --per-replica-batch-size or shard more text")
    total = config.max_steps or per_epoch * config.num_epochs
    per_epoch = min(per_epoch, total)
    return Plan(global_batch_size, per_epoch, -(-total // per_epoch), total)


class InputPlan(NamedTuple):
    """How the run reads its shards: the batch layout, --pack's count of packed rows, and the steps."""

    layout: BatchLayout
    packing: Optional[dict]  # packed_rows.py's count; None without --pack
    plan: Plan
    warmup: Optional[BatchWarmup] = None  # the batch-size warm-up (--batch-size-warmup-tokens); the layout's batch
    # is then its unit, the start size


def units_per_step(planned: InputPlan) -> int:
    """The layout's batches in a full step: 1, or a batch-size warm-up's K."""
    return planned.warmup.units_per_step if planned.warmup else 1


def plan_input(config: TrunkConfig, shards: ShardSet, strategy, record: Optional[BackupRecord]) -> InputPlan:
    """The batch layout (the data order of the backup `record`, or this run's), --pack's count of packed rows (the
    backup's, cached, or counted now) and the steps planned over them; with a batch-size warm-up, the layout makes
    its units (batch_warmup.py)."""
    replicas = strategy.num_replicas_in_sync
    full, micro_batch = global_batch_of(config, replicas), config.per_replica_batch_size * replicas
    warmup = plan_warmup(config, full, micro_batch, shards.length)
    unit = warmup.start if warmup else full
    layout = choose_layout(config.input_pipelines, record.loop if record else None, config.output_dir,
                           fewest_shards(shards), unit, input_hosts(strategy), replicas, unit // micro_batch)
    packing = None
    if config.pack:
        packing = packed_rows(shards, layout, seed=config.seed, window=config.shuffle_buffer_size,
                              recorded=record.loop.get("packed_rows") if record else None)
    plan = plan_steps(config, shards, layout, packing, full // unit)
    if warmup and warmup.ends_inside(plan.total_steps):
        log(warmup.ends_inside(plan.total_steps))
    return InputPlan(layout, packing, plan, warmup)


def training_input(config: TrunkConfig, shards: ShardSet, layout: BatchLayout, make_transform, *,
                   steps_per_epoch: int, member_counts: Optional[MemberCounts] = None,
                   warmup: Optional[BatchWarmup] = None, **settings):
    """host -> that machine's input pipeline: a mixture's (each member started where `member_counts` says), packed
    rows (--pack) or the examples as they are; `settings` are the keyword arguments they share (seed, window,
    start_step, vocab_size). With a batch-size `warmup`, the examples' units grouped into steps (batch_warmup.py)."""
    if warmup:
        step = settings.pop("start_step")
        units = training_input(config, shards, layout, make_transform, member_counts=member_counts,
                               steps_per_epoch=steps_per_epoch * warmup.units_per_step,
                               start_step=warmup.units_before(step), **settings)
        return lambda host: steps_of_units(units(host), warmup, layout.replicas_per_host, step)
    if isinstance(shards, Mixture):
        return lambda host: host_mixture_batches(shards, layout, host, make_transform, taken=member_counts.taken,
                                                 **settings)
    if config.pack:
        return lambda host: host_packed_batches(shards, layout, host, steps_per_epoch=steps_per_epoch, **settings)
    return lambda host: host_training_batches(shards, layout, host, make_transform, steps_per_epoch=steps_per_epoch,
                                              **settings)


def member_counts(config: TrunkConfig, shards: ShardSet, layout: BatchLayout, step: int,
                  taken: Optional[List[List[int]]]) -> Optional[MemberCounts]:
    """A mixture's counts of what each member gave before `step`: `taken`, the backup's, else (a backup of mlm_tpu
    0.4.0, which kept none) counted over every step before it, once."""
    if not isinstance(shards, Mixture):
        return None
    why = "mlm_tpu 0.4.0 kept no count"
    if taken is not None and np.shape(taken) != (layout.input_pipelines, len(shards.members)):
        taken, why = None, "it counted other members"  # --allow-changed-settings: counted as this mixture draws
    if step and taken is None:
        log(f"The backup does not say how many examples each mixture member gave ({why}): counting them over its "
            f"{step:,} steps, once")
    return MemberCounts(shards.rates, layout.global_batch_size, config.seed, layout.input_pipelines, step, taken)
