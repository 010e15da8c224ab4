"""Labelled examples for encoders (BERT, RoBERTa, ELECTRA...): one corpus row -> one fixed-length example.

sequence-classification: the text of --input-column (and, with --pair-column, its pair) framed by the
tokenizer's special tokens ([CLS] A [SEP] B [SEP]), cut to --max-length by trimming the longer of the two
first (🤗's `truncation="longest_first"`, as run_glue), padded; its label a class id, or a float score
when the split is a regression (STS-B).
token-classification: the words of --input-column and their tags (--target-column), given as lists (JSON
lines or parquet, as 🤗's conll2003: `{"tokens": ["EU", "rejects", ...], "ner_tags": ["B-ORG", "O", ...]}`,
tags as names or as ids) or as whitespace-separated strings (CSV); each word's tag goes on its first piece,
-100 on its other pieces, on special tokens and on padding; words past --max-length are cut.

Before anything is written, a first pass over the split checks every row (a text, and a pair, in each; as many
tags as words; labels that are labels) and finds the labels' names (and whether they are scores: numbers, some not
whole), unless --labels names them: then they are exactly those, in that order, and a label given as a whole
number i that is not itself a name is the i-th name (🤗's ClassLabel ids). A split's label ids are the positions
of its names, which its manifest records; the trainer matches the names of the training and validation splits.
"""

import math
import re
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from mlm_tpu.corpus import Corpus, Record
from mlm_tpu.errors import UserError
from mlm_tpu.shards.format import IGNORE_INDEX, REGRESSION, SEQUENCE_CLASSIFICATION
from mlm_tpu.shards.packing import BatchTokenizer, Features
from mlm_tpu.shards.rows import RowExamples

CLASSIFICATION = "single_label_classification"  # transformers' problem_type of one class per example
PROBLEM_TYPES = (CLASSIFICATION, REGRESSION)
MAX_LABELS = 1000  # more distinct labels than this: a score or a free-text target, not classes
INTEGER = re.compile(r"[+-]?\d+")


def natural_order(names) -> List[str]:
    """Label names sorted; whole numbers by their value ("2" before "10"), so that integer labels 0..n-1 keep
    their own ids."""
    names = sorted(set(names))
    if all(INTEGER.fullmatch(name) for name in names):
        return sorted(names, key=int)
    return names


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def score_of(value, record: Record, column: str) -> float:
    """A regression label as a float, or one error line naming the row."""
    if _is_number(value) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
        if number is not None and math.isfinite(number):
            return number
    raise UserError(f"{record.where}: the label column '{column}' holds {value!r}, not a number, in a regression "
                    "split (its labels are scores); fix the row, or shard with --problem-type "
                    f"{CLASSIFICATION} if the labels are classes")


def label_text(value, record: Record, column: str) -> str:
    """A class label as its name (a whole number as its digits, 1.0 as "1"), or one error line naming the row."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    if value is None or isinstance(value, str):
        raise UserError(f"{record.where}: the label column '{column}' is empty; every example needs a label: fill "
                        "it in or remove the row")
    raise UserError(f"{record.where}: the label column '{column}' holds {type(value).__name__} values, not a label "
                    "(a name or a number)")


def _number(value) -> Optional[float]:
    """The label as a number, if it is one (given as a number, or as text that reads as one)."""
    if _is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def words_of(value, record: Record, column: str, what: str) -> List:
    """A row's words (or tags): a list, or a string split at whitespace."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, (list, tuple)):
        return list(value)
    if value is None:
        return []
    raise UserError(f"{record.where}: the column '{column}' holds {type(value).__name__} values, not {what} (a list, "
                    "or a string of them separated by spaces)")


class LabelIds:
    """Label name -> id in a split: the position of the name; a whole number that is no name is an id itself."""

    def __init__(self, names: Sequence[str], column: str):
        self.names = list(names)
        self.ids = {name: index for index, name in enumerate(self.names)}
        self.column = column

    def id_of(self, value, record: Record) -> int:
        name = label_text(value, record, self.column)
        if name in self.ids:
            return self.ids[name]
        if INTEGER.fullmatch(name) and 0 <= int(name) < len(self.names):
            return int(name)
        shown = ", ".join(self.names[:10]) + (", ..." if len(self.names) > 10 else "")
        raise UserError(f"{record.where}: the label '{name}' is not among --labels ({shown}); add it to --labels or "
                        "fix the row")


