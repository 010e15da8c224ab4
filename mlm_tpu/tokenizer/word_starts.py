"""Where words start, as a tokenizer marks them: what whole-word masking needs to mask every piece of a word.

Each family marks words its own way. Unigram (SentencePiece) pieces that start a word begin with ▁;
byte-level BPE pieces (RoBERTa's, GPT-2's) with Ġ, the space byte; WordPiece (BERT's) marks the other way
round: a piece that continues a word begins with ##. The convention is read from the tokenizer itself (its
model and pre-tokenizer), so it holds for Hub tokenizers (roberta-base, bert-base-cased, t5-small) as for
ours; `tokenizer_training.json` also records the --algorithm of ours.

One case the pieces alone do not show: byte-level BPE puts no Ġ before a text's first word (RoBERTa's
`add_prefix_space=False`), so a piece right after a special token (a document's <s>) starts a word too.

Examples:
    >>> import mlm_tpu
    >>> from mlm_tpu.tokenizer.load import load_tokenizer
    >>> mlm_tpu.train_tokenizer("runs/bpe", algorithm="bpe", builtin_corpus="pydoc-topics", vocab_size=1000,
    ...                         overwrite=True)
    'runs/bpe'
    >>> starts = word_starts(load_tokenizer("runs/bpe"))
    >>> starts.family, starts.marker, starts.starts_word("Ġworld"), starts.starts_word("ing")
    ('bpe', 'Ġ', True, False)
"""

import json
from dataclasses import dataclass
from typing import Collection, List, Sequence

from mlm_tpu.errors import UserError

METASPACE = "▁"
BYTE_LEVEL_SPACE = "Ġ"


@dataclass(frozen=True)
class WordStarts:
    """How one tokenizer marks words."""

    family: str  # "unigram", "bpe" or "wordpiece": the tokenizers model behind it
    marker: str  # "▁", "Ġ" or "##"
    marks_start: bool  # True: a piece beginning with `marker` starts a word; False (WordPiece): it continues one

    def starts_word(self, piece: str) -> bool:
        return piece.startswith(self.marker) == self.marks_start

    def describe(self) -> str:
        return f"a piece {'starting' if self.marks_start else 'not starting'} with {self.marker} starts a word"


def _steps(component) -> List[dict]:
    """A normalizer or pre-tokenizer as the list of its steps (a Sequence's, or itself)."""
    if not component:
        return []
    return component.get("pretokenizers") or component.get("normalizers") or [component]


def _backend(tokenizer) -> dict:
    return json.loads(tokenizer.backend_tokenizer.to_str()) if getattr(tokenizer, "is_fast", False) else {}


def family_of(tokenizer) -> str:
    """The tokenizers model behind a transformers tokenizer: "unigram", "bpe", "wordpiece", "wordlevel", or ""
    for a slow (Python) one."""
    return _backend(tokenizer).get("model", {}).get("type", "").lower()


def word_starts(tokenizer) -> WordStarts:
    """How `tokenizer` (a transformers fast tokenizer) marks the pieces that start or continue a word."""
    backend = _backend(tokenizer)
    model = backend.get("model", {"type": "slow (Python)"})
    family = model["type"].lower()
    if model.get("continuing_subword_prefix"):  # WordPiece; BPE trained with a prefix, as some are
        return WordStarts(family, model["continuing_subword_prefix"], marks_start=False)
    for step in _steps(backend.get("pre_tokenizer")):
        if step["type"] == "ByteLevel":
            return WordStarts(family, BYTE_LEVEL_SPACE, marks_start=True)
        if step["type"] == "Metaspace":
            return WordStarts(family, step.get("replacement", METASPACE), marks_start=True)
    for step in _steps(backend.get("normalizer")):  # SentencePiece models converted before Metaspace existed
        if step["type"] == "Prepend":
            return WordStarts(family, step["prepend"], marks_start=True)
    raise UserError(f"cannot tell how the tokenizer {tokenizer.name_or_path or ''} marks word starts: its "
                    f"{model['type']} model has no ## continuation and no ▁ or Ġ word marker; use a tokenizer made "
                    "by `python -m mlm_tpu.tokenizer train`")


def word_start_table(tokenizer) -> List[bool]:
    """For every id of `tokenizer`, whether its piece starts a word; special tokens count as words of their own."""
    starts = word_starts(tokenizer)
    special = set(tokenizer.all_special_ids)
    return [index in special or starts.starts_word(piece)
            for index, piece in enumerate(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))))]


def word_start_flags(ids: Sequence[int], table: Sequence[bool], special_ids: Collection[int]) -> List[bool]:
    """For a sequence of ids, whether each starts a word: its piece says so (`table`: `word_start_table`), or it
    follows a special token (a document's first word, which byte-level BPE writes without Ġ)."""
    return [table[token] or (index > 0 and ids[index - 1] in special_ids) for index, token in enumerate(ids)]
