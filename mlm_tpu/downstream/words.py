"""The text every row of the benchmark reads: each text (and pair) cut to the whole words the model's tokenizer keeps
at the protocol's length. The model, its shape from scratch, the reference encoders (each tokenizing that text with
its own tokenizer) and the TF-IDF floor then read the same words, so that a row's margin is not a tokenizer fitting
more words into its tokens (all-MiniLM-L6-v2's WordPiece fits about 26% more of an IMDB review into 64 tokens than a
2,048-piece Unigram learnt on IMDB); the report gives the words each row read.

A word is a run of characters between spaces: a cut inside one (the tokenizer kept some of its pieces) leaves it out.
"""

import statistics
from typing import List, Optional, Sequence, Tuple


def whole_words(text: str, kept: str) -> str:
    """`kept` (a start of `text`, where a tokenizer's cut ended) without a last word the cut fell inside; a text whose
    first word alone is cut keeps its pieces (a row is never left empty)."""
    if len(kept) >= len(text) or text[len(kept)].isspace() or kept[-1:].isspace():
        return kept.rstrip()
    start = kept.rstrip().rfind(" ")
    return kept[:start].rstrip() if start > 0 else kept


def kept_words(tokenizer, max_length: int, texts: Sequence[str], pairs: Optional[Sequence[str]] = None
               ) -> Tuple[List[str], Optional[List[str]], int]:
    """(each text, and pair, cut to the whole words `tokenizer` keeps of it in `max_length` tokens, framing
    included; how many rows it cut)."""
    from mlm_tpu.encoder.labelled_rows import FixedLengthEncoder

    kept, kept_pairs, cut = FixedLengthEncoder(tokenizer, max_length).kept_texts(texts, pairs)
    sides = [[whole_words(text, piece) for text, piece in zip(texts, kept)]]
    if pairs is not None:
        sides.append([whole_words(text, piece) for text, piece in zip(pairs, kept_pairs)])
    return sides[0], sides[1] if pairs is not None else None, cut


def words_per_row(*sides: Optional[Sequence[str]]) -> float:
    """The mean count of words in a row (its text and pair together) over the rows of `sides`' columns."""
    columns = [side for side in sides if side is not None]
    counts = [sum(len(text.split()) for text in row) for row in zip(*columns)]
    return statistics.fmean(counts) if counts else 0.0
