"""The tf.data input pipeline over count-named TFRecord shards, local or gs://.

list shards -> counts from names (checked against manifest.json when there is one) -> this
input pipeline's share of the files -> shuffle files -> TFRecordDataset (parallel reads) ->
assert_cardinality -> shuffle -> batch (drop_remainder) -> decode (fixed length) and mask ->
prefetch. Shapes are fixed all the way, as TPUs need. Records are shuffled still serialized
and decoded a batch at a time (`parse_example`): about twice the examples/s of decoding them
one by one before shuffling, with the same result.
"""

import json
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import tensorflow as tf

from mlm_tpu.errors import UserError
from mlm_tpu.masking import IGNORE_INDEX
from mlm_tpu.sharding.tfrecord import iter_records
from mlm_tpu.sharding.writer import SHARD_COUNT

FEATURES = ("input_ids", "attention_mask")


@dataclass(frozen=True)
class ShardSet:
    """The shards of one split, how many records each holds, and the tokens per example."""

    files: List[str]
    counts: List[int]
    length: int

    @property
    def records(self) -> int:
        return sum(self.counts)

    def share(self, pipeline: int, pipelines: int) -> "ShardSet":
        """Every `pipelines`-th file from `pipeline`: what one host's input pipeline reads."""
        return ShardSet(self.files[pipeline::pipelines], self.counts[pipeline::pipelines], self.length)


def find_shards(location: str, max_length: Optional[int], flag: str = "--train-dataset") -> ShardSet:
    """The shards under a folder (or matching a glob), with their counts, checked before any work starts.

    `max_length` None accepts whatever length the shards hold (it is then read from them).
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
    length = _example_length(files, counts, flag)
    if max_length is not None and length != max_length:
        raise UserError(f"{flag}: the shards in {os.path.dirname(files[0])} hold {length}-token examples, not "
                        f"--max-length {max_length}; pass --max-length {length} or re-shard")
    return ShardSet(files, counts, length)


def _example_length(files: List[str], counts: List[int], flag: str) -> int:
    """Tokens per example: from the manifest when there is one, else from each shard's first record."""
    folder = os.path.dirname(files[0])
    manifest_path = f"{folder}/manifest.json"
    if tf.io.gfile.exists(manifest_path):
        with tf.io.gfile.GFile(manifest_path, "r") as stream:
            manifest = json.load(stream)
        listed = {entry["name"]: entry["count"] for entry in manifest["shards"]}
        if listed != {os.path.basename(path): count for path, count in zip(files, counts)}:
            raise UserError(f"{flag}: the shards in {folder} do not match its manifest.json (a shard is missing, "
                            "extra or renamed); re-run `python -m mlm_tpu.shard` for that split")
        return manifest["settings"]["max_length"]
    lengths = {path: _first_record_length(path) for path in files}
    if len(set(lengths.values())) > 1:
        raise UserError(f"{flag}: the shards in {folder} hold examples of different lengths "
                        f"({', '.join(f'{os.path.basename(p)}: {n}' for p, n in lengths.items())}); re-shard")
    return lengths[files[0]]


def _first_record_length(path: str) -> int:
    try:
        record = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except tf.errors.OpError as error:
        raise UserError(f"cannot read {path}: {error.message.splitlines()[0]}") from None
    if record is None:
        raise UserError(f"{path} is empty although its name counts records; re-shard")
    example = tf.train.Example.FromString(record.numpy())
    if "input_ids" not in example.features.feature:
        raise UserError(f"{path} has no input_ids feature; it was not made by a masked-LM sharder")
    return len(example.features.feature["input_ids"].int64_list.value)


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


def build_dataset(shards: ShardSet, max_length: int, batch_size: int, masker: Callable, *, shuffle: bool,
                  seed: int, shuffle_buffer_size: int = 2**18, repeat: bool = False,
                  pad_endlessly: bool = False) -> tf.data.Dataset:
    """Batches of `{input_ids, attention_mask, labels}`, int32, shape [batch_size, max_length].

    `pad_endlessly` (evaluation): keep the last partial batch, filled up with unscored rows
    (labels all -100), then yield unscored batches forever. Every example counts exactly once,
    shapes stay fixed, and every replica can take the same number of steps.
    """
    files = tf.data.Dataset.from_tensor_slices(shards.files)
    if shuffle:
        files = files.shuffle(len(shards.files), seed=seed, reshuffle_each_iteration=True)
    schema = {name: tf.io.FixedLenFeature([max_length], tf.int64) for name in FEATURES}

    def decode_and_mask(batch_number, records):
        examples = tf.io.parse_example(records, schema)
        return masker(batch_number, {name: tf.cast(examples[name], tf.int32) for name in FEATURES})

    dataset = tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(shards.records))
    if shuffle:
        dataset = dataset.shuffle(min(shuffle_buffer_size, shards.records), seed=seed)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=not pad_endlessly)
    dataset = dataset.enumerate().map(decode_and_mask, num_parallel_calls=tf.data.AUTOTUNE)
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


def distributed_dataset(strategy: tf.distribute.Strategy, shards: ShardSet, max_length: int,
                        per_replica_batch_size: int, make_masker: Callable[[int], Callable], *, shuffle: bool,
                        seed: int, shuffle_buffer_size: int = 2**18, repeat: bool = False, pad_endlessly: bool = False):
    """One input pipeline per host, each reading its own files, batched per replica."""

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        pipeline = context.input_pipeline_id
        return build_dataset(shards.share(pipeline, context.num_input_pipelines), max_length, per_replica_batch_size,
                             make_masker(seed + pipeline), shuffle=shuffle, seed=seed + pipeline,
                             shuffle_buffer_size=shuffle_buffer_size, repeat=repeat, pad_endlessly=pad_endlessly)

    return strategy.distribute_datasets_from_function(dataset_fn)
