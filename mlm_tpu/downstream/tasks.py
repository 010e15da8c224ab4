"""The tasks `mlm-tpu downstream --tasks ...` knows, and where each one's training and dev rows come from.

- Built in, offline: `rotten-tomatoes` and `imdb` (movie_reviews.py; dev sets carved with a fixed seed, a repeated
  text on one side).
- GLUE by name, from the 🤗 Hub (nyu-mll/glue, or a local copy of it: --glue-dataset): cola, sst2, mrpc, qqp, stsb,
  mnli, qnli, rte, with GLUE's columns, label kinds (STS-B: scores) and metrics, scored on their dev sets (MNLI's
  validation_matched). A task with two metrics (MRPC, QQP: F1 and accuracy; STS-B: Pearson and Spearman) scores
  their mean, as GLUE's leaderboard does.
- The user's own: `NAME=TRAIN:DEV` (two CSV or JSON-lines files, columns picked as 🤗's run_glue picks them), or a
  task file (YAML or JSON) naming the files or a 🤗 dataset, the columns and the metrics: see `DownstreamTask`.
"""

import csv
import difflib
import gzip
import io
import json
import os
import re
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from mlm_tpu.configuration import from_dict, read_config_file
from mlm_tpu.corpus import CorpusSource
from mlm_tpu.downstream import movie_reviews
from mlm_tpu.encoder.metrics import CLASSIFICATION_SCORES, REGRESSION_SCORES
from mlm_tpu.errors import UserError, reason_of

GLUE_DATASET = "nyu-mll/glue"
DEFAULT_TASKS = tuple(movie_reviews.SOURCES)
TASK_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*$")  # it names folders
TASK_FILE_SUFFIXES = (".yaml", ".yml", ".json")
REGRESSION = "regression"


@dataclass(frozen=True)
class DownstreamTask:
    """One task: where its rows come from, which columns hold text and label, and what scores it. A task file holds
    these keys (`name` defaults to the file's name):

        name: reviews
        train_file: data/train.csv          # CSV or JSON lines (or parquet); or a 🤗 dataset:
        validation_file: data/dev.csv       #   dataset: NAME, dataset_config: CONFIG, train_split, validation_split
        input_column: review                # default: as run_glue, sentence1 (+ sentence2), else the first one or
        pair_column: null                   #   two columns that are not the target
        target_column: label
        problem_type: null                  # regression for scores (default: found from the labels)
        metrics: [accuracy]                 # default: accuracy; pearson and spearman for scores
    """

    name: str
    train_file: Optional[str] = None
    validation_file: Optional[str] = None
    dataset: Optional[str] = None
    dataset_config: Optional[str] = None
    train_split: str = "train"
    validation_split: str = "validation"
    input_column: Optional[str] = None
    pair_column: Optional[str] = None
    target_column: str = "label"
    problem_type: Optional[str] = None
    metrics: Tuple[str, ...] = ()
    about: str = ""  # where the rows come from, in words (the report says it)

    @property
    def builtin(self) -> bool:
        return self.name in movie_reviews.SOURCES and not (self.train_file or self.dataset)

    def sources(self, data_dir: str) -> Tuple[CorpusSource, CorpusSource]:
        """Where the training and dev rows are read from (a built-in task's files are written first, in
        `data_dir`/<task>)."""
        if self.builtin:
            train, validation = movie_reviews.task_files(self.name, os.path.join(data_dir, self.name))
            return CorpusSource(text_files=(train,)), CorpusSource(text_files=(validation,))
        if self.dataset:
            return tuple(CorpusSource(dataset=self.dataset, dataset_config=self.dataset_config, split=split)
                         for split in (self.train_split, self.validation_split))
        return CorpusSource(text_files=(self.train_file,)), CorpusSource(text_files=(self.validation_file,))

    def scored_by(self, regression: bool) -> Tuple[str, ...]:
        """The metrics the task reports (its score is their mean), once its labels say whether it is a regression."""
        metrics = self.metrics or (("pearson", "spearman") if regression else ("accuracy",))
        allowed = REGRESSION_SCORES if regression else CLASSIFICATION_SCORES
        wrong = [metric for metric in metrics if metric not in allowed]
        if wrong:
            kind = "scores (a regression)" if regression else "classes"
            raise UserError(f"task {self.name}: its labels are {kind}, which are scored by {', '.join(allowed)}, "
                            f"not {', '.join(wrong)}; fix the task's metrics")
        return metrics


def _glue(config: str, input_column: str, pair_column: Optional[str] = None, metrics: Tuple[str, ...] = ("accuracy",),
          validation_split: str = "validation", **more) -> DownstreamTask:
    return DownstreamTask(config, dataset=GLUE_DATASET, dataset_config=config, input_column=input_column,
                          pair_column=pair_column, metrics=metrics, validation_split=validation_split,
                          about=f"{config}: GLUE's training split, scored on its {validation_split} split", **more)


