"""Where a split's shards are stored: a local folder or a gs:// prefix, with the same few verbs.

Both make a file appear under its final name only when complete (local: write a hidden temp
file, then rename; GCS: an upload is atomic), so a crash never leaves a half-written shard
under a shard's name. A temporary file's name says which process writes it, so that a job
starting on the folder clears those of killed jobs and never one a live job is about to move
(another job's claim being created, a retried Beam bundle's shard). GCS goes through
google-cloud-storage (which honours `STORAGE_EMULATOR_HOST`), retrying transient errors for up to `retry_seconds`.
"""

import contextlib
import os
import re
import socket
import stat
import tempfile
from typing import Dict, List, Optional

from mlm_tpu.claim import writer_running
from mlm_tpu.cloud_storage import bucket_and_path, gcs_call, make_client
from mlm_tpu.errors import UserError
from mlm_tpu.output_dir import give_umask_mode

TEMPORARY_WRITER = re.compile(r"\.(?P<pid>\d+)@(?P<host>[^/]+)\.[^.]+\.partial$")  # .NAME.PID@HOST.RANDOM.partial


class LocalStorage:
    """A split's folder on this machine."""

    def __init__(self, folder: str):
        self.folder = folder
        self.made_folder = False
        existing = os.path.abspath(folder)
        while not os.path.exists(existing):  # the folder is made at the first write, not before
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing) or not os.access(existing, os.W_OK):
            raise UserError(f"cannot write output folder '{folder}': '{existing}' is "
                            f"{'not a folder' if not os.path.isdir(existing) else 'not writable'}")

    def location(self, name: str = "") -> str:
        return os.path.join(self.folder, name)

    def sizes(self) -> Dict[str, int]:
        """Each file of the split and its size in bytes."""
        if not os.path.isdir(self.folder):
            return {}
        sizes = {}
        for name in sorted(os.listdir(self.folder)):
            try:
                facts = os.stat(self.location(name))
            except FileNotFoundError:  # another job's temporary file, moved or removed since the listing
                continue
            if stat.S_ISREG(facts.st_mode):
                sizes[name] = facts.st_size
        return sizes

    def left_temporaries(self, sizes: Dict[str, int]) -> List[str]:
        """The temporary files among `sizes` that no running process will move or remove: a killed job's (a live
        job's are its own, its claim being created among them: deleting one would break that job's write)."""
        return [name for name in sizes if name.startswith(".") and name.endswith(".partial")
                and not self._writer_runs(name)]

    def _writer_runs(self, name: str) -> bool:
        writer = TEMPORARY_WRITER.search(name)
        if writer is None:  # an earlier version's, whose writer is unknown
            return False
        try:
            written = os.path.getmtime(self.location(name))
        except FileNotFoundError:  # moved or removed by its writer just now
            return True
        return writer_running(writer["host"], writer["pid"], written)

    def _make_folder(self) -> None:
        if not os.path.isdir(self.folder):
            self.made_folder = True
        try:
            os.makedirs(self.folder, exist_ok=True)
        except OSError as error:
            raise UserError(f"cannot create output folder '{self.folder}': {error.strerror or error}") from None

    def write(self, name: str, data: bytes) -> None:
        self._publish(name, data, os.replace)

    def create(self, name: str, data: bytes) -> bool:
        """Write `name` only if it does not exist yet, whole, atomically (of two jobs, one wins, and the other reads
        what the winner wrote, never an empty file); whether it did."""
        try:
            self._publish(name, data, os.link)  # link fails if the name exists: O_EXCL with the content in
        except FileExistsError:
            return False
        return True

    def _publish(self, name: str, data: bytes, put_in_place) -> None:
        """Write `data` to a hidden temporary file named after this process, then put_in_place(temporary, final
        path): a reader never sees a part of it under its name."""
        self._make_folder()
        descriptor, temporary = tempfile.mkstemp(prefix=f".{name}.{os.getpid()}@{socket.gethostname()}.",
                                                 suffix=".partial", dir=self.folder)
        try:
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(data)
            give_umask_mode(temporary)
            put_in_place(temporary, self.location(name))
        except FileExistsError:
            raise
        except OSError as error:
            raise UserError(f"cannot write {self.location(name)}: {error.strerror or error}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):  # moved into place
                os.remove(temporary)

    def read(self, name: str) -> Optional[bytes]:
        try:
            with open(self.location(name), "rb") as stream:
                return stream.read()
        except FileNotFoundError:
            return None

    def delete(self, name: str) -> None:
        """Remove `name` (gone already is as good); a folder this job made and left empty goes too."""
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.location(name))
        if self.made_folder and not os.listdir(self.folder):
            os.rmdir(self.folder)
            self.made_folder = False


