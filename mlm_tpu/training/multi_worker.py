"""Training on several machines: who writes what, which backup every worker resumes from, and faults.

Worker 0 of the cluster TF_CONFIG names (cluster.py; the chief, when TF_CONFIG names one) is the one
that writes: the backup, the model folder and its card, the TensorBoard logs, the Hub push. The others
take part in every backup, as the strategy needs, writing into a temporary folder of their own that
they delete; they restore from the backup the chief chose, so the output folder must be storage every
worker sees (a shared file system).

What can go wrong is one line each: a worker that cannot see the chief's output folder, or the backup
it resumes from; a worker that fails (its own error line; the others stop at once, quoting it) or dies
mid-run (the others learn it from the coordination service's heartbeat within ~10 s and stop). SIGTERM
(what a preempted VM gets) to any worker makes every worker save a backup at the same step and stop:
stops.py.
"""
import contextlib
import json
import os
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.training.cluster import FAILED, TF_CONFIG, Cluster, read_cluster, why_others_stop

KEY_TIMEOUT_MS = 300_000  # how long a worker waits for the chief at the start (after the cluster formed)
# how long a worker waits to see the backup the chief resumes from: a shared file system's cached metadata (NFS's
# attribute cache, gcsfuse's stat cache: a minute by default) may show it an older view of the folder for a while
BACKUP_WAIT_SECONDS = 120.0
SCRATCH = "mlm-tpu-worker-"  # + index - pid - random: a non-chief's temporary folder


@dataclass
class Worker:
    """This process' part in the run: which worker it is, and where what it writes goes."""

    cluster: Optional[Cluster] = None  # None: the only process
    scratch: Optional[str] = None  # a non-chief's temporary folder, deleted at the end
    store: Any = None  # the coordination service's key-value store (TensorFlow's context unless one is given)

    @property
    def is_chief(self) -> bool:
        return self.cluster is None or self.cluster.index == 0

    @property
    def name(self) -> str:
        return self.cluster.name(self.cluster.index) if self.cluster else "the only worker"

    def folder(self, output_dir: str) -> str:
        """Where this worker writes what belongs in `output_dir`: there (the chief), or its scratch folder."""
        if self.is_chief:
            return output_dir
        if self.scratch is None:
            _remove_scratch_of_dead_workers()
            self.scratch = tempfile.mkdtemp(prefix=f"{SCRATCH}{self.cluster.index}-{os.getpid()}-")
        return self.scratch

    def backup(self, backup_class, folder: str, model, optimizer):
        """The chief's backup in `folder`; a non-chief restores from it and saves into its scratch folder."""
        if self.is_chief:
            return backup_class(folder, model, optimizer)
        return _WorkerBackup(backup_class(folder, model, optimizer),
                             backup_class(os.path.join(self.folder(""), "backup"), model, optimizer))

    def _store(self):
        if self.store is None:
            from tensorflow.python.eager import context

            self.store = context.context()
        return self.store

    def agreed_backup(self, folder: str, wait_seconds: float = BACKUP_WAIT_SECONDS):
        """The backup (a BackupRecord) every worker resumes from, None to start from scratch: the one the chief finds.
        A shared file system may show another worker an older view of the folder, another backup or none, so the
        chief publishes its choice and each other worker takes exactly that backup, waiting up to `wait_seconds`
        to see it whole, or stops with one line; the chief hears from each before going on."""
        from mlm_tpu.training.backup import check_backup, find_backup

        if self.cluster is None:
            return find_backup(folder)
        store = self._store()
        if self.is_chief:
            try:
                record = find_backup(folder)
            except UserError as error:
                store.set_config_key_value("mlm_tpu/backup_step", f"{FAILED}{error}")
                raise
            store.set_config_key_value("mlm_tpu/backup_step", str(record.step) if record else "none")
            self._hear_from_others("backup_seen", lambda worker, seen: f"{worker} {seen}")
            return record
        chosen = store.get_config_key_value("mlm_tpu/backup_step", KEY_TIMEOUT_MS)
        if chosen.startswith(FAILED):
            raise UserError(f"{self.cluster.name(0)} failed, so {self.name} stops too: {chosen[len(FAILED):]}")
        record, problem = None, None
        if chosen != "none":
            deadline = time.monotonic() + wait_seconds
            record, problem = check_backup(folder, int(chosen))
            if record is None:
                log(f"{self.name} does not see the backup of step {chosen} that {self.cluster.name(0)} resumes from "
                    f"({problem}): waiting up to {wait_seconds:g} s for the shared file system to show it")
            while record is None and time.monotonic() < deadline:
                time.sleep(min(1.0, wait_seconds / 10))
                record, problem = check_backup(folder, int(chosen))
        seen = "yes" if problem is None else (
            f"cannot see the backup of step {chosen} that {self.cluster.name(0)} resumes from, even after "
            f"{wait_seconds:g} s ({problem}): every worker must see the same files in --output-dir; if they are "
            "on a shared file system that caches what it lists (an NFS attribute cache, gcsfuse's stat cache), "
            "shorten its caching or start again once the backup shows on every machine")
        self._tell_chief("backup_seen", seen)
        if problem is not None:
            raise UserError(f"{self.name} {seen}")
        return record

    def _hear_from_others(self, subject: str, problem) -> None:
        """The chief waits for every other worker's word on `subject`; one that is not "yes" stops the run, in the
        words `problem(worker's name, its word)`."""
        for index in range(1, self.cluster.size):
            seen = self._store().get_config_key_value(f"mlm_tpu/{subject}/{index}", KEY_TIMEOUT_MS)
            if seen != "yes":
                raise UserError(problem(self.cluster.name(index), seen))

    def _tell_chief(self, subject: str, seen: str) -> None:
        self._store().set_config_key_value(f"mlm_tpu/{subject}/{self.cluster.index}", seen)

    def tell_others(self, error: UserError) -> None:
        """Pass this worker's error to every other worker at once through the coordination service: the steps they
        are in stop with it (else they would wait for this worker, then blame its silence)."""
        import tensorflow as tf

        if self.cluster is None:
            return
        try:
            self._store().report_error_to_cluster(tf.errors.ABORTED, f"{FAILED}{error}")
        except (tf.errors.OpError, ValueError):  # the service is gone (its chief stopped): they will hear anyway
            pass

    def clean_up(self) -> None:
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def check_output_dir(self, output_dir: str) -> None:
        """Every worker must see the chief's output folder: the chief writes a token file there and publishes the
        token; each other worker reads the file and says what it found; the chief names any that could not."""
        if self.cluster is None:
            return
        service = self._store()
        if self.is_chief:
            token = uuid.uuid4().hex
            path = os.path.join(output_dir, f".worker-check-{token}")
            with open(path, "w") as stream:
                stream.write(token)
            try:
                service.set_config_key_value("mlm_tpu/output_dir_token", token)
                self._hear_from_others("output_dir_seen", lambda worker, seen: _not_shared(worker, output_dir, seen))
            finally:
                os.remove(path)
            return
        token = service.get_config_key_value("mlm_tpu/output_dir_token", KEY_TIMEOUT_MS)
        path = os.path.join(output_dir, f".worker-check-{token}")
        try:
            with open(path) as stream:
                seen = "yes" if stream.read() == token else f"{path} holds something else"
        except OSError as error:
            seen = f"{path}: {error.strerror}"
        self._tell_chief("output_dir_seen", seen)
        if seen != "yes":
            raise UserError(_not_shared(self.name, output_dir, seen))


