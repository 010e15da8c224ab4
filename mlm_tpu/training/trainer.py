"""The training loop, in plain sight: run steps; at each epoch's end validate, then save if the score improved,
then push; back up at exact steps. `train(config)` is `python train.py`.

What the 🤗 TPU language-modeling example does (shards -> batches -> model under a strategy ->
`create_optimizer` -> steps), with the order of things written out here rather than implied by
a list of Keras callbacks, and these promises:
- a run killed at any moment and started again with the same command continues from its last
  backup and ends with the same weights, bit for bit, as if it had never stopped (on CPUs, and
  GPUs with deterministic kernels): the backup is written at an exact step with the loop's state,
  the input pipeline restarts at that step (shards/pipeline.py), and dropout, masks and spans are
  keyed by the step (dropout.py);
- every step's training loss comes back from the device: a loss that is not finite stops the run
  before anything is saved over a good model;
- `--steps-per-execution` runs that many steps per call into the device, cut short only where an
  epoch ends or a backup is due, so backups fall every `--backup-steps` steps exactly.
What differs between tasks (masked LM, ELECTRA, T5) is in their Task plug-ins (mlm/task.py, electra/task.py, t5/).
"""

import os
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras as keras

import mlm_tpu
from mlm_tpu.claim import claimed
from mlm_tpu.configuration import to_dict
from mlm_tpu.console import log, progress, warn
from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import write_json
from mlm_tpu.model_folder.card import LOSS_PLOT, CardFacts
from mlm_tpu.shards.layout import BatchLayout
from mlm_tpu.shards.mixture import Mixture
from mlm_tpu.shards.pipeline import distributed_dataset, input_hosts, reading_errors
from mlm_tpu.shards.storage import LocalStorage
from mlm_tpu.training.backup import Backup, BackupRecord
from mlm_tpu.training.checks import check_config, check_output_folder, check_tokenizers, make_output_dir
from mlm_tpu.training.config import TrainingConfig
from mlm_tpu.training.data_order import SHARES
from mlm_tpu.training.dropout import key_dropout_by_step
from mlm_tpu.training.hardware import describe, set_up, wants_jit_compile
from mlm_tpu.training.input import Plan, find_training_shards, member_counts, plan_input, training_input
from mlm_tpu.training.multi_worker import cluster_errors, worker_of
from mlm_tpu.training.optimizers import with_schedule_defaults
from mlm_tpu.training.run_logs import LOSS, TRAIN, VALIDATION, RunLogs
from mlm_tpu.training.run_settings import result_settings, resumed_changes
from mlm_tpu.training.step import build_model_and_optimizer, make_train_steps
from mlm_tpu.training.stops import StopRequests
from mlm_tpu.training.task import Task
from mlm_tpu.training.throughput import Throughput, find_peak

RUN_INFO_FILE = "training_args.json"  # the run's config (replayable with --config) and what it computed
BEST_RECORD = "best_model.json"
CLAIM_RECORD = ".writer.json"  # which process trains into the output folder (mlm_tpu/claim.py)
CLAIM_REFRESH_SECONDS = 60


@dataclass
class LoopState:
    """What the loop keeps between steps, saved with every backup so a resumed run goes on identically."""

    epoch_loss: float = 0.0  # sum of this epoch's step losses so far
    epoch_steps: int = 0
    epoch_hits: float = 0.0  # scored positions predicted right, and scored positions, this epoch
    epoch_scored: float = 0.0
    epoch_left_out: float = 0.0  # targets the batches' transform left out (TARGETS_LEFT_OUT), this epoch
    interval_loss: float = 0.0  # since the last logging step
    interval_steps: int = 0
    best: Optional[dict] = None  # the best epoch so far, when the task keeps the best
    epochs: List[dict] = field(default_factory=list)  # one record per finished epoch
    input_pipelines: Optional[int] = None  # the data order's V (data_order.py); None in backups of mlm_tpu <= 0.3.0
    pipeline_shares: Optional[str] = None  # what each of them reads (data_order.SHARES); None in earlier backups
    # a mixture: the examples each virtual pipeline took from each member before the backup's step
    # (mixture.MemberCounts); None without a mixture, and in backups of mlm_tpu <= 0.4.0
    mixture_taken: Optional[List[List[int]]] = None
    packed_rows: Optional[dict] = None  # --pack: epoch 1's packed rows per virtual pipeline, keyed (packed_rows.py)


