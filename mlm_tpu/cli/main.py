"""`mlm-tpu COMMAND ...` (and `python -m mlm_tpu COMMAND ...`): every command under one name.

The same commands keep their 🤗-example-style spellings: `python -m mlm_tpu.tokenizer`,
`python -m mlm_tpu.shard`, `python train.py`, `python -m mlm_tpu.evaluate`, `python -m mlm_tpu.predict`,
`python -m mlm_tpu.inspect`, `python -m mlm_tpu.loss_plot`, `python -m mlm_tpu.export`, `python -m mlm_tpu.demo`,
`python -m mlm_tpu.launch`; each takes the same flags
either way.
"""

import importlib
import sys
from typing import Optional, Sequence

from mlm_tpu.cli import run_command

COMMANDS = {  # command -> (module in mlm_tpu.cli, what it does)
    "tokenizer": ("tokenizer", "train a Unigram tokenizer, or see how one encodes text"),
    "shard": ("shard", "cut a corpus into count-named TFRecord shards (local or gs://)"),
    "train": ("train", "train a model on shards (TPU, GPUs or CPU); a killed run resumes"),
    "launch": ("launch", "run train as N worker processes on this machine (multi-worker, locally)"),
    "evaluate": ("evaluate", "score a trained model on shards"),
    "predict": ("predict", "fill masks, or run a T5 model on text"),
    "inspect": ("inspect_shards", "show a split's first examples as the model receives them"),
    "plot": ("plot", "plot a run's training and validation loss"),
    "export": ("export", "add PyTorch weights and a model card to a TensorFlow model folder, push it"),
    "demo": ("demo", "the whole pipeline on a built-in corpus, offline"),
}


def command_main(command: str):
    return importlib.import_module(f"mlm_tpu.cli.{COMMANDS[command][0]}").main


def run_as_main(module_name: str, command: str) -> None:
    """What `python -m mlm_tpu.<command>` runs (called by those modules with their __name__)."""
    if module_name == "__main__":
        run_command(command_main(command))


def main(argv: Optional[Sequence[str]] = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in ("-h", "--help") or arguments[0] not in COMMANDS:
        listing = "\n".join(f"  {name:<10} {words}" for name, (_, words) in COMMANDS.items())
        print(f"usage: mlm-tpu COMMAND [flags]   (mlm-tpu COMMAND --help for its flags)\n\ncommands:\n{listing}",
              file=sys.stdout if arguments[:1] in (["-h"], ["--help"]) else sys.stderr)
        if arguments[:1] not in (["-h"], ["--help"]):
            sys.exit(2)
        return
    command = arguments.pop(0)
    command_main(command)(arguments, prog=f"mlm-tpu {command}")


def console_main() -> None:
    """The `mlm-tpu` console script."""
    run_command(main)
