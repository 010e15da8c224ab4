"""Google Cloud Storage for every stage: one client, one way to turn a failing call into one clear line, and the
few reads that inputs need (list objects matching a pattern, open one as a file, copy a folder here).

Inputs on gs:// are what a Beam job on Dataflow reads: its workers see Cloud Storage, not the disk
the command was typed on. google-cloud-storage honours `STORAGE_EMULATOR_HOST` (the tests' fake-gcs-server).
"""

import fnmatch
import os
import re
from typing import List, Tuple

from mlm_tpu.errors import UserError, reason_of

BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")  # GCS' naming rules (dotted names up to 222)
RETRY_SECONDS = 120.0  # how long reads of inputs retry transient errors


def is_gcs(path: str) -> bool:
    return path.startswith("gs://")


def bucket_and_path(url: str) -> Tuple[str, str]:
    """gs://BUCKET/PATH -> (BUCKET, PATH), the bucket name checked."""
    bucket, _, path = url[len("gs://"):].partition("/")
    if not bucket:
        raise UserError(f"'{url}' names no bucket; write gs://BUCKET/PATH")
    if not BUCKET_NAME.fullmatch(bucket):
        raise UserError(f"'{bucket}' in {url} is not a valid bucket name (3 to 63 lowercase letters, digits, dashes, "
                        "underscores and dots, starting and ending with a letter or digit); fix the gs:// path")
    return bucket, path


def make_client():
    """A google-cloud-storage client: anonymous against an emulator, else the application-default credentials."""
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project="emulator", credentials=AnonymousCredentials())
    return storage.Client()


def gcs_call(what: str, function, *args, **kwargs):
    """Run one storage call; turn whatever fails (after the call's own retries) into one clear line.

    NotFound and PreconditionFailed pass through: callers decide what they mean.
    """
    import google.auth.exceptions
    import requests
    from google.api_core import exceptions

    try:
        return function(*args, **kwargs)
    except (exceptions.NotFound, exceptions.PreconditionFailed):
        raise
    except exceptions.Forbidden as error:
        raise UserError(f"cannot {what}: permission denied ({reason_of(error)}); check the account's "
                        "roles on the bucket") from None
    except google.auth.exceptions.DefaultCredentialsError:
        raise UserError(f"cannot {what}: no Google Cloud credentials; run "
                        "`gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS") from None
    except (exceptions.GoogleAPIError, requests.exceptions.RequestException, OSError) as error:
        raise UserError(f"cannot {what}: storage unreachable or failing after retries ({reason_of(error)})") from None


def _retry():
    from google.cloud.storage.retry import DEFAULT_RETRY

    return DEFAULT_RETRY.with_timeout(RETRY_SECONDS)


def list_objects(url: str) -> List[Tuple[str, int]]:
    """(gs:// URL, size) of every object under `url`, a prefix that may end in a glob pattern, in name order."""
    bucket, path = bucket_and_path(url)
    pattern = any(character in path for character in "*?[")
    prefix = re.split(r"[*?\[]", path, maxsplit=1)[0] if pattern else path
    client = make_client()
    blobs = gcs_call(f"list {url}", lambda: list(client.list_blobs(bucket, prefix=prefix or None, retry=_retry())))
    return sorted((f"gs://{bucket}/{blob.name}", blob.size) for blob in blobs
                  if not blob.name.endswith("/") and (fnmatch.fnmatchcase(blob.name, path) if pattern else True))


def open_object(url: str):
    """A gs:// object as a seekable binary file (read in chunks: a large object is never held whole)."""
    from google.api_core import exceptions

    bucket, path = bucket_and_path(url)
    blob = make_client().bucket(bucket).blob(path)
    try:
        return gcs_call(f"read {url}", blob.open, "rb", retry=_retry())
    except exceptions.NotFound:
        raise UserError(f"{url} does not exist") from None


def download_folder(url: str, folder: str) -> List[str]:
    """Copy the objects directly in the gs:// folder `url` into the local `folder`; the names copied."""
    bucket, path = bucket_and_path(url.rstrip("/") + "/")
    client = make_client()
    blobs = gcs_call(f"list {url}", lambda: list(client.list_blobs(bucket, prefix=path, retry=_retry())))
    names = []
    for blob in blobs:
        name = blob.name[len(path):]
        if name and "/" not in name:
            gcs_call(f"read gs://{bucket}/{blob.name}", blob.download_to_filename, os.path.join(folder, name),
                     retry=_retry())
            names.append(name)
    return names
