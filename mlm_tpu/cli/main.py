"""`mlm-tpu COMMAND ...` (and `python -m mlm_tpu COMMAND ...`): every command under one name.

The same commands keep their 🤗-example-style spellings: `python -m mlm_tpu.tokenizer`,
`python -m mlm_tpu.shard`, `python train.py`, `python -m mlm_tpu.evaluate`, `python -m mlm_tpu.predict`,
`python -m mlm_tpu.inspect`, `python -m mlm_tpu.loss_plot`, `python -m mlm_tpu.export`, `python -m mlm_tpu.demo`,
`python -m mlm_tpu.launch`, `python -m mlm_tpu.downstream`; each takes the same flags
either way.
"""

import argparse
import difflib
import importlib
import sys
from types import ModuleType
from typing import Dict, Optional, Sequence

from mlm_tpu.cli import run_command
from mlm_tpu.errors import UserError

# command -> (module in mlm_tpu.cli, what it does). Each module has `main(argv, prog)` and `build_parser(prog)`, the
# parser its --help prints; argparse sub-commands, and a module's MODES (first arguments it dispatches by hand, each
# (parser, run)), have a --help of their own. The docs make a page of each (`help_parsers`).
COMMANDS = {
    "tokenizer": ("tokenizer", "train a tokenizer (Unigram, byte-level BPE, WordPiece), or see how one encodes text"),
    "shard": ("shard", "cut a corpus into count-named TFRecord shards (local or gs://)"),
    "train": ("train", "train a model on shards (TPU, GPUs or CPU); a killed run resumes"),
    "launch": ("launch", "run train as N worker processes on this machine (multi-worker, locally)"),
    "evaluate": ("evaluate", "score a trained model on shards"),
    "predict": ("predict", "fill masks, or run a T5 model, an encoder classifier or a tagger on text"),
    "inspect": ("inspect_shards", "show a split's first examples as the model receives them"),
    "plot": ("plot", "plot a run's training and validation loss"),
    "export": ("export", "add PyTorch weights and a model card to a TensorFlow model folder, push it"),
    "downstream": ("downstream", "judge a pretrained encoder: fine-tune it per task and seed, report medians"),
    "demo": ("demo", "the whole pipeline on a built-in corpus, offline"),
}


def command_module(command: str) -> ModuleType:
    return importlib.import_module(f"mlm_tpu.cli.{COMMANDS[command][0]}")


def command_main(command: str):
    return command_module(command).main


def listing() -> str:
    """What `mlm-tpu --help` prints: the commands and what each does."""
    commands = "\n".join(f"  {name:<10} {words}" for name, (_, words) in COMMANDS.items())
    return f"usage: mlm-tpu COMMAND [flags]   (mlm-tpu COMMAND --help for its flags)\n\ncommands:\n{commands}"


def help_parsers() -> Dict[str, argparse.ArgumentParser]:
    """Every command line with a --help of its own ("train", "tokenizer train", "predict text2text", ...) and the
    parser that prints it, in the order of COMMANDS: what the docs' command pages are generated from."""
    parsers: Dict[str, argparse.ArgumentParser] = {}

    def add(line: str, parser: argparse.ArgumentParser) -> None:
        parsers[line] = parser
        for action in parser._actions:  # argparse keeps sub-commands nowhere public
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    add(f"{line} {name}", sub)

    for command in COMMANDS:
        module, prog = command_module(command), f"mlm-tpu {command}"
        add(command, module.build_parser(prog))
        for mode, (mode_parser, _) in getattr(module, "MODES", {}).items():
            if mode != module.DEFAULT_MODE:  # the default mode's --help is the command's
                add(f"{command} {mode}", mode_parser(prog))
    return parsers


def run_as_main(module_name: str, command: str) -> None:
    """What `python -m mlm_tpu.<command>` runs (called by those modules with their __name__)."""
    if module_name == "__main__":
        run_command(command_main(command))


def main(argv: Optional[Sequence[str]] = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    asked_for_help = arguments[:1] in (["-h"], ["--help"])
    if asked_for_help or not arguments or arguments[0] not in COMMANDS:
        print(listing(), file=sys.stdout if asked_for_help else sys.stderr)
        if not asked_for_help:
            raise UserError(_what_is_wrong(arguments))
        return
    command = arguments.pop(0)
    command_main(command)(arguments, prog=f"mlm-tpu {command}")


def _what_is_wrong(arguments: Sequence[str]) -> str:
    if not arguments:
        return "no command given; name one of the commands above, e.g. `mlm-tpu train --help`"
    if arguments[0].startswith("-"):
        return f"'{arguments[0]}' is a flag, and flags go after the command: mlm-tpu COMMAND {arguments[0]}"
    close = difflib.get_close_matches(arguments[0], COMMANDS, n=1)
    guess = f"; did you mean '{close[0]}'?" if close else f"; it is one of {', '.join(COMMANDS)}"
    return f"unknown command '{arguments[0]}'{guess}"


def console_main() -> None:
    """The `mlm-tpu` console script."""
    run_command(main)
