"""The one exception type that means "the user gave us something we cannot use".

Commands raise `UserError` with a message that names what is wrong and how to fix it; the
command-line wrapper turns it into one line on stderr and a non-zero exit, never a traceback.
"""

import os
import re
from typing import Optional

RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")  # how Rust libraries (tokenizers) quote an errno


class UserError(Exception):
    """Bad input, bad flags or unreachable resources: a message for the user, not a bug."""


def reason_of(error: BaseException) -> str:
    """The first line of a library's exception message, to quote inside our own one-line error."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def os_reason(error: BaseException) -> Optional[str]:
    """The OS's own words for a failed file operation ("No space left on device"): an OSError's, or those of the
    errno a Rust library puts in its message ("... (os error 28)"); None for any other error."""
    if isinstance(error, OSError) and error.errno:
        return os.strerror(error.errno)
    match = RUST_OS_ERROR.search(str(error))
    return os.strerror(int(match.group(1))) if match else None


class Stopped(Exception):
    """A run stopped on request (SIGTERM: a preempted machine), having saved what it needs to go on: the message
    says where it stopped and how to continue. Commands exit with STOPPED_EXIT_CODE."""


STOPPED_EXIT_CODE = 42  # what TensorFlow's PreemptionCheckpointHandler exits with: "restart me", to schedulers


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what to do next in its message: commands end with one `interrupted:` line, exit code 130."""
