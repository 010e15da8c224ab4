"""How mlm_tpu talks to its user: one way for progress lines, warnings and progress bars, and quiet libraries.

Results go to stdout (what a script pipes on); everything else goes to stderr through the
`mlm_tpu` logger, so `log()` and `warn()` read the same whether a command-line tool or a notebook
calls the library, and a notebook user can silence or redirect them with the `logging` module.

TensorFlow prints several lines from C++ when it loads (absl's "All log messages before
absl::InitializeLog()", oneDNN and CUDA notices), before any Python setting can stop it;
`import_tensorflow` loads it with the process' stderr pointed elsewhere, and shows what was said
only if loading fails (or always, with `verbose`).
"""

import logging
import os
import sys
import tempfile

from tqdm.auto import tqdm

logger = logging.getLogger("mlm_tpu")


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (pytest and notebooks replace it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):
        pass


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        return f"warning: {message}" if record.levelno == logging.WARNING else message


if not logger.handlers:
    _handler = _StderrHandler()
    _handler.setFormatter(_Formatter())
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def log(message: str) -> None:
    """A line saying what is happening, on stderr."""
    logger.info(message)


def warn(message: str) -> None:
    """A `warning: ...` line on stderr: something works but is probably not what the user wants."""
    logger.warning(message)


def progress(iterable=None, **kwargs) -> tqdm:
    """A progress bar on stderr (tqdm), for work that takes long enough to wonder about."""
    return tqdm(iterable, file=sys.stderr, **kwargs)


def quiet_libraries(verbose: bool = False) -> None:
    """transformers' and TensorFlow's own notices (deprecations, device placement) only with `verbose`."""
    import transformers

    if verbose:
        transformers.logging.set_verbosity_info()
        return
    transformers.logging.set_verbosity_error()
    if "tensorflow" in sys.modules:
        sys.modules["tensorflow"].get_logger().setLevel(logging.ERROR)


def import_tensorflow(verbose: bool = False):
    """`import tensorflow`, without its C++ start-up lines on the terminal unless `verbose` (or loading fails)."""
    if verbose or "tensorflow" in sys.modules:
        import tensorflow

        return tensorflow
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            import tensorflow
        except BaseException:
            os.dup2(saved, 2)
            sink.seek(0)
            sys.stderr.write(sink.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    tensorflow.get_logger().setLevel(logging.ERROR)
    return tensorflow
