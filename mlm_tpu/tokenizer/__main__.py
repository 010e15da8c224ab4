"""`python -m mlm_tpu.tokenizer {train,encode}`."""

import argparse
from typing import Optional, Sequence

from mlm_tpu.cli import run_command
from mlm_tpu.tokenizer import encode, train


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mlm_tpu.tokenizer",
                                     description="Train a Unigram tokenizer, or look at how one encodes text.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{train,encode}")
    for name, module, run in (("train", train, train.train), ("encode", encode, encode.encode)):
        sub = commands.add_parser(name, help=module.__doc__.splitlines()[0], description=module.__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
        sub.set_defaults(run=run)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    run_command(main)
