"""An encoder fine-tuned here (or any sequence or token classifier) on text: `python -m mlm_tpu.predict
text-classification | token-classification`, `classify_texts`, `tag_texts`.

text-classification: each text's label with every label's probability, or a regression's score. A model trained
on pairs takes each input as its two texts separated by a tab ("first<TAB>second").
token-classification: each text split at whitespace into words, each word's tag (its first piece's), and the
entities the tags make (seqeval's reading of BIO tags: B-PER I-PER -> one PER entity).
Inputs are cut and padded as the sharder cut them (labelled_rows.py), to the training length unless
--max-length says otherwise (no more than the model reads: checked as training checks its shards), and run in
fixed-shape batches.
"""

import math
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from mlm_tpu.configuration import check_ranges, setting
from mlm_tpu.console import warn
from mlm_tpu.errors import UserError

PAIR_SEPARATOR = "\t"


@dataclass
class EncoderPredictionConfig:
    """What `python -m mlm_tpu.predict text-classification | token-classification` does."""

    model: str  # a classifier: train.py's --output-dir, a save_pretrained folder or a Hub name
    texts: Tuple[str, ...]  # the inputs (a pair: its two texts separated by a tab)
    max_length: Optional[int] = setting(None, low=8)  # tokens per input, at most the model's positions (None: the
    # training length, else 512 or the model's positions if fewer)
    batch_size: int = setting(16, low=1)  # inputs run together
    base_model: Optional[str] = None  # an adapter folder's base (None: its adapter_config.json's)


def load_classifier(config: EncoderPredictionConfig, pipeline: str, load=None):
    """(model, tokenizer, the task's settings) of --model, refused in one line unless it has the pipeline's head."""
    import transformers

    from mlm_tpu.encoder.models import saved_config
    from mlm_tpu.model_folder.loading import load_pretrained
    from mlm_tpu.model_folder.task_settings import ENCODER_PARAMS, task_settings
    from mlm_tpu.encoder.heads import HEADS, PIPELINES

    task = PIPELINES[pipeline]
    suffix = HEADS[task].suffix

    def check(architecture: str) -> None:
        if not architecture.endswith(suffix):
            other = next((name for name, of in PIPELINES.items()
                          if architecture.endswith(HEADS[of].suffix)), None)
            fix = (f"run it with `predict {other}`" if other else
                   f"train one with `python train.py --task {task} --model-name-or-path {config.model} ...`")
            raise UserError(f"--model {config.model} is a {architecture}, not a {task.replace('-', ' ')} model; {fix}")

    saved = saved_config(config.model, "--model") if load is None else None  # (an adapter: checked once loaded)
    if saved:
        check((saved.architectures or [saved.model_type])[0])
    head = getattr(transformers, HEADS[task].class_name)
    model, tokenizer = (load or load_pretrained)(config.model, head)
    check(type(model).__name__.removeprefix("TF"))
    return model, tokenizer, task_settings(model.config, ENCODER_PARAMS) or {}


def check_max_length(config: EncoderPredictionConfig) -> None:
    """--max-length against the positions --model's config.json gives, before TensorFlow and the model load (seconds
    for a typo's answer); an adapter folder or a Hub name is checked once loaded."""
    path = os.path.join(config.model, "config.json")
    if not (config.max_length and os.path.isfile(path)):
        return
    from transformers import AutoConfig

    try:
        model_config = AutoConfig.from_pretrained(config.model)
    except (OSError, ValueError):
        return  # loading it says what is wrong with it
    _check_max_length(config, model_config)


def _check_max_length(config: EncoderPredictionConfig, model_config) -> None:
    from mlm_tpu.training.task import check_length

    check_length(model_config, config.max_length, config.model,
                 f"--max-length {config.max_length} makes {config.max_length}-token inputs", "pass")


def _length(config: EncoderPredictionConfig, settings: dict, model, tokenizer) -> int:
    """Tokens per input: --max-length, refused past the model's positions as training refuses longer shards; else the
    training length, else as many as both the tokenizer and the model take, at most 512."""
    from mlm_tpu.model_folder.configs import longest_input

    if config.max_length:
        _check_max_length(config, model.config)
        return config.max_length
    return settings.get("max_length") or min(tokenizer.model_max_length, 512, longest_input(model.config) or 512)


