"""Helpers every command-line entry point shares: flag spelling and error reporting."""

import argparse
import sys
from typing import Callable, Optional, Sequence

from mlm_tpu.errors import UserError

USER_ERROR_EXIT_CODE = 2


def add_flag(parser: argparse.ArgumentParser, name: str, *more_names: str, **kwargs) -> argparse.Action:
    """Add `--some-flag`, also accepting the 🤗 example scripts' spelling `--some_flag`."""
    names = [name, *more_names]
    underscored = ["--" + n[2:].replace("-", "_") for n in names if n.startswith("--") and "-" in n[2:]]
    kwargs.setdefault("dest", name.lstrip("-").replace("-", "_"))
    return parser.add_argument(*names, *[u for u in underscored if u not in names], **kwargs)


def log(message: str) -> None:
    """A progress line for the user, on stderr (stdout is for results)."""
    print(message, file=sys.stderr, flush=True)


def run_command(main: Callable[[Optional[Sequence[str]]], None], argv: Optional[Sequence[str]] = None) -> None:
    """Run a command's `main`; a `UserError` becomes one `error:` line on stderr and exit code 2."""
    try:
        main(argv)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(USER_ERROR_EXIT_CODE)
    except KeyboardInterrupt:
        print("interrupted: nothing was left half-written", file=sys.stderr)
        sys.exit(130)
