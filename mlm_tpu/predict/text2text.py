"""`python -m mlm_tpu.predict text2text --model DIR "quality: How do I ...?"`

A T5 model on text: for a model trained with `--task classification`, the class (one decoder step,
argmax over the label tokens, as in training) with each label's probability; otherwise the
generated text (XLA-compiled greedy `generate`). Inputs come as arguments, or one per line on
stdin, written as the model saw them in training (task prefix included); a long input keeps its
first and last halves, as the sharder cut it. Output is a table, or with --json one object per
input: {"input", "label", "scores": {label: probability}} or {"input", "output"}.
"""

import argparse
import json
import math
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np

from mlm_tpu.cli import add_flag, log
from mlm_tpu.errors import UserError
from mlm_tpu.predict.texts import read_texts
from mlm_tpu.sharding.text2text import head_and_tail, padded_inputs

DEFAULT_MAX_NEW_TOKENS = 32


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mlm_tpu.predict text2text", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="*", metavar="INPUT", help="Input texts; none: read lines from stdin.")
    add_flag(parser, "--model", "--model-name-or-path", required=True,
             help="A T5 model: `python train.py --head t5`'s --output-dir, a save_pretrained folder or a Hub name.")
    add_flag(parser, "--task", choices=("classification", "generation"), default=None,
             help="What to do (default: what the model was trained for; generation for other T5 models).")
    add_flag(parser, "--labels", nargs="+", default=None, metavar="LABEL",
             help="Classification: the class names (default: those the model was trained with).")
    add_flag(parser, "--max-length", type=int, default=None,
             help="Input tokens; longer inputs keep their first and last halves (default: the training length, "
                  "else the tokenizer's limit).")
    add_flag(parser, "--max-new-tokens", type=int, default=None,
             help=f"Generation: tokens to generate (default: the training setting, else {DEFAULT_MAX_NEW_TOKENS}).")
    add_flag(parser, "--batch-size", type=int, default=16, help="Inputs run together (default: 16).")
    add_flag(parser, "--json", action="store_true", help="One JSON object per input on stdout.")
    return parser


def encode_inputs(tokenizer, texts: Sequence[str], max_length: int) -> Dict[str, np.ndarray]:
    """Token ids cut as the sharder cuts them (head and tail), padded to the longest, a multiple of 8."""
    ids = [head_and_tail(row, max_length) for row in tokenizer(list(texts))["input_ids"]]
    width = min(max_length, 8 * math.ceil(max(map(len, ids)) / 8))
    return {name: rows.astype(np.int32) for name, rows in padded_inputs(ids, width, tokenizer.pad_token_id).items()}


def batches(encoded: Dict[str, np.ndarray], batch_size: int) -> Iterator[Dict[str, np.ndarray]]:
    """Fixed-shape batches (the last one filled up with copies of its first row), so XLA compiles once."""
    for start in range(0, len(encoded["input_ids"]), batch_size):
        batch = {name: rows[start:start + batch_size] for name, rows in encoded.items()}
        missing = batch_size - len(batch["input_ids"])
        yield {name: np.concatenate([rows, np.repeat(rows[:1], missing, axis=0)]) for name, rows in batch.items()}


def classify(model, encoded, batch_size: int, labels) -> List[Dict[str, float]]:
    """Each input's probability of each label."""
    import tensorflow as tf

    from mlm_tpu.t5.classification import label_logits

    token_ids = tf.constant(labels.token_ids, dtype=tf.int32)
    step = tf.function(lambda batch: tf.nn.softmax(label_logits(model, batch["input_ids"], batch["attention_mask"],
                                                                token_ids)))
    probabilities = np.concatenate([step(batch).numpy() for batch in batches(encoded, batch_size)])
    return [dict(zip(labels.names, map(float, row))) for row in probabilities[:len(encoded["input_ids"])]]


def generate(model, tokenizer, encoded, batch_size: int, max_new_tokens: int) -> List[str]:
    import tensorflow as tf

    from mlm_tpu.t5.generation import generate_tokens

    step = tf.function(lambda batch: generate_tokens(model, batch["input_ids"], batch["attention_mask"],
                                                     max_new_tokens), jit_compile=True)
    tokens = np.concatenate([step(batch).numpy() for batch in batches(encoded, batch_size)])
    return tokenizer.batch_decode(tokens[:len(encoded["input_ids"])], skip_special_tokens=True)


def check_arguments(args: argparse.Namespace) -> None:
    for flag, value in (("--batch-size", args.batch_size), ("--max-length", args.max_length),
                        ("--max-new-tokens", args.max_new_tokens)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, not {value}")


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    check_arguments(args)
    texts = read_texts(args.inputs, "inputs (e.g. \"quality: How do I sort a list?\")")

    import transformers
    from transformers import TFT5ForConditionalGeneration

    from mlm_tpu.pretrained import load_pretrained
    from mlm_tpu.t5.classification import LabelSet
    from mlm_tpu.t5.tasks import task_settings

    transformers.logging.set_verbosity_error()
    model, tokenizer = load_pretrained(args.model, TFT5ForConditionalGeneration)
    trained = task_settings(model.config) or {}
    task = args.task or trained.get("task", "generation")
    prefix = trained.get("source_prefix")
    if prefix and any(not text.startswith(prefix) for text in texts):
        log(f"warning: {args.model} was trained on inputs starting with '{prefix}'; write it before each input")
    encoded = encode_inputs(tokenizer, texts, args.max_length or trained.get("max_length") or
                            min(tokenizer.model_max_length, 512))
    batch_size = min(args.batch_size, len(texts))
    if task == "classification":
        names = args.labels or trained.get("labels")
        if not names:
            raise UserError(f"--model {args.model} was not trained for classification here: pass its --labels")
        for text, scores in zip(texts, classify(model, encoded, batch_size, LabelSet.from_names(names, tokenizer))):
            label = max(scores, key=scores.get)
            if args.json:
                print(json.dumps({"input": text, "label": label, "scores": scores}, ensure_ascii=False), flush=True)
            else:
                others = ", ".join(f"{name} {score:.3f}" for name, score in scores.items() if name != label)
                print(f"input:  {text}\nlabel:  {label} ({scores[label]:.3f}; {others})\n", flush=True)
        return
    max_new_tokens = args.max_new_tokens or trained.get("max_new_tokens") or DEFAULT_MAX_NEW_TOKENS
    for text, output in zip(texts, generate(model, tokenizer, encoded, batch_size, max_new_tokens)):
        if args.json:
            print(json.dumps({"input": text, "output": output}, ensure_ascii=False), flush=True)
        else:
            print(f"input:  {text}\noutput: {output}\n", flush=True)
