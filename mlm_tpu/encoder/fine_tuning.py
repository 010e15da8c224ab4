"""One fixed way to fine-tune an encoder, and what a fine-tuning run gave: what a downstream benchmark drives, one
run per task and seed (`mlm_tpu.fine_tune` in-process, or `mlm-tpu train --config` as a subprocess, reading the
result back from the output folder).

The protocol's defaults are GLUE-sane's (Geiping & Goldstein 2022, "Cramming"): the same hyperparameters for every
task, 5 epochs, learning rate 4e-5, batch 16, length 128, and the last epoch's score reported (no epoch chosen on the
split that is scored); warm-up and weight decay as fairseq's RoBERTa GLUE recipe (6%, 0.01). `keep_epoch="best"`
keeps instead the epoch of the best validation score, which is then reported on the split that chose it: optimistic
(the best of 5 epochs on the scored split adds an upward bias of about the size of the gains such tables report).
"""

import os
from dataclasses import asdict, dataclass, replace
from typing import Dict, List, Optional

from mlm_tpu.configuration import setting
from mlm_tpu.encoder.settings import check_kept_epoch
from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json
from mlm_tpu.output_dir import BEST_RECORD, RUN_INFO_FILE


@dataclass(frozen=True)
class FineTuningProtocol:
    """The settings every fine-tuning run of a benchmark shares (fields of the training config, plus the length the
    shards are cut to)."""

    max_length: int = setting(128, low=8)  # tokens per example: shard with it (the trainer checks the shards' length)
    num_epochs: int = setting(5, low=1)
    learning_rate: float = setting(4e-5, low=0, low_open=True)
    per_replica_batch_size: int = setting(16, low=1)
    warmup_ratio: float = setting(0.06, low=0, high=1)
    weight_decay_rate: float = setting(0.01, low=0, high=1)
    keep_epoch: str = "last"  # last: the last epoch's scores; best: the best on validation (optimistic: OPTIMISTIC)
    metric_for_best_model: Optional[str] = None  # with keep_epoch best; None: the task's (accuracy, Pearson, entity F1)

    def training_settings(self) -> Dict[str, object]:
        """The protocol as training settings (TrainingConfig's fields; `train --config` reads them as a file)."""
        return {name: value for name, value in asdict(self).items() if value is not None}

    def with_overrides(self, **overrides) -> "FineTuningProtocol":
        return replace(self, **overrides)

    @property
    def optimistic(self) -> bool:
        """Whether each run's score is picked as the best of its epochs on the split it is reported on."""
        return self.keep_epoch == "best"

    def check(self) -> None:
        check_kept_epoch(self.keep_epoch, self.metric_for_best_model)


# what a table of scores picked on the split they are reported on says of them
OPTIMISTIC = "optimistic (selected on the scored split)"


@dataclass(frozen=True)
class FineTuningResult:
    """What one fine-tuning run gave: the kept epoch's validation scores (the last, or the best with keep_epoch
    best), and every epoch's figures."""

    output_dir: str
    task: str
    seed: int
    scores: Dict[str, float]  # the kept epoch's validation scores (accuracy, macro_f1, ..., loss)
    best_epoch: int  # the kept epoch: the best, or the last when `kept` is "last"
    metric: Optional[str]  # the score that chose it ("accuracy", "pearson", "f1", ...); None for the last epoch
    epochs: List[dict]  # {epoch, step, loss, <accuracy>, validation: {...}, saved}, when run in this process
    kept: str = "best"  # which epoch the folder holds: "best" or "last" (keep_epoch)

    @classmethod
    def of_training(cls, result, task: str, seed: int) -> "FineTuningResult":
        """From the trainer's TrainingResult (a run with validation): its best epoch, or without one (--keep-epoch
        last) its last."""
        best = result.best or {}
        if best:
            return cls(result.output_dir, task, seed, dict(best["validation"]), best["epoch"],
                       best["metric"].removeprefix("val_"), list(result.epochs))
        last = result.epochs[-1] if result.epochs else {}
        if not last.get("validation"):
            raise UserError("the run scored no epoch: fine-tuning needs an --eval-dataset to score each epoch")
        return cls(result.output_dir, task, seed, dict(last["validation"]), last["epoch"], None, list(result.epochs),
                   "last")

    @classmethod
    def of_folder(cls, output_dir: str) -> "FineTuningResult":
        """From a finished run's output folder (best_model.json, training_args.json): what a subprocess run, or an
        earlier one, gave."""
        best_path, args_path = os.path.join(output_dir, BEST_RECORD), os.path.join(output_dir, RUN_INFO_FILE)
        if os.path.isfile(args_path) and not os.path.isfile(best_path) and \
                read_json(args_path, f"{output_dir}'s {RUN_INFO_FILE}", "run the fine-tuning again").get(
                    "keep_epoch") == "last":
            raise UserError(f"{output_dir} kept its last epoch (--keep-epoch last), whose scores its model card "
                            f"gives; only a run that kept its best epoch records them in {BEST_RECORD}")
        if not (os.path.isfile(best_path) and os.path.isfile(args_path)):
            raise UserError(f"{output_dir} holds no finished fine-tuning run ({BEST_RECORD} and {RUN_INFO_FILE})")
        if os.path.isdir(os.path.join(output_dir, "backup")):
            raise UserError(f"the fine-tuning run in {output_dir} is unfinished (its backup/ is there); run the same "
                            "command again to finish it")
        best = read_json(best_path, f"{output_dir}'s {BEST_RECORD}", "run the fine-tuning again")
        settings = read_json(args_path, f"{output_dir}'s {RUN_INFO_FILE}", "run the fine-tuning again")
        if "validation" not in best:
            raise UserError(f"{best_path} records no validation scores (an earlier mlm_tpu wrote it); run the "
                            "fine-tuning again")
        return cls(output_dir, settings["task"], settings["seed"], dict(best["validation"]), best["epoch"],
                   best["metric"].removeprefix("val_"), [])
