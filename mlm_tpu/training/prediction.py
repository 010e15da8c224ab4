"""What every task's prediction shares (t5/prediction.py, encoder/prediction.py): inputs run in fixed-shape
batches."""

from typing import Dict, Iterator

import numpy as np


def batches(encoded: Dict[str, np.ndarray], batch_size: int) -> Iterator[Dict[str, np.ndarray]]:
    """Fixed-shape batches (the last one filled up with copies of its first row), so XLA compiles once."""
    for start in range(0, len(encoded["input_ids"]), batch_size):
        batch = {name: rows[start:start + batch_size] for name, rows in encoded.items()}
        missing = batch_size - len(batch["input_ids"])
        yield {name: np.concatenate([rows, np.repeat(rows[:1], missing, axis=0)]) for name, rows in batch.items()}