def text_of(value, record: Record, column: str, what: str) -> str:
    """A row's text in `column`, or one error line naming the row."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if value is not None and not isinstance(value, str):
        raise UserError(f"{record.where}: column '{column}' holds {type(value).__name__} values, not text; pick a text "
                        "column")
    if not value or not value.strip():
        raise UserError(f"{record.where}: the {what} column '{column}' is empty; every example needs its text: fill "
                        "it in or remove the row")
    return value.strip()


def words_and_tags(record: Record, words_column: str, tags_column: str) -> Tuple[List[str], List]:
    """A token-classification row's words and its tags (as given), as many, or one error line naming the row."""
    words = [text_of(word, record, words_column, "word") for word in
             words_of(record.values[0], record, words_column, "words")]
    tags = words_of(record.values[1], record, tags_column, "tags")
    if not words:
        raise UserError(f"{record.where}: the words column '{words_column}' is empty; every example needs its words: "
                        "fill it in or remove the row")
    if len(tags) != len(words):
        raise UserError(f"{record.where}: {len(words)} words ('{words_column}') but {len(tags)} tags "
                        f"('{tags_column}'); every word needs exactly one tag")
    return words, tags


def find_labels(corpus: Corpus, task: str, columns: Sequence[str], target: str, problem_type: Optional[str],
                given: Sequence[str] = ()) -> Tuple[str, List[str]]:
    """A first pass over the split, before anything is written: every row checked (texts there, tags as many as
    words, labels that are labels), and (problem_type, label names): `given` (--labels), else scores (regression)
    when `problem_type` says so or (None) when every label is a number and some are not whole, else the distinct
    labels in their natural order."""
    known = LabelIds(given, target) if given else None
    names, fraction, not_number = set(), None, None  # the first row of a score, and of a label that is no number
    for record in corpus.records((*columns, target), as_text=False):
        if task == SEQUENCE_CLASSIFICATION:
            for value, column, what in zip(record.values, columns, ("text", "pair")):
                text_of(value, record, column, what)
            labels = record.values[-1:]
        else:
            labels = words_and_tags(record, columns[0], target)[1]
        if problem_type == REGRESSION:
            score_of(labels[0], record, target)
            continue
        for label in labels:
            names.add(known.names[known.id_of(label, record)] if known else label_text(label, record, target))
        number = _number(labels[0]) if task == SEQUENCE_CLASSIFICATION else None
        if number is not None and math.isfinite(number) and not number.is_integer():
            fraction = fraction or record
        elif number is None or not math.isfinite(number):
            not_number = not_number or record
        if len(names) > MAX_LABELS and (not_number or not fraction):
            raise UserError(f"the label column '{target}' holds more than {MAX_LABELS:,} distinct labels: too many "
                            "classes; if they are scores, shard with --problem-type regression")
    if given:
        return CLASSIFICATION, list(given)
    if problem_type == REGRESSION:
        return REGRESSION, []
    if problem_type is None and fraction and not_number:
        raise UserError(f"{not_number.where}: the label column '{target}' holds {not_number.values[-1]!r}, not a "
                        f"number, where other labels are scores ({fraction.values[-1]!r} at {fraction.where}); fix "
                        f"the row, or shard with --problem-type {CLASSIFICATION} if the labels are classes")
    if problem_type is None and fraction:
        return REGRESSION, []
    return CLASSIFICATION, natural_order(names)


