"""`mlm-tpu downstream`: what a pretrained encoder is worth on tasks, measured the way the field measures it.

Each seed fine-tunes a fresh copy of the model on each task under one fixed protocol (FineTuningProtocol: GLUE-sane's
defaults, Geiping & Goldstein 2022), scores its last epoch on the task's dev set (no epoch is chosen on the split that
is scored; `keep_epoch="best"` keeps each run's best epoch on the dev set instead, and every table says the scores
are then optimistic), and the report gives per task the median over seeds and the spread (max - min), and the mean of
the medians over tasks. Every model reads the same text: each row cut to the whole words the model's tokenizer keeps
at the protocol's length (words.py), which each tokenizes with its own; the report gives the words each read per
row. `--baseline scratch` runs the same shape from random initialisation (the model's config and tokenizer), so the
report says what pretraining bought; `--baseline tfidf` adds the floor of a linear model on TF-IDF features
(floor.py); `--baseline reference` a checkpoint people use, all-MiniLM-L6-v2 (reference.py), fine-tuned the same
way on shards of its own tokenizer, and `--reference-continued FOLDER` its continued-pretraining (task-adaptive)
variant beside it. `--classifier-pooling` (the first token's hidden state, or the mean over real tokens) is part of
the protocol: every row's classifiers read the same, the model's own (a mean-pooled classifier's mean) unless given.

Everything goes under --output-dir, and nothing is done twice:
    downstream.json                    what makes the runs comparable: protocol, classifier pooling, row caps, the
                                       models' labels, and RULES (the dev carve's version, what picks a run's best
                                       epoch, what each result file records)
    data/<task>/{train,validation}.jsonl   a built-in task's rows (dev carved with a fixed seed)
    data/<task>/<text>/{train,validation}.jsonl   the rows every model reads: cut to the whole words the model's
                                       tokenizer keeps at that length (<text>: words-<its fingerprint>-len<L>-<rows>)
    shards/<task>/<text>/<tokenizer fingerprint>-len<L>/<split>/   that text, sharded once per tokenizer, shared by
                                       every seed, the baseline and any model with the same tokenizer
    runs/<task>/<label>/seed-<n>/      one fine-tuning run (a training output folder), and seed-<n>.json beside it,
                                       written when the run has finished: its result (the kept epoch's dev scores,
                                       which epoch and why, every epoch's dev scores) and the settings it was made
                                       under (protocol, pooling, rows), read back by a later benchmark that shares
                                       them
    runs/<task>/tfidf-<tokenizer fingerprint>-len<L>.json   the TF-IDF floor, reading the same words (and the whole
                                       texts, when texts were cut), with its cut and the settings its rows follow
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
from mlm_tpu.configuration import check_ranges, from_keywords, setting, to_dict
from mlm_tpu.console import log, logger
from mlm_tpu.corpus import Corpus, CorpusSource
from mlm_tpu.downstream import movie_reviews, reference
from mlm_tpu.downstream.retrieval import retrieval_specs, run_retrieval_benchmark
from mlm_tpu.downstream.report import SPREAD, kept_epoch_words, run_score, task_entry, with_mean
from mlm_tpu.downstream.tasks import (DEFAULT_TASKS, GLUE_DATASET, DownstreamTask, check_available, parse_tasks,
                                      with_columns)
from mlm_tpu.encoder.fine_tuning import FineTuningProtocol, FineTuningResult
from mlm_tpu.model_folder.pooling import classifier_pooling
from mlm_tpu.errors import Interrupted, UserError
from mlm_tpu.jsonfiles import encode_json, read_json
from mlm_tpu.output_dir import Record, write_file, write_json
from mlm_tpu.shards.format import MANIFEST, REGRESSION
from mlm_tpu.shards.storage import LocalStorage
from mlm_tpu.training.config import HardwareConfig

BASELINES = ("scratch", "tfidf", "reference")
POOLINGS = ("cls", "mean")  # --classifier-pooling: the first token's hidden state, or the mean over real tokens
DEFAULT_POOLING = "cls"  # what a family's classifier reads when --classifier-pooling is not given
SETTINGS_FILE = "downstream.json"
RESULTS_FILE = "results.json"
PARTS = ("data", "shards", "runs", SETTINGS_FILE, RESULTS_FILE)  # what the benchmark makes in its --output-dir
CLAIM_RECORD = ".benchmark-writer.json"
# what a folder's data and runs depend on beside its settings, recorded with them: an earlier mlm_tpu's folder (which
# carved IMDB's dev set row by row, picked MRPC's and QQP's best epochs by F1 alone, did not record the classifier's
# pooling in each result file, or let each model read as much of a text as its own tokenizer fits) is not mixed with
# this one's
RULES = {"dev_carve": movie_reviews.CARVE, "best_epoch": "the task's score", "records": 2,
         "text": "the words the model's tokenizer keeps"}
# what an earlier mlm_tpu did otherwise, by rule (its refusal says it)
EARLIER = {"dev_carve": "carved IMDB's dev set", "best_epoch": "picked best epochs",
           "records": "recorded no classifier pooling in its runs (they read the first token)",
           "text": "let each model read as much of a text as its own tokenizer fits"}
# config.json entries that do not change the shape of a model trained from scratch
NOT_SHAPE = ("architectures", "_name_or_path", "transformers_version", "id2label", "label2id", "problem_type",
             "task_specific_params", "torch_dtype", "finetuning_task")


@dataclass
class DownstreamConfig:
    """What `mlm-tpu downstream` does; the flags of the same names fill it."""

    model: str  # the pretrained encoder: a folder (with its tokenizer) or a Hub name
    tasks: Tuple[str, ...] = DEFAULT_TASKS  # task names, NAME=TRAIN:DEV, or task files (tasks.py)
    seeds: int = setting(5, low=1, high=1000)  # seeds 1..N, each a fresh fine-tuning run per task
    baseline: Tuple[str, ...] = ()  # scratch: the same shape from random weights; tfidf: a linear floor; reference
    reference_continued: Optional[str] = None  # a folder continuing the reference's pretraining (--task mlm)
    # the reference rows' peak learning rate, where a pretrained checkpoint's differs from the protocol's (a tiny
    # model's 1e-3 is far above what fine-tuning a BERT takes); None: the protocol's
    reference_learning_rate: Optional[float] = setting(None, low=0, low_open=True)
    classifier_pooling: Optional[str] = None  # cls or mean (POOLINGS); None: the model's own (a classifier's), else cls
    output_dir: str = "runs/downstream"
    max_train_samples: Optional[int] = setting(None, low=1)  # each task's first N training rows (as run_glue)
    max_eval_samples: Optional[int] = setting(None, low=1)  # each task's first N dev rows
    glue_dataset: str = GLUE_DATASET  # where GLUE tasks come from: the Hub's, or a local copy of it
    protocol: FineTuningProtocol = field(default_factory=FineTuningProtocol)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    verbose: bool = False  # show each run's training log too


@dataclass(frozen=True)
class Variant:
    """A model the benchmark fine-tunes: the pretrained one, its shape from scratch, the reference encoder or the
    reference continued."""

    label: str  # names its run folders
    role: str  # "model", "scratch", "reference" or "reference_continued" (report.py's ROLE_TITLES)
    settings: Dict[str, Optional[str]]  # fine_tune's: model_name_or_path, or model_config and tokenizer
    tokenizer: str  # the folder or Hub name of the tokenizer its shards are made with
    source: Optional[str] = None  # what its label stands for (downstream.json's `models`); None: its label says it
    protocol_overrides: Dict[str, float] = field(default_factory=dict)  # the reference rows' own learning rate


@dataclass(frozen=True)
class TaskText:
    """A task's rows: as given (capped), and cut to the words the model's tokenizer keeps, which every model reads."""

    name: str  # names its folder under data/<task>/ and shards/<task>/
    sources: Tuple[CorpusSource, CorpusSource]  # the rows as given: training, dev (the TF-IDF floor reads them)
    read: Tuple[CorpusSource, CorpusSource]  # the same rows cut to the model's words: what every model is fed


@dataclass
class PreparedTask:
    """A task ready to run for one tokenizer: its shards, sizes and metrics, and the words it reads per row."""

    task: DownstreamTask
    train: str  # the training split's shards
    validation: str
    train_examples: int
    dev_examples: int
    metrics: Tuple[str, ...]
    sources: Tuple[CorpusSource, CorpusSource]  # the rows as given (the TF-IDF floor reads them)
    regression: bool
    words_per_row: float  # the words of a row (text and pair) this tokenizer reads, mean over training and dev rows


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
    check_choices(config)
    retrieval = retrieval_specs(config.tasks)  # BEIR folders and the inverse cloze task: downstream/retrieval.py
    if retrieval:
        return run_retrieval_benchmark(config, retrieval)
    tasks = parse_tasks(config.tasks, config.glue_dataset)
    model_config, tokenizer = check_model(config.model, config.protocol.max_length)
    # one pooling for every row: the model's own unless given (a mean-pooled classifier's runs read the mean, and
    # so do its shape's from scratch and the reference's), recorded as such
    config = dataclasses.replace(config, classifier_pooling=config.classifier_pooling or
                                 classifier_pooling(model_config))
    for task in tasks:
        check_available(task)
    tasks = [with_columns(task) for task in tasks]
    for task in tasks:
        check_has_rows(task)
    variants = [Variant(model_label(config.model), "model", {"model_name_or_path": config.model}, config.model,
                        model_source(config.model))]
    tokenizers = {config.model: tokenizer}  # each variant's shards are made with its own
    if "scratch" in config.baseline:
        variants.append(Variant(f"scratch-{shape_id(model_config, tokenizer)}", "scratch",
                                {"model_config": config.model, "tokenizer": config.model}, config.model))
    if "reference" in config.baseline:
        variants += reference_variants(config, tokenizers)
    settings = check_output_dir(config, variants)
    with claimed(LocalStorage(config.output_dir), CLAIM_RECORD, "downstream benchmark",
                 "give this one another --output-dir"):
        write_file(os.path.join(config.output_dir, SETTINGS_FILE), encode_json(settings), start_record=True)
        texts = {task.name: prepare_text(config, task, tokenizer) for task in tasks}
        prepared = {(task.name, source): prepare_task(config, task, texts[task.name], source, tokenizers[source])
                    for source in tokenizers for task in tasks}
        runs = [Run(prepared[(task.name, variant.tokenizer)], variant, seed,
                    os.path.join(config.output_dir, "runs", task.name, variant.label, f"seed-{seed}"))
                for seed in range(1, config.seeds + 1) for task in tasks for variant in variants]
        results = run_all(config, runs)
        of_model = [prepared[(task.name, config.model)] for task in tasks]
        floors = {task.task.name: tfidf_result(config, task, tokenizer) for task in of_model} \
            if "tfidf" in config.baseline else {}
        words = {key: task.words_per_row for key, task in prepared.items()}
        report = make_report(config, of_model, variants, results, floors, words)
        write_json(os.path.join(config.output_dir, RESULTS_FILE), report)
    return report


def check_choices(config: DownstreamConfig) -> None:
    """Refuse an unknown baseline or pooling, and a continued reference or the reference's rate without its row."""
    unknown = [name for name in config.baseline if name not in BASELINES]
    if unknown:
        raise UserError(f"--baseline is one or more of {', '.join(BASELINES)}, not {unknown[0]}")
    if config.classifier_pooling not in (None, *POOLINGS):
        raise UserError(f"--classifier-pooling is {' or '.join(POOLINGS)}, not {config.classifier_pooling}")
    config.protocol.check()
    if config.reference_continued and "reference" not in config.baseline:
        raise UserError(f"--reference-continued {config.reference_continued} adds a row beside the reference "
                        "encoder's: give --baseline reference too")
    if config.reference_learning_rate and "reference" not in config.baseline:
        raise UserError(f"--reference-learning-rate {config.reference_learning_rate:g} is the reference rows' rate: "
                        "give --baseline reference too")


