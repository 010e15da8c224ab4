"""Where the predict commands' texts come from: the arguments, else one per line on stdin."""

import sys
from typing import List

from mlm_tpu.errors import UserError


def read_texts(arguments: List[str], what: str) -> List[str]:
    """The non-empty texts given as arguments, else the non-empty lines of stdin; `what` says what to pass."""
    texts = arguments if arguments else ([] if sys.stdin.isatty() else sys.stdin.read().splitlines())
    texts = [text.strip() for text in texts if text.strip()]
    if not texts:
        raise UserError(f"no input: pass {what} as arguments or one per line on stdin")
    return texts
