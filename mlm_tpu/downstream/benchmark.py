"""`mlm-tpu downstream`: what a pretrained encoder is worth on tasks, measured the way the field measures it.

Each seed fine-tunes a fresh copy of the model on each task under one fixed protocol (FineTuningProtocol: GLUE-sane's
defaults, Geiping & Goldstein 2022), keeps the best epoch on the task's dev set, and the report gives per task the
median over seeds and the spread (max - min), and the mean of the medians over tasks. `--baseline scratch` runs the
same shape from random initialisation (the model's config and tokenizer), so the report says what pretraining bought;
`--baseline tfidf` adds the floor of a linear model on TF-IDF features (floor.py).

Everything goes under --output-dir, and nothing is done twice:
    downstream.json                    what makes the runs comparable: protocol, row caps, the models' labels, and
                                       RULES (the dev carve's version, what picks a run's best epoch)
    data/<task>/{train,validation}.jsonl   a built-in task's rows (dev carved with a fixed seed)
    shards/<task>/<tokenizer fingerprint>-len<L>-<rows>/<split>/   made once per tokenizer and length, shared by
                                       every seed, the baseline and any model with the same tokenizer
    runs/<task>/<label>/seed-<n>/      one fine-tuning run (a training output folder), and seed-<n>.json beside it,
                                       written when the run has finished: its result, read back by a later benchmark
    runs/<task>/tfidf.json             the TF-IDF floor
    results.json                       the report (--json prints it)
A benchmark stopped in any way is finished by the same command: finished runs are read back, an unfinished one
resumes from its backup (or starts again), the missing ones run.
"""

import dataclasses
import gc
import hashlib
import json
import logging
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from mlm_tpu.claim import claimed
from mlm_tpu.configuration import check_ranges, setting, to_dict
from mlm_tpu.console import log, logger
from mlm_tpu.corpus import CorpusSource
from mlm_tpu.downstream import movie_reviews
from mlm_tpu.downstream.report import SPREAD, run_score, task_entry, with_mean
from mlm_tpu.downstream.tasks import (DEFAULT_TASKS, GLUE_DATASET, REGRESSION, DownstreamTask, check_available,
                                      parse_tasks, with_columns)
from mlm_tpu.encoder.fine_tuning import FineTuningProtocol, FineTuningResult
from mlm_tpu.errors import Interrupted, UserError
from mlm_tpu.jsonfiles import encode_json, read_json, write_json
from mlm_tpu.output_dir import Record, write_file
from mlm_tpu.shards.format import MANIFEST
from mlm_tpu.shards.storage import LocalStorage
from mlm_tpu.training.config import HardwareConfig

BASELINES = ("scratch", "tfidf")
SETTINGS_FILE = "downstream.json"
RESULTS_FILE = "results.json"
PARTS = ("data", "shards", "runs", SETTINGS_FILE, RESULTS_FILE)  # what the benchmark makes in its --output-dir
CLAIM_RECORD = ".benchmark-writer.json"
# what a folder's data and runs depend on beside its settings, recorded with them: an earlier mlm_tpu's folder (which
# carved IMDB's dev set row by row, and picked MRPC's and QQP's best epochs by F1 alone) is not mixed with this one's
RULES = {"dev_carve": movie_reviews.CARVE, "best_epoch": "the task's score"}
# config.json entries that do not change the shape of a model trained from scratch
NOT_SHAPE = ("architectures", "_name_or_path", "transformers_version", "id2label", "label2id", "problem_type",
             "task_specific_params", "torch_dtype", "finetuning_task")


@dataclass
class DownstreamConfig:
    """What `mlm-tpu downstream` does; the flags of the same names fill it."""

    model: str  # the pretrained encoder: a folder (with its tokenizer) or a Hub name
    tasks: Tuple[str, ...] = DEFAULT_TASKS  # task names, NAME=TRAIN:DEV, or task files (tasks.py)
    seeds: int = setting(5, low=1, high=1000)  # seeds 1..N, each a fresh fine-tuning run per task
    baseline: Tuple[str, ...] = ()  # scratch: the same shape from random weights; tfidf: a linear floor
    output_dir: str = "runs/downstream"
    max_train_samples: Optional[int] = setting(None, low=1)  # each task's first N training rows (as run_glue)
    max_eval_samples: Optional[int] = setting(None, low=1)  # each task's first N dev rows
    glue_dataset: str = GLUE_DATASET  # where GLUE tasks come from: the Hub's, or a local copy of it
    protocol: FineTuningProtocol = field(default_factory=FineTuningProtocol)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    verbose: bool = False  # show each run's training log too