def check_model(model: str, max_length: int, flag: str = "--model"):
    """The model's config and tokenizer, refusing before any work a model that is no encoder, has no tokenizer,
    or reads fewer tokens than the protocol's length."""
    from mlm_tpu.encoder.models import check_encoder, saved_config
    from mlm_tpu.training.task import check_length
    from mlm_tpu.model_folder import families
    from mlm_tpu.tokenizer.load import load_tokenizer

    model_config = saved_config(model, flag)
    check_encoder(model_config, families.of_folder(model).model_class("sequence_classification"), f"{flag} {model}")
    check_length(model_config, max_length, f"{flag} {model}", f"--max-length {max_length} makes {max_length}-token "
                 "inputs", "pass")
    return model_config, load_tokenizer(model, flag, fast=True)


def reference_variants(config: DownstreamConfig, tokenizers: dict) -> List[Variant]:
    """The reference encoder (reference.py), and the folder continuing its pretraining when given: each fine-tuned
    on shards of its own tokenizer (added to `tokenizers`), at the protocol's length."""
    from mlm_tpu.tokenizer.load import tokenizer_fingerprint

    folder = reference.reference_folder()
    reference_config, tokenizers[folder] = check_model(folder, config.protocol.max_length)
    rate = {"learning_rate": config.reference_learning_rate} if config.reference_learning_rate else {}
    variants = [Variant(reference.NAME, "reference", {"model_name_or_path": folder}, folder,
                        reference.reference_version(), rate)]
    continued = config.reference_continued
    if continued:
        flag = "--reference-continued"
        continued_config, tokenizers[continued] = check_model(continued, config.protocol.max_length, flag)
        shape = ("model_type", "hidden_size", "num_hidden_layers")
        differs = [key for key in shape if getattr(continued_config, key, None) != getattr(reference_config, key)]
        if not differs and tokenizer_fingerprint(tokenizers[continued]) != tokenizer_fingerprint(tokenizers[folder]):
            differs = ["tokenizer"]
        if differs:
            raise UserError(f"{flag} {continued} does not continue {reference.NAME}: its {differs[0]} is another; "
                            f"give a folder made by `mlm-tpu train --task mlm --model-name-or-path {folder}`")
        variants.append(Variant(model_label(continued), "reference_continued", {"model_name_or_path": continued},
                                continued, model_source(continued), rate))
    return variants


