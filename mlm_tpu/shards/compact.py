"""Integer arrays as compact bytes, for sending token ids between the workers of a Beam pipeline.

A 1,000-token row of Python ints is ~28 KB pickled; as uint16 (any vocabulary below 65,536 pieces)
it is 2 KB. Each array travels in the narrowest type that holds its values (uint8 for an attention
mask, uint16 for ids, int16 for T5 labels with their -100; float arrays, a regression split's scores,
as float32), as plain bytes, tuples and strings that Beam's own coder handles without pickling.
"""

from typing import Dict, Tuple

import numpy as np

Compact = Tuple[str, Tuple[int, ...], bytes]  # numpy dtype string, shape, the values' bytes
NARROW_TYPES = (np.uint8, np.uint16, np.int16, np.int32, np.int64)


def compact(array: np.ndarray) -> Compact:
    """`array` in the narrowest of NARROW_TYPES that holds all its values (float32, if it holds floats)."""
    if np.issubdtype(array.dtype, np.floating):
        return np.dtype(np.float32).str, tuple(array.shape), array.astype(np.float32, copy=False).tobytes()
    low, high = (int(array.min()), int(array.max())) if array.size else (0, 0)
    narrow = next(np.dtype(kind) for kind in NARROW_TYPES
                  if np.iinfo(kind).min <= low and high <= np.iinfo(kind).max)
    return narrow.str, tuple(array.shape), array.astype(narrow, copy=False).tobytes()


def expand(packed: Compact) -> np.ndarray:
    """The array `compact` packed (in its narrow type: callers widen it where they need to)."""
    dtype, shape, data = packed
    return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)


def compact_columns(columns: Dict[str, np.ndarray]) -> Dict[str, Compact]:
    return {name: compact(array) for name, array in columns.items()}


def expand_columns(columns: Dict[str, Compact]) -> Dict[str, np.ndarray]:
    return {name: expand(packed) for name, packed in columns.items()}
