"""Writing count-named shards and the manifest, and picking up an interrupted job where it stopped.

The manifest is written last, so a split with a manifest is complete (format.py has the names
and features). While a job runs, a small hidden progress file says how many full shards are
written and where the corpus stood when the last one was (the example maker's counters); a
re-run with the same settings re-reads and checks those shards, keeps them, and restarts there.
`write_shard` and `write_manifest` are the only writers of a split's files: the local job's
`ShardWriter` and the Beam pipeline's DoFns (beam_pipeline.py) both call them.
"""

from dataclasses import asdict, dataclass
from typing import Dict, List, Optional

import numpy as np

from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import encode_json, parse_json
from mlm_tpu.shards.format import MANIFEST, SHARD_SUFFIX, manifest_features, progress_name, shard_name
from mlm_tpu.shards.packing import Features
from mlm_tpu.shards.storage import crc32c_base64
from mlm_tpu.shards.tfrecord import frame_records, iter_records, serialize_examples

@dataclass(frozen=True)
class ShardInfo:
    """One written shard, as the manifest lists it."""

    name: str
    count: int
    bytes: int
    crc32c: str


def write_shard(storage, prefix: str, index: int, examples: Features) -> ShardInfo:
    """Store shard number `index` holding `examples`, named by its record count; return its manifest entry.

    One call writes the whole file under its final name at once (storage.py), so writing it again (a
    retried bundle, a re-run) leaves the same complete file.
    """
    rows = len(examples["input_ids"])
    data = frame_records(serialize_examples(examples))
    name = shard_name(prefix, index, rows)
    storage.write(name, data)
    return ShardInfo(name, rows, len(data), crc32c_base64(data))


def manifest_of(settings: Dict[str, object], feature_lengths: Dict[str, int], totals: Dict[str, object],
                shards: List[ShardInfo]) -> dict:
    """What manifest.json says of a complete split."""
    records = sum(shard.count for shard in shards)
    return {
        "settings": settings,
        "features": manifest_features(feature_lengths),
        **totals,
        "records": records,
        "tokens": records * feature_lengths["input_ids"],
        "shards": [asdict(shard) for shard in shards],
    }


def write_manifest(storage, prefix: str, manifest: dict) -> None:
    """Mark the split complete: the manifest, then no more progress file."""
    storage.write(MANIFEST, encode_json(manifest))
    storage.delete(progress_name(prefix))


@dataclass(frozen=True)
class ResumePoint:
    """Where a job (re)starts: the example maker's counters then (none: from the start), full shards kept."""

    counters: Optional[dict] = None
    shards: int = 0
    complete: bool = False


def _concatenate(parts: List[Features]) -> Features:
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


