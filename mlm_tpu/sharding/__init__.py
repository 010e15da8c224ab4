"""Turning a corpus into count-named TFRecord shards: tokenize, pack, serialize, store."""
