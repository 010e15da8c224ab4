"""`python -m mlm_tpu.demo`: the whole pipeline on the built-in offline corpus, step by step.

Today's steps: train a Unigram tokenizer on the standard library's help pages, show how it
encodes a few sentences, and cut the train and validation splits into TFRecord shards. Each
later stage (training, fill-mask) adds its step here.
"""

import argparse
import os
import time
from typing import Optional, Sequence

from mlm_tpu.cli import add_flag, run_command
from mlm_tpu.shard import main as shard_command
from mlm_tpu.tokenizer.__main__ import main as tokenizer_command

SAMPLE_SENTENCES = [
    "The assert statement is a convenient way to insert debugging assertions into a program.",
    "A for loop iterates over the items of any sequence, such as a list or a string.",
    "Exceptions are raised when an error is detected during execution.",
]


def step(number: int, text: str) -> None:
    print(f"\n=== Step {number}: {text}", flush=True)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mlm_tpu.demo", description=__doc__)
    add_flag(parser, "--output-dir", default="runs/demo", help="Where the demo writes everything (default: runs/demo).")
    add_flag(parser, "--vocab-size", type=int, default=4096, help="Tokenizer vocabulary (default: 4096).")
    add_flag(parser, "--max-length", type=int, default=128, help="Tokens per training example (default: 128).")
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

    print(f"Demo finished in {time.perf_counter() - started:.0f} s. Everything is under {args.output_dir}/")


if __name__ == "__main__":
    run_command(main)
