"""The tf.data input pipelines over a split's shards, local or gs://, with fixed shapes all the way (TPUs need them).

Training: the batches of every step are a pure function of (seed, step) and the shards, whatever the machines,
so a run resumed at step N reads exactly what the uninterrupted run read from step N on, on as many workers, replicas
or TPU hosts as it now has. The global batch is made by V virtual input pipelines (layout.py: who reads what).
Each of them:
- each epoch, puts its files in an order drawn from (seed, pipeline, epoch) and reads them one after the other
  (several are read ahead in parallel, which does not change the order);
- shuffles the records within consecutive windows of --shuffle-buffer-size / V records, each window's order drawn
  from (seed, pipeline, epoch, window); batches never cross epochs;
- transforms (masks, span-corrupts) its part of each step's batch keyed by (seed + pipeline, step).
To start at step N, whole files before N's window are skipped by the counts in their names, never
opened; only the window holding step N is read from its start, and the batches before N in it are
dropped still serialized: never decoded, masked or sent to the device.
A virtual pipeline may give packed rows instead (text2text_packing.py) or a mixture's examples (mixture.py):
host_batches puts together whatever its pipelines give, so those keep the same promises.

Evaluation: the files in name order, every example once, the last batch filled up with unscored
rows, then unscored batches forever, so every replica can take the same number of steps.
Records are decoded a batch at a time (`parse_example`), about twice as fast as one by one.
"""

import contextlib
import math
import re
from typing import Callable, Dict, Optional

import tensorflow as tf

from mlm_tpu.errors import UserError
from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.shards.layout import BatchLayout
from mlm_tpu.shards.reading import ShardSet, find_corrupt_shard, find_short_shard

READ_AHEAD = 8  # files read in parallel; the order stays that of the file list
FILE_ORDER, WINDOW_ORDER = 1, 2  # random streams of a pipeline's key

ID_BEYOND_VOCABULARY = "token id beyond the vocabulary"
Transform = Callable[[tf.Tensor, Dict[str, tf.Tensor]], Dict[str, tf.Tensor]]


def decoder(shards: ShardSet, transform: Optional[Transform], vocab_size: Optional[int]):
    """(batch number, serialized records) -> the batch as the model takes it, int32; every token id checked to
    be below `vocab_size` (on TPUs and GPUs an id beyond the embeddings reads zeros instead of failing). Float
    features (a regression split's labels) stay float32."""
    dtypes = shards.dtypes or {}
    schema = {name: tf.io.FixedLenFeature([length], tf.float32 if name in dtypes else tf.int64)
              for name, length in shards.features.items()}

    def decode(batch_number, records):
        examples = tf.io.parse_example(records, schema)
        if vocab_size is not None:
            largest = tf.reduce_max([tf.reduce_max(examples[name]) for name in shards.kind.token_id_features
                                     if name in examples])
            with tf.control_dependencies([tf.debugging.Assert(largest < vocab_size, [ID_BEYOND_VOCABULARY, largest])]):
                examples = {name: tf.identity(values) for name, values in examples.items()}
        batch = {name: values if name in dtypes else tf.cast(values, tf.int32) for name, values in examples.items()}
        return transform(batch_number, batch) if transform else batch

    return decode


@contextlib.contextmanager
def reading_errors(shards: ShardSet, vocab_size: Optional[int]):
    """What TensorFlow reports about bad shards while a pipeline runs, as one line each."""
    try:
        yield
    except tf.errors.DataLossError:
        raise UserError(find_corrupt_shard(shards) or "a shard is corrupt; re-shard the data") from None
    except tf.errors.FailedPreconditionError as error:
        if "expected to contain" not in error.message:
            raise
        raise UserError(find_short_shard(shards) or "a shard holds fewer records than its name counts; re-shard "
                        "the data") from None
    except tf.errors.InvalidArgumentError as error:
        found = re.search(ID_BEYOND_VOCABULARY + r"\]\s*\[(\d+)", error.message)
        if not found:
            raise
        raise UserError(f"the shards in {shards.folder} hold token id {found.group(1)}, beyond the model's "
                        f"vocabulary of {vocab_size} ids: they were made with another, bigger tokenizer; train with "
                        "the tokenizer that made them, or re-shard with this one") from None


