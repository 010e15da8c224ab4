"""A training run, from its config to its result: `train(config, task)` is `python train.py`.

What the 🤗 TPU language-modeling example does (shards -> batches -> model under a strategy ->
`create_optimizer` -> steps), with the order of things written out rather than implied by a list
of Keras callbacks: the settings checked (checks.py), the shards found and the steps planned
(input.py), the backup every worker resumes from agreed on (multi_worker.py), the model and its
train step built (step.py), the output folder claimed, then the loop (loop.py), the loss plot and
the Hub push. Its promise: a run killed at any moment and started again with the same command
continues from its last backup and ends with the same weights, bit for bit, as if it had never
stopped (on CPUs, and GPUs with deterministic kernels): the backup is written at an exact step with
the loop's state, the input pipeline restarts at that step (shards/pipeline.py), and dropout, masks
and spans are keyed by the step (dropout.py).
What differs between tasks (masked LM, ELECTRA, span corruption, T5 classification and generation,
sequence and token classification; delta-tuning wraps any of them) is in their Task plug-ins
(mlm/, electra/, t5/, encoder/, delta/), which the command looks up in tasks.py and hands in.
"""

import os
from contextlib import nullcontext
from functools import partial
from dataclasses import asdict, dataclass, replace
from typing import Any, List, Optional, Sequence, Tuple

import tf_keras as keras

import mlm_tpu.version  # mlm_tpu.__version__ without the front door's API
from mlm_tpu.claim import claimed
from mlm_tpu.configuration import to_dict
from mlm_tpu.model_folder import families
from mlm_tpu.console import log
from mlm_tpu.output_dir import RUN_INFO_FILE, write_json
from mlm_tpu.shards.mixture import Mixture
from mlm_tpu.shards.pipeline import distributed_dataset, input_hosts
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.shards.storage import LocalStorage
from mlm_tpu.training.backup import Backup, BackupRecord
from mlm_tpu.training.checks import check_config, check_output_folder, check_tokenizers, make_output_dir
from mlm_tpu.training.config import TrunkConfig
from mlm_tpu.training.data_order import SHARES
from mlm_tpu.training.dropout import key_dropout_by_step
from mlm_tpu.training.hardware import describe, set_up, wants_jit_compile
from mlm_tpu.training.input import (InputPlan, Plan, find_training_shards, global_batch_of, member_counts, plan_input,
                                    training_input, units_per_step)
from mlm_tpu.training.loop import BEFORE_TRAINING_KEY, Loop, LoopState, Run
from mlm_tpu.training.multi_worker import cluster_errors, worker_of
from mlm_tpu.training.optimizers import state_bytes, with_schedule_defaults
from mlm_tpu.training.run_logs import RunLogs
from mlm_tpu.training.run_settings import result_settings, resumed_changes
from mlm_tpu.training.step import build_model_and_optimizer, make_train_steps
from mlm_tpu.training.stops import StopRequests
from mlm_tpu.training.task import Task

CLAIM_RECORD = ".writer.json"  # which process trains into the output folder (mlm_tpu/claim.py)


@dataclass
class TrainingResult:
    output_dir: str
    steps: int
    epochs: List[dict]  # {epoch, step, loss, <accuracy>, validation: {...}, saved}
    best: Optional[dict]
    before_training: Optional[dict] = None  # a continued pretraining run: its checkpoint's validation, as loaded


