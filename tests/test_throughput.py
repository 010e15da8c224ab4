"""Model FLOPs (training/flops.py) against hand counts and real models' weights, and tokens/s and MFU
(training/throughput.py): the peak table by device names, which no TPU or GPU here can confirm."""

from types import SimpleNamespace

import numpy as np
import pytest

from mlm_tpu.training.flops import ExampleCost, masked_lm_cost, t5_cost
from mlm_tpu.training.throughput import Peak, Throughput, peak_of, tpu_type

ROBERTA = SimpleNamespace(hidden_size=64, num_hidden_layers=2, intermediate_size=256, vocab_size=1000)
T5 = SimpleNamespace(d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2, num_decoder_layers=3, vocab_size=300,
                     is_gated_act=False)


def test_a_masked_lm_costs_6n_plus_the_attention_with_the_head_where_it_runs():
    # a layer: attention 4 x (64·64 + 64) = 16,640; feed-forward 64·256 + 256 + 256·64 + 64 = 33,088; two layer
    # norms 256: 49,984; two layers and the embeddings' norm (128): 100,096 weights at every position. The head:
    # 64·64 + 64 + 128 + 64·1000 + 1000 = 69,288. Attention: 12 · 2 layers · 64 · 128 · 128 = 25,165,824.
    dense = masked_lm_cost(ROBERTA, 128, 128)
    assert dense == ExampleCost(128, 6 * (128 * 100_096 + 128 * 69_288) + 25_165_824.0)
    assert dense.flops_per_token == 1_212_912
    sparse = masked_lm_cost(ROBERTA, 128, 41)  # the head at 41 slots: 87 x 6 x 69,288 fewer
    assert (sparse.tokens, dense.flops - sparse.flops) == (128, 87 * 6 * 69_288)


def test_t5_counts_its_encoder_at_the_inputs_and_its_decoder_and_vocabulary_at_the_targets():
    # attention 4·32·32 = 4,096 and feed-forward 2·32·64 = 4,096 per block; encoder 2 x (8,192 + 64) + 32 = 16,544;
    # decoder 3 x (2 x 4,096 + 4,096 + 96) + 32 = 37,184, of which the cross-attention's keys and values
    # (3 x 2 x 32·32 = 6,144) run at the 16 inputs; the output 32·300 = 9,600 at the 4 targets.
    weights = 16 * (16_544 + 6_144) + 4 * (37_184 - 6_144 + 9_600)
    attention = 12 * 32 * (2 * 16 * 16 + 3 * 4 * 4 + 3 * 4 * 16)  # encoder, decoder, cross
    assert t5_cost(T5, 16, 4) == ExampleCost(20, 6.0 * weights + attention)
    gated = t5_cost(SimpleNamespace(**{**vars(T5), "is_gated_act": True}), 16, 4)
    assert gated.flops - t5_cost(T5, 16, 4).flops == 6 * 32 * 64 * (2 * 16 + 3 * 4)  # a third weight per block


def weights_of(model, leave_out) -> int:
    return sum(int(np.prod(v.shape)) for v in model.trainable_variables if not any(n in v.name for n in leave_out))


def test_the_weights_counted_are_the_real_models_but_their_embedding_tables():
    """With one position and no attention partner, the count is 6 x the weights a position runs through."""
    from transformers import RobertaConfig, T5Config, TFRobertaForMaskedLM, TFT5ForConditionalGeneration

    roberta = TFRobertaForMaskedLM(RobertaConfig(**vars(ROBERTA), num_attention_heads=2, type_vocab_size=1))
    roberta.build_in_name_scope()  # the word embeddings are the head's tied projection, counted once
    no_attention = masked_lm_cost(roberta.config, 1, 1).flops - 12 * 2 * 64
    assert no_attention == 6 * weights_of(roberta, ("position_embeddings", "token_type_embeddings"))
    for gated, tied in ((False, True), (True, False)):  # T5 1.0 and T5 1.1 (an untied output projection)
        shape = {name: value for name, value in vars(T5).items() if name != "is_gated_act"}
        config = T5Config(**shape, feed_forward_proj="gated-gelu" if gated else "relu", tie_word_embeddings=tied)
        t5 = TFT5ForConditionalGeneration(config)
        t5.build_in_name_scope()
        per_position = t5_cost(config, 1, 0).flops + t5_cost(config, 0, 1).flops - 12 * 32 * (2 + 3)
        assert per_position == 6 * weights_of(t5, ("relative_attention_bias",) + (() if tied else ("shared",)))


@pytest.mark.parametrize("device, peak", [
    ("TPU v2-8", Peak(22.5, "TPU v2")), ("TPU v3-32", Peak(61.5, "TPU v3")), ("TPU v4-8", Peak(275.0, "TPU v4")),
    ("TPU v5litepod-16", Peak(197.0, "TPU v5e")), ("TPU v5 lite", Peak(197.0, "TPU v5e")),
    ("TPU v5p-8", Peak(459.0, "TPU v5p")), ("TPU v6e-8", Peak(918.0, "TPU v6e")),
    ("NVIDIA A100-SXM4-40GB", Peak(312.0, "NVIDIA A100")), ("NVIDIA H100 80GB HBM3", Peak(989.0, "NVIDIA H100/H200 SXM")),
    ("NVIDIA H100 PCIe", Peak(756.0, "NVIDIA H100 PCIe")), ("NVIDIA L4", Peak(121.0, "NVIDIA L4")),
    ("NVIDIA L40S", None), ("Tesla V100-SXM2-16GB", None), ("CPU", None), ("TPU of unknown type", None)])
def test_device_names_give_their_peak_per_replica(device, peak):
    assert peak_of(device) == peak  # TPU v2 and v3: two replicas per chip


def test_the_tpu_type_comes_from_the_environment_else_the_metadata_server(monkeypatch):
    for variable in ("TPU_ACCELERATOR_TYPE", "ACCELERATOR_TYPE"):
        monkeypatch.delenv(variable, raising=False)

    def unreachable(url):
        raise OSError("no route to host")

    assert tpu_type(unreachable) is None and tpu_type(lambda url: "v5litepod-8") == "v5litepod-8"
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v4-32")
    assert tpu_type(unreachable) == "v4-32"


def test_tokens_per_second_and_mfu_in_words_and_scalars():
    cost = ExampleCost(tokens=128, flops=128 * 1.5e9)
    unknown = Throughput(examples=640, seconds=10.0, replicas=2, cost=cost, peak=None, device="CPU")
    assert unknown.describe() == ("64 examples/s, 8,192 tokens/s (4,096 per replica), 1.5 GFLOP per token, MFU unknown "
                                  "(no peak known for CPU: pass --peak-tflops)")
    assert "mfu" not in unknown.scalars() and unknown.scalars()["tokens_per_second_per_replica"] == 4096
    known = Throughput(640, 10.0, 2, cost, Peak(10.0, "--peak-tflops"), "CPU")
    assert known.mfu == pytest.approx(8192 * 1.5e9 / 2e13)
    assert known.describe().endswith("MFU 61.4% of 10 TFLOP/s per replica (--peak-tflops)")
    assert Throughput(640, 10.0, 2, None, None, "CPU").describe() == "64 examples/s"  # a task that counts no FLOPs