@dataclass(frozen=True)
class Variant:
    """A model the benchmark fine-tunes: the pretrained one, or its shape from scratch."""

    label: str  # names its run folders
    role: str  # "model" or "scratch"
    settings: Dict[str, Optional[str]]  # fine_tune's: model_name_or_path, or model_config and tokenizer


@dataclass
class PreparedTask:
    """A task ready to run: its shards, sizes and metrics."""

    task: DownstreamTask
    train: str  # the training split's shards
    validation: str
    train_examples: int
    dev_examples: int
    metrics: Tuple[str, ...]
    sources: Tuple[CorpusSource, CorpusSource]  # what the shards were made from (the TF-IDF floor reads them too)
    regression: bool


@dataclass
class Run:
    task: PreparedTask
    variant: Variant
    seed: int
    folder: str  # the training run's output folder; its result is `folder`.json

    @property
    def record(self) -> str:
        return self.folder + ".json"

    def describe(self) -> str:
        return f"{self.task.task.name}, {self.variant.label} (seed {self.seed})"


def run_benchmark(config: DownstreamConfig) -> dict:
    """Fine-tune every (task, seed, model) run not finished yet, then report; see the module's docstring."""
    check_ranges(config)
    unknown = [name for name in config.baseline if name not in BASELINES]
    if unknown:
        raise UserError(f"--baseline is one or more of {', '.join(BASELINES)}, not {unknown[0]}")
    tasks = parse_tasks(config.tasks, config.glue_dataset)
    model_config, tokenizer = check_model(config.model, config.protocol.max_length)
    for task in tasks:
        check_available(task)
    tasks = [with_columns(task) for task in tasks]
    variants = [Variant(model_label(config.model), "model", {"model_name_or_path": config.model})]
    if "scratch" in config.baseline:
        variants.append(Variant(f"scratch-{shape_id(model_config, tokenizer)}", "scratch",
                                {"model_config": config.model, "tokenizer": config.model}))
    settings = check_output_dir(config, variants)
    with claimed(LocalStorage(config.output_dir), CLAIM_RECORD, "downstream benchmark",
                 "give this one another --output-dir"):
        write_file(os.path.join(config.output_dir, SETTINGS_FILE), encode_json(settings), start_record=True)
        prepared = [prepare_task(config, task, tokenizer) for task in tasks]
        runs = [Run(task, variant, seed, os.path.join(config.output_dir, "runs", task.task.name, variant.label,
                                                       f"seed-{seed}"))
                for seed in range(1, config.seeds + 1) for task in prepared for variant in variants]
        results = run_all(config, runs)
        floors = {task.task.name: tfidf_result(config, task) for task in prepared} if "tfidf" in config.baseline \
            else {}
        report = make_report(config, prepared, variants, results, floors)
        write_json(os.path.join(config.output_dir, RESULTS_FILE), report)
    return report


def check_model(model: str, max_length: int):
    """The model's config and tokenizer, refusing before any work a model that is no encoder, has no tokenizer,
    or reads fewer tokens than the protocol's length."""
    from transformers import TFAutoModelForSequenceClassification

    from mlm_tpu.encoder.models import check_encoder, check_length, saved_config
    from mlm_tpu.tokenizer.load import load_tokenizer

    model_config = saved_config(model, "--model")
    check_encoder(model_config, TFAutoModelForSequenceClassification, f"--model {model}")
    check_length(model_config, max_length, f"--model {model}", f"--max-length {max_length} makes {max_length}-token "
                 "inputs", "pass")
    return model_config, load_tokenizer(model, "--model", fast=True)


def model_label(model: str) -> str:
    """The name of a model's run folders: its folder's name, or its Hub name (/ as --)."""
    if os.path.isdir(model):
        return os.path.basename(os.path.abspath(model))
    return model.replace("/", "--")