class FixedLengthEncoder:
    """The tokenizer, cutting and padding every example to `max_length` as 🤗's tokenizer(truncation=True,
    padding="max_length") does; what the sharder writes and what prediction feeds a model alike."""

    def __init__(self, tokenizer, max_length: int, num_threads: int = 1):
        if tokenizer.pad_token_id is None:
            raise UserError("the tokenizer has no pad token, which examples are padded with; use a tokenizer made by "
                            "`python -m mlm_tpu.tokenizer train`, or the model's own")
        self.batch_tokenizer = BatchTokenizer(tokenizer, num_threads)  # threads, and the tokenizer's fingerprint
        self.tokenizer = self.batch_tokenizer.tokenizer
        self.tokenizer.enable_truncation(max_length, strategy="longest_first")
        self.tokenizer.enable_padding(length=max_length, pad_id=tokenizer.pad_token_id, pad_token=tokenizer.pad_token)
        self.max_length = max_length
        self.words_tokenizer = None  # for lists of words: byte-level BPE needs a space before every word

    @staticmethod
    def _features(encodings) -> Features:
        return {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}

    def texts(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None) -> Tuple[Features, int]:
        """(input features of each text, or text pair; how many were cut)."""
        encodings = self.tokenizer.encode_batch_fast(list(zip(texts, pairs)) if pairs is not None else list(texts))
        return self._features(encodings), sum(bool(e.overflowing) for e in encodings)

    def kept_texts(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None
                   ) -> Tuple[List[str], Optional[List[str]], int]:
        """(each text, and pair, cut where these inputs cut it: up to the end of its last piece kept; how many were
        cut): what a model fed these inputs reads of them, for a model that reads words (the TF-IDF floor)."""
        # (encode_batch, not encode_batch_fast: the offsets say where each kept piece ends)
        encodings = self.tokenizer.encode_batch(list(zip(texts, pairs)) if pairs is not None else list(texts))
        sides = [list(texts)] + ([list(pairs)] if pairs is not None else [])
        kept = [[_kept_text(text, encoding, side) if encoding.overflowing else text
                 for text, encoding in zip(column, encodings)] for side, column in enumerate(sides)]
        return kept[0], kept[1] if pairs is not None else None, sum(bool(e.overflowing) for e in encodings)

    def words(self, rows: Sequence[Sequence[str]]) -> Tuple[Features, List[List[Optional[int]]], int]:
        """(input features of each row of words; each token's word index, None on special tokens and padding; how
        many rows were cut)."""
        if self.words_tokenizer is None:
            self.words_tokenizer = _with_prefix_spaces(self.tokenizer)
        # (encode_batch_fast leaves out the offsets, and with them the word ids)
        encodings = self.words_tokenizer.encode_batch([list(row) for row in rows], is_pretokenized=True)
        return self._features(encodings), [e.word_ids for e in encodings], sum(bool(e.overflowing) for e in encodings)


def _kept_text(text: str, encoding, side: int) -> str:
    """`text` up to the end of the last of its pieces `encoding` kept (`side`: 0 the text, 1 its pair)."""
    ends = [end for sequence, (_, end) in zip(encoding.sequence_ids, encoding.offsets) if sequence == side]
    return text[:max(ends, default=0)]


def _with_prefix_spaces(tokenizer):
    """The tokenizer, its byte-level pre-tokenizer (RoBERTa's, GPT-2's BPE) set to put a space before each word, as
    🤗's add_prefix_space=True does for words given one by one: without it only the first word reads as a word
    start. Other pre-tokenizers (Metaspace, BERT's) mark every word already."""
    from tokenizers import Tokenizer, pre_tokenizers

    if not isinstance(tokenizer.pre_tokenizer, pre_tokenizers.ByteLevel) or tokenizer.pre_tokenizer.add_prefix_space:
        return tokenizer
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.pre_tokenizer.add_prefix_space = True
    return copy


def first_piece_labels(word_ids: Sequence[Optional[int]], tags: Sequence[int]) -> List[int]:
    """Each token's label: the tag of the word it starts, -100 on a word's later pieces and where there is no word."""
    labels, previous = [], None
    for word in word_ids:
        labels.append(tags[word] if word is not None and word != previous else IGNORE_INDEX)
        previous = word
    return labels


