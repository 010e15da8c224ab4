"""Writing a result directory so that a crash never leaves a half-written one behind.

Files are written into a hidden staging folder beside the destination and moved into place
only once all of them exist; the destination is checked before the slow work starts.
"""

import contextlib
import os
import shutil
import tempfile
from typing import Iterator

from mlm_tpu.errors import UserError


def check_output_dir(path: str, overwrite: bool, flag: str = "--output-dir") -> None:
    """Refuse a destination that is a file, or a folder that already holds something, unless told."""
    if os.path.isfile(path):
        raise UserError(f"{flag} '{path}' is a file, not a folder; choose another {flag}")
    if os.path.isdir(path) and os.listdir(path) and not overwrite:
        raise UserError(f"{flag} '{path}' is not empty ({len(os.listdir(path))} entries); pass "
                        f"--overwrite to replace what it holds, or choose another {flag}")


@contextlib.contextmanager
def staged_output_dir(path: str) -> Iterator[str]:
    """Yield a staging folder; on success its files replace those of the same name in `path`."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.partial-", dir=parent)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)  # mkdtemp's private 0700 would stick to the result
    except OSError as error:
        raise UserError(f"cannot write in '{parent}': {error.strerror or error}") from None
    try:
        yield staging
        if not os.path.exists(path):
            os.replace(staging, path)
            return
        for name in sorted(os.listdir(staging)):
            target = os.path.join(path, name)
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            os.replace(os.path.join(staging, name), target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
