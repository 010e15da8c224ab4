"""Pushing a saved folder (tokenizer or model) to the 🤗 Hub, failing in one clear line."""

from mlm_tpu.errors import UserError, reason_of


def push_folder_to_hub(folder: str, repo_id: str, commit_message: str) -> str:
    """Create `repo_id` if needed and upload `folder` to it; return the commit's URL.

    The folder is already saved locally when this runs, so a Hub failure loses nothing: the
    error says where the files are and how to upload them later.
    """
    from huggingface_hub import HfApi
    from requests.exceptions import ConnectionError as NoConnection

    api = HfApi()
    later = f"the files are saved in {folder}: upload them later with `huggingface-cli upload {repo_id} {folder}`"
    try:
        api.create_repo(repo_id, exist_ok=True)
        commit = api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message=commit_message)
    except NoConnection:
        raise UserError(f"could not reach the Hub at {api.endpoint} to push '{repo_id}'; {later}") from None
    except Exception as error:  # offline mode, unauthorised, rate-limited: all the same to the user
        raise UserError(f"could not push to the Hub repo '{repo_id}' ({reason_of(error)}); {later}") from None
    return commit.commit_url