class GcsStorage:
    """A split's prefix in a Google Cloud Storage bucket."""

    def __init__(self, url: str, retry_seconds: float):
        from google.api_core import exceptions
        from google.cloud.storage.retry import DEFAULT_RETRY

        self._exceptions = exceptions
        bucket_name, prefix = bucket_and_path(url)
        self.url = url.rstrip("/")
        self.prefix = prefix.strip("/")
        self.retry = DEFAULT_RETRY.with_timeout(retry_seconds)
        self.timeout = max(1.0, min(60.0, retry_seconds))
        self.client = gcs_call(f"connect to Google Cloud Storage for {url}", make_client)
        self.bucket = self.client.bucket(bucket_name)
        if not gcs_call(f"find bucket gs://{bucket_name}", self.bucket.exists, retry=self.retry, timeout=self.timeout):
            raise UserError(f"bucket gs://{bucket_name} does not exist; create it "
                            f"(`gcloud storage buckets create gs://{bucket_name}`) or fix --output-dir")

    def location(self, name: str = "") -> str:
        return f"{self.url}/{name}"

    def _object(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def sizes(self) -> Dict[str, int]:
        """Each object of the split (not those of deeper prefixes) and its size in bytes."""
        start = len(self.prefix) + 1 if self.prefix else 0
        blobs = gcs_call(f"list {self.url}", lambda: list(self.client.list_blobs(
            self.bucket, prefix=f"{self.prefix}/" if self.prefix else None, retry=self.retry, timeout=self.timeout)))
        return {blob.name[start:]: blob.size for blob in sorted(blobs, key=lambda blob: blob.name)
                if "/" not in blob.name[start:]}

    def left_temporaries(self, sizes: Dict[str, int]) -> List[str]:
        """None: an upload is atomic, and leaves no temporary object."""
        return []

    def write(self, name: str, data: bytes) -> None:
        blob = self.bucket.blob(self._object(name))
        gcs_call(f"upload {self.location(name)}", blob.upload_from_string, data,
                 content_type="application/octet-stream", retry=self.retry, timeout=self.timeout)

    def create(self, name: str, data: bytes) -> bool:
        """Write `name` only if no object of that name exists (generation precondition 0); whether it did."""
        blob = self.bucket.blob(self._object(name))
        try:
            gcs_call(f"upload {self.location(name)}", blob.upload_from_string, data, if_generation_match=0,
                     content_type="application/octet-stream", retry=self.retry, timeout=self.timeout)
        except self._exceptions.PreconditionFailed:
            return False
        return True

    def read(self, name: str) -> Optional[bytes]:
        blob = self.bucket.blob(self._object(name))
        try:
            return gcs_call(f"read {self.location(name)}", blob.download_as_bytes, retry=self.retry,
                            timeout=self.timeout)
        except self._exceptions.NotFound:
            return None

    def delete(self, name: str) -> None:
        try:
            gcs_call(f"delete {self.location(name)}", self.bucket.delete_blob, self._object(name),
                     retry=self.retry, timeout=self.timeout)
        except self._exceptions.NotFound:
            pass


def open_split_storage(output_dir: str, split: str, retry_seconds: float):
    """The storage for `<output_dir>/<split>/`, local or gs://."""
    if output_dir.startswith("gs://"):
        return GcsStorage(f"{output_dir.rstrip('/')}/{split}", retry_seconds)
    return LocalStorage(os.path.join(output_dir, split))