def model_source(model: str) -> str:
    """What a model's label stands for in downstream.json: its folder's absolute path, or its Hub name."""
    return os.path.abspath(model) if os.path.isdir(model) else model


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
    """What every run in an output folder must share to be compared: the protocol, the classifier's pooling, the rows
    and the RULES; every result file records it too."""
    return {"protocol": to_dict(config.protocol), "classifier_pooling": config.classifier_pooling or DEFAULT_POOLING,
            "max_train_samples": config.max_train_samples, "max_eval_samples": config.max_eval_samples, **RULES}


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
        raise UserError(f"--output-dir {folder} holds runs of an earlier mlm_tpu, which {earlier_rules(recorded)}; "
                        "its scores are not comparable with new ones: choose another --output-dir")
    if recorded and recorded.get("fixed") != fixed:
        changed = sorted(key for key in fixed if recorded.get("fixed", {}).get(key) != fixed[key])
        raise UserError(f"--output-dir {folder} holds runs made with other settings ({', '.join(changed)}: "
                        f"{json.dumps({key: recorded.get('fixed', {}).get(key) for key in changed})}); runs are "
                        "compared under one protocol: choose another --output-dir, or give the same settings")
    labels = [variant.label for variant in variants]
    twice = next((label for label in labels if labels.count(label) > 1), None)
    if twice:
        raise UserError(f"two models would share the run folders {twice} (named after each model's folder): give "
                        "one of them a folder of another name")
    models = dict(recorded.get("models", {}))
    for variant in variants:
        if variant.source:
            if models.get(variant.label, variant.source) != variant.source:
                raise UserError(f"--output-dir {folder} holds runs of another model called {variant.label} "
                                f"({models[variant.label]}); choose another --output-dir")
            models[variant.label] = variant.source
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
    return not broken_rules(recorded)


