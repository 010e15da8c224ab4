"""The claim's record is created whole: of jobs started at once on one output, one wins and every other one reads
the winner's record (a job that read an empty record took it for nobody's and wrote beside the winner)."""

import multiprocessing

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
