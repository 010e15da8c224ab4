"""One fixed way to fine-tune an encoder, and what a fine-tuning run gave: what a downstream benchmark drives, one
run per task and seed (`mlm_tpu.fine_tune` in-process, or `mlm-tpu train --config` as a subprocess, reading the
result back from the output folder).

The protocol's defaults are GLUE-sane's (Geiping & Goldstein 2022, "Cramming"): the same hyperparameters for every
task, at most 5 epochs, learning rate 4e-5, batch 16, length 128, the best epoch on the validation split kept;
warm-up and weight decay as fairseq's RoBERTa GLUE recipe (6%, 0.01).
"""

import os
from dataclasses import asdict, dataclass, replace
from typing import Dict, List, Optional

from mlm_tpu.configuration import setting
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
    metric_for_best_model: Optional[str] = None  # None: the task's (accuracy, Pearson, entity F1)

    def training_settings(self) -> Dict[str, object]:
        """The protocol as training settings (TrainingConfig's fields; `train --config` reads them as a file)."""
        return {name: value for name, value in asdict(self).items() if value is not None}

    def with_overrides(self, **overrides) -> "FineTuningProtocol":
        return replace(self, **overrides)


@dataclass(frozen=True)
class FineTuningResult:
    """What one fine-tuning run gave: the kept (best) epoch's validation scores, and every epoch's figures."""

    output_dir: str
    task: str
    seed: int
    scores: Dict[str, float]  # the kept epoch's validation scores (accuracy, macro_f1, ..., loss)
    best_epoch: int
    metric: str  # the score that chose it ("accuracy", "pearson", "f1", ...)
    epochs: List[dict]  # {epoch, step, loss, <accuracy>, validation: {...}, saved}, when run in this process

    @classmethod
    def of_training(cls, result, task: str, seed: int) -> "FineTuningResult":
        """From the trainer's TrainingResult (a run with validation)."""
        best = result.best or {}
        if not best:
            raise UserError("the run kept no best epoch: fine-tuning needs an --eval-dataset to score each epoch")
        return cls(result.output_dir, task, seed, dict(best["validation"]), best["epoch"],
                   best["metric"].removeprefix("val_"), list(result.epochs))

    @classmethod
    def of_folder(cls, output_dir: str) -> "FineTuningResult":
        """From a finished run's output folder (best_model.json, training_args.json): what a subprocess run, or an
        earlier one, gave."""
        best_path, args_path = os.path.join(output_dir, BEST_RECORD), os.path.join(output_dir, RUN_INFO_FILE)
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
