"""`python -m mlm_tpu.tokenizer encode`: show how a saved tokenizer splits some text.

A quick look at a tokenizer's quality: the pieces, their ids, and the decoded text, which for a
good tokenizer reads back as written.
"""

import argparse
import json
import sys
from typing import List

from mlm_tpu.cli import add_flag
from mlm_tpu.errors import UserError
from mlm_tpu.tokenizer.load import load_tokenizer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--tokenizer", "--tokenizer-name-or-path", required=True,
             help="A tokenizer folder (from `train`) or a Hub name.")
    add_flag(parser, "--json", action="store_true", help="Print one JSON object per text instead of a table.")
    parser.add_argument("texts", nargs="*", help="Texts to encode (default: one per line on stdin).")


def encode(args: argparse.Namespace) -> None:
    texts: List[str] = args.texts or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
        raise UserError("no text to encode: pass texts as arguments or one per line on stdin")
    tokenizer = load_tokenizer(args.tokenizer)
    for text in texts:
        ids = tokenizer(text)["input_ids"]
        tokens = tokenizer.convert_ids_to_tokens(ids)
        decoded = tokenizer.decode(ids, skip_special_tokens=True)
        if args.json:
            print(json.dumps({"text": text, "tokens": tokens, "ids": ids, "decoded": decoded}, ensure_ascii=False))
        else:
            print(f"text:    {text}\ntokens:  {' '.join(tokens)}\nids:     {' '.join(map(str, ids))}\n"
                  f"decoded: {decoded}\n")
