"""The one exception type that means "the user gave us something we cannot use".

Commands raise `UserError` with a message that names what is wrong and how to fix it; the
command-line wrapper turns it into one line on stderr and a non-zero exit, never a traceback.
"""


class UserError(Exception):
    """Bad input, bad flags or unreachable resources: a message for the user, not a bug."""


def reason_of(error: BaseException) -> str:
    """The first line of a library's exception message, to quote inside our own one-line error."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class Stopped(Exception):
    """A run stopped on request (SIGTERM: a preempted machine), having saved what it needs to go on: the message
    says where it stopped and how to continue. Commands exit with STOPPED_EXIT_CODE."""


STOPPED_EXIT_CODE = 42  # what TensorFlow's PreemptionCheckpointHandler exits with: "restart me", to schedulers
