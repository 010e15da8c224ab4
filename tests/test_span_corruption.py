"""T5 span corruption in tf.data: T5's lengths, outputs that give back the raw text, seeded draws, T5's law."""

import math
from collections import Counter
from typing import Dict, List

import numpy as np
import pytest
import tensorflow as tf
from tokenizers import Tokenizer
from tokenizers.models import Unigram
from transformers import T5TokenizerFast

from mlm_tpu.t5.span_corruption import SpanCorrupter
from mlm_tpu.shards.span_lengths import (TooFewSentinels, lengths_at, longest_inputs_within, noise_counts,
                                         span_lengths)

EOS, PAD, FIRST_SENTINEL = 1, 0, 999  # sentinels 999, 998, ... ; raw tokens are drawn from 3..799


def corrupter(raw_length: int, noise_density: float = 0.15, mean_noise_span_length: float = 3.0,
              seed: int = 0) -> SpanCorrupter:
    return SpanCorrupter(raw_length, noise_density, mean_noise_span_length, EOS, PAD, FIRST_SENTINEL, seed)


def raw_batch(rows: int, raw_length: int, seed: int = 0) -> tf.Tensor:
    return tf.constant(np.random.default_rng(seed).integers(3, 800, size=(rows, raw_length)), tf.int64)


def corrupt(span_corrupter: SpanCorrupter, ids: tf.Tensor, batch_number: int = 0) -> Dict[str, np.ndarray]:
    output = span_corrupter(tf.constant(batch_number, tf.int64), {"input_ids": ids})
    return {name: value.numpy() for name, value in output.items()}


def t5_tokenizer(sentinels: List[int]) -> T5TokenizerFast:
    """A T5 tokenizer with <extra_id_i> for each i in `sentinels`, in that id order after 20 word pieces."""
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + [(f"▁w{i}", -1.0 - i) for i in range(20)]
    extra = [f"<extra_id_{i}>" for i in sentinels]
    backend = Tokenizer(Unigram(vocab + [(token, 0.0) for token in extra], 2, False))
    return T5TokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                           extra_ids=len(extra), additional_special_tokens=sorted(extra))


def spans_of(inputs: np.ndarray, labels: np.ndarray, spans: int):
    """(kept spans, noise spans) of one row, read back from its inputs and labels (both checked for framing)."""
    sentinels = [FIRST_SENTINEL - i for i in range(spans)]
    assert inputs[-1] == EOS and labels[-1] == EOS
    assert [t for t in inputs if t > 900] == sentinels and [t for t in labels if t > 900] == sentinels
    assert EOS not in inputs[:-1] and EOS not in labels[:-1]
    input_cuts = [i for i, t in enumerate(inputs) if t > 900]
    label_cuts = [i for i, t in enumerate(labels) if t > 900] + [len(labels) - 1]
    kept = [inputs[start + 1:end] for start, end in zip([-1] + input_cuts[:-1], input_cuts)]
    noise = [labels[start + 1:end] for start, end in zip(label_cuts[:-1], label_cuts[1:])]
    assert input_cuts[-1] == len(inputs) - 2  # inputs end in the last sentinel: the last span is noise, as in T5
    return kept, noise


def test_span_lengths_reproduce_t5s_figures():
    assert span_lengths(128) == lengths_at(141)
    figures = {128: (141, 128, 29, 21, 7), 512: (568, 512, 114, 85, 28), 1024: (1137, 1024, 229, 171, 57)}
    for inputs_length, expected in figures.items():
        lengths = span_lengths(inputs_length)
        assert (lengths.raw_length, lengths.input_length, lengths.target_length, lengths.noise_tokens,
                lengths.noise_spans) == expected
        assert (lengths.noise_density, lengths.mean_noise_span_length) == (0.15, 3.0)
        assert lengths_at(lengths.raw_length + 1).input_length > inputs_length
    # T5's "minor hack" at density 0.5: 1535 raw tokens would fit 1024 inputs but make 1025 targets
    assert lengths_at(1535, 0.5, 3.0).target_length == 1025
    halves = span_lengths(1024, 0.5, 3.0)
    assert (halves.raw_length, halves.input_length, halves.target_length) == (1534, 1024, 1024)


def test_noise_counts_are_those_of_t5s_mask_in_float32():
    """T5's random_spans_noise_mask's own TF arithmetic, for every raw length up to 3,000 and a few settings."""
    lengths = tf.range(2, 3001)
    for density, mean in ((0.15, 3.0), (0.3, 3.0), (0.5, 2.0), (0.15, 8.0)):
        noise = tf.cast(tf.round(tf.cast(lengths, tf.float32) * density), tf.int32)
        noise = tf.minimum(tf.maximum(noise, 1), lengths - 1)
        spans = tf.maximum(tf.cast(tf.round(tf.cast(noise, tf.float32) / mean), tf.int32), 1)
        ours = np.array([noise_counts(length, density, mean) for length in range(2, 3001)])
        np.testing.assert_array_equal(ours, np.stack([noise.numpy(), spans.numpy()], axis=1))
    # where T5's helper (float64: 190 * 0.15 = 28.5, to even: 28) says 28 noise tokens, its mask makes 29
    assert noise_counts(190, 0.15, 3.0) == (29, 10) and span_lengths(172).target_length == 40


