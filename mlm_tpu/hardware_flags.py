"""The flags that say where a command runs (TPU, GPUs, CPU replicas) and in what precision.

Shared by the trainer and the evaluator so both run under the same strategies, spelled alike.
"""

import argparse

from mlm_tpu.cli import add_flag


def add_hardware_flags(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Add --tpu, --tpu-zone, --gcp-project, --bf16 and --cpu-replicas in a "hardware" group."""
    hardware = parser.add_argument_group("hardware")
    add_flag(hardware, "--tpu", "--tpu-name", nargs="?", const="local", default=None, metavar="NAME",
             help="Run on a TPU: bare --tpu is this TPU VM (or Colab's TPU), NAME a TPU node. Without it: "
                  "every GPU if there are any, else the CPU.")
    add_flag(hardware, "--tpu-zone", default=None, help="Zone of the TPU node NAME.")
    add_flag(hardware, "--gcp-project", default=None, help="Google Cloud project of the TPU node NAME.")
    add_flag(hardware, "--bf16", "--bfloat16", action=argparse.BooleanOptionalAction, default=None,
             help="bfloat16 mixed precision (default: on with --tpu, off otherwise).")
    add_flag(hardware, "--cpu-replicas", type=int, default=1,
             help="Split the CPU into N replicas under MirroredStrategy (to try the multi-replica path "
                  "without accelerators; default: 1).")
    return hardware


def wants_bf16(args: argparse.Namespace) -> bool:
    """--bf16 as given, else on exactly when running on a TPU."""
    return args.bf16 if args.bf16 is not None else args.tpu is not None
