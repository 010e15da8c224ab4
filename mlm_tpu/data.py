"""The tf.data input pipeline over count-named TFRecord shards, local or gs://.

list shards -> counts from names (checked against manifest.json when there is one) -> this
input pipeline's share of the files -> shuffle files -> TFRecordDataset (parallel reads) ->
assert_cardinality -> shuffle -> batch (drop_remainder) -> decode (fixed length) and transform
(mask, for masked-LM) -> prefetch. Shapes are fixed all the way, as TPUs need. Records are
shuffled still serialized and decoded a batch at a time (`parse_example`): about twice the
examples/s of decoding them one by one before shuffling, with the same result.

Masked-LM shards hold input_ids and attention_mask; text-to-text shards add labels (of their own
length). Which features a folder holds, and their lengths, come from its manifest, or else from
the first record of each shard.
"""

import json
import math
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import tensorflow as tf

from mlm_tpu.errors import UserError
from mlm_tpu.labels import IGNORE_INDEX
from mlm_tpu.sharding.tfrecord import iter_records
from mlm_tpu.sharding.writer import SHARD_COUNT

LENGTH_FLAGS = {"input_ids": ("--max-length", "examples"), "attention_mask": ("--max-length", "attention masks"),
                "labels": ("--max-target-length", "targets")}


def masked_lm_features(max_length: Optional[int]) -> Dict[str, Optional[int]]:
    """What masked-LM shards hold: feature -> length (None: whatever the shards say)."""
    return {"input_ids": max_length, "attention_mask": max_length}


def text2text_features(max_length: Optional[int], max_target_length: Optional[int]) -> Dict[str, Optional[int]]:
    """What text-to-text shards hold: inputs of one length, labels of another."""
    return {**masked_lm_features(max_length), "labels": max_target_length}


@dataclass(frozen=True)
class ShardSet:
    """The shards of one split, how many records each holds, each feature's length, and the split's manifest."""

    files: List[str]
    counts: List[int]
    features: Dict[str, int]
    manifest: Optional[dict] = None  # manifest.json, when the folder has one (the sharder's; others may not)

    @property
    def records(self) -> int:
        return sum(self.counts)

    @property
    def length(self) -> int:
        """Tokens per example (per input, for text-to-text)."""
        return self.features["input_ids"]

    def share(self, pipeline: int, pipelines: int) -> "ShardSet":
        """Every `pipelines`-th file from `pipeline`: what one host's input pipeline reads."""
        return ShardSet(self.files[pipeline::pipelines], self.counts[pipeline::pipelines], self.features,
                        self.manifest)


def find_shards(location: str, lengths: Dict[str, Optional[int]], flag: str = "--train-dataset") -> ShardSet:
    """The shards under a folder (or matching a glob), with their counts, checked before any work starts.

    `lengths` names the features the caller needs and their lengths; None accepts whatever the shards hold.
    """
    pattern = location if "*" in location or location.endswith(".tfrecord") else os.path.join(location, "*.tfrecord")
    try:
        files = sorted(tf.io.gfile.glob(pattern))
    except tf.errors.OpError as error:
        raise UserError(f"{flag} {location}: cannot list shards ({error.message.splitlines()[0]})") from None
    if not files:
        raise UserError(f"{flag} {location}: no shards (*.tfrecord) found; make them with `python -m mlm_tpu.shard`")
    counts = []
    for path in files:
        match = SHARD_COUNT.search(path)
        if not match:
            raise UserError(f"{flag}: shard {path} has no record count in its name; shards must be named "
                            "<prefix>-<index>-<count>.tfrecord")
        counts.append(int(match.group(1)))
    shards = ShardSet(files, counts, {}, _read_manifest(os.path.dirname(files[0])))
    features = _feature_lengths(shards, flag)
    _check_features(features, lengths, flag, os.path.dirname(files[0]))
    return ShardSet(files, counts, {name: features[name] for name in lengths}, shards.manifest)


def _read_manifest(folder: str) -> Optional[dict]:
    path = f"{folder}/manifest.json"
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "r") as stream:
        return json.load(stream)


def _feature_lengths(shards: ShardSet, flag: str) -> Dict[str, int]:
    """Each feature's length: from the manifest when there is one, else from each shard's first record."""
    folder = os.path.dirname(shards.files[0])
    manifest = shards.manifest
    if manifest is not None:
        listed = {entry["name"]: entry["count"] for entry in manifest["shards"]}
        if listed != {os.path.basename(path): count for path, count in zip(shards.files, shards.counts)}:
            raise UserError(f"{flag}: the shards in {folder} do not match its manifest.json (a shard is missing, "
                            "extra or renamed); re-run `python -m mlm_tpu.shard` for that split")
        # mlm_tpu 0.1 listed only each feature's type; its features were all max_length long
        return {name: feature["length"] if isinstance(feature, dict) else manifest["settings"]["max_length"]
                for name, feature in manifest["features"].items()}
    found = {path: _first_record_lengths(path) for path in shards.files}
    if len({tuple(sorted(lengths.items())) for lengths in found.values()}) > 1:
        described = "; ".join(f"{os.path.basename(path)}: " + ", ".join(f"{name} {length}" for name, length in
                                                                        lengths.items())
                              for path, lengths in found.items())
        raise UserError(f"{flag}: the shards in {folder} hold examples of different lengths ({described}); re-shard")
    return found[shards.files[0]]


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
    return {name: len(feature.int64_list.value) for name, feature in sorted(features.items())}


