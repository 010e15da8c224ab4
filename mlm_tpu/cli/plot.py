"""`python -m mlm_tpu.loss_plot RUN_DIR` (also `mlm-tpu plot`): training and validation loss against steps."""

import argparse
import os
from typing import Optional, Sequence

from mlm_tpu.cli.flags import add_flag, add_verbose_flag
from mlm_tpu.console import import_tensorflow
from mlm_tpu.model_folder.card import LOSS_PLOT
from mlm_tpu.training import loss_plot


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=loss_plot.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", metavar="RUN_DIR", help="The --output-dir of a `python train.py` run.")
    add_flag(parser, "--output", default=None,
             help="Where to write the PNG (default: RUN_DIR/loss.png, the run's own plot, which the trainer draws at "
                  "its end and this command redraws). A file already elsewhere is refused, unless --overwrite.")
    add_flag(parser, "--overwrite", action="store_true",
             help="Replace a plot mlm_tpu drew at --output before. A file mlm_tpu did not write (or that was changed "
                  "since) is never replaced, even so.")
    add_verbose_flag(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.loss_plot") -> None:
    args = build_parser(prog).parse_args(argv)
    import_tensorflow(args.verbose)  # TensorBoard's log reader loads it
    output = args.output or os.path.join(args.run_dir, LOSS_PLOT)
    training, validation = loss_plot.plot_losses(args.run_dir, output, args.overwrite)
    print(f"Loss plot ({training} training and {validation} validation points) written to {output}")