def broken_rules(recorded: dict) -> List[str]:
    """The RULES a folder's downstream.json says its data and runs were not made by."""
    return [key for key, value in RULES.items() if recorded.get("fixed", {}).get(key) != value]


def earlier_rules(recorded: dict) -> str:
    """What an earlier mlm_tpu did otherwise in a folder, in words."""
    broken = broken_rules(recorded)
    otherwise = [EARLIER[key] for key in ("dev_carve", "best_epoch") if key in broken]
    said = [" and ".join(otherwise) + " otherwise"] if otherwise else []
    return ", and ".join(said + [EARLIER[key] for key in broken if key not in ("dev_carve", "best_epoch")])


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


def prepare_text(config: DownstreamConfig, task: DownstreamTask, tokenizer) -> TaskText:
    """The task's rows (capped) and, written once in data/<task>/<text>/, the same rows cut to the whole words the
    model's `tokenizer` keeps at the protocol's length (words.py): the text every model reads."""
    from mlm_tpu.downstream.floor import read_rows
    from mlm_tpu.downstream.words import kept_words

    train, validation = task.sources(os.path.join(config.output_dir, "data"))
    sources = (dataclasses.replace(train, limit=config.max_train_samples),
               dataclasses.replace(validation, limit=config.max_eval_samples))
    name = f"words-{cut_key(cut_of(tokenizer, config.protocol.max_length))}-{rows_key(config)}"
    folder = os.path.join(config.output_dir, "data", task.name, name)
    columns = task_columns(task)
    read = []
    for source, split in zip(sources, ("train", "validation")):
        path = os.path.join(folder, f"{split}.jsonl")
        if not os.path.isfile(path):
            log(f"{task.name}'s {split} rows cut to the words the model's tokenizer keeps in "
                f"{config.protocol.max_length} tokens: the text every model reads (once)")
            texts, labels = read_rows(source, columns)
            *kept, _ = kept_words(tokenizer, config.protocol.max_length, *texts)
            rows = [dict(zip(columns, values)) for values in zip(*[side for side in kept if side is not None], labels)]
            os.makedirs(folder, exist_ok=True)
            write_file(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode())
        read.append(CorpusSource(text_files=(path,)))
    return TaskText(name, sources, tuple(read))