class Trainer:
    """One training run of `config`; `run()` trains and returns what happened."""

    def __init__(self, config: TrunkConfig, task: Task, callbacks: Sequence[keras.callbacks.Callback] = ()):
        self.config = config
        self.task = task
        self.user_callbacks = list(callbacks)

    def run(self) -> TrainingResult:
        check_config(self.config, self.task)
        self.config = with_schedule_defaults(self.config)
        strategy = set_up(self.config.hardware, multi_worker=True)
        self.worker = worker_of(strategy)
        with StopRequests(strategy, self.worker) as stops, \
                cluster_errors(self.worker, os.path.join(self.config.output_dir, "backup")):
            return self._run(strategy, stops)  # from now on SIGTERM stops the run with a backup

    def _run(self, strategy, stops: StopRequests) -> TrainingResult:
        """What the run reads, checked, then where it writes; the backup, the input and the model; then, the output
        folder this run's alone, the training."""
        config, task = self.config, self.task
        keras.utils.set_random_seed(config.seed)
        shards, eval_shards = find_training_shards(config, task)
        tokenizer = task.load_tokenizer(config)
        check_tokenizers(config, tokenizer, shards, eval_shards, task.grows_vocabulary)
        task.prepare(config, tokenizer, shards, eval_shards)
        check_output_folder(config)  # what the run reads is checked first, then where it writes
        # before the model, which follows the data order the backup holds; every worker takes the one the chief finds
        record = self.worker.agreed_backup(os.path.join(config.output_dir, "backup"))
        global_batch_size = global_batch_of(config, strategy.num_replicas_in_sync)
        changes = resumed_changes(config, record, global_batch_size, shards) if record else []
        planned = plan_input(config, shards, strategy, record)
        task.check_steps(config, planned.plan.total_steps)
        self.config = config = replace(config, input_pipelines=planned.layout.input_pipelines)  # training_args.json
        with strategy.scope():  # before anything is written: a model config that cannot work leaves no folder
            model, optimizer = build_model_and_optimizer(config, task, tokenizer, shards, planned.plan)
            dropout_keys = key_dropout_by_step(model, config.seed, planned.layout, units_per_step(planned))
        if self.worker.is_chief:
            make_output_dir(config.output_dir)
        self.worker.check_output_dir(config.output_dir)
        claim = claimed(LocalStorage(config.output_dir), CLAIM_RECORD, "training run",
                        "give this run another --output-dir") if self.worker.is_chief else nullcontext()
        with claim as claim:
            run, dataset = self._start(strategy, stops, claim, planned, (model, optimizer, tokenizer),
                                       (shards, eval_shards), record, changes)
            return self._train(run, partial(make_train_steps, strategy, model, optimizer, dropout_keys,
                                            wants_jit_compile(config.jit_compile, config.hardware), task,
                                            planned.layout.accumulation * units_per_step(planned),
                                            config.max_grad_norm, planned.warmup), dataset)

    def _start(self, strategy, stops: StopRequests, claim, planned: InputPlan, built, split,
               record: Optional[BackupRecord], changes: List[dict]) -> Tuple[Run, Any]:
        """(the run as the loop takes it, the training input), once the output folder is this run's alone: the backup
        restored (or none), the loop's state, training_args.json written. `built` is (model, optimizer, tokenizer);
        `split`, (training shards, validation shards or None); `changes`, the settings changed on resuming."""
        config, task, plan = self.config, self.task, planned.plan
        (model, optimizer, tokenizer), (shards, eval_shards) = built, split
        pusher = hub_pusher(config) if self.worker.is_chief else None
        accumulated = (f" x {config.gradient_accumulation_steps} micro-batches accumulated"
                       if config.gradient_accumulation_steps > 1 else "")
        log(f"Training ({task.name}) on {describe(strategy)}: global batch {plan.global_batch_size} = "
            f"{config.per_replica_batch_size} per replica x {strategy.num_replicas_in_sync}{accumulated}, made by "
            f"{planned.layout.input_pipelines} input pipelines; {shards.records:,} examples in "
            f"{len(shards.files)} shards -> {plan.steps_per_epoch} steps per epoch, {plan.total_steps} steps in all")
        if planned.warmup:
            log(planned.warmup.describe(shards.length, config.batch_size_warmup_tokens))
        memory_plan = getattr(families.of_model(model), "memory_plan", None)  # a family that plans its long rows
        if memory_plan:
            log(memory_plan(model, state_bytes(optimizer), shards.length, config.per_replica_batch_size))
        settings = result_settings(config, plan.global_batch_size, shards.files, shards.counts)
        with strategy.scope():
            backup = self.worker.backup(Backup, os.path.join(config.output_dir, "backup"), model, optimizer)
            if record:
                backup.restore(record)
        step, state = (record.step, LoopState(**record.loop)) if record else (0, LoopState())
        state.input_pipelines, state.pipeline_shares, state.packed_rows = (planned.layout.input_pipelines, SHARES,
                                                                           planned.packing)
        counts = member_counts(config, shards, planned.layout, step, state.mixture_taken)
        info = run_info(config, plan, strategy, shards, changes, state.before_training)
        # the chief writes the run's settings now, unless a model is there: then they come with the first save
        if self.worker.is_chief and not os.path.isfile(os.path.join(config.output_dir, "config.json")):
            write_json(os.path.join(config.output_dir, RUN_INFO_FILE), info)
        if step:
            log(f"Resuming from the backup at step {step} of {plan.total_steps}")
        validation = task.validation(strategy, model, tokenizer, eval_shards, config.per_replica_batch_size,
                                     config.seed, on_tpu=config.hardware.tpu is not None) if eval_shards else None
        dataset = distributed_dataset(strategy, planned.layout, training_input(
            config, shards, planned.layout, task.make_transform(tokenizer), seed=config.seed,
            window=config.shuffle_buffer_size, start_step=step, vocab_size=model.config.vocab_size,
            steps_per_epoch=plan.steps_per_epoch, member_counts=counts, warmup=planned.warmup))
        return Run(config=config, task=task, worker=self.worker, plan=plan, shards=shards, model=model,
                   tokenizer=tokenizer, state=state, backup=backup,
                   backup_record=BackupRecord(step, {}, settings, changes), stops=stops,
                   logs=RunLogs(self.worker.folder(config.output_dir)), run_info=info, hardware=describe(strategy),
                   member_counts=counts, validation=validation, eval_corpus=corpus_of(eval_shards), pusher=pusher,
                   claim=claim, warmup=planned.warmup), dataset

    def _train(self, run: Run, make_steps, dataset) -> TrainingResult:
        """The loop over `dataset` with the train step `make_steps()` makes, then the end of the run: the backup
        removed, the loss plot drawn, the Hub push finished."""
        loop = Loop(run, self.user_callbacks)
        try:
            loop.train(make_steps(), iter(dataset), run.backup_record.step)
        except BaseException:
            if run.pusher:
                run.pusher.abandon()
            raise
        run.backup.remove()
        if run.worker.is_chief:
            loop.draw_loss_plot()
        if run.pusher:
            run.pusher.finish(f"End of training ({run.plan.total_steps} steps)")
        state, output_dir = run.state, run.config.output_dir
        first, last = state.epochs[0]["loss"], state.epochs[-1]["loss"]
        log(f"Done: loss {first:.3f} -> {last:.3f}; model and tokenizer in {output_dir}")
        return TrainingResult(output_dir, run.plan.total_steps, state.epochs, state.best, state.before_training)


