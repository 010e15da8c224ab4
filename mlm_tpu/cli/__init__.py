"""The command-line layer: argparse only. Each module parses one command's flags into its typed config
and calls the library; flags.py holds the helpers and flag groups several commands share."""

import sys
from typing import Callable, Optional, Sequence

from mlm_tpu.errors import STOPPED_EXIT_CODE, Stopped, UserError

USER_ERROR_EXIT_CODE = 2


def run_command(main: Callable[[Optional[Sequence[str]]], None], argv: Optional[Sequence[str]] = None) -> None:
    """Run a command's `main`; a `UserError` becomes one `error:` line on stderr and exit code 2, a `Stopped` run
    one `stopped:` line and exit code 42, Ctrl-C one `interrupted:` line (an `Interrupted`'s message) and 130."""
    try:
        main(argv)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(USER_ERROR_EXIT_CODE)
    except Stopped as stopped:
        print(f"stopped: {stopped}", file=sys.stderr)
        sys.exit(STOPPED_EXIT_CODE)
    except KeyboardInterrupt as interrupted:
        print(f"interrupted: {interrupted or 'nothing was left half-written'}", file=sys.stderr)
        sys.exit(130)
