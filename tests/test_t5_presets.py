"""The T5 presets are the published checkpoints' shapes (config.json on the Hub; the same figures in T5X's
t5_1_0/*.gin, t5_1_1/*.gin and mt5/*.gin), and each builds, offline."""

from pathlib import Path

import pytest

from conftest import run_train

FIXTURES = Path(__file__).parent / "fixtures" / "made-by-0.2"

# name: d_model, d_ff, num_heads, d_kv, num_layers (= num_decoder_layers), feed_forward_proj, tie_word_embeddings
PUBLISHED = {
    "t5-small": (512, 2048, 8, 64, 6, "relu", True),
    "t5-base": (768, 3072, 12, 64, 12, "relu", True),
    "t5-large": (1024, 4096, 16, 64, 24, "relu", True),
    "t5-3b": (1024, 16384, 32, 128, 24, "relu", True),
    "t5-11b": (1024, 65536, 128, 128, 24, "relu", True),
    "t5-v1_1-small": (512, 1024, 6, 64, 8, "gated-gelu", False),
    "t5-v1_1-base": (768, 2048, 12, 64, 12, "gated-gelu", False),
    "t5-v1_1-large": (1024, 2816, 16, 64, 24, "gated-gelu", False),
    "t5-v1_1-xl": (2048, 5120, 32, 64, 24, "gated-gelu", False),
    "t5-v1_1-xxl": (4096, 10240, 64, 64, 24, "gated-gelu", False),
    "mt5-small": (512, 1024, 6, 64, 8, "gated-gelu", False),
    "mt5-base": (768, 2048, 12, 64, 12, "gated-gelu", False),
    "mt5-large": (1024, 2816, 16, 64, 24, "gated-gelu", False),
    "mt5-xl": (2048, 5120, 32, 64, 24, "gated-gelu", False),
    "mt5-xxl": (4096, 10240, 64, 64, 24, "gated-gelu", False),
}


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(FIXTURES / "t5-tokenizer")


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_each_preset_has_the_published_shape_and_builds(name, tokenizer):
    """The config has the published figures, fitted to our tokenizer; the model built from it (one layer each side,
    the rest as published; in a graph, so that no weight is allocated) has weights of the published sizes."""
    import tensorflow as tf
    from transformers import TFT5ForConditionalGeneration

    from mlm_tpu.t5.presets import config_for

    d_model, d_ff, heads, d_kv, layers, feed_forward, tied = PUBLISHED[name]
    config = config_for(name, tokenizer)
    assert (config.d_model, config.d_ff, config.num_heads, config.d_kv, config.num_layers, config.num_decoder_layers,
            config.feed_forward_proj, config.tie_word_embeddings) == (d_model, d_ff, heads, d_kv, layers, layers,
                                                                      feed_forward, tied)
    assert config.vocab_size == len(tokenizer) and config.decoder_start_token_id == tokenizer.pad_token_id

    with tf.Graph().as_default():
        model = TFT5ForConditionalGeneration.from_config(
            config_for(name, tokenizer, "num_layers=1,num_decoder_layers=1"))
        model.build_in_name_scope()
        shapes = {weight.name.split("/", 1)[1]: weight.shape.as_list() for weight in model.weights}
    block = "encoder/block_._0/layer_._"
    assert shapes[f"{block}0/SelfAttention/q/kernel:0"] == [d_model, heads * d_kv]
    assert shapes[f"{block}0/SelfAttention/o/kernel:0"] == [heads * d_kv, d_model]
    assert shapes["decoder/block_._0/layer_._1/EncDecAttention/k/kernel:0"] == [d_model, heads * d_kv]
    gates = ("wi_0", "wi_1") if feed_forward == "gated-gelu" else ("wi",)
    for gate in gates:
        assert shapes[f"{block}1/DenseReluDense/{gate}/kernel:0"] == [d_model, d_ff]
    assert shapes[f"{block}1/DenseReluDense/wo/kernel:0"] == [d_ff, d_model]
    assert ("lm_head/kernel:0" in shapes) is (not tied)
    if not tied:
        assert shapes["lm_head/kernel:0"] == [d_model, len(tokenizer)]


def test_help_lists_every_t5_preset():
    result = run_train("--help")
    assert result.returncode == 0
    words = " ".join(result.stdout.split())
    for name in PUBLISHED:
        assert name in words, name
