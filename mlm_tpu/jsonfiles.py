"""The JSON files mlm_tpu writes and reads back (manifests, progress files, training_args.json, best_model.json).

One reader, so that a file cut short by a full disk or edited by hand is one clear line naming
it and what to do, never a JSONDecodeError; one encoding (`encode_json`), which the one writer,
output_dir.py's `write_json` beside `write_file`, writes through a temporary file renamed, so a crash
never leaves a half-written file under the real name.
"""

import json
from typing import Any

from mlm_tpu.errors import UserError


def encode_json(payload: Any) -> bytes:
    """The bytes mlm_tpu writes for a JSON file: indented, keys in order, a final newline."""
    return (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode()


def parse_json(data: bytes, what: str, fix: str) -> Any:
    """`data` as JSON; `what` names the file for the message, `fix` says what to do about a bad one."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"{what} is not UTF-8 text; {fix}") from None
    except json.JSONDecodeError as error:
        raise UserError(f"{what} is not valid JSON (line {error.lineno}: {error.msg}; it may have been cut short "
                        f"or edited); {fix}") from None


def read_json(path: str, what: str, fix: str) -> Any:
    """A JSON file the project wrote, local or gs://; see `parse_json`."""
    if path.startswith("gs://"):
        import tensorflow as tf

        with tf.io.gfile.GFile(path, "rb") as stream:
            return parse_json(stream.read(), f"{what} ({path})", fix)
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as error:
        raise UserError(f"cannot read {what} ({path}): {error.strerror or error}") from None
    return parse_json(data, f"{what} ({path})", fix)