GLUE_TASKS: Dict[str, DownstreamTask] = {task.name: task for task in (
    _glue("cola", "sentence", metrics=("matthews_correlation",)),
    _glue("sst2", "sentence"),
    _glue("mrpc", "sentence1", "sentence2", ("f1", "accuracy")),
    _glue("qqp", "question1", "question2", ("f1", "accuracy")),
    _glue("stsb", "sentence1", "sentence2", ("pearson", "spearman"), problem_type=REGRESSION),
    _glue("mnli", "premise", "hypothesis", validation_split="validation_matched"),
    _glue("qnli", "question", "sentence"),
    _glue("rte", "sentence1", "sentence2"),
)}


def builtin_task(name: str) -> DownstreamTask:
    dev = movie_reviews.dev_size(name)
    train = movie_reviews.ROWS[name] - dev
    what = "sentences" if name == "rotten-tomatoes" else "reviews"
    return DownstreamTask(name, input_column="text", about=(
        f"{name}: {movie_reviews.ROWS[name]:,} {what} of the movie-reviews package, {train:,} to train and {dev:,} "
        f"for dev ({movie_reviews.DEV_SHARE:.0%} of each label, seed {movie_reviews.DEV_SEED}; a repeated text on one "
        "side)"))


def known_names() -> str:
    return (f"{', '.join(movie_reviews.SOURCES)} (built in, offline), {', '.join(GLUE_TASKS)} (GLUE, from the 🤗 Hub), "
            "NAME=train.csv:dev.csv, or a task file (.yaml, .json)")