class LabelledExamples(RowExamples):
    """What the two encoder kinds share: one example per row, with the labels it saw counted."""

    counted = "label_counts"

    def __init__(self, tokenizer, num_threads: int, max_length: int, label_names: Sequence[str], columns: Sequence[str],
                 target_column: str):
        super().__init__()
        self.fixed = FixedLengthEncoder(tokenizer, max_length, num_threads)
        self.encoder = self.fixed.batch_tokenizer
        self.max_length = max_length
        self.labels = LabelIds(label_names, target_column)
        self.columns = tuple(columns)
        self.target_column = target_column
        self.counters["truncated"] = 0

    def batches(self, corpus, batch_size: int) -> Iterator[List[Record]]:
        return corpus.record_batches((*self.columns, self.target_column), batch_size, skip=self.counters["documents"],
                                     as_text=False)

    def count(self, rows: int, truncated: int, labels: Sequence[str]) -> None:
        self.counters["documents"] += rows
        self.counters["units"] += rows
        self.counters["truncated"] += truncated
        self.count_values(labels)

    def totals(self) -> Dict[str, object]:
        return {key: value for key, value in self.counters.items() if key != "units"}


class SequenceExamples(LabelledExamples):
    """sequence-classification: a text (or a pair) and its label (a class, or a score in a regression split)."""

    def __init__(self, tokenizer, num_threads: int, max_length: int, input_column: str, pair_column: Optional[str],
                 target_column: str, problem_type: str, label_names: Sequence[str]):
        columns = (input_column, pair_column) if pair_column else (input_column,)
        super().__init__(tokenizer, num_threads, max_length, label_names, columns, target_column)
        self.regression = problem_type == REGRESSION
        self.feature_lengths = {"input_ids": max_length, "attention_mask": max_length, "token_type_ids": max_length,
                                "labels": 1}

    def encode(self, batch: List[Record]) -> Features:
        texts = [[text_of(value, record, column, "text" if index == 0 else "pair")
                  for index, (value, column) in enumerate(zip(record.values, self.columns))] for record in batch]
        first = [row[0] for row in texts]
        pairs = [row[1] for row in texts] if len(self.columns) == 2 else None
        if self.regression:
            labels = np.array([[score_of(record.values[-1], record, self.target_column)] for record in batch],
                              dtype=np.float32)
            names = []
        else:
            labels = np.array([[self.labels.id_of(record.values[-1], record)] for record in batch], dtype=np.int64)
            names = [self.labels.names[row[0]] for row in labels]
        features, truncated = self.fixed.texts(first, pairs)
        self.count(len(batch), truncated, names)
        return {**features, "labels": labels}

    def summary(self) -> str:
        labels = ("scores" if self.regression else
                  f"{len(self.counters['label_counts'])} of {len(self.labels.names)} labels")
        return (f"from {self.counters['documents']:,} rows ({labels}; {self.counters['truncated']:,} cut to "
                f"{self.max_length} tokens)")


class TokenExamples(LabelledExamples):
    """token-classification: a row's words and one tag per word; the tag on each word's first piece."""

    def __init__(self, tokenizer, num_threads: int, max_length: int, input_column: str, target_column: str,
                 label_names: Sequence[str]):
        super().__init__(tokenizer, num_threads, max_length, label_names, (input_column,), target_column)
        self.feature_lengths = {"input_ids": max_length, "attention_mask": max_length, "token_type_ids": max_length,
                                "labels": max_length}
        self.counters.update({"words": 0, "dropped_words": 0})

    def words_and_tags(self, record: Record) -> Tuple[List[str], List[int]]:
        words, tags = words_and_tags(record, self.columns[0], self.target_column)
        return words, [self.labels.id_of(tag, record) for tag in tags]

    def encode(self, batch: List[Record]) -> Features:
        words, tags = zip(*map(self.words_and_tags, batch))
        features, word_ids, truncated = self.fixed.words(words)
        labels = np.array([first_piece_labels(ids, row) for ids, row in zip(word_ids, tags)], dtype=np.int64)
        kept = int((labels != IGNORE_INDEX).sum())
        total = sum(map(len, words))
        self.count(len(batch), truncated, [self.labels.names[tag] for row in tags for tag in row])
        self.counters["words"] += total
        self.counters["dropped_words"] += total - kept
        return {**features, "labels": labels}

    def summary(self) -> str:
        return (f"from {self.counters['documents']:,} rows ({self.counters['words']:,} words, "
                f"{len(self.counters['label_counts'])} of {len(self.labels.names)} tags; "
                f"{self.counters['truncated']:,} rows cut to {self.max_length} tokens, losing "
                f"{self.counters['dropped_words']:,} words)")
