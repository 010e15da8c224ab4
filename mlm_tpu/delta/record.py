"""`mlm_tpu_delta.json`, an adapter folder's record: the method and its settings, the base model and its task
settings, so predict and evaluate run the adapter as it was trained; for a classifier, the modules saved whole and
the labels its head was built for, which the base's own config lacks. folder.py writes it, the card, merge and the
registry of tasks read it."""

import dataclasses
import os
from typing import Dict

from mlm_tpu.jsonfiles import read_json
from mlm_tpu.model_folder import families

DELTA_RECORD = "mlm_tpu_delta.json"
# a classifier's config settings its base lacks (classifier_pooling: model_folder/pooling.py)
HEAD_SETTINGS = ("id2label", "label2id", "problem_type", "classifier_pooling")


def delta_record(method, model, base_model: str) -> dict:
    """What an adapter folder records of `method` applied to `model` (on `base_model`)."""
    return {"delta": method.name, "settings": dataclasses.asdict(method.settings),
            "base_model_name_or_path": base_model, "model_type": families.model_type(model.config),
            "architecture": type(model).__name__.removeprefix("TF"),
            "task_specific_params": model.config.task_specific_params,
            **({"modules_to_save": list(method.modules_to_save), "head": head_settings(model.config)}
               if method.modules_to_save else {})}


def head_settings(config) -> Dict[str, object]:
    """The config settings a classifier's head was built with (num_labels follows from id2label)."""
    return {name: getattr(config, name) for name in HEAD_SETTINGS if getattr(config, name, None) is not None}


def recorded_head_settings(record: dict) -> Dict[str, object]:
    """The head settings of an adapter folder's record, id2label's keys as numbers again (JSON made them text)."""
    settings = dict(record.get("head") or {})
    if "id2label" in settings:
        settings["id2label"] = {int(key): value for key, value in settings["id2label"].items()}
    return settings


def is_adapter_folder(path: str) -> bool:
    return os.path.isfile(os.path.join(path, DELTA_RECORD))


def read_delta_record(path: str) -> dict:
    return read_json(os.path.join(path, DELTA_RECORD), f"{path}'s {DELTA_RECORD}", "train the adapter again")
