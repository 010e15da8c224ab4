"""`mlm-tpu launch --workers N [--port P] -- train <train flags>` (also `python -m mlm_tpu.launch`): one training run
as N worker processes on this machine, each with its TF_CONFIG, under MultiWorkerMirroredStrategy.

It is how to try multi-worker training without a cluster: the run is the one a cluster of N machines would make
(same data order, same weights up to the order of floating-point sums; see the README), only slower here, as every
worker shares this machine. Each output line is prefixed with its worker's index; Ctrl-C, SIGTERM and SIGHUP (a
closed terminal) go to every worker, which save a backup at the same step and stop, as they do if the launcher is
killed; if a worker fails, the others stop with it, and the launcher's one line is that worker's own error. On a real
cluster, start `python train.py <flags>` on every machine with its own TF_CONFIG instead.
"""

import argparse
import sys
from typing import Optional, Sequence

from mlm_tpu.cli.flags import add_flag
from mlm_tpu.errors import UserError
from mlm_tpu.training.local_cluster import launch

COMMANDS = ("train",)


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     usage=f"{prog} --workers N [--port P] -- train <train flags>")
    add_flag(parser, "--workers", type=int, required=True, metavar="N", help="Worker processes to start (required).")
    add_flag(parser, "--port", type=int, default=None, metavar="P",
             help="The workers listen on ports P, P+1, ... P+N-1 of localhost (default: free ports the system picks).")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="After --: the command every worker runs, `train` and its flags (see `mlm-tpu train "
                             "--help`).")
    return parser


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.launch") -> None:
    args = build_parser(prog).parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or command[0] not in COMMANDS:
        raise UserError(f"give the command after --, e.g. `{prog} --workers 2 -- train --train-dataset ...`; only "
                        "train runs on several workers")
    if args.workers < 1:
        raise UserError(f"--workers must be at least 1, not {args.workers}")
    if args.port is not None and not 0 < args.port < 65536:
        raise UserError(f"--port must be between 1 and 65535, not {args.port}")
    sys.exit(launch([sys.executable, "-m", "mlm_tpu", *command], args.workers, args.port))