def check_has_rows(task: DownstreamTask) -> None:
    """Each of the user's task files holds a row (a dev file may be its header alone): said before the benchmark
    writes its settings, which would refuse the corrected command as one of other settings."""
    if task.builtin or task.dataset:  # the package's rows, a dataset's (check_available loaded it)
        return
    for source in task.sources(data_dir=""):  # the user's own files, read where they are
        next(Corpus(source).records(task_columns(task), as_text=False), None)


def task_columns(task: DownstreamTask) -> Tuple[str, ...]:
    """A task's text columns (its text, and pair if any), then its label's."""
    return (task.input_column, *([task.pair_column] if task.pair_column else []), task.target_column)


def rows_key(config: DownstreamConfig) -> str:
    """What names the rows a benchmark reads of each task: all, or its caps."""
    caps = [f"{what}{cap}" for what, cap in (("first", config.max_train_samples), ("dev", config.max_eval_samples))
            if cap]
    return "-".join(caps) or "all"


def prepare_task(config: DownstreamConfig, task: DownstreamTask, text: TaskText, tokenizer_source: str,
                 tokenizer) -> PreparedTask:
    """The task's text sharded with this tokenizer (loaded from `tokenizer_source`) at the protocol's length (made
    once, then reused), its sizes and metrics, and the words of a row it reads."""
    from mlm_tpu.downstream.floor import both, read_rows
    from mlm_tpu.downstream.words import kept_words, words_per_row
    from mlm_tpu.shards.config import ShardingConfig
    from mlm_tpu.shards.sharding import shard_corpus
    from mlm_tpu.tasks import shard_kinds

    root = os.path.join(config.output_dir, "shards", task.name, text.name,
                        cut_key(cut_of(tokenizer, config.protocol.max_length)))
    folders = []
    for source, name in zip(text.read, ("train", "validation")):
        folder = os.path.join(root, name)
        if not os.path.isfile(os.path.join(folder, MANIFEST)):
            whose = "the model's" if tokenizer_source == config.model else f"{model_label(tokenizer_source)}'s"
            log(f"Sharding {task.name}'s {name} rows with {whose} tokenizer (once; every run reuses them)")
            shard_corpus(from_keywords(ShardingConfig, dict(
                tokenizer=tokenizer_source, output_dir=root, task="sequence-classification",
                text_files=source.text_files, split=name, input_columns=(task.input_column,),
                pair_column=task.pair_column, target_column=task.target_column, problem_type=task.problem_type,
                max_length=config.protocol.max_length)), shard_kinds())
        folders.append(folder)
    manifests = [read_json(os.path.join(folder, MANIFEST), "a shard manifest", "delete the folder and run again")
                 for folder in folders]
    regression = manifests[0]["settings"].get("problem_type") == REGRESSION
    sides = [kept_words(tokenizer, config.protocol.max_length, *read_rows(source, task_columns(task))[0])[:2]
             for source in text.read]  # what this tokenizer keeps of the text: all of it, for the model's
    words = words_per_row(*both(*sides))
    return PreparedTask(task, folders[0], folders[1], manifests[0]["records"], manifests[1]["records"],
                        task.scored_by(regression), text.sources, regression, words)


