"""Finding a split's shards (local or gs://) and checking them before any work starts.

The record counts come from the shard names; which features the examples hold, and their
lengths, from the split's manifest when it has one (checked against the files), else from the
first record of each shard. A split of the wrong kind for the task, or of other lengths than
asked for, is refused in one line that says what to do.
"""

import dataclasses
import os
from dataclasses import dataclass
from typing import Dict, List, Optional

import tensorflow as tf

from mlm_tpu.errors import UserError
from mlm_tpu.shards.format import (MANIFEST, SHARD_COUNT, WRITER_RECORD, feature_lengths, manifest_dtypes, no_shards,
                                   shard_pattern)
from mlm_tpu.shards.kinds import ShardKind, ShardKinds
from mlm_tpu.shards.tfrecord import iter_records

LENGTH_FLAGS = {"input_ids": ("--max-length", "examples"), "attention_mask": ("--max-length", "attention masks"),
                "token_type_ids": ("--max-length", "token types"), "labels": ("--max-target-length", "targets")}


@dataclass(frozen=True)
class ShardSet:
    """The shards of one split, how many records each holds, each feature's length, and the split's manifest.

    A part of a split (`share`) may read only some of a file's records: `counts[i]` of them from its `starts[i]`-th,
    the file holding `totals[i]` (None: every file whole)."""

    files: List[str]
    counts: List[int]
    features: Dict[str, int]
    manifest: Optional[dict] = None  # manifest.json, when the folder has one (the sharder's; others may not)
    kind: Optional[ShardKind] = None  # the kind of split it is: which features hold token ids, what its labels are
    starts: Optional[List[int]] = None
    totals: Optional[List[int]] = None
    dtypes: Optional[Dict[str, str]] = None  # the features that are not int64 (a regression split's float32 labels)

    @property
    def records(self) -> int:
        return sum(self.counts)

    @property
    def first_records(self) -> List[int]:
        """The first record read of each file."""
        return self.starts if self.starts is not None else [0] * len(self.files)

    @property
    def file_records(self) -> List[int]:
        """The records each file holds, as its name says."""
        return self.totals if self.totals is not None else self.counts

    @property
    def length(self) -> int:
        """Tokens per example (per input, for text-to-text; raw tokens, for span corruption)."""
        return self.features["input_ids"]

    @property
    def folder(self) -> str:
        return os.path.dirname(self.files[0])

    def share(self, part: int, parts: int) -> "ShardSet":
        """The `part`-th of `parts` equal parts of the records, the files read one after the other in name order:
        records [part x N / parts, (part + 1) x N / parts). What one input pipeline reads: each reads the files its
        part covers (a file is read by two where a part ends inside it), and no part has a record more than
        another, however unequal the files."""
        begin, end = part * self.records // parts, (part + 1) * self.records // parts
        files, counts, starts, totals, offset = [], [], [], [], 0
        for path, count, first, total in zip(self.files, self.counts, self.first_records, self.file_records):
            low, high = max(begin, offset), min(end, offset + count)
            if low < high:
                files.append(path)
                counts.append(high - low)
                starts.append(first + low - offset)
                totals.append(total)
            offset += count
        return dataclasses.replace(self, files=files, counts=counts, starts=starts, totals=totals)


def find_shards(location: str, kinds: ShardKinds, kind: Optional[str], lengths: Optional[Dict[str, Optional[int]]],
                flag: str = "--train-dataset") -> ShardSet:
    """The shards of `kind` under a folder (or matching a glob), with their counts, checked before any work starts.

    `kinds` are the kinds of split a split may be (the registry's, handed down: a task plug-in's `shard_kinds`):
    they say which one it is and, when it is not `kind`, what it is and how to make one of `kind`.
    `lengths` names the features the caller needs and their lengths; None accepts whatever the shards hold.
    A `kind` (and `lengths`) of None accepts any kind of split, with all its features.
    """
    pattern = shard_pattern(location)
    try:
        files = sorted(tf.io.gfile.glob(pattern))
    except tf.errors.OpError as error:
        raise UserError(f"{flag} {location}: cannot list shards ({error.message.splitlines()[0]})") from None
    if not files:
        raise no_shards(location, flag)
    counts = []
    for path in files:
        match = SHARD_COUNT.search(path)
        if not match:
            raise UserError(f"{flag}: shard {path} has no record count in its name; shards must be named "
                            "<prefix>-<index>-<count>.tfrecord")
        counts.append(int(match.group(1)))
    folder = os.path.dirname(files[0])
    if tf.io.gfile.exists(f"{folder}/{WRITER_RECORD}"):
        raise UserError(f"{flag}: the shards in {folder} are still being written by a sharding job (or one that was "
                        "killed); wait for it to finish, or run it again to finish the split")
    manifest = _read_manifest(folder, flag)
    found = _feature_lengths_from_manifest(manifest, files, counts, folder, flag) if manifest else \
        _feature_lengths_from_records(files, folder, flag)
    if manifest:
        _check_sizes(manifest, files, flag)
    found_kind = kinds.of_manifest(manifest) if manifest else kinds.holding(found)
    if kind is None:
        kind, lengths = found_kind.name, found_kind.features(None, None)
    _check_kind(found_kind, kinds.kinds[kind], flag, folder)
    _check_lengths(found, lengths, flag, folder)
    return ShardSet(files, counts, {name: found[name] for name in lengths}, manifest, found_kind,
                    dtypes=manifest_dtypes(manifest) if manifest else None)


def _read_manifest(folder: str, flag: str) -> Optional[dict]:
    from mlm_tpu.jsonfiles import read_json

    path = f"{folder}/{MANIFEST}"
    if not tf.io.gfile.exists(path):
        return None
    return read_json(path, f"{flag}: the manifest of the shards in {folder}",
                     "re-run `python -m mlm_tpu.shard` for that split (with --overwrite)")


