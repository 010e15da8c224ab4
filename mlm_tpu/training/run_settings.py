"""A run's settings that decide its result, kept in every backup, so a resumed run is the run it says it is.

Started again over its backup, a run goes on with the settings it was started with. A setting that
changes the result (learning rate, schedule, batch, data, model, seed, task, ...) given differently
is refused in one line naming it and both values, unless --allow-changed-settings says the change
is meant: then it is recorded, with the step it took effect at, in the backup and in
`training_args.json` under "run", and the log says so. Settings marked `changes_result=False` in
the config (logging, backups, pushing, where the run runs) change freely. The global batch is
compared rather than the per-replica one and the accumulation steps, so a run may move to another number of replicas
(and micro-batches).
"""

import dataclasses
import os
from typing import Any, Dict, List, Optional

from mlm_tpu.configuration import flag_of
from mlm_tpu.console import warn
from mlm_tpu.errors import UserError

GLOBAL_BATCH = "global_batch_size"  # computed: per-replica batch x replicas x accumulation steps
SHARDS = "train_shards"  # computed: the training shards' names and counts
# settings that earlier runs recorded unset (None) where runs now record the value they use
# (MaskedLmTask.with_defaults), and the value such a run used: --task electra's default split has since become
# ELECTRA's (85/15/0), so an earlier ELECTRA run resumed without the flags is refused, not silently changed
UNSET_USED = {"mask_replace_prob": 0.8, "random_replace_prob": 0.1}


def _result_fields(config, prefix: str = "") -> Dict[str, Any]:
    found = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            found.update(_result_fields(value, f"{prefix}{field.name}."))
        elif field.metadata.get("changes_result", True):
            found[prefix + field.name] = list(value) if isinstance(value, tuple) else value
    return found


def _defaults(config_class, prefix: str = "") -> Dict[str, Any]:
    """The default of every setting that decides the result (what a backup made before the setting existed ran with)."""
    found = {}
    for field in dataclasses.fields(config_class):
        if field.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(field.default_factory):
            found.update(_defaults(field.default_factory, f"{prefix}{field.name}."))
        elif field.default is not dataclasses.MISSING and field.metadata.get("changes_result", True):
            found[prefix + field.name] = list(field.default) if isinstance(field.default, tuple) else field.default
    return found


def result_settings(config, global_batch_size: int, shard_files: List[str], shard_counts: List[int]) -> dict:
    """The settings of `config` (a TrainingConfig) that decide the result, with the global batch and shards."""
    return {**_result_fields(config), GLOBAL_BATCH: global_batch_size,
            SHARDS: [[os.path.basename(name), count] for name, count in zip(shard_files, shard_counts)]}


def _flag(config_class, path: str) -> str:
    if path == GLOBAL_BATCH:
        return "the global batch (--per-replica-batch-size x replicas x --gradient-accumulation-steps)"
    if path == SHARDS:
        return "the training shards"
    *parents, name = path.split(".")
    for parent in parents:
        config_class = {field.name: field for field in dataclasses.fields(config_class)}[parent].type
    fields = {field.name: field for field in dataclasses.fields(config_class)}
    return flag_of(fields[name]) if name in fields else path


def _shown(path: str, value: Any) -> str:
    if path == SHARDS:
        return f"{len(value)} shards of {sum(count for _, count in value):,} examples"
    return "not set" if value is None else repr(value)


def _recorded(path: str, value: Any) -> Any:
    return _shown(path, value) if path == SHARDS else value


def _unset_used(recorded: dict, current: dict) -> Dict[str, Any]:
    """The values a backup's unset settings of UNSET_USED stood for, where the run records them now (the tasks that
    use them)."""
    return {path: value for path, value in UNSET_USED.items()
            if path in recorded and recorded[path] is None and current.get(path) is not None}


def changed_settings(recorded: dict, current: dict) -> List[str]:
    """The settings whose values differ (the training shards count as unchanged when only their folder moved)."""
    return [path for path in sorted(set(recorded) | set(current))
            if recorded.get(path) != current.get(path)
            and not (path == "train_dataset" and recorded.get(SHARDS) == current.get(SHARDS))]


def check_resumed_settings(config, recorded: Optional[dict], current: dict, step: int, folder: str,
                           earlier_changes: List[dict]) -> List[dict]:
    """The changes made on resuming at `step` (all changes so far, with `earlier_changes`); refused unless
    `config.allow_changed_settings`. A backup that recorded no settings (mlm_tpu 0.3) is resumed as it is."""
    if recorded is None:
        warn(f"the backup in {folder} was written by mlm_tpu 0.3, which did not record the run's settings: resuming "
             "without checking that they are the same")
        return list(earlier_changes)
    recorded = {**_defaults(type(config)), **recorded, **_unset_used(recorded, current)}  # what the backup's run used
    changed = changed_settings(recorded, current)
    if not changed:
        return list(earlier_changes)
    config_class = type(config)
    first = changed[0]
    described = (f"{_flag(config_class, first)} was {_shown(first, recorded.get(first))} in the backup at step {step} "
                 f"and is {_shown(first, current.get(first))} now")
    more = f" (and {', '.join(_flag(config_class, path) for path in changed[1:])})" if changed[1:] else ""
    if not config.allow_changed_settings:
        raise UserError(f"{described}{more}: resuming would silently make a run that no training_args.json "
                        f"describes; give another --output-dir to start a new run, or pass --allow-changed-settings "
                        f"to resume with the change (it is recorded in {folder}/training_args.json)")
    changes = [{"step": step, "setting": _flag(config_class, path), "from": _recorded(path, recorded.get(path)),
                "to": _recorded(path, current.get(path))} for path in changed]
    warn(f"{described}{more}: resuming with the change, as --allow-changed-settings says; training_args.json records "
         f"it under run.setting_changes")
    return [*earlier_changes, *changes]


def resumed_changes(config, record, global_batch_size: int, shards) -> List[dict]:
    """The settings changed since the backup `record` (a BackupRecord; `shards`, the training shards), refused unless
    --allow-changed-settings; compared before anything follows from them, so a change is named as itself (other
    shards), not by what it breaks (the data order's input pipelines). Their number V is the backup's here:
    choose_layout checks it, knowing what may change."""
    config = dataclasses.replace(config, input_pipelines=(record.settings or {}).get("input_pipelines",
                                                                                      config.input_pipelines))
    current = result_settings(config, global_batch_size, shards.files, shards.counts)
    return check_resumed_settings(config, record.settings, current, record.step, config.output_dir,
                                  record.setting_changes)
