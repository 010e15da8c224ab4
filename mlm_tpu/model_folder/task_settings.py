"""What a saved model says it was trained for: mlm_tpu's T5 tasks keep their settings (task, labels,
source_prefix, lengths) in the model's config, under `task_specific_params`, so that prediction,
evaluation and export find them in the folder alone; the encoder tasks theirs (task, length, pairs) under
a key of their own. Plain reading and writing of the config: the stages read it without knowing any task."""

from typing import Dict, Optional

TASK_PARAMS = "mlm_tpu_text2text"  # the key of our T5 settings in config.task_specific_params
ENCODER_PARAMS = "mlm_tpu_encoder"  # the key of the encoder tasks' settings


def task_settings(config, key: str = TASK_PARAMS) -> Optional[Dict[str, object]]:
    """The task a saved model was trained for here (task, labels, source_prefix, lengths), if it was."""
    return (getattr(config, "task_specific_params", None) or {}).get(key)


def record_task_settings(config, settings: Dict[str, object], key: str = TASK_PARAMS) -> None:
    """Write `settings` into the config, beside any task_specific_params it holds already."""
    config.task_specific_params = {**(config.task_specific_params or {}), key: settings}
