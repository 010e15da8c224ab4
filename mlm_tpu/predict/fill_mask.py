"""`python -m mlm_tpu.predict [fill-mask] --model DIR "Paris is the [MASK] of France."`

The 🤗 fill-mask pipeline (TensorFlow) on a trained model: the top-k words for each masked
position, as a table or as JSON lines. Sentences come as arguments, or one per line on stdin.
The mask may be written [MASK] or <mask> whatever the model's own mask token is; a sentence may
hold several masks (each is predicted on its own).
"""

import argparse
import json
from typing import Dict, List, Optional, Sequence

from mlm_tpu.cli import add_flag
from mlm_tpu.errors import UserError
from mlm_tpu.predict.texts import read_texts

MASK_SPELLINGS = ("[MASK]", "<mask>")

Predictions = List[List[Dict]]  # per masked position, the top-k candidates


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mlm_tpu.predict [fill-mask]", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="T5 models: python -m mlm_tpu.predict text2text --help")
    parser.add_argument("sentences", nargs="*", metavar="SENTENCE",
                        help="Text with [MASK] (or <mask>) where a word is missing; none: read lines from stdin.")
    add_flag(parser, "--model", "--model-name-or-path", required=True,
             help="The trained model: `python train.py`'s --output-dir, a save_pretrained folder or a Hub name.")
    add_flag(parser, "--top-k", type=int, default=5, help="Candidates shown per mask (default: 5).")
    add_flag(parser, "--json", action="store_true",
             help='One JSON object per sentence on stdout: {"sentence", "predictions": [[{"token", "token_str", '
                  '"score", "sequence"}, ...] per mask]}.')
    return parser


def with_mask_token(sentence: str, mask_token: str) -> str:
    """The sentence with either mask spelling replaced by the model's own mask token."""
    for spelling in MASK_SPELLINGS:
        sentence = sentence.replace(spelling, mask_token)
    if mask_token not in sentence:
        raise UserError(f"no mask in {sentence!r}: write [MASK] (or <mask>) where the missing word goes")
    return sentence


def predict(fill_mask_pipeline, sentence: str, top_k: int) -> Predictions:
    """Top-k candidates for each mask of one sentence (the pipeline nests one level less for one mask)."""
    output = fill_mask_pipeline(sentence, top_k=top_k)
    per_mask = [output] if output and isinstance(output[0], dict) else output
    frame = _framing_tokens(fill_mask_pipeline.tokenizer)
    return [[{"token": int(c["token"]), "token_str": c["token_str"], "score": float(c["score"]),
              "sequence": _unframed(c["sequence"], frame)} for c in candidates] for candidates in per_mask]


def _framing_tokens(tokenizer) -> List[str]:
    return [token for token in (tokenizer.cls_token, tokenizer.bos_token, tokenizer.sep_token, tokenizer.eos_token)
            if token]


def _unframed(sequence: str, frame: List[str]) -> str:
    """Drop [CLS]/[SEP] the pipeline leaves around sentences with several masks (it cannot skip special tokens
    there, the other masks being special too)."""
    sequence = sequence.strip()
    for token in frame:
        sequence = sequence.removeprefix(token).removesuffix(token)
    return sequence.strip()


def format_table(sentence: str, predictions: Predictions) -> str:
    lines = [sentence]
    for number, candidates in enumerate(predictions, start=1):
        if len(predictions) > 1:
            lines.append(f"  mask {number} of {len(predictions)}:")
        shown = [repr(c["token_str"]) if not c["token_str"].strip() else c["token_str"] for c in candidates]
        width = max(map(len, shown))
        lines += [f"  {rank:>2}. {word:<{width}}  {c['score']:.4f}  {c['sequence']}"
                  for rank, (word, c) in enumerate(zip(shown, candidates), start=1)]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    if args.top_k < 1:
        raise UserError(f"--top-k must be at least 1, not {args.top_k}")
    sentences = read_texts(args.sentences, "sentences with [MASK] where a word is missing")

    import transformers
    from transformers import TFAutoModelForMaskedLM, pipeline

    from mlm_tpu.pretrained import load_pretrained

    transformers.logging.set_verbosity_error()
    model, tokenizer = load_pretrained(args.model, TFAutoModelForMaskedLM)
    if tokenizer.mask_token is None:
        raise UserError(f"--model {args.model}: its tokenizer has no mask token, so it cannot fill masks")
    prepared = [with_mask_token(sentence, tokenizer.mask_token) for sentence in sentences]
    # dtype=None: without it transformers 4.57 reaches for torch, which is not installed (STACK.md).
    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, framework="tf", dtype=None)
    for sentence, text in zip(sentences, prepared):
        predictions = predict(fill, text, min(args.top_k, len(tokenizer)))
        if args.json:
            print(json.dumps({"sentence": sentence, "predictions": predictions}, ensure_ascii=False), flush=True)
        else:
            print(format_table(sentence, predictions), flush=True)
