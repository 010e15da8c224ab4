"""Where the commands that take texts (encode, predict) get them: the arguments, else one per line on stdin."""

import sys
from typing import List

from mlm_tpu.errors import UserError


def read_texts(arguments: List[str], what: str) -> List[str]:
    """The non-empty texts given as arguments, else the non-empty lines of stdin; `what` says what to pass."""
    if arguments:
        texts = arguments
    elif sys.stdin.isatty():
        texts = []
    else:
        data = sys.stdin.buffer.read()
        try:
            texts = data.decode("utf-8").splitlines()
        except UnicodeDecodeError as error:
            raise UserError(f"stdin is not UTF-8 text (bad byte at offset {error.start}); convert it to UTF-8, "
                            "e.g. with `iconv -t UTF-8`") from None
    texts = [text.strip() for text in texts if text.strip()]
    if not texts:
        raise UserError(f"no input: pass {what} as arguments or one per line on stdin")
    return texts
