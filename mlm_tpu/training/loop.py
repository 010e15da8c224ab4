"""The training loop, in plain sight: a continued pretraining run first validates its checkpoint as loaded; then
run steps; at each epoch's end validate, then save if the score improved, then push; back up at exact steps; stop
with a backup when asked (stops.py).

- Every step's training loss comes back from the device: a loss that is not finite stops the run
  before anything is saved over a good model;
- `--steps-per-execution` runs that many steps per call into the device, cut short only where an
  epoch ends or a backup is due, so backups fall every `--backup-steps` steps exactly;
- the loop's state (LoopState) is saved with every backup, so a resumed run goes on identically.
"""

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras as keras

from mlm_tpu.console import log, progress, warn
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.card import LOSS_PLOT, CardFacts, hub_name
from mlm_tpu.output_dir import BEST_RECORD, RUN_INFO_FILE
from mlm_tpu.shards.mixture import MemberCounts
from mlm_tpu.shards.pipeline import reading_errors
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.training.backup import BackupRecord
from mlm_tpu.training.config import TrunkConfig
from mlm_tpu.training.input import Plan
from mlm_tpu.training.multi_worker import Worker
from mlm_tpu.training.run_logs import LOSS, TRAIN, VALIDATION, RunLogs
from mlm_tpu.training.stops import StopRequests
from mlm_tpu.training.task import Task
from mlm_tpu.training.throughput import Throughput, find_peak

CLAIM_REFRESH_SECONDS = 60
BEFORE_TRAINING_KEY = "validation_before_training"  # of training_args.json's "run": the checkpoint's, as loaded


@dataclass
class LoopState:
    """What the loop keeps between steps, saved with every backup so a resumed run goes on identically."""

    epoch_loss: float = 0.0  # sum of this epoch's step losses so far
    epoch_steps: int = 0
    epoch_hits: float = 0.0  # scored positions predicted right, and scored positions, this epoch
    epoch_scored: float = 0.0
    epoch_left_out: float = 0.0  # targets the batches' transform left out (TARGETS_LEFT_OUT), this epoch
    # --max-grad-norm: this epoch's steps whose gradient was clipped, the sum and the largest of their global norms
    epoch_clipped: int = 0
    epoch_grad_norm: float = 0.0
    epoch_grad_norm_max: float = 0.0
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
    # a continued pretraining run: the validation scores of its checkpoint as loaded, before the first step (kept in
    # the backups, so a resumed run reports the figures it does not measure again)
    before_training: Optional[dict] = None


@dataclass
class Run:
    """What the loop works with, made by the trainer before the first step and handed over as one value."""

    config: TrunkConfig
    task: Task
    worker: Worker
    plan: Plan
    shards: ShardSet  # the training shards, or their Mixture
    model: Any
    tokenizer: Any
    state: LoopState
    backup: Any  # a Backup, or a non-chief's (multi_worker.Worker.backup)
    backup_record: BackupRecord  # what each backup writes: its step and the loop's state are filled in then
    stops: StopRequests
    logs: RunLogs
    run_info: dict  # what training_args.json says, saved with the model
    hardware: str  # the strategy, in words (the card's)
    member_counts: Optional[MemberCounts] = None  # a mixture's count of what each member gave
    validation: Any = None  # the task's validation, without --eval-dataset None
    eval_corpus: Optional[dict] = None  # the corpus the validation shards came from (the card's)
    pusher: Any = None  # the chief's HubPusher, with --hub-model-id
    claim: Any = None  # the chief's claim on the output folder, refreshed as the run goes
    warmup: Any = None  # the batch-size warm-up (batch_warmup.BatchWarmup), None without one


