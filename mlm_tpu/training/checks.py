"""A run's settings, tokenizer and output folder, checked before it writes anything: each bad input is one line,
named as itself, in the order the run meets them (the settings, what the run reads, then where it writes)."""

import os
from typing import Optional

from mlm_tpu.configuration import check_ranges
from mlm_tpu.errors import UserError
from mlm_tpu.hub import is_local
from mlm_tpu.model_folder.checks import check_config_names_no_code
from mlm_tpu.model_folder.configs import read_model_config
from mlm_tpu.model_folder.saving import check_training_output_dir
from mlm_tpu.shards.mixture import members_of
from mlm_tpu.shards.reading import ShardSet, check_tokenizer
from mlm_tpu.training.config import TrunkConfig
from mlm_tpu.training.task import Task, check_base_vocabulary


def check_config(config: TrunkConfig, task: Task) -> None:
    """The settings, and the pretrained model they start from (its type against the task's, before the shards or
    its tokenizer are read: what follows from a wrong base is not the first thing to report)."""
    check_ranges(config)
    task.check(config)
    if config.output_dir.startswith("gs://"):
        raise UserError("--output-dir must be a local folder (the backup and save_pretrained write there); "
                        "push the result with --hub-model-id or copy it to gs:// afterwards")
    if config.backup_steps and config.backup_steps % config.steps_per_execution:
        raise UserError(f"--backup-steps {config.backup_steps} is not a multiple of --steps-per-execution "
                        f"{config.steps_per_execution}: a backup can only be written between executions; use "
                        f"{max(config.backup_steps // config.steps_per_execution, 1) * config.steps_per_execution}")
    if config.model_config and is_local(config.model_config):  # a preset names no code; a Hub name: configs.py
        check_config_names_no_code(config.model_config, "--model-config")
    if config.model_name_or_path:
        task.check_base(read_model_config(config.model_name_or_path, "--model-name-or-path"),
                        f"--model-name-or-path {config.model_name_or_path}")
        check_not_in_place(config)


def check_not_in_place(config: TrunkConfig) -> None:
    """Refuse an --output-dir that is the --model-name-or-path folder: the run would save over the checkpoint it
    continues (its weights, card and training_args.json), and the same command, run again, would continue another
    checkpoint. Only a run's own resumable output goes on there: its backup records this --model-name-or-path."""
    base, output_dir = config.model_name_or_path, config.output_dir
    if not (os.path.isdir(base) and os.path.isdir(output_dir) and os.path.samefile(base, output_dir)):
        return
    if _backup_continues(output_dir, base):
        return
    raise UserError(f"--output-dir {output_dir} is --model-name-or-path {base}: the run would save over the "
                    "checkpoint it continues (its weights, card and training_args.json), and the same command run "
                    "again would continue another; give another --output-dir")


def _backup_continues(output_dir: str, base: str) -> bool:
    """Whether `output_dir` holds a backup of a run started from `base` (its newest backup's settings say so)."""
    from mlm_tpu.training.backup import backup_steps, check_backup  # TensorFlow's: only for a folder given twice

    folder = os.path.join(output_dir, "backup")
    steps = backup_steps(folder)
    record = check_backup(folder, steps[0])[0] if steps else None
    settings = record.settings if record else None
    recorded = (settings or {}).get("model_name_or_path")
    return bool(recorded) and os.path.isdir(recorded) and os.path.samefile(recorded, base)


def check_output_folder(config: TrunkConfig) -> None:
    """Where the run writes, checked once what it reads is."""
    if os.path.exists(config.output_dir) and not os.path.isdir(config.output_dir):
        raise UserError(f"--output-dir {config.output_dir} is a file, not a folder; choose another --output-dir")
    check_training_output_dir(config.output_dir)


def make_output_dir(path: str) -> None:
    """The output folder, made by the chief once everything the run reads is checked, and writable."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise UserError(f"cannot create --output-dir {path}: {error.strerror or error}") from None
    if not os.access(path, os.W_OK):
        raise UserError(f"--output-dir {path} is not writable; choose another --output-dir or fix its permissions")


def check_tokenizers(config: TrunkConfig, tokenizer, train_shards: ShardSet,
                     eval_shards: Optional[ShardSet], grows: bool = False) -> None:
    """The tokenizer the run trains with is the base's (its embeddings; with `grows`, the task's Task.grows_vocabulary,
    or an extension of it), then the one every split (each mixture member) was sharded with (its ids)."""
    check_base_vocabulary(config, tokenizer, grows)
    base = config.model_name_or_path
    given = f"--tokenizer {config.tokenizer}" if config.tokenizer else f"the tokenizer of --model-name-or-path {base}"
    # without --tokenizer, the model's own: its embeddings were learnt for its pieces, so only re-sharding can fix it
    fix = {} if config.tokenizer else {"fix": f"re-shard the text with it (`mlm-tpu shard --tokenizer {base} ...`)"}
    for flag, shards in (*(("--train-dataset", member) for member in members_of(train_shards)),
                         ("--eval-dataset", eval_shards)):
        if shards:
            check_tokenizer(shards, tokenizer, flag, given, **fix)
