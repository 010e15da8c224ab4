"""Writing count-named shards and the manifest, and picking up an interrupted job where it stopped.

The manifest is written last, so a split with a manifest is complete (format.py has the names
and features). While a job runs, a small hidden progress file says how many full shards are
written and where the corpus stood when the last one was (the example maker's counters); a
re-run with the same settings re-reads and checks those shards, keeps them, and restarts there.
The manifest, or while a job runs its progress file, is also the split's record of what mlm_tpu
wrote there: --overwrite deletes only what it names, and a shard it does not name is never replaced.
`write_shard` and `write_manifest` are the only writers of a split's files: the local job's
`ShardWriter` and the Beam pipeline's DoFns (beam_pipeline.py) both call them.
"""

from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Set, Tuple

import numpy as np

from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import encode_json, parse_json
from mlm_tpu.output_dir import check_replacing, crc32c_base64
from mlm_tpu.shards.format import (MANIFEST, SHARD_SUFFIX, feature_dtypes, is_shard_of,
                                    manifest_features, progress_name, shard_name)
from mlm_tpu.shards.packing import Features
from mlm_tpu.shards.tfrecord import frame_records, iter_records, serialize_examples


def split_record(storage, sizes: Dict[str, int], prefix: str) -> Tuple[Optional[str], Optional[dict]]:
    """The split's record of what mlm_tpu wrote there, and its name: the manifest of a finished split, else the
    progress file of an unfinished job (which owns the shards named with its prefix); (None, None) without one."""
    kind = MANIFEST if MANIFEST in sizes else progress_name(prefix) if progress_name(prefix) in sizes else None
    if kind is None:
        return None, None
    what = "manifest" if kind == MANIFEST else "progress file"
    fix = ("mlm_tpu cannot tell which files of the split it wrote, so it replaces none of them, even with "
           "--overwrite: delete the split yourself if nothing in it is yours, or choose another --output-dir")
    record = parse_json(storage.read(kind) or b"", f"the {what} {storage.location(kind)}", fix)
    shards = record.get("shards") if isinstance(record, dict) else None
    if not (isinstance(shards, int) if kind != MANIFEST else isinstance(shards, list) and all(
            isinstance(entry, dict) and {"name", "count"} <= set(entry) for entry in shards)):
        raise UserError(f"{storage.location(kind)} is not a {what} of mlm_tpu shards; {fix}")
    return kind, record


def written_files(storage, sizes: Dict[str, int], prefix: str, kind: Optional[str],
                  record: Optional[dict]) -> Set[str]:
    """The files of the split that mlm_tpu wrote, by its record (the shards it lists with their size, or those of
    an unfinished job's prefix), and the temporary files killed jobs left, a killed job's claim among them (never
    one a live job writes: storage.py)."""
    ours = set(storage.left_temporaries(sizes))
    if kind == MANIFEST:
        ours |= {entry["name"] for entry in record["shards"] if entry["name"] in sizes and
                 entry.get("bytes", sizes[entry["name"]]) == sizes[entry["name"]]}
    elif kind is not None:
        ours |= {name for name in sizes if is_shard_of(prefix, name)}
    return ours | ({MANIFEST, progress_name(prefix)} & set(sizes) if kind else set())


def files_not_written(storage, prefix: str) -> List[str]:
    """The files of a split that mlm_tpu did not write (hidden ones, its bookkeeping, aside)."""
    sizes = storage.sizes()
    ours = written_files(storage, sizes, prefix, *split_record(storage, sizes, prefix))
    return [name for name in sizes if name not in ours and not name.startswith(".")]


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
        "features": manifest_features(feature_lengths, feature_dtypes(settings)),
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
        """Where the job starts. By the rule of output folders (output_dir.py), --overwrite deletes only the files
        the split's record names (see `split_record`), and a shard it does not name is never replaced."""
        sizes = self.storage.sizes()
        kind, record = split_record(self.storage, sizes, self.prefix)
        ours = written_files(self.storage, sizes, self.prefix, kind, record)
        if kind == MANIFEST and not overwrite:
            return self._check_complete(record)
        others = [name for name in sizes if name.endswith(SHARD_SUFFIX) and name not in ours]
        check_replacing(f"the split {self.storage.location().rstrip('/')}", others, [], overwrite=True)
        if kind is not None and kind != MANIFEST and not overwrite:
            return self._resume(record, ours)
        for name in sorted(ours, key=lambda name: name == kind):  # the record last
            self.storage.delete(name)
        return ResumePoint()

    def read_manifest(self) -> dict:
        """The manifest of the split, once a job has finished it."""
        return parse_json(self.storage.read(MANIFEST) or b"", f"the manifest {self.storage.location(MANIFEST)}",
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

    def _resume(self, progress: dict, ours: Set[str]) -> ResumePoint:
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