@pytest.mark.parametrize("raw_length, density, mean", [(141, 0.15, 3.0), (568, 0.15, 3.0), (20, 0.5, 1.0),
                                                       (37, 0.3, 1.5), (30, 0.15, 3.0)])
def test_inputs_and_labels_give_back_the_raw_tokens(raw_length, density, mean):
    span_corrupter = corrupter(raw_length, density, mean, seed=7)
    lengths = span_corrupter.lengths
    ids = raw_batch(300, raw_length)
    output = corrupt(span_corrupter, ids, batch_number=3)
    assert output["input_ids"].shape == output["attention_mask"].shape == (300, lengths.input_length)
    assert output["labels"].shape == (300, lengths.target_length)
    assert all(value.dtype == np.int64 for value in output.values()) and (output["attention_mask"] == 1).all()
    for raw, inputs, labels in zip(ids.numpy(), output["input_ids"], output["labels"]):
        kept, noise = spans_of(inputs, labels, lengths.noise_spans)
        assert all(len(span) > 0 for span in kept + noise)
        assert sum(map(len, noise)) == lengths.noise_tokens
        rebuilt = np.concatenate([part for pair in zip(kept, noise) for part in pair])
        np.testing.assert_array_equal(rebuilt, raw)


def test_same_seed_and_batch_number_same_corruption_else_different():
    ids = raw_batch(32, 141)
    first = corrupt(corrupter(141, seed=1), ids, batch_number=5)
    again = corrupt(corrupter(141, seed=1), ids, batch_number=5)
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    for other in (corrupt(corrupter(141, seed=1), ids, batch_number=6), corrupt(corrupter(141, seed=2), ids, 5)):
        assert (other["labels"] != first["labels"]).any(axis=1).mean() > 0.9  # nearly every row differs


def test_in_a_parallel_tf_data_pipeline_as_in_eager_mode():
    span_corrupter = corrupter(141, seed=11)
    ids = raw_batch(16 * 12, 141, seed=1)
    dataset = tf.data.Dataset.from_tensor_slices({"input_ids": ids}).batch(16).enumerate()
    dataset = dataset.map(lambda number, batch: (number, span_corrupter(number, batch)), num_parallel_calls=4,
                          deterministic=False)
    seen = 0
    for number, output in dataset:
        eager = corrupt(span_corrupter, ids[16 * int(number):16 * (int(number) + 1)], int(number))
        for name in eager:
            np.testing.assert_array_equal(output[name].numpy(), eager[name])
        seen += 1
    assert seen == 12


def test_graph_mode_with_an_unknown_batch_size():
    span_corrupter = corrupter(141, seed=4)
    traced = tf.function(span_corrupter, input_signature=[tf.TensorSpec([], tf.int64),
                                                          {"input_ids": tf.TensorSpec([None, 141], tf.int32)}])
    ids = raw_batch(5, 141)
    output = traced(tf.constant(2, tf.int64), {"input_ids": tf.cast(ids, tf.int32)})
    eager = corrupt(span_corrupter, ids, batch_number=2)
    for name in eager:
        np.testing.assert_array_equal(output[name].numpy(), eager[name])


def chi_square_below_critical(observed: Counter, probabilities: Dict[int, float], rows: int) -> None:
    """Pearson's chi-square over the outcomes (tail pooled so that each bin expects >= 5) under the p=0.001
    critical value (Wilson-Hilferty's approximation of the chi-square quantile)."""
    bins, expected, counts = [], 0.0, 0
    for outcome in sorted(probabilities):
        expected += probabilities[outcome] * rows
        counts += observed.get(outcome, 0)
        if expected >= 5:
            bins.append((counts, expected))
            expected, counts = 0.0, 0
    if bins and expected:
        bins[-1] = (bins[-1][0] + counts, bins[-1][1] + expected)
    assert sum(observed.values()) == rows and set(observed) <= set(probabilities)
    statistic = sum((count - expect) ** 2 / expect for count, expect in bins)
    dof, z = len(bins) - 1, 3.090232  # z: the standard normal's 0.999 quantile
    critical = dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3
    assert statistic < critical, f"chi-square {statistic:.1f} >= {critical:.1f} ({dof} degrees of freedom)"


def composition_law(items: int, parts: int) -> Dict[int, float]:
    """P(first part = l) when `items` is cut into `parts` positive parts, every way equally likely."""
    total = math.comb(items - 1, parts - 1)
    return {length: math.comb(items - length - 1, parts - 2) / total for length in range(1, items - parts + 2)}