@dataclass
class TrainingResult:
    output_dir: str
    steps: int
    epochs: List[dict]  # {epoch, step, loss, <accuracy>, validation: {...}, saved}
    best: Optional[dict]


class Trainer:
    """One training run of `config`; `run()` trains and returns what happened."""

    def __init__(self, config: TrainingConfig, task: Task, callbacks: Sequence[keras.callbacks.Callback] = ()):
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
        config, task = self.config, self.task
        keras.utils.set_random_seed(config.seed)
        self.train_shards, eval_shards = find_training_shards(config, task)
        self.eval_corpus = ((eval_shards.manifest or {}).get("settings", {}).get("corpus") if eval_shards else None)
        tokenizer = task.load_tokenizer(config)
        check_tokenizers(config, tokenizer, self.train_shards, eval_shards)
        task.prepare(config, tokenizer, self.train_shards, eval_shards)
        check_output_folder(config)  # what the run reads is checked first, then where it writes
        # before the model, which follows the data order the backup holds; every worker takes the one the chief finds
        record = self.worker.agreed_backup(os.path.join(config.output_dir, "backup"))
        global_batch_size = config.per_replica_batch_size * strategy.num_replicas_in_sync
        changes = resumed_changes(config, record, global_batch_size, self.train_shards) if record else []
        layout, self.packing, plan = plan_input(config, self.train_shards, strategy, record)
        self.config = config = replace(config, input_pipelines=layout.input_pipelines)  # for training_args.json
        with strategy.scope():  # before anything is written: a model config that cannot work leaves no folder
            model, optimizer = build_model_and_optimizer(config, task, tokenizer, self.train_shards, plan)
            dropout_keys = key_dropout_by_step(model, config.seed, layout)
        if self.worker.is_chief:
            make_output_dir(config.output_dir)
        self.worker.check_output_dir(config.output_dir)
        claim = claimed(LocalStorage(config.output_dir), CLAIM_RECORD, "training run",
                        "give this run another --output-dir") if self.worker.is_chief else nullcontext()
        with claim as claim:
            return self._train(strategy, stops, layout, plan, (model, optimizer, dropout_keys), tokenizer,
                               eval_shards, record, changes, claim)

    def _train(self, strategy, stops: StopRequests, layout: BatchLayout, plan: Plan, trained, tokenizer,
               eval_shards, record: Optional[BackupRecord], changes: List[dict], claim) -> TrainingResult:
        """The run, once the output folder is this run's alone: resume or start, train, save, push. `trained` is
        (model, optimizer, dropout keys); `changes`, the settings changed on resuming."""
        config, task = self.config, self.task
        model, optimizer, dropout_keys = trained
        pusher = self._hub_pusher() if self.worker.is_chief else None
        log(f"Training ({task.name}) on {describe(strategy)}: global batch {plan.global_batch_size} = "
            f"{config.per_replica_batch_size} per replica x {strategy.num_replicas_in_sync}, made by "
            f"{layout.input_pipelines} input pipelines; {self.train_shards.records:,} examples in "
            f"{len(self.train_shards.files)} shards -> {plan.steps_per_epoch} steps per epoch, {plan.total_steps} "
            "steps in all")
        settings = result_settings(config, plan.global_batch_size, self.train_shards.files, self.train_shards.counts)
        with strategy.scope():
            backup = self.worker.backup(Backup, os.path.join(config.output_dir, "backup"), model, optimizer)
            if record:
                backup.restore(record)
        step, state = (record.step, LoopState(**record.loop)) if record else (0, LoopState())
        state.input_pipelines, state.pipeline_shares, state.packed_rows = layout.input_pipelines, SHARES, self.packing
        self.member_counts = member_counts(config, self.train_shards, layout, step, state.mixture_taken)
        self.run_info = self._run_info(plan, strategy, changes)
        # the chief writes the run's settings now, unless a model is there: then they come with the first save
        if self.worker.is_chief and not os.path.isfile(os.path.join(config.output_dir, "config.json")):
            write_json(os.path.join(config.output_dir, RUN_INFO_FILE), self.run_info)
        if step:
            log(f"Resuming from the backup at step {step} of {plan.total_steps}")
        validation = task.validation(strategy, model, tokenizer, eval_shards, config.per_replica_batch_size,
                                     config.seed, on_tpu=config.hardware.tpu is not None) if eval_shards else None
        dataset = distributed_dataset(strategy, layout, training_input(
            config, self.train_shards, layout, task.make_transform(tokenizer), seed=config.seed,
            window=config.shuffle_buffer_size, start_step=step, vocab_size=model.config.vocab_size,
            steps_per_epoch=plan.steps_per_epoch, member_counts=self.member_counts))
        loop = _Loop(self, plan, model, tokenizer, backup, validation, pusher,
                     RunLogs(self.worker.folder(config.output_dir)), state, describe(strategy),
                     BackupRecord(step, {}, settings, changes), claim, stops)
        try:
            loop.train(make_train_steps(strategy, model, optimizer, dropout_keys,
                                        wants_jit_compile(config.jit_compile, config.hardware), task),
                       iter(dataset), step)
        except BaseException:
            if pusher:
                pusher.abandon()
            raise
        backup.remove()
        if self.worker.is_chief:
            loop.draw_loss_plot()
        if pusher:
            pusher.finish(f"End of training ({plan.total_steps} steps)")
        first, last = state.epochs[0]["loss"], state.epochs[-1]["loss"]
        log(f"Done: loss {first:.3f} -> {last:.3f}; model and tokenizer in {config.output_dir}")
        return TrainingResult(config.output_dir, plan.total_steps, state.epochs, state.best)

    def _hub_pusher(self):
        if not self.config.hub_model_id:
            return None
        from mlm_tpu.hub import HubPusher

        return HubPusher(self.config.hub_model_id, self.config.output_dir)

    def _run_info(self, plan: Plan, strategy, setting_changes: List[dict]) -> dict:
        """training_args.json: the config (`--config` replays it) and, under "run", what this run computed, and the
        settings changed on resuming (--allow-changed-settings), each with the step it took effect at."""
        run = {"replicas": strategy.num_replicas_in_sync, "hosts": input_hosts(strategy),
               "strategy": describe(strategy), **asdict(plan),
               "train_examples": self.train_shards.records, "max_length": self.train_shards.length,
               "mlm_tpu_version": mlm_tpu.__version__}
        if isinstance(self.train_shards, Mixture):
            run["mixture"] = self.train_shards.describe()
        if setting_changes:
            run["setting_changes"] = setting_changes
        return {**to_dict(self.config), "run": run}


