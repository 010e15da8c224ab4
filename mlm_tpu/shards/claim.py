"""One job at a time per split: the record of who is writing it.

Before a sharding job reads, deletes or writes anything in a split, it creates `.writer.json` (host,
process, when) there, exclusively: a second job started on the same split, with the same or other
settings, finds the record and stops with one line instead of mixing its shards into the first's.
The record is refreshed with each shard and removed when the job ends, however it ends short of
being killed. A killed job's record is taken over by the next job once its process is gone (same
host) or it has not been refreshed for STALE_SECONDS (another host: a preempted VM).
"""

import contextlib
import datetime
import json
import os
import socket
import time
from typing import Iterator, Optional

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import encode_json
from mlm_tpu.shards.format import WRITER_RECORD

STALE_SECONDS = 600


class SplitClaim:
    """This job's record in a split's storage (LocalStorage or GcsStorage)."""

    def __init__(self, storage):
        self.storage = storage
        self.started = datetime.datetime.now().isoformat(timespec="seconds")

    def _record(self) -> bytes:
        return encode_json({"host": socket.gethostname(), "pid": os.getpid(), "started": self.started,
                            "updated": time.time()})

    def acquire(self) -> None:
        if self.storage.create(WRITER_RECORD, self._record()):
            return
        other = self._other()
        if other is not None and _still_running(other):
            raise UserError(f"{self.storage.location()} is being written by another sharding job (host "
                            f"{other.get('host')}, process {other.get('pid')}, started {other.get('started')}); "
                            f"wait for it to finish, or write this split elsewhere (--output-dir or --split). If "
                            f"that job is no longer running, delete {self.storage.location(WRITER_RECORD)}")
        if other is not None:
            log(f"Taking over {self.storage.location()} from a sharding job that is gone (host {other.get('host')}, "
                f"process {other.get('pid')}); its finished shards are kept")
        self.storage.write(WRITER_RECORD, self._record())

    def _other(self) -> Optional[dict]:
        data = self.storage.read(WRITER_RECORD)
        try:
            return json.loads(data) if data else None
        except ValueError:
            return None  # a record cut short by a crash names nobody

    def refresh(self) -> None:
        self.storage.write(WRITER_RECORD, self._record())

    def release(self) -> None:
        self.storage.delete(WRITER_RECORD)


def _still_running(record: dict) -> bool:
    if record.get("host") != socket.gethostname():
        return time.time() - float(record.get("updated", 0)) < STALE_SECONDS
    try:
        os.kill(int(record.get("pid", 0)), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True
    return True


@contextlib.contextmanager
def claimed(storage) -> Iterator[SplitClaim]:
    """The split, claimed for this job until the block ends."""
    claim = SplitClaim(storage)
    claim.acquire()
    try:
        yield claim
    finally:
        claim.release()