def cut_of(tokenizer, max_length: int) -> dict:
    """Where texts are cut: by which tokenizer, at how many tokens (the shards', and the TF-IDF floor's)."""
    from mlm_tpu.tokenizer.load import tokenizer_fingerprint

    return {"tokenizer": tokenizer_fingerprint(tokenizer), "max_length": max_length}


def cut_key(where: dict) -> str:
    """What names the files made for one cut."""
    return f"{where['tokenizer']}-len{where['max_length']}"


def run_all(config: DownstreamConfig, runs: List[Run]) -> Dict[Tuple[str, str, int], FineTuningResult]:
    """Every run's result: read back when finished earlier, else fine-tuned now; progress and an ETA as they go."""
    results = {}
    took: Dict[str, List[float]] = {}  # task -> seconds of each of its runs finished, now or earlier
    examples = {run.task.task.name: run.task.train_examples for run in runs}
    for number, run in enumerate(runs, start=1):
        done = read_run(config, run)
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
        score = _describe_score(run.task.metrics, run_score(result.scores, run.task.metrics))
        log(f"{where}: {score} ({kept_epoch_words(result.kept, result.best_epoch)}; {said}); " +
            (f"{left} run{'s' * (left != 1)} left{_eta(runs[number:], took, examples)}" if left else "all runs done"))
    return results


def read_run(config: DownstreamConfig, run: Run) -> Optional[dict]:
    """A finished run's record (written once its training ended), or None; one made under other settings (protocol,
    pooling, rows) is refused, never mixed in."""
    if not os.path.isfile(run.record):
        return None
    done = read_json(run.record, "a finished run's record", "delete it to run that seed again")
    if done.get("fixed") != fixed_settings(config):
        raise UserError(f"{run.record} records a run made under other settings than this benchmark's (protocol, "
                        "classifier pooling or rows); delete it to run that seed again, or choose another --output-dir")
    if done.get("protocol_overrides", {}) != run.variant.protocol_overrides:
        raise UserError(f"{run.record} records a reference run fine-tuned at another learning rate "
                        f"({done.get('protocol_overrides', {}).get('learning_rate', 'the protocol')}'s) than "
                        "--reference-learning-rate; delete it to run that seed again, or give the same rate")
    result = FineTuningResult(run.folder, done["task"], done["seed"], done["scores"], done["kept_epoch"],
                              done["metric"], done["epochs"], done["kept"])
    return {"result": result, "seconds": done["seconds"]}


