"""The shard stage, both sides of the on-disk contract: format.py (names, manifest, features), tfrecord.py
and storage.py (bytes and where they go), packing.py and text2text.py (corpus -> examples), writer.py and
sharding.py (the shard job), reading.py and pipeline.py (shards -> tf.data batches)."""