def test_first_span_lengths_follow_the_law_of_uniform_compositions():
    span_corrupter = corrupter(141, seed=5)
    lengths, rows = span_corrupter.lengths, 20000
    output = corrupt(span_corrupter, raw_batch(rows, 141), batch_number=9)
    first_kept, first_noise = Counter(), Counter()
    for inputs, labels in zip(output["input_ids"], output["labels"]):
        first_kept[int(np.argmax(inputs > 900))] += 1  # tokens before <extra_id_0>
        first_noise[int(np.argmax(labels[1:] > 900))] += 1  # tokens after <extra_id_0>, before <extra_id_1>
    chi_square_below_critical(first_noise, composition_law(lengths.noise_tokens, lengths.noise_spans), rows)
    chi_square_below_critical(first_kept, composition_law(141 - lengths.noise_tokens, lengths.noise_spans), rows)


def test_every_mask_equally_likely():
    """10 tokens, 4 noise in 2 spans: 3 x 5 = 15 masks, each should come up 1/15 of the time."""
    span_corrupter = corrupter(10, 0.4, 2.0, seed=3)
    assert (span_corrupter.lengths.noise_tokens, span_corrupter.lengths.noise_spans) == (4, 2)
    rows = 15000
    output = corrupt(span_corrupter, tf.tile(tf.range(10, 20, dtype=tf.int64)[None], [rows, 1]))
    masks = Counter(tuple(labels) for labels in output["labels"])
    assert len(masks) == 15
    chi_square_below_critical(Counter({index: masks[mask] for index, mask in enumerate(sorted(masks))}),
                              {index: 1 / 15 for index in range(15)}, rows)


def test_for_tokenizer_uses_its_eos_pad_and_sentinels():
    tokenizer = t5_tokenizer(list(reversed(range(10))))  # <extra_id_0> last, as T5 has it
    span_corrupter = SpanCorrupter.for_tokenizer(tokenizer, span_lengths(128), seed=2)
    assert (span_corrupter.eos_token_id, span_corrupter.pad_token_id) == (1, 0)
    assert span_corrupter.first_sentinel_id == len(tokenizer) - 1 == tokenizer.convert_tokens_to_ids("<extra_id_0>")
    labels = corrupt(span_corrupter, raw_batch(2, 141) % 20 + 3)["labels"]
    assert tokenizer.convert_ids_to_tokens(labels[0][labels[0] >= 23].tolist()) == [f"<extra_id_{i}>" for i in
                                                                                    range(7)]


@pytest.mark.parametrize("sentinels, have", [(list(reversed(range(5))), 5), (list(range(10)), 1), ([], 0)])
def test_a_tokenizer_with_too_few_sentinels_is_refused(sentinels, have):
    with pytest.raises(TooFewSentinels, match=r"141-token rows makes 7 noise spans.*the tokenizer has "
                                              + (f"{have} \\(<extra_id_0>" if have else "none")) as refused:
        SpanCorrupter.for_tokenizer(t5_tokenizer(sentinels), span_lengths(128))
    assert (refused.value.have, refused.value.lengths.noise_spans) == (have, 7)


def test_the_longest_inputs_within_a_tokenizers_sentinels():
    assert span_lengths(512).noise_spans == 28  # T5's 512-token inputs take 28 of its 100 sentinels
    for sentinels, density, mean in ((100, 0.15, 3.0), (28, 0.15, 3.0), (100, 0.3, 1.5), (1, 0.15, 3.0)):
        longest = longest_inputs_within(sentinels, density, mean)
        assert span_lengths(longest, density, mean).noise_spans <= sentinels
        assert span_lengths(longest + 1, density, mean).noise_spans > sentinels
    assert longest_inputs_within(100) == 1809 and longest_inputs_within(100, 0.3, 1.5) == 452


def test_bad_arguments_are_refused_with_their_values():
    for density in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError, match=f"noise_density must be strictly between 0 and 1, not {density}"):
            span_lengths(512, noise_density=density)
    with pytest.raises(ValueError, match="mean_noise_span_length must be at least 1, not 0.5"):
        span_lengths(512, mean_noise_span_length=0.5)
    with pytest.raises(ValueError, match="inputs_length must be at least 3"):
        span_lengths(2)
    with pytest.raises(ValueError, match="raw length must be at least 2"):
        corrupter(1)
    with pytest.raises(ValueError, match="9 noise spans.*only 1 tokens are not noise"):
        corrupter(10, 0.9, 1.0)
    with pytest.raises(ValueError, match="would reach negative ids"):
        SpanCorrupter(568, 0.15, 3.0, EOS, PAD, first_sentinel_id=20)
    with pytest.raises(ValueError, match="eos_token_id 990 is among the sentinel ids 972..999"):
        SpanCorrupter(568, 0.15, 3.0, 990, PAD, FIRST_SENTINEL)
    with pytest.raises(ValueError, match="set up for 141 raw tokens, the batch has 140"):
        corrupter(141)(tf.constant(0), {"input_ids": raw_batch(2, 140)})