class Loop:
    """The steps of one run and what happens between them."""

    def __init__(self, run: Run, callbacks: Sequence[keras.callbacks.Callback]):
        self.run = run
        config = run.config
        self.card_name = config.hub_model_id or os.path.basename(os.path.abspath(config.output_dir))
        self.saved_card: Optional[CardFacts] = None  # the card of the model the output folder holds
        self.best_metric = run.task.best_metric(config) if run.validation else None
        self.callbacks = keras.callbacks.CallbackList(list(callbacks), model=run.model)
        self.example_cost = run.task.example_cost(run.model, run.shards)
        self.peak, self.device = find_peak(config.peak_tflops, config.hardware.tpu is not None)
        self.batch_logged: Optional[int] = None  # a batch-size warm-up: the last global batch the log gave
        self.replicas = run.plan.global_batch_size // (config.per_replica_batch_size *
                                                        config.gradient_accumulation_steps)

    def execution_length(self, step: int) -> int:
        """Steps until the next place the loop must stop: an epoch's end, a backup, the end, or a full execution."""
        run = self.run
        stops = [step + run.config.steps_per_execution, (step // run.plan.steps_per_epoch + 1) *
                 run.plan.steps_per_epoch, run.plan.total_steps]
        if run.config.backup_steps:
            stops.append((step // run.config.backup_steps + 1) * run.config.backup_steps)
        return min(stops) - step

    def train(self, train_steps, iterator, step: int) -> None:
        run = self.run
        self.callbacks.on_train_begin()
        if step == 0 and self.validates_before_training():
            self.validate_before_training()
        going_on = True
        if run.state.epoch_steps and self.ends_epoch(step):  # stopped after the epoch's last step, before its end
            going_on = self.finish_epoch(step, None, 0)
        bar = None
        started, timed_from = time.perf_counter(), step
        while going_on and step < run.plan.total_steps:
            epoch = step // run.plan.steps_per_epoch
            if bar is None:
                bar = progress(total=run.plan.steps_per_epoch, initial=step - epoch * run.plan.steps_per_epoch,
                               desc=f"epoch {epoch + 1}/{run.plan.epochs}", unit=" steps", disable=None, leave=False)
                self.callbacks.on_epoch_begin(epoch)
                started, timed_from = time.perf_counter(), step
            length = self.execution_length(step)
            self.callbacks.on_train_batch_begin(step)  # Keras times a batch from its begin: a user's end hook needs it
            self.log_batch_growth(step, step + length)
            with reading_errors(run.shards, run.model.config.vocab_size):
                results = train_steps(iterator, tf.constant(length)).numpy()
            self.check_finite(results[:, 0], step)
            if run.claim:  # the chief's
                run.claim.refresh(unless_within=CLAIM_REFRESH_SECONDS)
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

    def examples(self, first: int, last: int) -> int:
        """The examples of steps first, ..., last - 1: global batches, smaller ones while a batch-size warm-up lasts."""
        warmup = self.run.warmup
        return warmup.examples(first, last) if warmup else (last - first) * self.run.plan.global_batch_size

    def log_batch_growth(self, first: int, last: int) -> None:
        """A batch-size warm-up: a line for the first step of this process and each of first, ..., last - 1 where the
        global batch grows."""
        warmup = self.run.warmup
        if not warmup:
            return
        for step in range(first, min(last, warmup.end + 1)):
            if warmup.batch_at(step) != self.batch_logged:
                self.batch_logged = warmup.batch_at(step)
                log(f"Batch-size warm-up: step {step + 1} trains a global batch of {self.batch_logged}"
                    + (" (the full one)" if step >= warmup.end else f" (of {warmup.full} after the warm-up)"))

    def validates_before_training(self) -> bool:
        """Whether the run scores its checkpoint before the first step: a pretraining task continuing
        --model-name-or-path, with validation shards, that has not scored it yet (a run killed before its first backup
        starts again from step 0, and scores it again: with the same figures)."""
        run = self.run
        return bool(run.task.validates_before_training and run.config.model_name_or_path and run.validation
                    and run.state.before_training is None)

    def validate_before_training(self) -> None:
        """The task's validation (the epochs' own) of the checkpoint as loaded: in the log, the loop's state (so the
        backups keep it), training_args.json (under "run") and the card, beside the scores continuing reached."""
        run = self.run
        scores = run.validation.run()
        log(f"Before training (the checkpoint as loaded): {run.validation.describe(scores)}")
        run.state.before_training = scores
        run.run_info["run"][BEFORE_TRAINING_KEY] = scores

    def ends_epoch(self, step: int) -> bool:
        run = self.run
        return step % run.plan.steps_per_epoch == 0 or step == run.plan.total_steps

    def finish_epoch(self, step: int, seconds: Optional[float], timed_steps: int) -> bool:
        """The end of the epoch that ends at `step`, then what is due between executions; False when a user's Keras
        callback asked to stop."""
        run = self.run
        self.end_epoch((step - 1) // run.plan.steps_per_epoch, step, seconds, timed_steps)
        if run.model.stop_training:
            return False
        self.between_executions(step)
        return True

    def between_executions(self, step: int) -> None:
        """Stop with a backup if any worker was asked to; else back up if one is due."""
        if step < self.run.plan.total_steps:
            self.stop_if_asked(step)
            if self.backup_due(step):
                self.save_backup(step)

    def stop_if_asked(self, step: int) -> None:
        """A backup at `step` and the end of the run, if any worker was sent SIGTERM (all of them agree)."""
        run = self.run
        if run.stops.agreed():
            self.save_backup(step)
            run.stops.stop(step)

    def save_backup(self, step: int) -> None:
        run = self.run
        if run.member_counts:
            run.state.mixture_taken = run.member_counts.at(step)
        run.backup_record.step, run.backup_record.loop = step, asdict(run.state)
        run.backup.save(run.backup_record)

    def backup_due(self, step: int) -> bool:
        run = self.run
        if run.config.backup_steps:
            return step % run.config.backup_steps == 0
        return step % run.plan.steps_per_epoch == 0

    def check_finite(self, losses: np.ndarray, step: int) -> None:
        run = self.run
        bad = np.flatnonzero(~np.isfinite(losses))
        if len(bad):
            raise UserError(f"the training loss became {losses[bad[0]]} at step {step + bad[0] + 1}: the weights are "
                            f"no longer numbers, so the run stops here and nothing is saved over "
                            f"{run.config.output_dir}; lower --learning-rate ({run.config.learning_rate:g}) or check "
                            "the data")

    def count(self, results: np.ndarray, step: int) -> None:
        """Add each step's loss and hits to the epoch's sums; write the loss at every logging step."""
        run = self.run
        state = run.state
        for offset, (loss, hits, scored, left_out, norm, clipped) in enumerate(results.astype(np.float64)):
            state.epoch_loss += loss
            state.epoch_clipped += int(round(clipped))
            state.epoch_grad_norm += norm
            state.epoch_grad_norm_max = max(state.epoch_grad_norm_max, norm)
            state.epoch_steps += 1
            state.epoch_hits += hits
            state.epoch_scored += scored
            state.epoch_left_out += left_out
            state.interval_loss += loss
            state.interval_steps += 1
            done = step + offset + 1
            if run.config.logging_steps and done % run.config.logging_steps == 0:
                run.logs.write(TRAIN, done, {LOSS: state.interval_loss / state.interval_steps})
                state.interval_loss, state.interval_steps = 0.0, 0

    def end_epoch(self, epoch: int, step: int, seconds: Optional[float], timed_steps: int) -> None:
        """Validate, then save the model if it is the best so far (or always, without a best metric), then push.
        `timed_steps`: the steps of this epoch this process ran in `seconds` (fewer than its steps when resumed; none,
        and `seconds` None, when the run was stopped and resumed right before the epoch's end)."""
        run = self.run
        state, accuracy_name = run.state, run.task.accuracy_name
        training = {LOSS: state.epoch_loss / state.epoch_steps,
                    accuracy_name: state.epoch_hits / state.epoch_scored if state.epoch_scored else 0.0}
        speed = (Throughput(self.examples(step - timed_steps, step), max(seconds, 1e-9), self.replicas,
                            self.example_cost, self.peak, self.device) if seconds is not None and timed_steps else None)
        log(f"Epoch {epoch + 1} training: loss {training[LOSS]:.4f}, {accuracy_name.replace('_', ' ')} "
            f"{training[accuracy_name]:.2%} ({state.epoch_steps} steps" +
            (f", {seconds:.1f} s); {speed.describe()}" if speed else ")"))
        if state.epoch_left_out:
            warn(run.task.describe_left_out(int(state.epoch_left_out)))
            training["targets_left_out"] = int(state.epoch_left_out)
        if run.config.max_grad_norm is not None:
            training.update(self.describe_clipping(epoch))
        if not run.config.logging_steps:
            run.logs.write(TRAIN, step, {LOSS: training[LOSS]})
        run.logs.write(TRAIN, step, {name: value for name, value in training.items() if name != LOSS})
        if speed:
            run.logs.write(TRAIN, step, speed.scalars())
        scores = run.validation.run() if run.validation else {}
        if scores:
            log(f"Epoch {epoch + 1} validation: {run.validation.describe(scores)}")
            run.logs.write(VALIDATION, step, scores)
        saved = self.save_if_better(epoch, step, scores)
        state.epochs.append({"epoch": epoch + 1, "step": step, **training, "validation": scores, "saved": saved})
        state.epoch_loss, state.epoch_steps, state.epoch_hits, state.epoch_scored = 0.0, 0, 0.0, 0.0
        state.epoch_left_out = 0.0
        state.epoch_clipped, state.epoch_grad_norm, state.epoch_grad_norm_max = 0, 0.0, 0.0
        if saved and run.pusher:
            run.pusher.push(f"Training in progress, epoch {epoch + 1}")
        self.callbacks.on_epoch_end(epoch, {**training, **{f"val_{name}": value for name, value in scores.items()}})

    def describe_clipping(self, epoch: int) -> Dict[str, float]:
        """--max-grad-norm: how many of the epoch's steps were clipped and their gradients' norms, in the log; the
        figures for TensorBoard and the epoch's record."""
        state, limit = self.run.state, self.run.config.max_grad_norm
        mean = state.epoch_grad_norm / max(state.epoch_steps, 1)
        log(f"Epoch {epoch + 1} gradient clipping: {state.epoch_clipped} of {state.epoch_steps} steps clipped to "
            f"--max-grad-norm {limit:g}; global gradient norm {mean:.4g} on average, at most "
            f"{state.epoch_grad_norm_max:.4g} (before clipping)")
        return {"clipped_steps": state.epoch_clipped, "clipped_share": state.epoch_clipped / max(state.epoch_steps, 1),
                "grad_norm": mean, "grad_norm_max": state.epoch_grad_norm_max}

    def save_if_better(self, epoch: int, step: int, scores: Dict[str, float]) -> bool:
        run = self.run
        metric, best = self.best_metric, run.state.best
        if metric is None:
            self.save(epoch, step, scores)
            return True
        value = metric.value(scores)
        if not metric.improves(value, best["value"] if best else None):
            log(f"{metric.name} {value:.4f} is not better than epoch {best['epoch']}'s {best['value']:.4f}: "
                f"{run.config.output_dir} keeps that model")
            return False
        run.state.best = {"metric": f"val_{metric.name}", "value": float(value), "epoch": epoch + 1, "step": step,
                           "validation": dict(scores)}
        self.save(epoch, step, scores, {BEST_RECORD: run.state.best})
        log(f"{metric.name} {value:.4f} is the best so far: model saved to {run.config.output_dir}")
        return True

    def save(self, epoch: int, step: int, scores: Dict[str, float], records: Optional[Dict[str, dict]] = None) -> None:
        """The model in both layouts, its tokenizer, its card and `records`, through a staging folder: the chief's
        alone to write. Saving reads the weights, which are MirroredVariables (no SyncOnRead variables, such as
        Keras metrics', whose reading would be a collective every worker must join), so the others skip it."""
        run = self.run
        if not run.worker.is_chief:
            return
        corpus = (run.shards.manifest or {}).get("settings", {}).get("corpus")
        self.saved_card = run.task.card_facts(run.model, run.tokenizer, corpus=corpus,
                                               max_length=run.shards.length, steps=step, epoch=epoch + 1,
                                               global_batch_size=run.plan.global_batch_size, hardware=run.hardware,
                                               validation=scores, validation_corpus=run.eval_corpus,
                                               base_model=run.config.model_name_or_path,
                                               base_model_hub_id=hub_name(run.config.model_name_or_path),
                                               validation_before_training=run.state.before_training or {})
        run.task.save_model(run.config.output_dir, run.model, run.tokenizer, self.saved_card,
                             {RUN_INFO_FILE: run.run_info, **(records or {})}, self.card_name)

    def draw_loss_plot(self) -> None:
        """loss.png in the output folder, and the card showing it (for the Hub's page too)."""
        run = self.run
        from mlm_tpu.training.loss_plot import plot_losses

        try:
            plot_losses(run.config.output_dir, os.path.join(run.config.output_dir, LOSS_PLOT))
        except UserError as error:
            log(f"No loss plot: {error}")
            return
        if self.saved_card:
            run.task.write_card(run.config.output_dir, self.saved_card, self.card_name, has_loss_plot=True)
