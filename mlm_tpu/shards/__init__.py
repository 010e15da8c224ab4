"""The shard stage, both sides of the on-disk contract: format.py (names, manifest, features), tfrecord.py
and storage.py (bytes and where they go), packing.py and text2text.py (corpus -> examples), writer.py and
sharding.py (the shard job), span_lengths.py (the lengths of span-corruption splits), reading.py and
pipeline.py (shards -> tf.data batches)."""
