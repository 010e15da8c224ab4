"""Tokenize documents in parallel batches and pack the token stream into fixed-length chunks.

Every document keeps its [CLS] ... [SEP]; documents are concatenated across batch boundaries
and cut into chunks of exactly `max_length` tokens, so only the remainder at the very end of a
split is dropped (the reference dropped one remainder per 1,000 documents).

`ExampleMaker` is what the shard command drives, whatever the task: it reads batches from the
corpus, encodes them, and counts what it has done in "units" (tokens here, rows for text-to-text)
so that an interrupted job can skip exactly what its kept shards already hold.
"""

import copy
import itertools
import os
from typing import Dict, Iterator, List, Tuple

import numpy as np

from mlm_tpu.errors import UserError
from mlm_tpu.tokenizer.load import tokenizer_fingerprint

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
        self.fingerprint = tokenizer_fingerprint(transformers_tokenizer)
        self.tokenizer = Tokenizer.from_str(transformers_tokenizer.backend_tokenizer.to_str())
        self.tokenizer.no_truncation()  # documents are cut by packing, never by the tokenizer
        self.tokenizer.no_padding()

    def encode_each(self, documents: List[str], framed: bool = True) -> List[List[int]]:
        """Each document's ids, framed by its special tokens (unless not `framed`)."""
        return [encoding.ids for encoding in self.tokenizer.encode_batch_fast(documents, add_special_tokens=framed)]

    def encode(self, documents: List[str], framed: bool = True) -> np.ndarray:
        """All documents' ids, each framed by its special tokens (unless not `framed`), concatenated."""
        return np.fromiter(itertools.chain.from_iterable(self.encode_each(documents, framed)), dtype=np.int32)


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


Features = Dict[str, np.ndarray]  # feature name -> rows, shape [examples, length]


class ExampleMaker:
    """Turns corpus batches into fixed-length examples, counting progress so a restart can resume.

    `counters` always holds "documents" (rows of the corpus read) and "units" (what `units_per_example`
    counts); subclasses add their own. A restarted job restores the counters recorded with its last
    kept shard, re-reads the corpus after `counters["documents"]`, and drops the units already kept.
    """

    unit_name: str  # what a unit is, for the speed in the log: "tokens", "rows"
    units_per_example: int
    feature_lengths: Dict[str, int]
    encoder: BatchTokenizer  # its fingerprint says which tokenizer made the split

    def __init__(self):
        self.counters: Dict[str, object] = {"documents": 0, "units": 0}

    def restore(self, counters: Dict[str, object]) -> None:
        self.counters.update(copy.deepcopy(counters))

    @staticmethod
    def merged_counters(counters: Dict[str, object], more: Dict[str, object]) -> Dict[str, object]:
        """What two makers counted over two parts of a corpus, as one maker reading both would have counted it."""
        return {key: value + more[key] for key, value in counters.items()}

    def add_counters(self, more: Dict[str, object]) -> None:
        """Count in what another maker counted over another part of the corpus (a Beam worker's)."""
        self.counters = self.merged_counters(self.counters, more)

    def snapshot(self) -> Dict[str, object]:
        return copy.deepcopy(self.counters)

    def batches(self, corpus, batch_size: int) -> Iterator[list]:
        """The corpus in batches, from where the counters say this job stands."""
        raise NotImplementedError

    def encode(self, batch: list):
        """A batch's encoded units (a piece of the stream), counting them."""
        raise NotImplementedError

    def drop(self, piece, count: int):
        """`piece` without its first `count` units (those already in kept shards); (rest, units still to drop)."""
        raise NotImplementedError

    def examples(self, piece) -> Features:
        """The complete examples now available."""
        raise NotImplementedError

    def whole_examples(self, units) -> Features:
        """The examples the units of one whole shard make, where the split's stream of units is cut into shards
        (the Beam pipeline's shards; the last one's units may end with a part of an example, which is dropped)."""
        raise NotImplementedError

    def totals(self) -> Dict[str, object]:
        """What the manifest records of the whole split, once every batch is in; refuses a split with no example."""
        raise NotImplementedError

    def summary(self) -> str:
        """Words for the end-of-job line: what was read and what was left out."""
        raise NotImplementedError


class PackedExamples(ExampleMaker):
    """Masked-LM examples: documents tokenized, concatenated and cut into rows of exactly `max_length` tokens."""

    unit_name = "tokens"
    framed = True  # each document between the tokenizer's special tokens ([CLS] ... [SEP])

    def __init__(self, tokenizer, num_threads: int, max_length: int):
        super().__init__()
        self.encoder = BatchTokenizer(tokenizer, num_threads)
        self.packer = ChunkPacker(max_length)
        self.max_length = self.units_per_example = max_length
        self.feature_lengths = {"input_ids": max_length, "attention_mask": max_length}

    def batches(self, corpus, batch_size: int) -> Iterator[List[str]]:
        return corpus.batches(batch_size, skip=self.counters["documents"])

    def encode(self, batch: List[str]) -> np.ndarray:
        ids = self.encoder.encode(batch, self.framed)
        self.counters["documents"] += len(batch)
        self.counters["units"] += len(ids)
        return ids

    def drop(self, piece: np.ndarray, count: int) -> Tuple[np.ndarray, int]:
        cut = min(count, len(piece))
        return piece[cut:], count - cut

    def features(self, chunks: np.ndarray) -> Features:
        """The examples' features for rows of `max_length` tokens."""
        return {"input_ids": chunks, "attention_mask": np.ones_like(chunks)}

    def examples(self, piece: np.ndarray) -> Features:
        return self.features(self.packer.add(piece))

    def whole_examples(self, units: np.ndarray) -> Features:
        whole = len(units) // self.max_length * self.max_length
        return self.features(units[:whole].reshape(-1, self.max_length))

    @property
    def dropped(self) -> int:
        """Tokens after the last whole example (those the packer still holds, once the corpus is read)."""
        return self.counters["units"] % self.max_length

    def totals(self) -> Dict[str, object]:
        if self.counters["units"] < self.max_length:
            raise UserError(f"the corpus gave {self.counters['units']:,} tokens, fewer than one example of "
                            f"--max-length {self.max_length}: nothing was written; use more text or a smaller "
                            "--max-length")
        return {"documents": self.counters["documents"], "corpus_tokens": self.counters["units"],
                "dropped_tokens": self.dropped}

    def summary(self) -> str:
        return (f"from {self.counters['documents']:,} documents ({self.counters['units']:,} tokens, "
                f"{self.dropped:,} dropped at the end)")


class RawRows(PackedExamples):
    """Span-corruption examples: documents tokenized without special tokens (as T5's pipeline concatenates them),
    cut into raw rows of exactly `raw_length` tokens; the trainer corrupts each row into input and target."""

    framed = False

    def __init__(self, tokenizer, num_threads: int, raw_length: int):
        super().__init__(tokenizer, num_threads, raw_length)
        self.feature_lengths = {"input_ids": raw_length}

    def features(self, chunks: np.ndarray) -> Features:
        return {"input_ids": chunks}
