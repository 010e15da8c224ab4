"""A uniform sample of a stream of documents, holding only the sample: what a tokenizer trains on from a large corpus.

SentencePiece does the same with `input_sentence_size`: a tokenizer's vocabulary settles long
before it has seen a corpus of C4's size, and the trainer's memory grows with the text it is given
(its word counts, then its suffix array), so it is given a sample. Reservoir sampling (Vitter's
Algorithm R) reads the stream once, in any order a corpus streams in, and keeps N documents: every
document has the same chance N / total of being kept, and the same seed and stream give the same sample.
"""

import random
from typing import Iterable, List, Tuple, TypeVar

Item = TypeVar("Item")


def reservoir_sample(items: Iterable[Item], size: int, seed: int) -> List[Item]:
    """`size` items drawn uniformly without replacement from `items` (all of them if fewer), in stream order.

    Examples:
        >>> reservoir_sample(range(10), 3, seed=0)
        [1, 5, 6]
    """
    draw = random.Random(seed)
    reservoir: List[Tuple[int, Item]] = []
    for index, item in enumerate(items):
        if index < size:
            reservoir.append((index, item))
        else:
            slot = draw.randrange(index + 1)
            if slot < size:
                reservoir[slot] = (index, item)
    return [item for _, item in sorted(reservoir, key=lambda kept: kept[0])]
