"""How a saved tokenizer splits text (`python -m mlm_tpu.tokenizer encode`): pieces, ids and the text decoded back.

A quick look at a tokenizer's quality: for a good one the decoded text reads back as written.
"""

from typing import Dict, List, Sequence

from mlm_tpu.tokenizer.load import load_tokenizer


def encode_texts(tokenizer_name_or_path: str, texts: Sequence[str]) -> List[Dict[str, object]]:
    """For each text: {"text", "tokens", "ids", "decoded"}."""
    tokenizer = load_tokenizer(tokenizer_name_or_path)
    encoded = []
    for text in texts:
        ids = tokenizer(text)["input_ids"]
        encoded.append({"text": text, "tokens": tokenizer.convert_ids_to_tokens(ids), "ids": ids,
                        "decoded": tokenizer.decode(ids, skip_special_tokens=True)})
    return encoded
