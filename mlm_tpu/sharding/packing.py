"""Tokenize documents in parallel batches and pack the token stream into fixed-length chunks.

Every document keeps its [CLS] ... [SEP]; documents are concatenated across batch boundaries
and cut into chunks of exactly `max_length` tokens, so only the remainder at the very end of a
split is dropped (the reference dropped one remainder per 1,000 documents).
"""

import hashlib
import itertools
import os
from typing import List, Tuple

import numpy as np

from mlm_tpu.errors import UserError

MIN_MAX_LENGTH = 8


class BatchTokenizer:
    """Encodes batches of documents with the Rust tokenizer, in `num_threads` threads."""

    def __init__(self, transformers_tokenizer, num_threads: int):
        from tokenizers import Tokenizer

        if num_threads < 1:
            raise UserError(f"--num-workers must be at least 1, not {num_threads}")
        # The Rust thread pool reads these once, at its first parallel call.
        os.environ["RAYON_NUM_THREADS"] = str(num_threads)
        os.environ["TOKENIZERS_PARALLELISM"] = "true" if num_threads > 1 else "false"
        serialized = transformers_tokenizer.backend_tokenizer.to_str()
        self.fingerprint = hashlib.sha256(serialized.encode()).hexdigest()[:16]
        self.tokenizer = Tokenizer.from_str(serialized)
        self.tokenizer.no_truncation()  # documents are cut by packing, never by the tokenizer
        self.tokenizer.no_padding()

    def encode(self, documents: List[str]) -> np.ndarray:
        """All documents' ids, each framed by its special tokens, concatenated."""
        encodings = self.tokenizer.encode_batch_fast(documents)
        return np.fromiter(itertools.chain.from_iterable(e.ids for e in encodings), dtype=np.int32)


class ChunkPacker:
    """Turns a stream of token arrays into rows of exactly `max_length` tokens."""

    def __init__(self, max_length: int):
        self.max_length = max_length
        self.carry = np.zeros(0, dtype=np.int32)

    def add(self, ids: np.ndarray) -> np.ndarray:
        """Append tokens; return every complete chunk now available, shape [n, max_length]."""
        stream = np.concatenate([self.carry, ids]) if len(self.carry) else ids
        complete = len(stream) // self.max_length * self.max_length
        self.carry = stream[complete:].copy()
        return stream[:complete].reshape(-1, self.max_length)

    @property
    def remainder(self) -> int:
        """Tokens waiting for a chunk; at the end of a split these are the ones dropped."""
        return len(self.carry)


def check_max_length(max_length: int, tokenizer) -> Tuple[str, ...]:
    """Refuse lengths no model can use; return warnings for lengths that work but cost speed."""
    limit = tokenizer.model_max_length
    if max_length < MIN_MAX_LENGTH:
        raise UserError(f"--max-length must be at least {MIN_MAX_LENGTH}, not {max_length}")
    if limit and limit < 10**9 and max_length > limit:
        raise UserError(f"--max-length {max_length} is more than the tokenizer allows ({limit}); use at most "
                        f"{limit} or retrain the tokenizer with --model-max-length {max_length}")
    if max_length % 8:
        return (f"--max-length {max_length} is not a multiple of 8: TPUs and tensor cores run fastest on "
                f"multiples of 8 (e.g. {max_length // 8 * 8 or 8} or {max_length // 8 * 8 + 8})",)
    return ()