def _remove_scratch_of_dead_workers() -> None:
    """Scratch folders of workers killed on this machine (SIGKILL leaves no time to delete them)."""
    folder = tempfile.gettempdir()
    for name in os.listdir(folder):
        found = re.fullmatch(SCRATCH + r"\d+-(\d+)-\w+", name)
        if found and not _process_exists(int(found.group(1))):
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _not_shared(worker: str, output_dir: str, seen: str) -> str:
    return (f"{worker} cannot see the --output-dir {output_dir} that worker 0 writes ({seen}): every worker must "
            "see the same folder, on a shared file system mounted at the same path, since all of them resume from "
            "the chief's backup")


class _WorkerBackup:
    """A non-chief's backup: restored from the chief's, saved (every worker must take part) into scratch."""

    def __init__(self, chiefs, own):
        self.chiefs, self.own = chiefs, own

    def restore(self, record) -> None:
        self.chiefs.restore(record)

    def save(self, record) -> None:
        self.own.save(record)

    def remove(self) -> None:
        self.own.remove()


def worker_of(strategy) -> Worker:
    """This process' Worker under `strategy` (the only one, unless it is a MultiWorkerMirroredStrategy)."""
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return Worker()
    resolver = strategy.cluster_resolver
    cluster = read_cluster({TF_CONFIG: json.dumps({"cluster": resolver.cluster_spec().as_dict(),
                                                   "task": {"type": resolver.task_type,
                                                            "index": resolver.task_id}})})
    return Worker(cluster)


@contextlib.contextmanager
def cluster_errors(worker: Worker, backup_folder: str) -> Iterator[None]:
    """A worker's own error passed on to the others; a worker that failed, died or became unreachable, as one line
    naming it, instead of TensorFlow's pages."""
    import tensorflow as tf

    try:
        yield
    except UserError as error:
        worker.tell_others(error)
        raise
    except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError,
            tf.errors.DeadlineExceededError) as error:
        if worker.cluster is None:
            raise
        raise UserError(why_others_stop(worker.cluster, error.message, backup_folder)) from None
    finally:
        worker.clean_up()
