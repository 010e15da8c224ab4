"""The T5 task a model was trained for, kept in its saved config (`task_specific_params`), and the scorer of
a text-to-text task (what validation runs on the device, and how it is scored) made from those settings."""

from typing import Dict, Optional

from mlm_tpu.t5.classification import ClassificationScorer, LabelSet
from mlm_tpu.t5.generation import GenerationScorer

TASK_PARAMS = "mlm_tpu_text2text"  # the key of our settings in config.task_specific_params


def task_settings(config) -> Optional[Dict[str, object]]:
    """The task a saved model was trained for here (task, labels, source_prefix, lengths), if it was."""
    return (getattr(config, "task_specific_params", None) or {}).get(TASK_PARAMS)


def make_scorer(settings: Dict[str, object], tokenizer, default_max_new_tokens: int):
    """The scorer for these settings: classification over their labels, or generation."""
    if settings["task"] == "classification":
        return ClassificationScorer(LabelSet.from_names(settings["labels"], tokenizer))
    return GenerationScorer(tokenizer, settings.get("max_new_tokens") or default_max_new_tokens)
