"""The text-to-text task a T5 model is trained for: its settings in the saved config, and the task object
(what runs on the device in validation, and how it is scored) made from them."""

from typing import Dict, Optional

from mlm_tpu.t5.classification import ClassificationTask, LabelSet
from mlm_tpu.t5.generation import GenerationTask

TASK_PARAMS = "mlm_tpu_text2text"  # the key of our settings in config.task_specific_params


def task_settings(config) -> Optional[Dict[str, object]]:
    """The task a saved model was trained for here (task, labels, source_prefix, lengths), if it was."""
    return (getattr(config, "task_specific_params", None) or {}).get(TASK_PARAMS)


def make_task(settings: Dict[str, object], tokenizer, default_max_new_tokens: int):
    """The task object for these settings: classification over their labels, or generation."""
    if settings["task"] == "classification":
        return ClassificationTask(LabelSet.from_names(settings["labels"], tokenizer))
    return GenerationTask(tokenizer, settings.get("max_new_tokens") or default_max_new_tokens)
