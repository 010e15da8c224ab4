"""Rows of sentence-embedding shards: a query, its positive and, optionally, hard negatives (`shard --task
sentence-embedding --input-column query --target-column positive --negative-columns negative`), each text cut to
--max-length and padded: the query's as `input_ids` and `attention_mask` (the features the shard writer counts),
the positive's as `positive_input_ids`, `positive_attention_mask`. The negatives of a row lie end to end in one
feature (n x max_length tokens), so a split without them holds it empty. A first pass checks every row (each text
there) before anything is written."""

from typing import Dict, Iterator, List, Sequence

import numpy as np

from mlm_tpu.corpus import Corpus, Record
from mlm_tpu.encoder.labelled_rows import FixedLengthEncoder, text_of
from mlm_tpu.shards.packing import Features
from mlm_tpu.shards.rows import OneExamplePerRow

INPUT_FEATURES = ("input_ids", "attention_mask")
TEXTS = ("", "positive_")  # the prefixes of a row's two texts' features: the query's input_ids, positive_input_ids
NEGATIVES = "negative_"  # negative_input_ids: the hard negatives, end to end


def feature_names() -> List[str]:
    return [f"{text}{name}" for text in (*TEXTS, NEGATIVES) for name in INPUT_FEATURES]


def check_rows(corpus: Corpus, columns: Sequence[str]) -> int:
    """The first pass: every row has each of its texts (one error line naming the row and column); returns the
    rows."""
    rows = 0
    for record in corpus.records(tuple(columns), as_text=False):
        for value, column, what in zip(record.values, columns, _roles(len(columns))):
            text_of(value, record, column, what)
        rows += 1
    return rows


def _roles(count: int) -> List[str]:
    return ["query", "positive", *["hard negative"] * (count - 2)]


class PairExamples(OneExamplePerRow):
    """One example per row: its query, positive and hard negatives, each a fixed-length encoding."""

    def __init__(self, tokenizer, num_threads: int, max_length: int, columns: Sequence[str]):
        super().__init__()
        self.fixed = FixedLengthEncoder(tokenizer, max_length, num_threads)
        self.encoder = self.fixed.batch_tokenizer
        self.max_length = max_length
        self.columns = tuple(columns)
        negatives = len(columns) - 2
        self.feature_lengths = {name: max_length * (negatives if name.startswith(NEGATIVES) else 1)
                                for name in feature_names()}
        self.counters["truncated"] = 0

    def batches(self, corpus, batch_size: int) -> Iterator[List[Record]]:
        return corpus.record_batches(self.columns, batch_size, skip=self.counters["documents"], as_text=False)

    def encode(self, batch: List[Record]) -> Features:
        roles = _roles(len(self.columns))
        columns = [[text_of(record.values[index], record, column, roles[index]) for record in batch]
                   for index, column in enumerate(self.columns)]
        encoded, truncated = zip(*(self.fixed.texts(texts) for texts in columns))
        features: Dict[str, np.ndarray] = {}
        for text, encoding in zip(TEXTS, encoded):
            features.update({f"{text}{name}": encoding[name] for name in INPUT_FEATURES})
        for name in INPUT_FEATURES:  # the negatives of a row end to end: [rows, n x length]
            parts = [encoding[name] for encoding in encoded[2:]]
            features[f"{NEGATIVES}{name}"] = (np.concatenate(parts, axis=1) if parts else
                                               np.zeros((len(batch), 0), np.int64))
        self.counters["documents"] += len(batch)
        self.counters["units"] += len(batch)
        self.counters["truncated"] += sum(truncated)
        return features

    def totals(self) -> Dict[str, object]:
        return {key: value for key, value in self.counters.items() if key != "units"}

    def summary(self) -> str:
        return (f"from {self.counters['documents']:,} rows ({self.counters['truncated']:,} texts cut to "
                f"{self.max_length} tokens)")