def _run(model, tokenizer, features: Dict[str, np.ndarray], batch_size: int, probabilities: bool) -> np.ndarray:
    """The model's outputs (softmax, or raw for a regression) on every row, in fixed-shape batches; the rows cut to
    the longest input (a multiple of 8)."""
    import tensorflow as tf

    from mlm_tpu.encoder.models import model_inputs
    from mlm_tpu.training.prediction import batches

    width = min(features["input_ids"].shape[1], 8 * math.ceil(features["attention_mask"].sum(axis=1).max() / 8))
    inputs = {name: features[name][:, :width].astype(np.int32) for name in model_inputs(model.config, tokenizer)}

    def step(batch):
        logits = tf.cast(model(**batch, training=False).logits, tf.float32)
        return tf.nn.softmax(logits) if probabilities else logits

    step = tf.function(step, autograph=False)
    rows = len(inputs["input_ids"])
    outputs = np.concatenate([step(batch).numpy() for batch in batches(inputs, min(batch_size, rows))])
    return outputs[:rows]


def classify_texts(config: EncoderPredictionConfig, load=None) -> List[Dict[str, object]]:
    """For each text: {"text", ["pair",] "label", "scores": {label: probability}}, or {"text", ["pair",] "score"}
    from a regression model. `load(name_or_path, model_class)` -> (model, tokenizer) reads the model (default:
    load_pretrained; an adapter folder's plug-in loads its base with the delta)."""
    from mlm_tpu.encoder.models import Labels
    from mlm_tpu.encoder.labelled_rows import FixedLengthEncoder

    check_ranges(config)
    model, tokenizer, settings = load_classifier(config, "text-classification", load)
    pairs = bool(settings.get("pair_column"))
    texts, seconds = [], []
    for number, text in enumerate(config.texts, start=1):
        first, tab, second = text.partition(PAIR_SEPARATOR)
        if pairs and not (first.strip() and second.strip()):
            raise UserError(f"input {number}: {config.model} reads text pairs; write each input as its two texts "
                            "separated by a tab")
        texts.append(first.strip() if pairs else text)
        seconds.append(second.strip())
    length = _length(config, settings, model, tokenizer)
    features, cut = FixedLengthEncoder(tokenizer, length).texts(texts, seconds if pairs else None)
    if cut:
        warn(f"{cut} input{'s were' if cut != 1 else ' was'} cut to {length} tokens")
    labels = Labels.of_config(model.config, token_level=False)
    outputs = _run(model, tokenizer, features, config.batch_size, probabilities=not labels.regression)
    results = []
    for text, second, row in zip(texts, seconds, outputs):
        result = {"text": text, **({"pair": second} if pairs else {})}
        if labels.regression:
            result["score"] = float(row[0])
        else:
            scores = dict(zip(labels.names, map(float, row)))
            result.update({"label": labels.names[int(np.argmax(row))], "scores": scores})
        results.append(result)
    return results


def tag_texts(config: EncoderPredictionConfig, load=None) -> List[Dict[str, object]]:
    """For each text: {"text", "words", "tags" (one per word; None past the length), "entities": [{"entity",
    "words", "start", "end"}]} (word positions, end excluded)."""
    from seqeval.metrics.sequence_labeling import get_entities

    from mlm_tpu.encoder.models import Labels
    from mlm_tpu.encoder.labelled_rows import FixedLengthEncoder

    check_ranges(config)
    model, tokenizer, settings = load_classifier(config, "token-classification", load)
    words = [text.split() for text in config.texts]
    for number, row in enumerate(words, start=1):
        if not row:
            raise UserError(f"input {number} is empty; give each text to tag")
    length = _length(config, settings, model, tokenizer)
    features, word_ids, _ = FixedLengthEncoder(tokenizer, length).words(words)
    names = Labels.of_config(model.config, token_level=True).names
    predicted = _run(model, tokenizer, features, config.batch_size, probabilities=True).argmax(axis=-1)
    results, untagged = [], 0
    for text, row, ids, guesses in zip(config.texts, words, word_ids, predicted):
        tags: List[Optional[str]] = [None] * len(row)
        for position, word in enumerate(ids[:len(guesses)]):
            if word is not None and tags[word] is None:
                tags[word] = names[guesses[position]]
        untagged += tags.count(None)
        entities = [{"entity": kind, "words": " ".join(row[start:end + 1]), "start": start, "end": end + 1}
                    for kind, start, end in get_entities([tag or "O" for tag in tags])]
        results.append({"text": text, "words": row, "tags": tags, "entities": entities})
    if untagged:
        warn(f"{untagged} word{'s' * (untagged != 1)} past {length} tokens "
             "got no tag; pass a larger --max-length")
    return results
