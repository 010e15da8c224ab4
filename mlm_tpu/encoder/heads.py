"""The encoder line's heads, declared once: what a fine-tuned encoder's saved class is, which 🤗 pipeline (and
`predict` command) runs it, and PEFT's task type of its adapters. tasks.py declares the two encoder tasks with them;
prediction and delta-tuning, which sit below the registry, read them here."""

from mlm_tpu.training.task import Head

SEQUENCE_CLASSIFICATION = Head("TFAutoModelForSequenceClassification", "text-classification", "SEQ_CLS")
TOKEN_CLASSIFICATION = Head("TFAutoModelForTokenClassification", "token-classification", "TOKEN_CLS")
HEADS = {"sequence-classification": SEQUENCE_CLASSIFICATION, "token-classification": TOKEN_CLASSIFICATION}
PIPELINES = {head.pipeline_tag: task for task, head in HEADS.items()}  # `predict text-classification` -> its task
