"""Pushing a saved folder (tokenizer or model) to the 🤗 Hub, failing in one clear line."""

from mlm_tpu.errors import UserError, reason_of


def push_folder_to_hub(folder: str, repo_id: str, commit_message: str) -> str:
    """Create `repo_id` if needed and upload `folder` to it; return the commit's URL.

    The folder is already saved locally when this runs, so a Hub failure loses nothing: the
    error says where the files are and how to upload them later.
    """
    from huggingface_hub import HfApi

    api = HfApi()
    try:
        api.create_repo(repo_id, exist_ok=True)
        commit = api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message=commit_message)
    except Exception as error:  # offline, unreachable, unauthorised, rate-limited: all the same to the user
        raise UserError(f"could not push to the Hub repo '{repo_id}' ({reason_of(error)}); the files are saved "
                        f"in {folder}: upload them later with `huggingface-cli upload {repo_id} {folder}`") from None
    return commit.commit_url
