"""`python -m mlm_tpu.predict [TASK] ...`: fill-mask (the default) or text2text (T5)."""

import sys
from typing import Optional, Sequence

from mlm_tpu.cli import run_command
from mlm_tpu.predict import fill_mask, text2text

TASKS = {"fill-mask": fill_mask.main, "text2text": text2text.main}
DEFAULT_TASK = "fill-mask"


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Run the task named by the first argument, or fill-mask when the first argument names none."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    task = arguments.pop(0) if arguments and arguments[0] in TASKS else DEFAULT_TASK
    TASKS[task](arguments)


if __name__ == "__main__":
    run_command(main)
