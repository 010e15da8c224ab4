"""Generation tasks (question answering, summarization): greedy decoding and the usual text scores.

`generate_tokens` runs transformers' `generate` for a fixed number of new tokens, so the shapes
are fixed and the loop compiles once with XLA. Answers are scored as SQuAD does (exact match and
token F1 after lower-casing and dropping punctuation and articles) and summaries with ROUGE-1, -2
and -L F-measures (the `rouge-score` package, with stemming).
"""

import re
import string
from collections import Counter
from typing import Dict, Sequence

import numpy as np
import tensorflow as tf

from mlm_tpu.shards.format import IGNORE_INDEX

GENERATION_SCORES = ("exact_match", "f1", "rouge1", "rouge2", "rougeL")


def generate_tokens(model, input_ids: tf.Tensor, attention_mask: tf.Tensor, max_new_tokens: int) -> tf.Tensor:
    """[batch, max_new_tokens] int32: greedy output after the start token, padded after </s>."""
    output = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens,
                            do_sample=False, num_beams=1)
    new_tokens = tf.cast(output[:, 1:], tf.int32)
    missing = max_new_tokens - tf.shape(new_tokens)[1]  # without XLA, generation stops when all rows are done
    padded = tf.pad(new_tokens, [[0, 0], [0, missing]], constant_values=model.config.pad_token_id)
    return tf.ensure_shape(padded, [input_ids.shape[0], max_new_tokens])


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(character for character in text.lower() if character not in string.punctuation)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD's token F1 between the normalised answers."""
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not predicted or not expected:
        return float(predicted == expected)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def generation_scores(predictions: Sequence[str], references: Sequence[str]) -> Dict[str, float]:
    """Mean exact match, token F1 and ROUGE-1/2/L F-measures over the examples."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    rows = []
    for prediction, reference in zip(predictions, references):
        rouge = scorer.score(reference, prediction)
        rows.append([float(normalize_answer(prediction) == normalize_answer(reference)),
                     token_f1(prediction, reference), rouge["rouge1"].fmeasure, rouge["rouge2"].fmeasure,
                     rouge["rougeL"].fmeasure])
    means = np.mean(rows, axis=0) if rows else np.zeros(len(GENERATION_SCORES))
    return dict(zip(GENERATION_SCORES, map(float, means)))


class GenerationScorer:
    """What validation runs on the device for generation (new tokens) and how the host scores the texts."""

    best_metric = "rougeL"

    def __init__(self, tokenizer, max_new_tokens: int):
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens

    def on_device(self, model, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        return {"generated": generate_tokens(model, batch["input_ids"], batch["attention_mask"], self.max_new_tokens),
                "labels": batch["labels"]}

    def score(self, outputs: Dict[str, np.ndarray]) -> Dict[str, float]:
        examples = outputs["labels"][:, 0] != IGNORE_INDEX  # padding rows are not examples
        references = np.where(outputs["labels"] == IGNORE_INDEX, self.tokenizer.pad_token_id, outputs["labels"])
        return generation_scores(self.tokenizer.batch_decode(outputs["generated"][examples], skip_special_tokens=True),
                                 self.tokenizer.batch_decode(references[examples], skip_special_tokens=True))

    def describe(self, scores: Dict[str, float]) -> str:
        return (f"exact match {scores['exact_match']:.2%}, F1 {scores['f1']:.3f}, ROUGE-1/2/L {scores['rouge1']:.3f}/"
                f"{scores['rouge2']:.3f}/{scores['rougeL']:.3f}")