class ShardWriter:
    """Collects fixed-length examples into shards of `shard_size` records and stores them."""

    def __init__(self, storage, prefix: str, shard_size: int, feature_lengths: Dict[str, int],
                 settings: Dict[str, object]):
        self.storage = storage
        self.prefix = prefix
        self.shard_size = shard_size
        self.feature_lengths = feature_lengths
        self.settings = settings
        self.shards: List[ShardInfo] = []
        self.manifest: Optional[dict] = None  # set once the split is complete
        self._pending: List[Features] = []
        self._pending_rows = 0

    # Starting: fresh, resumed, or already complete.
    def resume_point(self, overwrite: bool) -> ResumePoint:
        names = self.storage.list_names()
        ours = [n for n in names if n.endswith(SHARD_SUFFIX) or n in (MANIFEST, progress_name(self.prefix))
                or (n.startswith(".") and n.endswith(".partial"))]
        if overwrite:
            for name in ours:
                self.storage.delete(name)
            return ResumePoint()
        if MANIFEST in names:
            return self._check_complete(self.read_manifest())
        if progress_name(self.prefix) in names:
            return self._resume(self._read_json(progress_name(self.prefix), "progress file"), ours)
        if ours:
            raise UserError(f"{self.storage.location()} already holds shards that this job did not start "
                            f"({ours[0]}, ...); pass --overwrite to replace them, or choose another --output-dir")
        return ResumePoint()

    def read_manifest(self) -> dict:
        return self._read_json(MANIFEST, "manifest")

    def _read_json(self, name: str, what: str) -> dict:
        return parse_json(self.storage.read(name) or b"", f"the {what} {self.storage.location(name)}",
                          "pass --overwrite to make the split again")

    def _refuse_other_settings(self, recorded: Dict[str, object], what: str) -> None:
        differing = sorted(key for key in self.settings if recorded.get(key) != self.settings[key])
        if differing:
            raise UserError(f"{self.storage.location()} holds {what} made with other settings "
                            f"({', '.join(differing)} differ); pass --overwrite to replace them, or choose "
                            "another --output-dir")

    def _verify(self, name: str, count: int) -> Optional[ShardInfo]:
        """The shard's manifest entry if it is stored whole with `count` records, else None."""
        data = self.storage.read(name)
        if data is None:
            return None
        try:
            if sum(1 for _ in iter_records(data, name)) != count:
                return None
        except UserError:  # truncated or corrupt
            return None
        return ShardInfo(name, count, len(data), crc32c_base64(data))

    def _check_complete(self, manifest: dict) -> ResumePoint:
        self._refuse_other_settings(manifest.get("settings", {}), "a finished split")
        listed = [self._verify(entry["name"], entry["count"]) for entry in manifest["shards"]]
        if [asdict(shard) if shard else None for shard in listed] != manifest["shards"]:
            raise UserError(f"{self.storage.location()} has a manifest but some of its shards are missing or "
                            "corrupt; pass --overwrite to make the split again")
        self.shards, self.manifest = listed, manifest
        return ResumePoint(complete=True)

    def _resume(self, progress: dict, ours: List[str]) -> ResumePoint:
        self._refuse_other_settings(progress.get("settings", {}), "an unfinished job")
        kept = [self._verify(shard_name(self.prefix, index, self.shard_size), self.shard_size)
                for index in range(progress["shards"])]
        if None in kept:  # a shard the progress file counts is gone or damaged: start the split over
            kept, progress = [], {"counters": None}
        self.shards = kept
        for name in set(ours) - {shard.name for shard in kept} - {progress_name(self.prefix)}:
            self.storage.delete(name)  # shards past the last recorded one, half-written temp files
        return ResumePoint(counters=progress["counters"], shards=len(kept))

    @property
    def records(self) -> int:
        """Examples taken so far, written or waiting for their shard."""
        return sum(shard.count for shard in self.shards) + self._pending_rows

    # Writing.
    def add(self, examples: Features, counters_before_batch: dict) -> None:
        """Queue examples; write every full shard now possible.

        The counters from before the batch that brought the examples are what a re-run restarts
        from: the corpus is re-read from there and the units already in shards are skipped.
        """
        rows = len(examples["input_ids"])
        if rows:
            self._pending.append(examples)
            self._pending_rows += rows
        while self._pending_rows >= self.shard_size:
            pending = _concatenate(self._pending)
            self._write({name: array[:self.shard_size] for name, array in pending.items()})
            self.save_progress(counters_before_batch)
            rest = {name: array[self.shard_size:] for name, array in pending.items()}
            self._pending_rows = len(rest["input_ids"])
            self._pending = [rest] if self._pending_rows else []

    def save_progress(self, counters: Optional[dict]) -> None:
        """Record the settings, the full shards kept so far and the counters a re-run restarts from (None: from
        the start, skipping the kept shards' examples)."""
        self.storage.write(progress_name(self.prefix), encode_json(
            {"settings": self.settings, "shards": len(self.shards), "counters": counters}))

    def _write(self, examples: Features) -> None:
        self.shards.append(write_shard(self.storage, self.prefix, len(self.shards), examples))

    def finish(self, totals: Dict[str, object]) -> dict:
        """Write the last, shorter shard and then the manifest; return the manifest."""
        if self._pending_rows:
            self._write(_concatenate(self._pending))
            self._pending, self._pending_rows = [], 0
        self.manifest = manifest_of(self.settings, self.feature_lengths, totals, self.shards)
        write_manifest(self.storage, self.prefix, self.manifest)
        return self.manifest
