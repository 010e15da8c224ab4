"""What PEFT calls things: the prefix of every key it saves, and the task_type a model's adapter needs (a head's: as
its task declares it, mlm_tpu/encoder/heads.py)."""

from typing import Optional

from mlm_tpu.encoder.heads import HEADS
from mlm_tpu.model_folder.configs import T5_MODEL_TYPES

PREFIX = "base_model.model."  # PeftModel -> LoraModel/IA3Model -> the transformers model


def head_task_type(class_name: str) -> Optional[str]:
    """PEFT's task type of a classifier class (TFAutoModelForSequenceClassification, TFBertForTokenClassification):
    the types whose PeftModel saves the new head whole beside the delta; None for other classes."""
    return next((head.peft_task_type for head in HEADS.values() if class_name.endswith(head.suffix)), None)


def task_type(model, method: str) -> Optional[str]:
    """SEQ_2_SEQ_LM for T5; SEQ_CLS or TOKEN_CLS for an encoder's classifier; for a RoBERTa masked LM,
    FEATURE_EXTRACTION where the method adds tokens (prompt and prefix tuning are applied only for these types,
    silently skipped for others), else no task type (the masked LM loads as it is)."""
    if model.config.model_type in T5_MODEL_TYPES:
        return "SEQ_2_SEQ_LM"
    head = head_task_type(type(model).__name__)
    if head:
        return head
    return "FEATURE_EXTRACTION" if method in ("prompt", "prefix") else None