def _check_features(found: Dict[str, int], wanted: Dict[str, Optional[int]], flag: str, folder: str) -> None:
    """Refuse shards of the other kind (masked-LM vs text-to-text) or of other lengths than the flags say."""
    if "labels" in found and "labels" not in wanted:
        raise UserError(f"{flag}: the shards in {folder} are text-to-text examples (they hold labels); train them "
                        "with --head t5")
    missing = [name for name in wanted if name not in found]
    if missing == ["labels"]:
        raise UserError(f"{flag}: the shards in {folder} are masked-LM examples (no labels); make text-to-text "
                        "shards with `python -m mlm_tpu.shard --task text2text`")
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


def build_dataset(shards: ShardSet, batch_size: int, transform: Optional[Callable], *, shuffle: bool,
                  seed: int, shuffle_buffer_size: int = 2**18, repeat: bool = False,
                  pad_endlessly: bool = False) -> tf.data.Dataset:
    """Batches of `{input_ids, attention_mask, labels}`, int32, shape [batch_size, feature length].

    `transform(batch_number, batch)` turns the decoded features into the model's inputs (the
    masker makes masked-LM labels); None passes text-to-text batches, labels included, as they are.
    `pad_endlessly` (evaluation): keep the last partial batch, filled up with unscored rows
    (labels all -100), then yield unscored batches forever. Every example counts exactly once,
    shapes stay fixed, and every replica can take the same number of steps (`evaluation_steps`).
    """
    files = tf.data.Dataset.from_tensor_slices(shards.files)
    if shuffle:
        files = files.shuffle(len(shards.files), seed=seed, reshuffle_each_iteration=True)
    schema = {name: tf.io.FixedLenFeature([length], tf.int64) for name, length in shards.features.items()}

    def decode_and_transform(batch_number, records):
        examples = tf.io.parse_example(records, schema)
        batch = {name: tf.cast(values, tf.int32) for name, values in examples.items()}
        return transform(batch_number, batch) if transform else batch

    dataset = tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(shards.records))
    if shuffle:
        dataset = dataset.shuffle(min(shuffle_buffer_size, shards.records), seed=seed)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=not pad_endlessly)
    dataset = dataset.enumerate().map(decode_and_transform, num_parallel_calls=tf.data.AUTOTUNE)
    if pad_endlessly:
        dataset = dataset.map(lambda batch: _fill_batch(batch, batch_size))
        no_rows = {name: tf.zeros([0, *spec.shape[1:]], spec.dtype) for name, spec in dataset.element_spec.items()}
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(_fill_batch(no_rows, batch_size)).repeat())
    return dataset.prefetch(tf.data.AUTOTUNE)


def _fill_batch(batch: Dict[str, tf.Tensor], batch_size: int) -> Dict[str, tf.Tensor]:
    """Append unscored rows (no attention, labels -100) up to `batch_size`."""

    def fill(name: str, tensor: tf.Tensor) -> tf.Tensor:
        missing = batch_size - tf.shape(tensor)[0]
        filler = IGNORE_INDEX if name == "labels" else 0
        filled = tf.pad(tensor, [[0, missing], [0, 0]], constant_values=filler)
        return tf.ensure_shape(filled, [batch_size, tensor.shape[1]])

    return {name: fill(name, tensor) for name, tensor in batch.items()}


def evaluation_steps(shards: ShardSet, per_replica_batch_size: int, strategy) -> int:
    """Steps for every replica to see every example: the input pipeline with the most batches decides."""
    pipelines = getattr(strategy.extended, "num_hosts", 1)
    replicas_per_pipeline = strategy.num_replicas_in_sync // pipelines
    per_step = per_replica_batch_size * replicas_per_pipeline
    return max(math.ceil(shards.share(pipeline, pipelines).records / per_step) for pipeline in range(pipelines))


def distributed_dataset(strategy: tf.distribute.Strategy, shards: ShardSet, per_replica_batch_size: int,
                        make_transform: Callable[[int], Optional[Callable]], *, shuffle: bool, seed: int,
                        shuffle_buffer_size: int = 2**18, repeat: bool = False, pad_endlessly: bool = False):
    """One input pipeline per host, each reading its own files, batched per replica.

    `make_transform(seed)` gives each pipeline its transform (masker) seeded by its own seed.
    """

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        pipeline = context.input_pipeline_id
        return build_dataset(shards.share(pipeline, context.num_input_pipelines), per_replica_batch_size,
                             make_transform(seed + pipeline), shuffle=shuffle, seed=seed + pipeline,
                             shuffle_buffer_size=shuffle_buffer_size, repeat=repeat, pad_endlessly=pad_endlessly)

    return strategy.distribute_datasets_from_function(dataset_fn)
