"""How a saved tokenizer splits text (`python -m mlm_tpu.tokenizer encode`): pieces, ids and the text decoded back.

A quick look at a tokenizer's quality: for a good one the decoded text reads back as written. Pieces are
shown as the vocabulary holds them (▁the, ##ing, <0xF0>), except byte-level BPE's: those spell bytes, and
a non-ASCII byte looks like an unrelated letter (é is stored as "Ã©"), so they are shown as the text they
spell (é, 中, 😀), with the bytes of a part of a character as <0xNN> (byte fallback's notation), and
byte-level's stand-ins for ASCII kept (Ġ, the space that starts a word; Ċ, a newline).
"""

import codecs
import functools
from typing import Dict, List, Optional, Sequence

from mlm_tpu.errors import UserError
from mlm_tpu.tokenizer.word_starts import BYTE_LEVEL_SPACE, WordStarts, word_starts

HEX_BYTES = "mlm_tpu-hex-bytes"
codecs.register_error(HEX_BYTES, lambda error: ("".join(f"<0x{byte:02X}>" for byte in
                                                        error.object[error.start:error.end]), error.end))


@functools.lru_cache(maxsize=1)
def _byte_level_tables():
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    char_of = bytes_to_unicode()  # byte -> the printable character byte-level BPE stores it as
    return char_of, {char: byte for byte, char in char_of.items()}


def byte_level_text(piece: str) -> str:
    """A byte-level BPE piece as the text its bytes spell, ASCII in byte-level's printable form (Ġ, Ċ)."""
    char_of, byte_of = _byte_level_tables()
    if any(char not in byte_of for char in piece):
        return piece  # an added token, stored as written
    text = bytes(byte_of[char] for char in piece).decode("utf-8", errors=HEX_BYTES)
    return "".join(char_of[ord(char)] if ord(char) < 128 else char for char in text)


def word_starts_if_known(tokenizer) -> Optional[WordStarts]:
    """The tokenizer's family and word marker, or None where it shows neither (a word-level tokenizer, say)."""
    try:
        return word_starts(tokenizer)
    except UserError:
        return None


def encode_texts(tokenizer, texts: Sequence[str]) -> List[Dict[str, object]]:
    """For each text: {"text", "tokens" (as the vocabulary holds them), "pieces" (as shown), "ids", "decoded"};
    `tokenizer`: a loaded one (`load_tokenizer`)."""
    starts = word_starts_if_known(tokenizer)
    byte_level = starts is not None and starts.marker == BYTE_LEVEL_SPACE
    encoded = []
    for text in texts:
        ids = tokenizer(text)["input_ids"]
        tokens = tokenizer.convert_ids_to_tokens(ids)
        encoded.append({"text": text, "tokens": tokens,
                        "pieces": [byte_level_text(token) for token in tokens] if byte_level else tokens, "ids": ids,
                        "decoded": tokenizer.decode(ids, skip_special_tokens=True)})
    return encoded