def _feature_lengths_from_manifest(manifest: dict, files: List[str], counts: List[int], folder: str,
                                   flag: str) -> Dict[str, int]:
    try:
        listed = {entry["name"]: entry["count"] for entry in manifest["shards"]}
        lengths = feature_lengths(manifest)
    except (KeyError, TypeError):
        raise UserError(f"{flag}: {folder}/{MANIFEST} is not a manifest of mlm_tpu shards (it lacks 'shards' or "
                        "'features'); re-run `python -m mlm_tpu.shard` for that split (with --overwrite)") from None
    if listed != {os.path.basename(path): count for path, count in zip(files, counts)}:
        raise UserError(f"{flag}: the shards in {folder} do not match its manifest.json (a shard is missing, "
                        "extra or renamed); re-run `python -m mlm_tpu.shard` for that split")
    return lengths


def _check_sizes(manifest: dict, files: List[str], flag: str) -> None:
    """Local shards must have the size the manifest recorded (a copy cut short loses whole records)."""
    sizes = {entry["name"]: entry.get("bytes") for entry in manifest["shards"]}
    for path in files:
        expected = sizes.get(os.path.basename(path))
        if expected is None or "://" in path:
            continue
        size = os.path.getsize(path)
        if size != expected:
            how = "fewer than" if size < expected else "not"
            raise UserError(f"{flag}: shard {path} holds {size:,} bytes, {how} the {expected:,} its manifest recorded"
                            f"{' (cut short?)' if size < expected else ''}; copy it again or re-shard the split")


def check_tokenizer(shards: ShardSet, tokenizer, flag: str, tokenizer_flag: str,
                    fix: str = "pass the tokenizer that made them, or re-shard with this one") -> None:
    """Refuse a tokenizer other than the one the manifest says made the shards (ids would mean other pieces); `fix`
    says what to do."""
    from mlm_tpu.tokenizer.load import tokenizer_fingerprint

    recorded = (shards.manifest or {}).get("settings", {}).get("tokenizer_fingerprint")
    given = tokenizer_fingerprint(tokenizer) if recorded else None
    if recorded != given and recorded != tokenizer_fingerprint(tokenizer, as_saved=True):
        raise UserError(f"{flag}: the shards in {shards.folder} were made with another tokenizer than {tokenizer_flag} "
                        f"(fingerprint {recorded}, not {given}); {fix}")


def find_short_shard(shards: ShardSet) -> Optional[str]:
    """Which shard holds fewer records than its name counts (after TensorFlow found one), in words."""
    for path, count in zip(shards.files, shards.counts):
        found = sum(1 for _ in tf.data.TFRecordDataset(path))
        if found != count:
            return (f"shard {path} holds {found} records, {'fewer' if found < count else 'more'} than the {count} its "
                    "name counts (cut short by a copy?); copy it again or re-shard the split")
    return None


def _feature_lengths_from_records(files: List[str], folder: str, flag: str) -> Dict[str, int]:
    """Each feature's length from each shard's first record; they must all agree."""
    found = {path: _first_record_lengths(path) for path in files}
    if len({tuple(sorted(lengths.items())) for lengths in found.values()}) > 1:
        described = "; ".join(f"{os.path.basename(path)}: " + ", ".join(f"{name} {length}" for name, length in
                                                                        lengths.items())
                              for path, lengths in found.items())
        raise UserError(f"{flag}: the shards in {folder} hold examples of different lengths ({described}); re-shard")
    return found[files[0]]


def _first_record_lengths(path: str) -> Dict[str, int]:
    try:
        record = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except tf.errors.OpError as error:
        raise UserError(f"cannot read {path}: {error.message.splitlines()[0]}") from None
    if record is None:
        raise UserError(f"{path} is empty although its name counts records; re-shard")
    features = tf.train.Example.FromString(record.numpy()).features.feature
    if "input_ids" not in features:
        raise UserError(f"{path} has no input_ids feature; it was not made by `python -m mlm_tpu.shard` or the "
                        "reference sharder")
    return {name: len(feature.int64_list.value) or len(feature.float_list.value)
            for name, feature in sorted(features.items())}


def _check_kind(found: ShardKind, wanted: ShardKind, flag: str, folder: str) -> None:
    """Refuse shards of another kind than the task trains on, saying what they are and what to do."""
    if found is not wanted:
        raise UserError(f"{flag}: the shards in {folder} are {found.examples}, which train with "
                        f"{found.trained_with}; make shards for this task with {wanted.how_to_make}")


def _check_lengths(found: Dict[str, int], wanted: Dict[str, Optional[int]], flag: str, folder: str) -> None:
    missing = [name for name in wanted if name not in found]
    if missing:
        raise UserError(f"{flag}: the shards in {folder} have no {' and no '.join(missing)} feature; re-shard them "
                        "with `python -m mlm_tpu.shard`")
    for name, length in wanted.items():
        if length is not None and found[name] != length:
            length_flag, what = LENGTH_FLAGS[name]
            raise UserError(f"{flag}: the shards in {folder} hold {found[name]}-token {what}, not {length_flag} "
                            f"{length}; pass {length_flag} {found[name]} or re-shard")


def find_corrupt_shard(shards: ShardSet) -> Optional[str]:
    """The first shard whose records fail their checksums (after TensorFlow reported data loss)."""
    for path in shards.files:
        with tf.io.gfile.GFile(path, "rb") as stream:
            data = stream.read()
        try:
            for _ in iter_records(data, path):
                pass
        except UserError as error:
            return str(error)
    return None
