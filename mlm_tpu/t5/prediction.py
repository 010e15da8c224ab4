"""A T5 model on text (`python -m mlm_tpu.predict text2text`, `predict_text2text`).

For a model trained with `--task classification`, the class (one decoder step, argmax over the
label tokens, as in training) with each label's probability; otherwise the generated text
(XLA-compiled greedy `generate`). Inputs are written as the model saw them in training (task
prefix included); a long input keeps its first and last halves, as the sharder cut it.
"""

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from mlm_tpu.configuration import check_ranges, setting
from mlm_tpu.console import warn
from mlm_tpu.errors import UserError
from mlm_tpu.t5.text2text_rows import head_and_tail, padded_inputs
from mlm_tpu.training.prediction import batches

DEFAULT_MAX_NEW_TOKENS = 32


@dataclass
class Text2TextPredictionConfig:
    """What `python -m mlm_tpu.predict text2text` does."""

    model: str  # a T5 model: train.py's --output-dir, a save_pretrained folder or a Hub name
    inputs: Tuple[str, ...]
    task: Optional[str] = None  # classification or generation (None: what the model was trained for)
    labels: Optional[Tuple[str, ...]] = None  # classification: the class names (None: the model's)
    max_length: Optional[int] = setting(None, low=1)  # input tokens (None: the training length)
    max_new_tokens: Optional[int] = setting(None, low=1)  # generation (None: the training setting, else 32)
    batch_size: int = setting(16, low=1)  # inputs run together
    base_model: Optional[str] = None  # an adapter folder's base (None: its adapter_config.json's)


def encode_inputs(tokenizer, texts: Sequence[str], max_length: int) -> Dict[str, np.ndarray]:
    """Token ids cut as the sharder cuts them (head and tail), padded to the longest, a multiple of 8."""
    ids = [head_and_tail(row, max_length) for row in tokenizer(list(texts))["input_ids"]]
    width = min(max_length, 8 * math.ceil(max(map(len, ids)) / 8))
    return {name: rows.astype(np.int32) for name, rows in padded_inputs(ids, width, tokenizer.pad_token_id).items()}


def classify(model, encoded, batch_size: int, labels) -> List[Dict[str, float]]:
    """Each input's probability of each label."""
    import tensorflow as tf

    from mlm_tpu.t5.classification import label_logits

    token_ids = tf.constant(labels.token_ids, dtype=tf.int32)
    step = tf.function(lambda batch: tf.nn.softmax(label_logits(model, batch["input_ids"], batch["attention_mask"],
                                                                token_ids)), autograph=False)
    probabilities = np.concatenate([step(batch).numpy() for batch in batches(encoded, batch_size)])
    return [dict(zip(labels.names, map(float, row))) for row in probabilities[:len(encoded["input_ids"])]]


def generate(model, tokenizer, encoded, batch_size: int, max_new_tokens: int) -> List[str]:
    import tensorflow as tf

    from mlm_tpu.t5.generation import generate_tokens

    step = tf.function(lambda batch: generate_tokens(model, batch["input_ids"], batch["attention_mask"],
                                                     max_new_tokens), jit_compile=True, autograph=False)
    tokens = np.concatenate([step(batch).numpy() for batch in batches(encoded, batch_size)])
    return tokenizer.batch_decode(tokens[:len(encoded["input_ids"])], skip_special_tokens=True)


def predict_text2text(config: Text2TextPredictionConfig, load=None) -> List[Dict[str, object]]:
    """For each input: {"input", "label", "scores": {label: probability}} (classification) or {"input", "output"}.
    `load(name_or_path, model_class)` -> (model, tokenizer) reads the model (default: load_pretrained; an adapter
    folder's plug-in loads its base with the delta, mlm_tpu/delta)."""
    from mlm_tpu.model_folder.configs import T5_MODEL_TYPES, model_type
    from mlm_tpu.model_folder.loading import load_pretrained
    from mlm_tpu.t5.classification import LabelSet
    from mlm_tpu.t5.family import TFT5FamilyForConditionalGeneration
    from mlm_tpu.model_folder.task_settings import task_settings

    check_ranges(config)
    if model_type(config.model) not in (None, *T5_MODEL_TYPES):
        raise UserError(f"--model {config.model} is a {model_type(config.model)} model, not a T5 one; "
                        "fill its masks with `python -m mlm_tpu.predict --model ...`")
    model, tokenizer = (load or load_pretrained)(config.model, TFT5FamilyForConditionalGeneration)
    trained = task_settings(model.config) or {}
    task = config.task or trained.get("task", "generation")
    texts = list(config.inputs)
    prefix = trained.get("source_prefix")
    if prefix and any(not text.startswith(prefix) for text in texts):
        warn(f"{config.model} was trained on inputs starting with '{prefix}'; write it before each input")
    encoded = encode_inputs(tokenizer, texts, config.max_length or trained.get("max_length") or
                            min(tokenizer.model_max_length, 512))
    batch_size = min(config.batch_size, len(texts))
    if task == "classification":
        names = config.labels or trained.get("labels")
        if not names:
            raise UserError(f"--model {config.model} was not trained for classification here: pass its --labels")
        scores = classify(model, encoded, batch_size, LabelSet.from_names(names, tokenizer))
        return [{"input": text, "label": max(row, key=row.get), "scores": row} for text, row in zip(texts, scores)]
    max_new_tokens = config.max_new_tokens or trained.get("max_new_tokens") or DEFAULT_MAX_NEW_TOKENS
    outputs = generate(model, tokenizer, encoded, batch_size, max_new_tokens)
    return [{"input": text, "output": output} for text, output in zip(texts, outputs)]
