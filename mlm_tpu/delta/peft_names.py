"""What PEFT calls things: the prefix of every key it saves, and the task_type a model's adapter needs."""

PREFIX = "base_model.model."  # PeftModel -> LoraModel/IA3Model -> the transformers model


def task_type(model, method: str) -> str:
    """SEQ_2_SEQ_LM for T5; for RoBERTa, FEATURE_EXTRACTION where the method adds tokens (prompt and prefix
    tuning are applied only for these types, silently skipped for others), else no task type (the masked LM
    loads as it is)."""
    if model.config.model_type == "t5":
        return "SEQ_2_SEQ_LM"
    return "FEATURE_EXTRACTION" if method in ("prompt", "prefix") else None
