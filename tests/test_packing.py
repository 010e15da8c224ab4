"""Packing the token stream into fixed-length chunks, and the tokenizer checks of sharding."""

import numpy as np
import pytest
from transformers import AutoTokenizer

from mlm_tpu.errors import UserError
from mlm_tpu.shards.packing import BatchTokenizer, ChunkPacker, check_max_length


def test_chunks_cross_batch_boundaries_and_only_the_final_remainder_is_left():
    packer = ChunkPacker(4)
    stream = np.arange(23, dtype=np.int32)
    pieces = [stream[:3], stream[3:3], stream[3:13], stream[13:23]]
    chunks = np.concatenate([packer.add(piece) for piece in pieces])
    assert np.array_equal(chunks, stream[:20].reshape(5, 4))
    assert packer.remainder == 3


def test_batches_give_each_documents_framed_ids_concatenated(wikitext_tokenizer):
    tokenizer = AutoTokenizer.from_pretrained(wikitext_tokenizer[0])
    documents = ["The game was released .", "It sold well in Japan .", "A third one ."]
    expected = np.concatenate(tokenizer(documents)["input_ids"])
    for threads in (1, 2):
        assert np.array_equal(BatchTokenizer(tokenizer, threads).encode(documents), expected)


def test_max_length_checks(wikitext_tokenizer):
    tokenizer = AutoTokenizer.from_pretrained(wikitext_tokenizer[0])
    assert check_max_length(512, tokenizer) == ()
    assert "not a multiple of 8" in check_max_length(100, tokenizer)[0]
    with pytest.raises(UserError, match="at least 8"):
        check_max_length(7, tokenizer)
    with pytest.raises(UserError, match="more than the tokenizer allows"):
        check_max_length(520, tokenizer)
