"""The 🤗 Hub both ways, failing in one clear line: a Hub model's files read from the Hub cache (or downloaded into
it, as transformers reads them), and saved folders (a tokenizer, a model) pushed over its HTTP API.

The folder is always saved locally first, so a Hub failure loses nothing: the error says where
the files are and how to upload them later. Training pushes in the background (`HubPusher`), so
the TPU does not wait for the upload; as transformers' PushToHubCallback does, an epoch whose
predecessor is still uploading is not pushed on its own, and the end of training waits for a
last push of the final folder.
"""

import os
import shutil
import tempfile
from concurrent.futures import Future
from typing import Optional

from mlm_tpu.console import log, warn
from mlm_tpu.errors import UserError, reason_of

NOT_PUSHED = ["backup/**", ".*", "**/.*"]  # the resumable backup and hidden staging files stay local
# A Hub model's files a hand-written family reads (hub_folder): its config, weights and tokenizer, not its other
# weights' formats (a TensorFlow, Flax or ONNX copy) nor its code
MODEL_FILES = ("config.json", "model*.safetensors", "model.safetensors.index.json", "tokenizer*", "special_tokens*",
               "vocab*", "merges.txt", "*.model", "added_tokens.json", "README.md")


def is_local(name_or_path: str) -> bool:
    """Whether `name_or_path` names a local path (anything else is taken for a Hub name)."""
    return os.path.exists(name_or_path) or name_or_path.startswith((".", "/", "~"))


def hub_file(name: str, filename: str) -> Optional[str]:
    """The local path of a Hub model's file, from the Hub cache or downloaded into it; None when the model has no
    such file, or it cannot be had (offline and not cached: the load that follows says so)."""
    from transformers.utils.hub import cached_file

    try:
        return cached_file(name, filename, _raise_exceptions_for_missing_entries=False,
                           _raise_exceptions_for_connection_errors=False, _raise_exceptions_for_gated_repo=False)
    except (OSError, ValueError):
        return None


def hub_folder(name_or_path: str, where: str) -> str:
    """A local folder of the model: `name_or_path` itself, or a Hub model's snapshot in the Hub cache (MODEL_FILES,
    downloaded into it when missing, as transformers reads a Hub model's files), for the readers that take a folder
    (a hand-written family's); one error line when it cannot be had (`where` names it: "--model NAME")."""
    if is_local(name_or_path):
        return name_or_path
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(name_or_path, allow_patterns=list(MODEL_FILES))
    except Exception as error:  # offline and not cached, unreachable, no such repo, gated: all one to the user
        raise UserError(f"{where}: not a model folder here, nor a Hub model whose files are in the Hub cache or can "
                        f"be downloaded ({reason_of(error)}); check the name, or download the model first") from None


def _hub_error(error: BaseException, repo_id: str, folder: str, endpoint: str) -> UserError:
    from requests.exceptions import ConnectionError as NoConnection

    later = f"the files are saved in {folder}: upload them later with `huggingface-cli upload {repo_id} {folder}`"
    if isinstance(error, NoConnection):
        return UserError(f"could not reach the Hub at {endpoint} to push '{repo_id}'; {later}")
    return UserError(f"could not push to the Hub repo '{repo_id}' ({reason_of(error)}); {later}")


def push_folder_to_hub(folder: str, repo_id: str, commit_message: str) -> str:
    """Create `repo_id` if needed and upload `folder` to it; return the commit's URL."""
    from huggingface_hub import HfApi

    api = HfApi()
    try:
        api.create_repo(repo_id, exist_ok=True)
        commit = api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message=commit_message,
                                   ignore_patterns=NOT_PUSHED)
    except Exception as error:  # offline mode, unreachable, unauthorised, rate-limited: all the same to the user
        raise _hub_error(error, repo_id, folder, api.endpoint) from None
    return commit.commit_url


class HubPusher:
    """Pushes a training run's output folder to one Hub repo, in the background."""

    def __init__(self, repo_id: str, folder: str):
        from huggingface_hub import HfApi
        from huggingface_hub.utils import logging as hub_logging

        hub_logging.set_verbosity_error()  # its retry warnings would bury our one-line error
        self.api = HfApi()
        self.repo_id = repo_id
        self.folder = folder
        self.pending: Optional[Future] = None
        self.snapshot: Optional[str] = None
        try:  # before training starts: a wrong name or a missing login fails now, not after hours
            self.api.create_repo(repo_id, exist_ok=True)
        except Exception as error:
            raise UserError(f"cannot set up pushing to the Hub repo '{repo_id}' ({reason_of(error)}); log in with "
                            "`huggingface-cli login` (or set HF_TOKEN) and check --hub-model-id") from None

    def push(self, message: str) -> None:
        """Upload the folder as it is now, unless the previous upload is still running."""
        if self.pending is not None and not self.pending.done():
            log(f"The previous push to {self.repo_id} is still uploading; this one waits for the next")
            return
        self._finish_pending()
        self.snapshot = tempfile.mkdtemp(prefix=".push-", dir=os.path.dirname(os.path.abspath(self.folder)))
        snapshot = os.path.join(self.snapshot, "folder")
        # Hard links: the next save replaces files by rename, so this upload keeps reading the epoch it began with.
        shutil.copytree(self.folder, snapshot, copy_function=_link_or_copy,
                        ignore=shutil.ignore_patterns("backup", ".*"))
        self.pending = self.api.upload_folder(repo_id=self.repo_id, folder_path=snapshot, commit_message=message,
                                              ignore_patterns=NOT_PUSHED, run_as_future=True)

    def finish(self, message: str) -> None:
        """Wait for the upload in flight, then push the final folder and wait for that too."""
        self._finish_pending()
        self.push(message)
        self._finish_pending()
        log(f"Pushed {self.folder} to the Hub repo {self.repo_id}")

    def _finish_pending(self) -> None:
        if self.pending is None:
            return
        try:
            self.pending.result()
        except Exception as error:
            raise _hub_error(error, self.repo_id, self.folder, self.api.endpoint) from None
        finally:
            self.pending = None
            shutil.rmtree(self.snapshot, ignore_errors=True)

    def abandon(self) -> None:
        """Training failed: let the upload in flight finish if it can, and say so if it cannot."""
        try:
            self._finish_pending()
        except UserError as error:
            warn(str(error))


def _link_or_copy(source: str, target: str) -> None:
    """Hard-link files that are replaced whole (weights); copy the TensorBoard logs, which grow in place."""
    if f"{os.sep}logs{os.sep}" in source:
        shutil.copy2(source, target)
        return
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