class _Loop:
    """The steps of one run and what happens between them."""

    def __init__(self, trainer: Trainer, plan: Plan, model, tokenizer, backup: Backup, validation, pusher,
                 logs: RunLogs, state: LoopState, hardware: str, backup_record: BackupRecord, claim,
                 stops: StopRequests):
        self.config, self.task, self.shards = trainer.config, trainer.task, trainer.train_shards
        self.eval_corpus = trainer.eval_corpus
        self.plan, self.model, self.tokenizer = plan, model, tokenizer
        self.backup, self.validation, self.pusher, self.logs, self.state = backup, validation, pusher, logs, state
        self.hardware, self.backup_record, self.claim = hardware, backup_record, claim
        self.stops, self.worker, self.member_counts = stops, trainer.worker, trainer.member_counts
        self.run_info = trainer.run_info
        self.card_name = self.config.hub_model_id or os.path.basename(os.path.abspath(self.config.output_dir))
        self.saved_card: Optional[CardFacts] = None  # the card of the model the output folder holds
        self.best_metric = self.task.best_metric(self.config) if validation else None
        self.callbacks = keras.callbacks.CallbackList(trainer.user_callbacks, model=model)
        self.example_cost = self.task.example_cost(model, self.shards)
        self.peak, self.device = find_peak(self.config.peak_tflops, self.config.hardware.tpu is not None)
        self.replicas = plan.global_batch_size // self.config.per_replica_batch_size

    def execution_length(self, step: int) -> int:
        """Steps until the next place the loop must stop: an epoch's end, a backup, the end, or a full execution."""
        stops = [step + self.config.steps_per_execution, (step // self.plan.steps_per_epoch + 1) *
                 self.plan.steps_per_epoch, self.plan.total_steps]
        if self.config.backup_steps:
            stops.append((step // self.config.backup_steps + 1) * self.config.backup_steps)
        return min(stops) - step

    def train(self, train_steps, iterator, step: int) -> None:
        self.callbacks.on_train_begin()
        going_on = True
        if self.state.epoch_steps and self.ends_epoch(step):  # stopped after the epoch's last step, before its end
            going_on = self.finish_epoch(step, None, 0)
        bar = None
        started, timed_from = time.perf_counter(), step
        while going_on and step < self.plan.total_steps:
            epoch = step // self.plan.steps_per_epoch
            if bar is None:
                bar = progress(total=self.plan.steps_per_epoch, initial=step - epoch * self.plan.steps_per_epoch,
                               desc=f"epoch {epoch + 1}/{self.plan.epochs}", unit=" steps", disable=None, leave=False)
                self.callbacks.on_epoch_begin(epoch)
                started, timed_from = time.perf_counter(), step
            length = self.execution_length(step)
            self.callbacks.on_train_batch_begin(step)  # Keras times a batch from its begin: a user's end hook needs it
            with reading_errors(self.shards, self.model.config.vocab_size):
                results = train_steps(iterator, tf.constant(length)).numpy()
            self.check_finite(results[:, 0], step)
            if self.claim:  # the chief's
                self.claim.refresh(unless_within=CLAIM_REFRESH_SECONDS)
            self.count(results, step)
            step += length
            bar.update(length)
            self.callbacks.on_train_batch_end(step - 1, {"loss": float(results[-1, 0])})
            if self.ends_epoch(step):
                bar.close()
                bar = None
                # first: the validation and save can outlast the notice a preempted machine gets (about 30 s)
                self.stop_if_asked(step)
                going_on = self.finish_epoch(step, time.perf_counter() - started, step - timed_from)
            else:
                self.between_executions(step)
        self.callbacks.on_train_end()

    def ends_epoch(self, step: int) -> bool:
        return step % self.plan.steps_per_epoch == 0 or step == self.plan.total_steps

    def finish_epoch(self, step: int, seconds: Optional[float], timed_steps: int) -> bool:
        """The end of the epoch that ends at `step`, then what is due between executions; False when a user's Keras
        callback asked to stop."""
        self.end_epoch((step - 1) // self.plan.steps_per_epoch, step, seconds, timed_steps)
        if self.model.stop_training:
            return False
        self.between_executions(step)
        return True

    def between_executions(self, step: int) -> None:
        """Stop with a backup if any worker was asked to; else back up if one is due."""
        if step < self.plan.total_steps:
            self.stop_if_asked(step)
            if self.backup_due(step):
                self.save_backup(step)

    def stop_if_asked(self, step: int) -> None:
        """A backup at `step` and the end of the run, if any worker was sent SIGTERM (all of them agree)."""
        if self.stops.agreed():
            self.save_backup(step)
            self.stops.stop(step)

    def save_backup(self, step: int) -> None:
        if self.member_counts:
            self.state.mixture_taken = self.member_counts.at(step)
        self.backup_record.step, self.backup_record.loop = step, asdict(self.state)
        self.backup.save(self.backup_record)

    def backup_due(self, step: int) -> bool:
        if self.config.backup_steps:
            return step % self.config.backup_steps == 0
        return step % self.plan.steps_per_epoch == 0

    def check_finite(self, losses: np.ndarray, step: int) -> None:
        bad = np.flatnonzero(~np.isfinite(losses))
        if len(bad):
            raise UserError(f"the training loss became {losses[bad[0]]} at step {step + bad[0] + 1}: the weights are "
                            f"no longer numbers, so the run stops here and nothing is saved over "
                            f"{self.config.output_dir}; lower --learning-rate ({self.config.learning_rate:g}) or check "
                            "the data")

    def count(self, results: np.ndarray, step: int) -> None:
        """Add each step's loss and hits to the epoch's sums; write the loss at every logging step."""
        state = self.state
        for offset, (loss, hits, scored, left_out) in enumerate(results.astype(np.float64)):
            state.epoch_loss += loss
            state.epoch_steps += 1
            state.epoch_hits += hits
            state.epoch_scored += scored
            state.epoch_left_out += left_out
            state.interval_loss += loss
            state.interval_steps += 1
            done = step + offset + 1
            if self.config.logging_steps and done % self.config.logging_steps == 0:
                self.logs.write(TRAIN, done, {LOSS: state.interval_loss / state.interval_steps})
                state.interval_loss, state.interval_steps = 0.0, 0

    def end_epoch(self, epoch: int, step: int, seconds: Optional[float], timed_steps: int) -> None:
        """Validate, then save the model if it is the best so far (or always, without a best metric), then push.
        `timed_steps`: the steps of this epoch this process ran in `seconds` (fewer than its steps when resumed; none,
        and `seconds` None, when the run was stopped and resumed right before the epoch's end)."""
        state, accuracy_name = self.state, self.task.accuracy_name
        training = {LOSS: state.epoch_loss / state.epoch_steps,
                    accuracy_name: state.epoch_hits / state.epoch_scored if state.epoch_scored else 0.0}
        speed = (Throughput(timed_steps * self.plan.global_batch_size, max(seconds, 1e-9), self.replicas,
                            self.example_cost, self.peak, self.device) if seconds is not None and timed_steps else None)
        log(f"Epoch {epoch + 1} training: loss {training[LOSS]:.4f}, {accuracy_name.replace('_', ' ')} "
            f"{training[accuracy_name]:.2%} ({state.epoch_steps} steps" +
            (f", {seconds:.1f} s); {speed.describe()}" if speed else ")"))
        if state.epoch_left_out:
            warn(self.task.describe_left_out(int(state.epoch_left_out)))
            training["targets_left_out"] = int(state.epoch_left_out)
        if not self.config.logging_steps:
            self.logs.write(TRAIN, step, {LOSS: training[LOSS]})
        self.logs.write(TRAIN, step, {name: value for name, value in training.items() if name != LOSS})
        if speed:
            self.logs.write(TRAIN, step, speed.scalars())
        scores = self.validation.run() if self.validation else {}
        if scores:
            log(f"Epoch {epoch + 1} validation: {self.validation.describe(scores)}")
            self.logs.write(VALIDATION, step, scores)
        saved = self.save_if_better(epoch, step, scores)
        state.epochs.append({"epoch": epoch + 1, "step": step, **training, "validation": scores, "saved": saved})
        state.epoch_loss, state.epoch_steps, state.epoch_hits, state.epoch_scored = 0.0, 0, 0.0, 0.0
        state.epoch_left_out = 0.0
        if saved and self.pusher:
            self.pusher.push(f"Training in progress, epoch {epoch + 1}")
        self.callbacks.on_epoch_end(epoch, {**training, **{f"val_{name}": value for name, value in scores.items()}})

    def save_if_better(self, epoch: int, step: int, scores: Dict[str, float]) -> bool:
        metric, best = self.best_metric, self.state.best
        if metric is None:
            self.save(epoch, step, scores)
            return True
        value = scores[metric.name]
        if not metric.improves(value, best["value"] if best else None):
            log(f"{metric.name} {value:.4f} is not better than epoch {best['epoch']}'s {best['value']:.4f}: "
                f"{self.config.output_dir} keeps that model")
            return False
        self.state.best = {"metric": f"val_{metric.name}", "value": float(value), "epoch": epoch + 1, "step": step,
                           "validation": dict(scores)}
        self.save(epoch, step, scores, {BEST_RECORD: self.state.best})
        log(f"{metric.name} {value:.4f} is the best so far: model saved to {self.config.output_dir}")
        return True

    def save(self, epoch: int, step: int, scores: Dict[str, float], records: Optional[Dict[str, dict]] = None) -> None:
        """The model in both layouts, its tokenizer, its card and `records`, through a staging folder: the chief's
        alone to write. Saving reads the weights, which are MirroredVariables (no SyncOnRead variables, such as
        Keras metrics', whose reading would be a collective every worker must join), so the others skip it."""
        if not self.worker.is_chief:
            return
        corpus = (self.shards.manifest or {}).get("settings", {}).get("corpus")
        self.saved_card = self.task.card_facts(self.model, self.tokenizer, corpus=corpus,
                                               max_length=self.shards.length, steps=step, epoch=epoch + 1,
                                               global_batch_size=self.plan.global_batch_size, hardware=self.hardware,
                                               validation=scores, validation_corpus=self.eval_corpus)
        self.task.save_model(self.config.output_dir, self.model, self.tokenizer, self.saved_card,
                             {RUN_INFO_FILE: self.run_info, **(records or {})}, self.card_name)

    def draw_loss_plot(self) -> None:
        """loss.png in the output folder, and the card showing it (for the Hub's page too)."""
        from mlm_tpu.training.loss_plot import plot_losses

        try:
            plot_losses(self.config.output_dir, os.path.join(self.config.output_dir, LOSS_PLOT))
        except UserError as error:
            log(f"No loss plot: {error}")
            return
        if self.saved_card:
            self.task.write_card(self.config.output_dir, self.saved_card, self.card_name, has_loss_plot=True)


def train(config: TrainingConfig, task: Task, callbacks: Sequence[keras.callbacks.Callback] = ()) -> TrainingResult:
    """Run the training job `config` describes (a killed run resumes from its backup); see the module's docstring.
    `task` is the plug-in of config.task (mlm_tpu.tasks.training_task), handed in: the trainer imports no task."""
    return Trainer(config, task, callbacks).run()
