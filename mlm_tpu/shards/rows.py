"""One example per corpus row (T5's text-to-text rows, an encoder's labelled rows): the rows are the units, a batch's
encoding is its examples, and the distinct values of one column (targets, labels) are counted, up to a bound, so
that training knows the classes from the manifest. The kinds of such rows live in their product lines."""

from collections import Counter
from typing import Dict, Optional, Sequence, Tuple

from mlm_tpu.shards.packing import ExampleMaker, Features

MAX_COUNTED_TARGETS = 1000  # beyond this many distinct targets the task is generation, not classification


def merged_target_counts(counts: Optional[Dict[str, int]], more: Optional[Dict[str, int]]) -> Optional[Dict[str, int]]:
    """Two counts of distinct targets as one, or None (too many to count) once they exceed MAX_COUNTED_TARGETS."""
    if counts is None or more is None:
        return None
    merged = Counter(counts)
    merged.update(more)
    return dict(sorted(merged.items())) if len(merged) <= MAX_COUNTED_TARGETS else None


class OneExamplePerRow(ExampleMaker):
    """The rows are the units and a batch's encoding is its examples (no packing, nothing carried over)."""

    unit_name = "rows"
    units_per_example = 1

    def drop(self, piece: Features, count: int) -> Tuple[Features, int]:
        cut = min(count, len(piece["input_ids"]))
        return {name: rows[cut:] for name, rows in piece.items()}, count - cut

    def examples(self, piece: Features) -> Features:
        return piece

    def whole_examples(self, units: Features) -> Features:
        return units


class RowExamples(OneExamplePerRow):
    """One example per corpus row (text-to-text, and labelled examples for encoders), the distinct values of
    `counted` (targets, labels) counted."""

    counted: str  # the counter of distinct values: a dict, value -> rows (None beyond MAX_COUNTED_TARGETS)

    def __init__(self):
        super().__init__()
        self.counters[self.counted] = {}

    def count_values(self, values: Sequence[str]) -> None:
        self.counters[self.counted] = merged_target_counts(self.counters[self.counted], Counter(values))

    @classmethod
    def merged_counters(cls, counters: Dict[str, object], more: Dict[str, object]) -> Dict[str, object]:
        numbers = ExampleMaker.merged_counters({key: value for key, value in counters.items()
                                                if key != cls.counted}, more)
        return {**numbers, cls.counted: merged_target_counts(counters[cls.counted], more[cls.counted])}