def _read_in_order(files: tf.Tensor, counts: tf.Tensor, starts: tf.Tensor, totals: tf.Tensor, block: int,
                   read_ahead: int = READ_AHEAD) -> tf.data.Dataset:
    """The records of `files`, file after file: `counts[i]` of file i's from its `starts[i]`-th, each file checked
    to hold the `totals[i]` its name says as far as it is read."""

    def read(path, count, start, total):
        records = tf.data.TFRecordDataset(path).apply(tf.data.experimental.assert_cardinality(total)).skip(start)
        return records.take(tf.where(start + count < total, count, -1))  # to its end: checked not to hold more

    return tf.data.Dataset.from_tensor_slices((files, counts, starts, totals)).interleave(
        read, cycle_length=read_ahead, block_length=block, num_parallel_calls=read_ahead, deterministic=True)


class TrainingOrder:
    """The order in which one input pipeline reads its files' records, epoch after epoch, from (seed, pipeline).
    `files`, `counts`, `starts` and `totals` (as ShardSet's `files`, `counts`, `first_records`, `file_records`) may be
    tensors, and `pipeline` too: one traced function then serves every pipeline."""

    def __init__(self, files, counts, starts, totals, seed: int, pipeline, window: int, block: int,
                 read_ahead: int = READ_AHEAD):
        self.files = tf.convert_to_tensor(files, tf.string)
        self.counts, self.starts, self.totals = (tf.convert_to_tensor(values, tf.int64)
                                                 for values in (counts, starts, totals))
        self.block, self.window, self.read_ahead = block, window, read_ahead
        self.key = tf.stack([tf.constant(seed, tf.int64), tf.cast(pipeline, tf.int64)])

    @classmethod
    def of(cls, shards: ShardSet, seed: int, pipeline: int, window: int) -> "TrainingOrder":
        return cls(shards.files, shards.counts, shards.first_records, shards.file_records, seed, pipeline, window,
                   max(shards.counts))

    def _key(self, *parts) -> tf.Tensor:
        key = self.key
        for part in parts:
            key = tf.random.experimental.stateless_fold_in(key, tf.cast(part, tf.int64))
        return key

    def file_order(self, epoch) -> tf.Tensor:
        """The indices of the files in the order epoch `epoch` reads them."""
        return tf.random.experimental.stateless_shuffle(tf.range(tf.size(self.files, out_type=tf.int64)),
                                                        seed=self._key(FILE_ORDER, epoch))

    def records(self, epoch, start) -> tf.data.Dataset:
        """Epoch `epoch`'s shuffled records (serialized), from its `start`-th one on."""
        epoch, start = tf.cast(epoch, tf.int64), tf.cast(start, tf.int64)
        order = self.file_order(epoch)
        files, counts, starts, totals = (tf.gather(values, order) for values in
                                         (self.files, self.counts, self.starts, self.totals))
        window_start = start // self.window * self.window
        before = tf.cumsum(counts) <= window_start  # files wholly before the window that holds `start`
        skipped_files = tf.reduce_sum(tf.cast(before, tf.int64))
        skipped_records = tf.reduce_sum(tf.where(before, counts, tf.zeros_like(counts)))
        records = _read_in_order(files[skipped_files:], counts[skipped_files:], starts[skipped_files:],
                                 totals[skipped_files:], self.block, self.read_ahead)
        records = records.skip(window_start - skipped_records)
        windows = records.batch(self.window).enumerate(start=window_start // self.window)
        shuffled = windows.map(lambda index, window: tf.gather(window, tf.random.experimental.stateless_shuffle(
            tf.range(tf.size(window, out_type=tf.int64)), seed=self._key(WINDOW_ORDER, epoch, index))))
        return shuffled.unbatch().skip(start - window_start)

    def batches(self, batch_size: int, batches_per_epoch: int, start_batch: int) -> tf.data.Dataset:
        """(batch number, serialized records) endlessly from the `start_batch`-th: `batches_per_epoch` per epoch."""

        def epoch_batches(epoch, first_batch) -> tf.data.Dataset:
            batches = self.records(epoch, first_batch * batch_size).batch(batch_size, drop_remainder=True)
            return batches.take(batches_per_epoch - first_batch)

        first_epoch, first_batch = divmod(start_batch, batches_per_epoch)
        dataset = epoch_batches(first_epoch, first_batch).concatenate(
            tf.data.Dataset.counter(first_epoch + 1).flat_map(lambda epoch: epoch_batches(epoch, 0)))
        return dataset.enumerate(start=start_batch)


def training_batches(shards: ShardSet, batch_size: int, transform: Optional[Transform], *, seed: int, pipeline: int,
                     window: int, batches_per_epoch: int, start_batch: int = 0,
                     vocab_size: Optional[int] = None) -> tf.data.Dataset:
    """One pipeline's batches, endlessly, from its `start_batch`-th: `batches_per_epoch` per epoch."""
    batches = TrainingOrder.of(shards, seed, pipeline, window).batches(batch_size, batches_per_epoch, start_batch)
    return batches.map(decoder(shards, transform, vocab_size),
                       num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def input_hosts(strategy: tf.distribute.Strategy) -> int:
    """The machines' input pipelines (TensorFlow's `num_input_pipelines`): one per TPU host or worker process."""
    if hasattr(strategy.extended, "num_hosts"):  # TPUStrategy
        return strategy.extended.num_hosts
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return strategy.num_replicas_in_sync // len(strategy.extended.worker_devices)
    return 1


def steps_per_epoch(shards: ShardSet, layout: BatchLayout) -> int:
    """Steps in which every virtual pipeline has its whole part of the batch (0 if the data is too small)."""
    return min(shards.share(pipeline, layout.input_pipelines).records // layout.rows_per_pipeline
               for pipeline in range(layout.input_pipelines))


def evaluation_steps(shards: ShardSet, per_replica_batch_size: int, strategy: tf.distribute.Strategy) -> int:
    """Steps for every replica to see every example: the input pipeline with the most batches decides."""
    hosts = input_hosts(strategy)
    per_step = per_replica_batch_size * strategy.num_replicas_in_sync // hosts
    return max(math.ceil(shards.share(host, hosts).records / per_step) for host in range(hosts))


class HostOrders:
    """The TrainingOrder of each of machine pipeline `host`'s virtual pipelines over its share of `shards` (the v-th of
    V equal parts of the records), picked by the pipeline's index among the host's, a tensor: one traced function
    reads any of them.
    `key_of(pipeline)` is the pipeline's key in its order's seed (default: the pipeline itself)."""

    def __init__(self, shards: ShardSet, layout: BatchLayout, host: int, seed: int, window: int,
                 key_of: Callable = lambda pipeline: pipeline):
        self.pipelines = layout.pipelines_of_host(host)
        shares = [shards.share(pipeline, layout.input_pipelines) for pipeline in self.pipelines]
        widest = max(len(share.files) for share in shares)

        def table(values_of, filler, dtype) -> tf.Tensor:
            return tf.constant([values_of(share) + [filler] * (widest - len(share.files)) for share in shares], dtype)

        self.files = table(lambda share: share.files, "", tf.string)
        self.counts = table(lambda share: share.counts, 0, tf.int64)
        self.starts = table(lambda share: share.first_records, 0, tf.int64)
        self.totals = table(lambda share: share.file_records, 0, tf.int64)
        self.sizes = tf.constant([len(share.files) for share in shares], tf.int64)
        self.seed, self.key_of, self.block = seed, key_of, max(shards.counts)
        self.window = pipeline_window(window, layout)
        self.read_ahead = max(READ_AHEAD // len(self.pipelines), 1)

    def order(self, index) -> TrainingOrder:
        size = self.sizes[index]
        return TrainingOrder(self.files[index][:size], self.counts[index][:size], self.starts[index][:size],
                             self.totals[index][:size], self.seed, self.key_of(self.pipelines.start + index),
                             self.window, self.block, self.read_ahead)


def pipeline_window(window: int, layout: BatchLayout) -> int:
    """Each virtual pipeline's shuffling window: its share of --shuffle-buffer-size."""
    return max(window // layout.input_pipelines, 1)


def host_batches(layout: BatchLayout, host: int, pipeline_parts: Callable[[tf.Tensor], tf.data.Dataset]):
    """What machine pipeline `host` gives its replicas, one batch per replica per step: the parts of its virtual
    pipelines side by side, in order, cut into its replicas' batches (see layout.py). `pipeline_parts(index)` gives
    the parts (layout.rows_per_pipeline rows each, one per step) of the host's `index`-th virtual pipeline, `index`
    a tensor; a deterministic interleave takes one part from each in turn."""
    pipelines = layout.pipelines_of_host(host)
    parts = tf.data.Dataset.range(len(pipelines)).interleave(
        pipeline_parts, cycle_length=len(pipelines), block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True)
    replicas, rows = layout.replicas_per_host, layout.rows_per_replica
    batches = parts.batch(len(pipelines), drop_remainder=True).map(lambda batch: {
        name: tf.reshape(values, [replicas, rows, *values.shape[2:]]) for name, values in batch.items()})
    return batches.unbatch().prefetch(tf.data.AUTOTUNE)


def host_training_batches(shards: ShardSet, layout: BatchLayout, host: int,
                          make_transform: Callable[[int], Optional[Transform]], *, seed: int, window: int,
                          steps_per_epoch: int, start_step: int = 0, vocab_size: Optional[int] = None):
    """What machine pipeline `host` gives its replicas from `start_step` on (host_batches), each virtual pipeline
    reading its shards in its own order, its part transformed by its own transform (seeded by seed + pipeline)."""
    orders = HostOrders(shards, layout, host, seed, window)

    def pipeline_parts(index):
        decode = decoder(shards, make_transform(seed + orders.pipelines.start + index), vocab_size)
        return orders.order(index).batches(layout.rows_per_pipeline, steps_per_epoch, start_step).map(
            decode, num_parallel_calls=tf.data.AUTOTUNE)

    return host_batches(layout, host, pipeline_parts)


def distributed_dataset(strategy: tf.distribute.Strategy, layout: BatchLayout,
                        host_dataset: Callable[[int], tf.data.Dataset]):
    """Each machine's input pipeline (once per worker or TPU host): `host_dataset(host)`, which reads only that host's
    virtual pipelines' shards. Iterate it with `next_per_replica`."""

    def dataset_of(host: int, hosts: int) -> tf.data.Dataset:
        if hosts != layout.hosts:
            raise ValueError(f"{hosts} input pipelines, but the layout has {layout.hosts}")
        return host_dataset(host)

    return _per_host(strategy, dataset_of)


def _per_host(strategy: tf.distribute.Strategy, dataset_of: Callable[[int, int], tf.data.Dataset]):
    """`dataset_of(host, hosts)` for this process' replicas. On TPUs, TensorFlow's distributed dataset: its
    `dataset_fn` runs once per TPU host. Elsewhere this process' own dataset, without tf.data's autotuning:
    TensorFlow 2.21's autotuning thread can hold up the deletion of an iterator (at the end of every run and
    validation) for as long as its tuning period, up to a minute, and the iterators of a distributed dataset
    (MultiDeviceIterator) make per-device iterators of their own that always autotune."""
    if _on_tpu(strategy):
        return strategy.distribute_datasets_from_function(
            lambda context: dataset_of(context.input_pipeline_id, context.num_input_pipelines))
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset_of(_this_host(strategy), input_hosts(strategy)).with_options(options)


def _on_tpu(strategy: tf.distribute.Strategy) -> bool:
    return hasattr(strategy.extended, "num_hosts")


def _this_host(strategy: tf.distribute.Strategy) -> int:
    """Which machine's input pipeline this process runs: its first replica's id over the replicas per machine."""
    replica_ids = strategy.experimental_distribute_values_from_function(
        lambda context: context.replica_id_in_sync_group)
    return strategy.experimental_local_results(replica_ids)[0] * input_hosts(strategy) // strategy.num_replicas_in_sync


def next_per_replica(strategy: tf.distribute.Strategy, iterator):
    """The next batch of each of this process' replicas from an iterator of `distributed_dataset` or
    `distributed_evaluation_dataset` (in a tf.function or eagerly): consecutive elements of this machine's input
    pipeline, one per replica, as TensorFlow's distributed iterators hand them out."""
    if isinstance(iterator, tf.distribute.DistributedIterator):
        return next(iterator)
    return strategy.experimental_distribute_values_from_function(lambda context: next(iterator))


def evaluation_batches(shards: ShardSet, batch_size: int, transform: Optional[Transform],
                       vocab_size: Optional[int] = None) -> tf.data.Dataset:
    """Every example once, in file order, the last batch filled with unscored rows; then unscored batches forever."""
    records = _read_in_order(tf.constant(shards.files), *(tf.constant(values, tf.int64) for values in (
        shards.counts, shards.first_records, shards.file_records)), max(shards.counts))
    dataset = records.batch(batch_size).enumerate().map(decoder(shards, transform, vocab_size),
                                                       num_parallel_calls=tf.data.AUTOTUNE)
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


def distributed_evaluation_dataset(strategy: tf.distribute.Strategy, shards: ShardSet, per_replica_batch_size: int,
                                   make_transform: Callable[[int], Optional[Transform]], seed: int,
                                   vocab_size: Optional[int] = None):
    """One pipeline per host over its own files, every example once; see `evaluation_batches`."""
    return _per_host(strategy, lambda host, hosts: evaluation_batches(
        shards.share(host, hosts), per_replica_batch_size, make_transform(seed + host), vocab_size))
