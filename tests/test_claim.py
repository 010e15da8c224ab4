"""The claim's record is created whole: of jobs started at once on one output, one wins and every other one reads
the winner's record (a job that read an empty record took it for nobody's and wrote beside the winner)."""

import json
import multiprocessing
import os
import socket
import subprocess
import time

from mlm_tpu.claim import Claim
from mlm_tpu.errors import UserError
from mlm_tpu.shards.storage import LocalStorage

JOBS, TRIALS = 3, 60


def _claim(folder: str, results, finish) -> None:
    """Claim `folder`, say how it went, and stay alive (a claim of a process that is gone is taken over) until told."""
    try:
        Claim(LocalStorage(folder), ".writer.json", "test job", "use another folder").acquire()
        results.put("won")
    except UserError as error:
        results.put("refused" if "is being written by another test job" in str(error) else str(error))
    finish.wait(60)


def test_of_jobs_claiming_one_output_at_once_exactly_one_wins(tmp_path):
    context = multiprocessing.get_context("fork")
    for trial in range(TRIALS):
        folder = tmp_path / str(trial)
        results, finish = context.Queue(), context.Event()
        jobs = [context.Process(target=_claim, args=(str(folder), results, finish)) for _ in range(JOBS)]
        for job in jobs:
            job.start()
        outcomes = sorted(results.get(timeout=60) for _ in jobs)
        finish.set()
        for job in jobs:
            job.join(timeout=60)
        assert outcomes == ["refused"] * (JOBS - 1) + ["won"], f"trial {trial}: {outcomes}"
        assert [path.name for path in folder.iterdir()] == [".writer.json"]  # no temporary file left


TAKEOVER_TRIALS = 20


def _take_over(folder: str, results, start, finish) -> None:
    """Line up with the other jobs, then claim `folder`, whose record names a job that is gone; say how it went (with
    this process's id), and stay alive until told."""
    start.wait(60)
    try:
        Claim(LocalStorage(folder), ".writer.json", "test job", "use another folder").acquire()
        results.put(("won", os.getpid()))
    except UserError as error:
        results.put(("refused" if "is being written by another test job" in str(error) else str(error), None))
    finish.wait(60)


def test_of_jobs_taking_over_a_dead_jobs_claim_at_once_exactly_one_wins(tmp_path):
    """A killed job's claim, found by several jobs started together: taking it over is a create-if-absent too, so one
    of them takes it and the others stop, 20 times in a row (a plain write let every one of them take it)."""
    context = multiprocessing.get_context("fork")
    gone = subprocess.Popen(["true"])
    gone.wait()  # a process of this host that no longer runs
    for trial in range(TAKEOVER_TRIALS):
        folder = tmp_path / f"takeover-{trial}"
        folder.mkdir()
        (folder / ".writer.json").write_text(json.dumps({"host": socket.gethostname(), "pid": gone.pid,
                                                         "started": "earlier", "updated": time.time() - 1}))
        results, start, finish = context.Queue(), context.Barrier(JOBS), context.Event()
        jobs = [context.Process(target=_take_over, args=(str(folder), results, start, finish)) for _ in range(JOBS)]
        for job in jobs:
            job.start()
        outcomes = sorted((results.get(timeout=60) for _ in jobs), key=lambda outcome: outcome[0])
        record = json.loads((folder / ".writer.json").read_text())
        finish.set()
        for job in jobs:
            job.join(timeout=60)
        assert [outcome for outcome, _ in outcomes] == ["refused"] * (JOBS - 1) + ["won"], f"trial {trial}: {outcomes}"
        assert record["pid"] == outcomes[-1][1]  # the record names the winner
        assert [path.name for path in folder.iterdir()] == [".writer.json"]  # no takeover marker left