def parse_task(spec: str, glue_dataset: str = GLUE_DATASET) -> DownstreamTask:
    """One --tasks entry as a task."""
    if spec in movie_reviews.SOURCES:
        return builtin_task(spec)
    if spec in GLUE_TASKS:
        task = GLUE_TASKS[spec]
        return replace(task, dataset=glue_dataset) if glue_dataset != GLUE_DATASET else task
    if "=" in spec:
        return _files_task(spec)
    if spec.endswith(TASK_FILE_SUFFIXES):
        return _task_file(spec)
    close = difflib.get_close_matches(spec, [*movie_reviews.SOURCES, *GLUE_TASKS], n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise UserError(f"--tasks: unknown task '{spec}'; {hint}a task is one of {known_names()}")


def parse_tasks(specs: Sequence[str], glue_dataset: str = GLUE_DATASET) -> List[DownstreamTask]:
    """--tasks (comma-separated, or several values) as tasks, each name once."""
    tasks = [parse_task(spec.strip(), glue_dataset) for value in specs for spec in value.split(",") if spec.strip()]
    if not tasks:
        raise UserError(f"--tasks names no task; give one or more of {known_names()}")
    names = [task.name for task in tasks]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UserError(f"--tasks names the task {twice[0]} twice; give each task once (own tasks: NAME=... with "
                        "another NAME)")
    return tasks


def _files_task(spec: str) -> DownstreamTask:
    name, _, files = spec.partition("=")
    paths = re.split(r":(?!//)", files)  # gs://... keeps its colon
    if len(paths) != 2 or not all(paths):
        raise UserError(f"--tasks {spec}: write your own task as NAME=TRAIN:DEV, two CSV or JSON-lines files (e.g. "
                        "reviews=data/train.csv:data/dev.csv), or as a task file (.yaml, .json)")
    return _checked(DownstreamTask(name, train_file=paths[0], validation_file=paths[1],
                                   about=f"{name}: {paths[0]} to train, {paths[1]} for dev"), f"--tasks {spec}")


def _task_file(path: str) -> DownstreamTask:
    if not os.path.isfile(path):
        raise UserError(f"--tasks {path}: no such task file; give a YAML or JSON file, a task's name, or "
                        "NAME=TRAIN:DEV")
    values = read_config_file(path)
    if not isinstance(values, dict):
        raise UserError(f"--tasks {path} must hold a mapping of the task's settings (train_file: ..., ...)")
    values.setdefault("name", os.path.splitext(os.path.basename(path))[0])
    values.pop("about", None)
    if isinstance(values.get("metrics"), str):
        values["metrics"] = [values["metrics"]]
    task = from_dict(DownstreamTask, values, f"task file {path}")
    where = (f"{task.dataset}" + (f" ({task.dataset_config})" if task.dataset_config else "") +
             f", splits {task.train_split} and {task.validation_split}") if task.dataset else \
        f"{task.train_file} to train, {task.validation_file} for dev"
    return _checked(replace(task, about=f"{task.name}: {where}"), f"task file {path}")


def _checked(task: DownstreamTask, where: str) -> DownstreamTask:
    if not TASK_NAME.match(task.name):
        raise UserError(f"{where}: a task's name may hold letters, digits, '.', '_' and '-' (it names folders), not "
                        f"'{task.name}'")
    if task.name in movie_reviews.SOURCES or task.name in GLUE_TASKS:
        raise UserError(f"{where}: {task.name} is a built-in task's name; call your own task something else")
    if bool(task.dataset) == bool(task.train_file or task.validation_file):
        raise UserError(f"{where}: give train_file and validation_file, or a dataset, not both or neither")
    if not task.dataset and not (task.train_file and task.validation_file):
        raise UserError(f"{where}: give both train_file and validation_file")
    if task.problem_type not in (None, REGRESSION, "single_label_classification"):
        raise UserError(f"{where}: problem_type is regression or single_label_classification, not "
                        f"{task.problem_type}")
    known = {*CLASSIFICATION_SCORES, *REGRESSION_SCORES}
    if any(metric not in known for metric in task.metrics):
        raise UserError(f"{where}: metrics are among {', '.join(sorted(known))}, not "
                        f"{', '.join(metric for metric in task.metrics if metric not in known)}")
    return task


def with_columns(task: DownstreamTask) -> DownstreamTask:
    """The task with its text columns named: as given, else as 🤗's run_glue picks them from the training rows'
    columns (sentence1 and sentence2 if there are both, else the first two columns that are not the target, or the
    one)."""
    if task.input_column:
        return task
    if task.dataset:
        columns = _dataset_columns(task)
    else:
        columns = file_columns(task.train_file)
    if task.target_column not in columns:
        raise UserError(f"task {task.name}: the training rows have no column '{task.target_column}' (columns: "
                        f"{', '.join(columns) or 'none'}); name the label's column with target_column in a task file")
    others = [column for column in columns if column != task.target_column]
    if "sentence1" in others and "sentence2" in others:
        return replace(task, input_column="sentence1", pair_column="sentence2")
    if not others:
        raise UserError(f"task {task.name}: the training rows hold no column of text beside "
                        f"'{task.target_column}'")
    return replace(task, input_column=others[0], pair_column=others[1] if len(others) > 1 else None)


def file_columns(path: str) -> List[str]:
    """The columns of a CSV, JSON-lines, JSON or parquet file (its header, or its first row's keys)."""
    if not os.path.isfile(path):
        raise UserError(f"no such file: {path}; check the task's files")
    name = path[:-3] if path.endswith(".gz") else path
    try:
        if name.endswith(".parquet"):
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as binary:
            stream = io.TextIOWrapper(binary, encoding="utf-8-sig", newline="")
            if name.endswith(".csv"):
                return next(csv.reader(stream), [])
            if name.endswith(".jsonl"):
                first = next((line for line in stream if line.strip()), "{}")
                return list(json.loads(first))
            if name.endswith(".json"):
                rows = json.load(stream)
                return list(rows[0]) if isinstance(rows, list) and rows else []
    except (OSError, ValueError, UnicodeDecodeError) as error:
        raise UserError(f"cannot read the columns of {path}: {reason_of(error)}") from None
    raise UserError(f"{path}: a task's files are .csv, .jsonl, .json or .parquet (all but .parquet may be gzipped)")


def _dataset_columns(task: DownstreamTask) -> List[str]:
    import datasets

    try:
        builder = datasets.load_dataset_builder(task.dataset, task.dataset_config)
    except Exception as error:  # datasets raises many types: offline, not found, bad config
        raise hub_error(task, error) from None
    return list(builder.info.features or {})


def hub_error(task: DownstreamTask, error: BaseException) -> UserError:
    glue = task.name in GLUE_TASKS
    local = " (or a local copy of it: --glue-dataset FOLDER)" if glue else ""
    return UserError(f"task {task.name} reads {task.dataset}" + (f" ({task.dataset_config})" if task.dataset_config
                                                                  else "") +
                     f" from the 🤗 Hub, which cannot be loaded ({reason_of(error)}); it needs network{local}. "
                     f"Offline, use the built-in tasks ({', '.join(movie_reviews.SOURCES)}) or your own files "
                     "(NAME=train.csv:dev.csv)")


def check_available(task: DownstreamTask) -> None:
    """Before any work: the task's rows can be read (the package is installed, the files exist, the dataset loads)."""
    if task.builtin:
        movie_reviews.read_package()
    elif task.dataset:
        _dataset_columns(task)
    else:
        for path in (task.train_file, task.validation_file):
            if not os.path.isfile(path):
                raise UserError(f"task {task.name}: no such file: {path}")
