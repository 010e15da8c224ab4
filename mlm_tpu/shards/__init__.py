"""The shard stage, both sides of the on-disk contract: format.py (names, manifest, features), tfrecord.py
and storage.py (bytes and where they go), packing.py and rows.py (corpus -> examples: packed documents, one
example per row), kinds.py (a kind of split as one object: the product lines own theirs), config.py, writer.py
and sharding.py (the shard job), span_lengths.py (the lengths of span-corruption splits), reading.py and
pipeline.py (shards -> tf.data batches)."""