def shape_id(model_config, tokenizer) -> str:
    """What a model trained from scratch depends on: the config's shape (not its names or labels) and the
    tokenizer."""
    from mlm_tpu.tokenizer.load import tokenizer_fingerprint

    shape = {key: value for key, value in model_config.to_dict().items() if key not in NOT_SHAPE}
    text = json.dumps([shape, tokenizer_fingerprint(tokenizer)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def fixed_settings(config: DownstreamConfig) -> dict:
    """What every run in an output folder must share to be compared: the protocol, the rows and the RULES."""
    return {"protocol": to_dict(config.protocol), "max_train_samples": config.max_train_samples,
            "max_eval_samples": config.max_eval_samples, **RULES}


def check_output_dir(config: DownstreamConfig, variants: List[Variant]) -> dict:
    """Refuse an --output-dir holding what the benchmark did not make, or runs of another protocol, or another
    model under the same label; return what its downstream.json is to say."""
    folder = config.output_dir
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise UserError(f"--output-dir {folder} is a file, not a folder; choose another --output-dir")
    settings_path = os.path.join(folder, SETTINGS_FILE)
    ours = os.path.isfile(settings_path) and Record(folder).owns(SETTINGS_FILE)
    others = not_made_by_the_benchmark(folder)
    if others:
        raise UserError(f"--output-dir {folder} holds {', '.join(others[:3])}, which the downstream benchmark did not "
                        "make; it writes only in a folder of its own (a new one, or an earlier benchmark's): choose "
                        "another --output-dir")
    recorded = read_json(settings_path, "the benchmark's settings", "choose another --output-dir") if ours else {}
    fixed = fixed_settings(config)
    if recorded and not follows_the_rules(recorded):
        raise UserError(f"--output-dir {folder} holds runs of an earlier mlm_tpu, which carved IMDB's dev set and "
                        "picked best epochs otherwise; its scores are not comparable with new ones: choose another "
                        "--output-dir")
    if recorded and recorded.get("fixed") != fixed:
        changed = sorted(key for key in fixed if recorded.get("fixed", {}).get(key) != fixed[key])
        raise UserError(f"--output-dir {folder} holds runs made with other settings ({', '.join(changed)}: "
                        f"{json.dumps({key: recorded.get('fixed', {}).get(key) for key in changed})}); runs are "
                        "compared under one protocol: choose another --output-dir, or give the same settings")
    models = dict(recorded.get("models", {}))
    model = os.path.abspath(config.model) if os.path.isdir(config.model) else config.model
    for variant in variants:
        if variant.role == "model":
            if models.get(variant.label, model) != model:
                raise UserError(f"--output-dir {folder} holds runs of another model called {variant.label} "
                                f"({models[variant.label]}); choose another --output-dir")
            models[variant.label] = model
    return {"fixed": fixed, "models": models}


def not_made_by_the_benchmark(folder: str) -> List[str]:
    """What `folder` holds that no downstream benchmark made there: nothing in a new folder or a benchmark's own
    (its recorded downstream.json beside data/, shards/, runs/, results.json), else every visible entry."""
    if not os.path.isdir(folder):
        return []
    entries = sorted(name for name in os.listdir(folder) if not name.startswith("."))
    ours = os.path.isfile(os.path.join(folder, SETTINGS_FILE)) and Record(folder).owns(SETTINGS_FILE)
    return [name for name in entries if not ours or name not in PARTS]


def follows_the_rules(recorded: dict) -> bool:
    """Whether a folder's downstream.json says its data and runs were made by these RULES."""
    return all(recorded.get("fixed", {}).get(key) == value for key, value in RULES.items())


def forget_runs(folder: str) -> None:
    """Delete a benchmark folder's runs and report (its data and shards stay, unless an earlier mlm_tpu made them by
    other RULES: then all goes): for a model trained again in the same place, whose earlier runs would otherwise be
    read back."""
    import shutil

    if not os.path.isdir(folder) or not_made_by_the_benchmark(folder):
        return
    settings = os.path.join(folder, SETTINGS_FILE)
    if os.path.isfile(settings) and not follows_the_rules(read_json(settings, "the benchmark's settings",
                                                                     f"delete {folder}")):
        shutil.rmtree(folder)
        return
    shutil.rmtree(os.path.join(folder, "runs"), ignore_errors=True)
    if os.path.isfile(os.path.join(folder, RESULTS_FILE)):
        os.remove(os.path.join(folder, RESULTS_FILE))


def prepare_task(config: DownstreamConfig, task: DownstreamTask, tokenizer) -> PreparedTask:
    """The task's shards for this tokenizer and length (made once, then reused), its sizes and metrics."""
    from mlm_tpu.api import shard_corpus
    from mlm_tpu.tokenizer.load import tokenizer_fingerprint

    train, validation = task.sources(os.path.join(config.output_dir, "data"))
    train = dataclasses.replace(train, limit=config.max_train_samples)
    validation = dataclasses.replace(validation, limit=config.max_eval_samples)
    key = f"{tokenizer_fingerprint(tokenizer)}-len{config.protocol.max_length}"
    folders = []
    for source, cap, name in ((train, config.max_train_samples, "train"),
                              (validation, config.max_eval_samples, "validation")):
        root = os.path.join(config.output_dir, "shards", task.name, f"{key}-{f'first{cap}' if cap else 'all'}")
        split = source.split if source.dataset else name
        folder = os.path.join(root, split)
        if not os.path.isfile(os.path.join(folder, MANIFEST)):
            log(f"Sharding {task.name}'s {name} rows with the model's tokenizer (once; every run reuses them)")
            shard_corpus(config.model, root, task="sequence-classification", dataset=source.dataset,
                         dataset_config=source.dataset_config, text_files=source.text_files, split=split,
                         limit=source.limit, input_columns=(task.input_column,), pair_column=task.pair_column,
                         target_column=task.target_column, problem_type=task.problem_type,
                         max_length=config.protocol.max_length)
        folders.append(folder)
    manifests = [read_json(os.path.join(folder, MANIFEST), "a shard manifest", "delete the folder and run again")
                 for folder in folders]
    regression = manifests[0]["settings"].get("problem_type") == REGRESSION
    return PreparedTask(task, folders[0], folders[1], manifests[0]["records"], manifests[1]["records"],
                        task.scored_by(regression), (train, validation), regression)


def run_all(config: DownstreamConfig, runs: List[Run]) -> Dict[Tuple[str, str, int], FineTuningResult]:
    """Every run's result: read back when finished earlier, else fine-tuned now; progress and an ETA as they go."""
    results = {}
    took: Dict[str, List[float]] = {}  # task -> seconds of each of its runs finished, now or earlier
    examples = {run.task.task.name: run.task.train_examples for run in runs}
    for number, run in enumerate(runs, start=1):
        done = read_run(run)
        where = f"[{number}/{len(runs)}] {run.describe()}"
        if done is None:
            epochs = config.protocol.num_epochs
            log(f"{where}: fine-tuning on {run.task.train_examples:,} examples, {epochs} epoch{'s' * (epochs != 1)}")
            try:
                done = fine_tune_run(config, run)
            except KeyboardInterrupt:
                raise Interrupted(f"the benchmark stopped in run {number} of {len(runs)}, {number - 1} finished; "
                                  "run the same command to finish it (finished runs are read back)") from None
            said = _seconds(done["seconds"])
        else:
            said = "finished earlier, read back"
        result = done["result"]
        results[(run.task.task.name, run.variant.label, run.seed)] = result
        took.setdefault(run.task.task.name, []).append(done["seconds"])
        left = len(runs) - number
        log(f"{where}: {_describe_score(run.task.metrics, run_score(result.scores, run.task.metrics))} (best epoch "
            f"{result.best_epoch}; {said}); " + (f"{left} run{'s' * (left != 1)} left{_eta(runs[number:], took, examples)}"
                                                 if left else "all runs done"))
    return results


def read_run(run: Run) -> Optional[dict]:
    """A finished run's record (written once its training ended), or None."""
    if not os.path.isfile(run.record):
        return None
    done = read_json(run.record, "a finished run's record", "delete it to run that seed again")
    result = FineTuningResult(run.folder, done["task"], done["seed"], done["scores"], done["best_epoch"],
                              done["metric"], [])
    return {"result": result, "seconds": done["seconds"]}


def fine_tune_run(config: DownstreamConfig, run: Run) -> dict:
    """Fine-tune one run in this process (resuming its backup if it has one) and record its result beside it."""
    import tf_keras as keras

    from mlm_tpu.api import fine_tune

    protocol = config.protocol
    if not protocol.metric_for_best_model:  # the epoch the task's score picks: the one the report gives
        protocol = protocol.with_overrides(metric_for_best_model=",".join(run.task.metrics))
    started, cpu_started = time.perf_counter(), time.process_time()
    level = logger.level
    if not config.verbose:
        logger.setLevel(logging.WARNING)  # the benchmark's lines, not each run's
    try:
        result = fine_tune(run.task.train, run.task.validation, run.folder, seed=run.seed, protocol=protocol,
                           hardware=to_dict(config.hardware), **run.variant.settings)
    finally:
        logger.setLevel(level)
        keras.backend.clear_session()  # the next run builds its model afresh, in the memory this one held
        gc.collect()
    seconds = time.perf_counter() - started
    os.makedirs(os.path.dirname(run.record), exist_ok=True)
    write_json(run.record, {"task": run.task.task.name, "model": run.variant.label, "seed": run.seed,
                            "scores": result.scores, "best_epoch": result.best_epoch, "metric": result.metric,
                            "epochs": [{key: value for key, value in epoch.items() if key != "saved"}
                                       for epoch in result.epochs],
                            "seconds": seconds, "cpu_seconds": time.process_time() - cpu_started})
    return {"result": result, "seconds": seconds}


def _describe_score(metrics: Tuple[str, ...], score: float) -> str:
    return f"{' and '.join(metrics)}{' (mean)' if len(metrics) > 1 else ''} {score:.4f}"


def _eta(remaining: List[Run], took: Dict[str, List[float]], examples: Dict[str, int]) -> str:
    """About how long the remaining runs take (those finished earlier take none): each as long as its task's finished
    runs took on average (a model and its shape from scratch train alike), a task not run yet as long per training
    example as the others."""
    if not took:
        return ""
    per_example = sum(map(sum, took.values())) / sum(len(seconds) * examples[task] for task, seconds in took.items())
    total = sum(statistics.fmean(took[run.task.task.name]) if run.task.task.name in took else
                per_example * run.task.train_examples for run in remaining if not os.path.isfile(run.record))
    return f", about {_seconds(total)}"


def _seconds(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def tfidf_result(config: DownstreamConfig, task: PreparedTask) -> Dict[str, float]:
    """The TF-IDF floor's dev scores, computed once per task and kept in runs/<task>/tfidf.json."""
    from mlm_tpu.downstream.floor import tfidf_floor

    path = os.path.join(config.output_dir, "runs", task.task.name, "tfidf.json")
    if os.path.isfile(path):
        return read_json(path, "the TF-IDF floor's record", "delete it to compute it again")["scores"]
    log(f"{task.task.name}: TF-IDF + logistic regression on the same rows (the floor)")
    scores = tfidf_floor(*task.sources, task.task.input_column, task.task.pair_column, task.task.target_column,
                         task.regression)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_json(path, {"task": task.task.name, "scores": scores})
    return scores


def make_report(config: DownstreamConfig, prepared: List[PreparedTask], variants: List[Variant],
                results: Dict[Tuple[str, str, int], FineTuningResult], floors: Dict[str, Dict[str, float]]) -> dict:
    """The report (results.json, --json; report.py): per task and model, the median and spread of its score and of
    each metric over the seeds; the mean of the medians over tasks."""
    seeds = list(range(1, config.seeds + 1))
    tasks = {}
    for task in prepared:
        name = task.task.name
        runs = {variant.role: (variant.label, [results[(name, variant.label, seed)].scores for seed in seeds],
                               [results[(name, variant.label, seed)].best_epoch for seed in seeds])
                for variant in variants}
        tasks[name] = task_entry(task.metrics, runs, floors.get(name, {}), train_examples=task.train_examples,
                                 dev_examples=task.dev_examples, about=task.task.about,
                                 folder=os.path.join(config.output_dir, "runs", name))
    return with_mean({"model": config.model, "seeds": seeds, "spread": SPREAD, "protocol": to_dict(config.protocol),
                      "max_train_samples": config.max_train_samples, "max_eval_samples": config.max_eval_samples,
                      "tasks": tasks})
