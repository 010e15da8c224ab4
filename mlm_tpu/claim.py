"""One job at a time per output: the record of who is writing it (a sharding job's split, a training run's folder).

Before a job reads, deletes or writes anything in its output, it creates a record (host, process,
when) there, exclusively: a second job started on the same output, with the same or other
settings, finds the record and stops with one line instead of mixing its files into the first's
(or resuming from a backup the first is about to delete). The record is refreshed as the job goes
and removed when the job ends, however it ends short of being killed. A killed job's record is
taken over by the next job once its process is gone (same host) or it has not been refreshed for
STALE_SECONDS (another host: a preempted VM).
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

STALE_SECONDS = 600
PROCESS_STARTED = time.time()  # about when this process started (the project's modules load at its start)


class Claim:
    """This job's record `name` in `storage` (shards/storage.py: LocalStorage or GcsStorage); `job` is what the
    messages call such a job, `elsewhere` how to avoid another one's output."""

    def __init__(self, storage, name: str, job: str, elsewhere: str):
        self.storage, self.name, self.job, self.elsewhere = storage, name, job, elsewhere
        self.started = datetime.datetime.now().isoformat(timespec="seconds")
        self.refreshed = 0.0

    def _record(self) -> bytes:
        return encode_json({"host": socket.gethostname(), "pid": os.getpid(), "started": self.started,
                            "updated": time.time()})

    def acquire(self) -> None:
        if self.storage.create(self.name, self._record()):
            self.refreshed = time.monotonic()
            return
        other = self._other()
        if other is not None and writer_running(other.get("host"), other.get("pid"), other.get("updated")):
            raise UserError(f"{self.storage.location()} is being written by another {self.job} (host "
                            f"{other.get('host')}, process {other.get('pid')}, started {other.get('started')}); "
                            f"wait for it to finish, or {self.elsewhere}. If that job is no longer running, delete "
                            f"{self.storage.location(self.name)}")
        if other is not None:
            log(f"Taking over {self.storage.location()} from a {self.job} that is gone (host {other.get('host')}, "
                f"process {other.get('pid')}); what it finished is kept")
        self.refresh()

    def _other(self) -> Optional[dict]:
        data = self.storage.read(self.name)
        try:
            return json.loads(data) if data else None
        except ValueError:
            return None  # a record cut short by a crash names nobody

    def refresh(self, unless_within: float = 0.0) -> None:
        """Say the job is alive (skipped when it said so less than `unless_within` seconds ago)."""
        if time.monotonic() - self.refreshed >= unless_within:
            self.storage.write(self.name, self._record())
            self.refreshed = time.monotonic()

    def release(self) -> None:
        self.storage.delete(self.name)


def writer_running(host, pid, updated) -> bool:
    """Whether the process `pid` on `host` that wrote something (a claim, a temporary file) last at `updated` (seconds
    since the epoch) still runs: on this host, whether that process exists (one with this process's number that
    wrote before it started was an earlier one, in a container restarted with the same numbers); on another, whether
    it wrote within STALE_SECONDS."""
    if host != socket.gethostname():
        return time.time() - float(updated or 0) < STALE_SECONDS
    try:
        pid = int(pid or 0)
        if pid == os.getpid():
            return float(updated or 0) >= PROCESS_STARTED
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True
    return True


@contextlib.contextmanager
def claimed(storage, name: str, job: str, elsewhere: str) -> Iterator[Claim]:
    """The output in `storage`, claimed for this job until the block ends (see `Claim`)."""
    claim = Claim(storage, name, job, elsewhere)
    claim.acquire()
    try:
        yield claim
    finally:
        claim.release()