def hub_pusher(config: TrunkConfig):
    """The HubPusher of --hub-model-id, None without it."""
    if not config.hub_model_id:
        return None
    from mlm_tpu.hub import HubPusher

    return HubPusher(config.hub_model_id, config.output_dir)


def corpus_of(shards: Optional[ShardSet]) -> Optional[dict]:
    """The corpus `shards` were made from, as their manifest records it (for the card)."""
    return (shards.manifest or {}).get("settings", {}).get("corpus") if shards else None


def run_info(config: TrunkConfig, plan: Plan, strategy, shards: ShardSet, setting_changes: List[dict],
             before_training: Optional[dict] = None) -> dict:
    """training_args.json: the config (`--config` replays it) and, under "run", what this run computed, the
    settings changed on resuming (--allow-changed-settings), each with the step it took effect at, and a continued
    run's validation of its checkpoint before training (the loop adds it once it has it; a resumed run, from its
    backup)."""
    run = {"replicas": strategy.num_replicas_in_sync, "hosts": input_hosts(strategy),
           "strategy": describe(strategy), **asdict(plan),
           "train_examples": shards.records, "max_length": shards.length,
           "mlm_tpu_version": mlm_tpu.__version__}
    if isinstance(shards, Mixture):
        run["mixture"] = shards.describe()
    if setting_changes:
        run["setting_changes"] = setting_changes
    if before_training is not None:
        run[BEFORE_TRAINING_KEY] = before_training
    return {**to_dict(config), "run": run}


def train(config: TrunkConfig, task: Task, callbacks: Sequence[keras.callbacks.Callback] = ()) -> TrainingResult:
    """Run the training job `config` describes (a killed run resumes from its backup); see the module's docstring.
    `task` is the plug-in of config.task (mlm_tpu.tasks.training_task), handed in: the trainer imports no task."""
    return Trainer(config, task, callbacks).run()
