"""Load tokenizer folders with transformers' AutoTokenizer and print how they encode texts.

Run by tests/test_tokenizer_families.py with any Python that has transformers (transformers 5 included; no
TensorFlow needed): `python tokenizer_check.py TEXTS.json FOLDER...` prints one JSON line per folder with the
transformers version, the class AutoTokenizer chose, its pad and mask ids, and for each text (or [first, second]
pair) its ids, token type ids and the text decoded back.
"""

import json
import sys

import transformers


def encodings(folder: str, texts: list) -> dict:
    """How AutoTokenizer's choice for `folder` encodes each text (or [first, second] pair)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    encoded = [tokenizer(*text) if isinstance(text, list) else tokenizer(text) for text in texts]
    return {"transformers": transformers.__version__, "class": type(tokenizer).__name__,
            "pad_token_id": tokenizer.pad_token_id, "mask_token_id": tokenizer.mask_token_id,
            "ids": [one["input_ids"] for one in encoded],
            "token_type_ids": [one.get("token_type_ids") for one in encoded],
            "decoded": [tokenizer.decode(one["input_ids"], skip_special_tokens=True) for one in encoded]}


def main() -> None:
    texts_path, *folders = sys.argv[1:]
    with open(texts_path, encoding="utf-8") as stream:
        texts = json.load(stream)
    for folder in folders:
        print(json.dumps(encodings(folder, texts), ensure_ascii=False))


if __name__ == "__main__":
    main()
