"""Our TFRecord bytes are TensorFlow's: same Example encoding, same framing, checked on read."""

import numpy as np
import pytest

from mlm_tpu.errors import UserError
from mlm_tpu.shards.tfrecord import frame_records, iter_records, serialize_examples


@pytest.fixture(scope="module")
def tf():
    import tensorflow

    return tensorflow


def reference_example(tf, features):
    return tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=values)) for name, values in features.items()
    })).SerializeToString(deterministic=True)


def test_examples_are_byte_identical_to_tf_train_example(tf):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 300_000, size=(20, 16))
    ids[0, :6] = [0, 127, 128, 16383, 16384, 2**35]  # every varint width boundary
    masks = rng.integers(0, 2, size=(20, 16))
    ours = serialize_examples({"input_ids": ids, "attention_mask": masks})
    assert ours == [reference_example(tf, {"input_ids": ids[i], "attention_mask": masks[i]}) for i in range(20)]
    constant = serialize_examples({"input_ids": ids, "attention_mask": np.ones_like(ids)})
    assert constant == [reference_example(tf, {"input_ids": ids[i], "attention_mask": np.ones(16, dtype=np.int64)})
                        for i in range(20)]


def test_negative_labels_are_encoded_as_protobuf_int64_and_read_back(tf):
    labels = np.array([[5, 1, -100, -100], [-1, -2**63, 2**63 - 1, 0]], dtype=np.int64)
    ids = np.arange(12, dtype=np.int32).reshape(2, 6)
    ours = serialize_examples({"input_ids": ids, "labels": labels})
    assert ours == [reference_example(tf, {"input_ids": ids[i], "labels": labels[i]}) for i in range(2)]
    schema = {"labels": tf.io.FixedLenFeature([4], tf.int64)}
    assert np.array_equal(tf.io.parse_example(ours, schema)["labels"].numpy(), labels)


def test_file_is_byte_identical_to_tfrecordwriter_and_reads_back(tf, tmp_path):
    rows = np.arange(40).reshape(5, 8)
    records = serialize_examples({"input_ids": rows, "attention_mask": np.ones_like(rows)})
    with tf.io.TFRecordWriter(str(tmp_path / "reference.tfrecord")) as writer:
        for record in records:
            writer.write(record)
    data = frame_records(records)
    assert data == (tmp_path / "reference.tfrecord").read_bytes()
    assert list(iter_records(data, "x.tfrecord")) == records


def test_corrupt_and_truncated_files_are_named():
    data = frame_records(serialize_examples({"input_ids": np.arange(16).reshape(2, 8)}))
    corrupt = bytearray(data)
    corrupt[20] ^= 0xFF
    with pytest.raises(UserError, match="shard.tfrecord is corrupt"):
        list(iter_records(bytes(corrupt), "shard.tfrecord"))
    with pytest.raises(UserError, match="shard.tfrecord is truncated"):
        list(iter_records(data[:-3], "shard.tfrecord"))
