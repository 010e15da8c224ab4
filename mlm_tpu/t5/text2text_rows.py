"""Text-to-text examples (T5): one row of the corpus -> fixed-length input_ids, attention_mask, labels.

The input is the task prefix (e.g. "quality:") and the input columns joined by newlines; an
input longer than `max_length` keeps its first and last halves (256 + 256 tokens of 512), since
the end of a question or document often says as much as its start. The target keeps its head
and its closing </s>. Inputs are padded with the pad token (attention 0), labels with -100 so
padding takes no loss. Distinct targets are counted, up to a bound, so classification training
knows its classes from the manifest.
"""

from typing import Dict, Iterator, List, Sequence, Tuple

import numpy as np

from mlm_tpu.corpus import Record
from mlm_tpu.errors import UserError
from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.shards.packing import BatchTokenizer, Features
from mlm_tpu.shards.rows import MAX_COUNTED_TARGETS, RowExamples

def head_and_tail(ids: Sequence[int], length: int) -> Sequence[int]:
    """`ids` if they fit in `length`, else their first ceil(length/2) and last floor(length/2) tokens."""
    if len(ids) <= length:
        return ids
    tail = length // 2
    return list(ids[:length - tail]) + list(ids[len(ids) - tail:])


def head_and_end(ids: Sequence[int], length: int) -> Sequence[int]:
    """`ids` if they fit in `length`, else their first length-1 tokens and the last one (the closing </s>)."""
    if len(ids) <= length:
        return ids
    return list(ids[:length - 1]) + [ids[-1]]


def padded_rows(sequences: List[Sequence[int]], length: int, fill: int) -> np.ndarray:
    """The sequences (each at most `length` long) as rows of an int64 array, filled up with `fill`."""
    rows = np.full((len(sequences), length), fill, dtype=np.int64)
    for row, sequence in zip(rows, sequences):
        row[:len(sequence)] = sequence
    return rows


def padded_inputs(sequences: List[Sequence[int]], length: int, pad_id: int) -> Features:
    """Inputs (each at most `length` long, already cut) as input_ids padded with `pad_id`, and their attention mask."""
    real = np.array([len(sequence) for sequence in sequences])
    return {"input_ids": padded_rows(sequences, length, pad_id),
            "attention_mask": (np.arange(length)[None, :] < real[:, None]).astype(np.int64)}


class Text2TextExamples(RowExamples):
    """One example per corpus row: inputs from `input_columns` (and `source_prefix`), labels from `target_column`."""

    counted = "target_counts"

    def __init__(self, tokenizer, num_threads: int, input_columns: Sequence[str], target_column: str,
                 source_prefix: str, max_length: int, max_target_length: int):
        super().__init__()
        if tokenizer.pad_token_id is None:
            raise UserError("--tokenizer has no pad token, which text-to-text examples are padded with; use a T5 "
                            "tokenizer (`python -m mlm_tpu.tokenizer train --template t5`)")
        self.encoder = BatchTokenizer(tokenizer, num_threads)
        self.pad_id = tokenizer.pad_token_id
        self.input_columns = tuple(input_columns)
        self.target_column = target_column
        self.source_prefix = source_prefix
        self.max_length = max_length
        self.max_target_length = max_target_length
        self.feature_lengths = {"input_ids": max_length, "attention_mask": max_length, "labels": max_target_length}
        self.counters.update({"input_tokens": 0, "target_tokens": 0, "truncated_inputs": 0, "truncated_targets": 0})

    def batches(self, corpus, batch_size: int) -> Iterator[List[Record]]:
        return corpus.record_batches((*self.input_columns, self.target_column), batch_size,
                                     skip=self.counters["documents"])

    def texts(self, record: Record) -> Tuple[str, str]:
        """(input, target) of one row; a row with no input or no target is refused, naming the row."""
        *parts, target = record.values
        text = "\n".join(part.strip() for part in parts if part and part.strip())
        if not text:
            raise UserError(f"{record.where}: the input ({' + '.join(self.input_columns)}) is empty; every example "
                            "needs an input: fill it in or remove the row")
        target = target.strip() if target else ""
        if not target:
            raise UserError(f"{record.where}: the target column '{self.target_column}' is empty; every example needs "
                            "a target: fill it in or remove the row")
        return (f"{self.source_prefix} {text}" if self.source_prefix else text), target

    def encode(self, batch: List[Record]) -> Features:
        inputs, targets = zip(*map(self.texts, batch))
        input_ids = self.encoder.encode_each(list(inputs))
        target_ids = self.encoder.encode_each(list(targets))
        counters = self.counters
        counters["documents"] += len(batch)
        counters["units"] += len(batch)
        counters["input_tokens"] += sum(map(len, input_ids))
        counters["target_tokens"] += sum(map(len, target_ids))
        counters["truncated_inputs"] += sum(len(ids) > self.max_length for ids in input_ids)
        counters["truncated_targets"] += sum(len(ids) > self.max_target_length for ids in target_ids)
        self.count_values(targets)
        inputs = padded_inputs([head_and_tail(ids, self.max_length) for ids in input_ids], self.max_length,
                               self.pad_id)
        labels = padded_rows([head_and_end(ids, self.max_target_length) for ids in target_ids],
                             self.max_target_length, IGNORE_INDEX)
        return {**inputs, "labels": labels}

    def totals(self) -> Dict[str, object]:
        return {key: self.counters[key] for key in ("documents", "input_tokens", "target_tokens", "truncated_inputs",
                                                     "truncated_targets", "target_counts")}

    def summary(self) -> str:
        counts = self.counters["target_counts"]
        targets = (f"{len(counts)} distinct targets" if counts is not None
                   else f"more than {MAX_COUNTED_TARGETS} distinct targets")
        return (f"from {self.counters['documents']:,} rows ({targets}; {self.counters['truncated_inputs']:,} inputs "
                f"cut to their first and last {self.max_length // 2} tokens, {self.counters['truncated_targets']:,} "
                f"targets cut to {self.max_target_length})")
