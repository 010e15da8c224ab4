"""`python -m mlm_tpu.demo`: the whole pipeline on the built-in offline corpus, step by step.

Train a Unigram tokenizer on the standard library's help pages, show how it encodes a few
sentences, cut the train and validation splits into TFRecord shards, train a tiny RoBERTa on
the CPU for a few minutes, evaluate it, fill masks with it, and plot its loss. Each step calls
the same code as the command it names, in this one process.
"""

import argparse
import os
import shutil
import time
from typing import Optional, Sequence

from mlm_tpu.cli.evaluate import main as evaluate_command
from mlm_tpu.cli.flags import add_flag
from mlm_tpu.cli.plot import main as loss_plot_command
from mlm_tpu.cli.predict import main as predict_command
from mlm_tpu.cli.shard import main as shard_command
from mlm_tpu.cli.tokenizer import main as tokenizer_command
from mlm_tpu.cli.train import main as train_command

SAMPLE_SENTENCES = [
    "The assert statement is a convenient way to insert debugging assertions into a program.",
    "A for loop iterates over the items of any sequence, such as a list or a string.",
    "Exceptions are raised when an error is detected during execution.",
]
MASKED_SENTENCES = [
    "The [MASK] statement is used to raise an exception.",
    "A for loop iterates over the items of a <mask>.",
    "If the [MASK] is true, the first suite is executed.",
]


def step(number: int, text: str) -> None:
    print(f"\n=== Step {number}: {text}", flush=True)


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.demo") -> None:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    add_flag(parser, "--output-dir", default="runs/demo", help="Where the demo writes everything (default: runs/demo).")
    add_flag(parser, "--vocab-size", type=int, default=4096, help="Tokenizer vocabulary (default: 4096).")
    add_flag(parser, "--max-length", type=int, default=128, help="Tokens per training example (default: 128).")
    add_flag(parser, "--num-epochs", type=int, default=40,
             help="Passes over the ~700 training examples (default: 40, about 3 minutes on 2 cores).")
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
                       "--max-length", str(args.max_length), "--shard-size", "256", "--output-dir", shards_dir,
                       "--overwrite"])

    model_dir = os.path.join(args.output_dir, "model")
    if os.path.isdir(model_dir):
        shutil.rmtree(model_dir)  # a fresh run, not a resumed one with two runs' logs mixed
    step(5, f"train a tiny RoBERTa on the CPU for {args.num_epochs} epochs (a few minutes) -> {model_dir}")
    train_command(["--train-dataset", f"{shards_dir}/train", "--eval-dataset", f"{shards_dir}/validation",
                   "--tokenizer", tokenizer_dir, "--max-length", str(args.max_length), "--model-config", "tiny",
                   "--per-replica-batch-size", "16", "--num-epochs", str(args.num_epochs), "--learning-rate", "3e-3",
                   "--logging-steps", "10", "--output-dir", model_dir])

    step(6, "evaluate it on the validation shards (masked-LM loss, perplexity, masked-token accuracy)")
    evaluate_command(["--model", model_dir, "--eval-dataset", f"{shards_dir}/validation",
                      "--per-replica-batch-size", "16"])

    step(7, "fill masks with it (the fill-mask pipeline; a tiny model after minutes guesses common words)")
    predict_command(["--model", model_dir, "--top-k", "3", *MASKED_SENTENCES])

    step(8, "plot training and validation loss against steps, from the TensorBoard logs")
    loss_plot_command([model_dir])

    print(f"Demo finished in {time.perf_counter() - started:.0f} s. Everything is under {args.output_dir}/")

