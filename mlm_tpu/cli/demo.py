"""`python -m mlm_tpu.demo` (also `mlm-tpu demo`): the whole pipeline on the built-in offline corpus, step by step.

Train a Unigram tokenizer on the standard library's help pages, show how it encodes a few
sentences, cut the train and validation splits into TFRecord shards, train a tiny RoBERTa on the
CPU for about 2.5 minutes (configs/demo.yaml), evaluate it, fill masks with it, and plot its loss.
Each step calls the same code as the command it names, with the same flags, in this one process.
"""

import argparse
import os
import shutil
import time
from pathlib import Path
from typing import Optional, Sequence

from mlm_tpu.cli.evaluate import main as evaluate_command
from mlm_tpu.cli.flags import add_flag
from mlm_tpu.cli.plot import main as loss_plot_command
from mlm_tpu.cli.predict import main as predict_command
from mlm_tpu.cli.shard import main as shard_command
from mlm_tpu.cli.tokenizer import main as tokenizer_command
from mlm_tpu.cli.train import main as train_command

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


def step(number: int, text: str) -> None:
    print(f"\n=== Step {number}: {text}", flush=True)


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.demo") -> None:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "--output-dir", default="runs/demo", help="Where the demo writes everything (default: runs/demo).")
    add_flag(parser, "--vocab-size", type=int, default=2048, help="Tokenizer vocabulary (default: 2048).")
    add_flag(parser, "--max-length", type=int, default=64, help="Tokens per training example (default: 64).")
    add_flag(parser, "--num-epochs", type=int, default=None,
             help=f"Passes over the ~1,600 training examples (default: the config's, {DEMO_CONFIG.name}: 60, about "
                  "2.5 minutes on 2 cores).")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    tokenizer_dir = os.path.join(args.output_dir, "tokenizer")
    shards_dir = os.path.join(args.output_dir, "shards")

    step(1, f"train a Unigram tokenizer on the built-in corpus 'pydoc-topics' -> {tokenizer_dir}")
    tokenizer_command(["train", "--builtin-corpus", "pydoc-topics", "--vocab-size", str(args.vocab_size),
                       "--output-dir", tokenizer_dir, "--overwrite"])

    step(2, "encode a few sentences with it (pieces, ids, and the text decoded back)")
    tokenizer_command(["encode", "--tokenizer", tokenizer_dir, *SAMPLE_SENTENCES])

    for number, split in ((3, "train"), (4, "validation")):
        step(number, f"cut the {split} split into {args.max_length}-token examples in TFRecord shards "
                     f"-> {shards_dir}/{split}/")
        shard_command(["--tokenizer", tokenizer_dir, "--builtin-corpus", "pydoc-topics", "--split", split,
                       "--max-length", str(args.max_length), "--shard-size", "512", "--output-dir", shards_dir,
                       "--overwrite"])

    model_dir = os.path.join(args.output_dir, "model")
    if os.path.isdir(model_dir):
        shutil.rmtree(model_dir)  # a fresh run, not a resumed one with two runs' logs mixed
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
    loss_plot_command([model_dir])

    print(f"Demo finished in {time.perf_counter() - started:.0f} s. Everything is under {args.output_dir}/")
