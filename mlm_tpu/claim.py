"""One job at a time per output: the record of who is writing it (a sharding job's split, a training run's folder).

Before a job reads, deletes or writes anything in its output, it creates a record (host, process,
when) there, exclusively: a second job started on the same output, with the same or other
settings, finds the record and stops with one line instead of mixing its files into the first's
(or resuming from a backup the first is about to delete). The record is refreshed as the job goes
and removed when the job ends, however it ends short of being killed. A killed job's record is
taken over by the next job once its process is gone (same host) or it has not been refreshed for
STALE_SECONDS (another host: a preempted VM).

Several jobs may find the same dead record at once. Taking it over is a create-if-absent too, so that one of them
wins: each tries to create a takeover marker named after the dead record's bytes (unique: they hold its process,
start and last refresh); the one that creates it checks the record is still that dead one, writes its own, and
removes the marker. The others find the marker held by a live job, and stop as they would beside a running one. A
marker left by a job killed while taking over is itself a dead record, taken over the same way. It needs no more of
the storage than create, read, write and delete, so it holds on gs:// (a generation precondition) as on disk.
"""

import contextlib
import datetime
import hashlib
import json
import os
import socket
import time
from typing import Iterator, Optional

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import encode_json

STALE_SECONDS = 600
TAKEOVER_ATTEMPTS = 50  # looks at the record while another job takes it over, before saying it is busy
TAKEOVER_WAIT = 0.02  # seconds between them: a takeover is a create, a read, a write and a delete
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
        for _ in range(TAKEOVER_ATTEMPTS):
            if self.storage.create(self.name, self._record()):
                self.refreshed = time.monotonic()
                return
            data = self.storage.read(self.name)
            if data is None:
                continue  # its job ended between the two looks: create it again
            other = _parsed(data)
            if other is not None and writer_running(other.get("host"), other.get("pid"), other.get("updated")):
                raise self._busy(other)
            if self._take_over(data, data):
                if other is not None:
                    log(f"Taking over {self.storage.location()} from a {self.job} that is gone (host "
                        f"{other.get('host')}, process {other.get('pid')}); what it finished is kept")
                return
            time.sleep(TAKEOVER_WAIT)  # another job is taking it over: look again once it has
        raise self._busy(_parsed(self.storage.read(self.name) or b"") or {})

    def _busy(self, other: dict) -> UserError:
        return UserError(f"{self.storage.location()} is being written by another {self.job} (host "
                         f"{other.get('host')}, process {other.get('pid')}, started {other.get('started')}); "
                         f"wait for it to finish, or {self.elsewhere}. If that job is no longer running, delete "
                         f"{self.storage.location(self.name)}")

    def _take_over(self, dead_record: bytes, dead: bytes) -> bool:
        """Replace `dead_record` (the record of a job that is gone) with this job's, if this job is the one that
        creates the takeover marker of `dead` (the record, or a marker left by a job killed while taking it over);
        whether it did."""
        marker = f"{self.name}.takeover-{hashlib.sha256(dead).hexdigest()[:16]}"
        mine = self._record()
        if self.storage.create(marker, mine):
            try:
                if self.storage.read(self.name) != dead_record:
                    return False  # taken over and written already (this marker is a later one): look again
                self.storage.write(self.name, mine)
                self.refreshed = time.monotonic()
                return True
            finally:
                self.storage.delete(marker)
        held = self.storage.read(marker)
        holder = _parsed(held) if held is not None else None
        if held is None or (holder is not None and writer_running(holder.get("host"), holder.get("pid"),
                                                                  holder.get("updated"))):
            return False  # another job is taking it over, or just has
        return self._take_over(dead_record, held)

    def refresh(self, unless_within: float = 0.0) -> None:
        """Say the job is alive (skipped when it said so less than `unless_within` seconds ago)."""
        if time.monotonic() - self.refreshed >= unless_within:
            self.storage.write(self.name, self._record())
            self.refreshed = time.monotonic()

    def release(self) -> None:
        self.storage.delete(self.name)


def _parsed(data: bytes) -> Optional[dict]:
    """A record's fields; None for one cut short by a crash, which names nobody."""
    try:
        found = json.loads(data) if data else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


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