def fine_tune_run(config: DownstreamConfig, run: Run) -> dict:
    """Fine-tune one run in this process (resuming its backup if it has one) and record its result beside it."""
    import tf_keras as keras

    from mlm_tpu.downstream.fine_tune import fine_tune

    protocol = config.protocol
    if protocol.optimistic and not protocol.metric_for_best_model:  # the task's score picks the epoch it reports
        protocol = protocol.with_overrides(metric_for_best_model=",".join(run.task.metrics))
    protocol = protocol.with_overrides(**run.variant.protocol_overrides)
    started, cpu_started = time.perf_counter(), time.process_time()
    pooling = {"classifier_pooling": config.classifier_pooling} if config.classifier_pooling else {}  # every row's
    level = logger.level
    if not config.verbose:
        logger.setLevel(logging.WARNING)  # the benchmark's lines, not each run's
    try:
        result = fine_tune(run.task.train, run.task.validation, run.folder, seed=run.seed, protocol=protocol,
                           hardware=to_dict(config.hardware), **pooling, **run.variant.settings)
    finally:
        logger.setLevel(level)
        keras.backend.clear_session()  # the next run builds its model afresh, in the memory this one held
        gc.collect()
    seconds = time.perf_counter() - started
    os.makedirs(os.path.dirname(run.record), exist_ok=True)
    write_json(run.record, {"task": run.task.task.name, "model": run.variant.label, "seed": run.seed,
                            "scores": result.scores, "kept": result.kept, "kept_epoch": result.best_epoch,
                            "chosen_on": "validation" if result.kept == "best" else None, "metric": result.metric,
                            "classifier_pooling": config.classifier_pooling or DEFAULT_POOLING,
                            "words_per_row": run.task.words_per_row,
                            # each epoch's training figures and its dev scores (`validation`)
                            "epochs": [{key: value for key, value in epoch.items() if key != "saved"}
                                       for epoch in result.epochs],
                            "seconds": seconds, "cpu_seconds": time.process_time() - cpu_started,
                            "fixed": fixed_settings(config), "protocol_overrides": run.variant.protocol_overrides})
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


def tfidf_result(config: DownstreamConfig, task: PreparedTask, tokenizer) -> dict:
    """The TF-IDF floor on the texts as the model reads them (floor.py), computed once per task and cut and kept in
    runs/<task>/tfidf-<cut>.json with its cut: a floor of another cut (another tokenizer or length) is never read."""
    from mlm_tpu.downstream.floor import tfidf_floor

    where = cut_of(tokenizer, config.protocol.max_length)
    path = os.path.join(config.output_dir, "runs", task.task.name, f"tfidf-{cut_key(where)}.json")
    if os.path.isfile(path):
        return read_json(path, "the TF-IDF floor's record", "delete it to compute it again")
    log(f"{task.task.name}: TF-IDF + logistic regression on the same rows, reading the same words as the models (the "
        "floor)")
    floor = tfidf_floor(*task.sources, task.task.input_column, task.task.pair_column, task.task.target_column,
                        task.regression, tokenizer, config.protocol.max_length)
    floor = {"task": task.task.name, "cut": where, **floor, "fixed": fixed_settings(config)}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_json(path, floor)
    return floor


def make_report(config: DownstreamConfig, prepared: List[PreparedTask], variants: List[Variant],
                results: Dict[Tuple[str, str, int], FineTuningResult], floors: Dict[str, dict],
                words: Dict[Tuple[str, str], float]) -> dict:
    """The report (results.json, --json; report.py): per task and model, the median and spread of its score and of
    each metric over the seeds, and the words of a row it read (`words`: by task and tokenizer); the mean of the
    medians over tasks."""
    seeds = list(range(1, config.seeds + 1))
    tasks = {}
    for task in prepared:
        name = task.task.name
        runs = {variant.role: (variant.label, [results[(name, variant.label, seed)].scores for seed in seeds],
                               [results[(name, variant.label, seed)].best_epoch for seed in seeds],
                               words[(name, variant.tokenizer)])
                for variant in variants}
        tasks[name] = task_entry(task.metrics, runs, floors.get(name, {}), train_examples=task.train_examples,
                                 dev_examples=task.dev_examples, about=task.task.about,
                                 folder=os.path.join(config.output_dir, "runs", name))
    about = {"reference": reference.ABOUT} if "reference" in config.baseline else {}
    if about and config.reference_learning_rate:
        about["reference_learning_rate"] = config.reference_learning_rate
    return with_mean({"model": config.model, "seeds": seeds, "spread": SPREAD, "protocol": to_dict(config.protocol),
                      "epoch_reported": kept_epoch_words(config.protocol.keep_epoch),
                      "optimistic": config.protocol.optimistic,
                      "classifier_pooling": config.classifier_pooling or DEFAULT_POOLING,
                      "max_train_samples": config.max_train_samples, "max_eval_samples": config.max_eval_samples,
                      **about, "tasks": tasks})
