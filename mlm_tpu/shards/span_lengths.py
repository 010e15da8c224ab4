"""The lengths of T5 span corruption, without TensorFlow: the sharder cuts raw rows with them, the trainer
corrupts those rows into inputs and targets of exactly these lengths (t5/span_corruption.py). Plain
arithmetic on lengths, and the check that a tokenizer has the sentinels it needs: part of the
span-corruption kind of split, so it lives with the shards, where the T5 line reads it too.

A raw sequence of T tokens gets N noise tokens in K spans; the inputs are the T - N other tokens, one
sentinel per span and EOS; the targets the N noise tokens, a sentinel before each span, and EOS.
`span_lengths` gives the raw length T whose corrupted inputs fit a wanted input length (T5's
`random_spans_helper`), counting N and K in float32 as the mask itself does (see `noise_counts`).
"""

from dataclasses import dataclass
from typing import Tuple

import numpy as np


def noise_counts(raw_length: int, noise_density: float, mean_noise_span_length: float) -> Tuple[int, int]:
    """(noise tokens N, noise spans K) of a raw sequence, exactly as T5's `random_spans_noise_mask` counts them.

    That function rounds in float32 with ties to even (`tf.round`), while T5's `random_spans_helper` rounds
    in float64: they disagree for some lengths (190 * 0.15 is 28.500002 in float32, so 29, but 28.5 in float64,
    so 28). What the model sees is the mask's count, so that is the one used everywhere here.
    """
    noise = int(np.round(np.float32(raw_length) * np.float32(noise_density)))
    noise = min(max(noise, 1), raw_length - 1)  # at least one noise and one non-noise token
    spans = max(1, int(np.round(np.float32(noise) / np.float32(mean_noise_span_length))))
    return noise, spans


@dataclass(frozen=True)
class SpanLengths:
    """The lengths of span corruption at one raw length: what the shards hold and what the model gets."""

    raw_length: int  # T: tokens per raw example
    input_length: int  # T - N non-noise tokens, K sentinels, EOS
    target_length: int  # N noise tokens, K sentinels, EOS
    noise_tokens: int  # N
    noise_spans: int  # K
    noise_density: float
    mean_noise_span_length: float


def _check_noise(noise_density: float, mean_noise_span_length: float) -> None:
    if not 0 < noise_density < 1:
        raise ValueError(f"noise_density must be strictly between 0 and 1, not {noise_density}")
    if not mean_noise_span_length >= 1:
        raise ValueError(f"mean_noise_span_length must be at least 1, not {mean_noise_span_length}")


def lengths_at(raw_length: int, noise_density: float = 0.15, mean_noise_span_length: float = 3.0) -> SpanLengths:
    """The lengths of span corruption of `raw_length` tokens; ValueError if it cannot be done."""
    _check_noise(noise_density, mean_noise_span_length)
    if raw_length < 2:
        raise ValueError(f"the raw length must be at least 2 (one noise and one non-noise token), not {raw_length}")
    noise, spans = noise_counts(raw_length, noise_density, mean_noise_span_length)
    if raw_length - noise < spans:
        raise ValueError(f"{raw_length} tokens at noise_density {noise_density} and mean_noise_span_length "
                         f"{mean_noise_span_length} give {spans} noise spans, which need as many non-noise spans, "
                         f"but only {raw_length - noise} tokens are not noise: lower the density or lengthen the spans")
    return SpanLengths(raw_length, raw_length - noise + spans + 1, noise + spans + 1, noise, spans, noise_density,
                       mean_noise_span_length)


def span_lengths(inputs_length: int, noise_density: float = 0.15, mean_noise_span_length: float = 3.0) -> SpanLengths:
    """The longest raw length whose corrupted inputs fit `inputs_length` tokens (T5's `random_spans_helper`).

    Inputs 512 give T = 568 and targets of 114, T5's own figures. `input_length` may come out one short of
    `inputs_length` where one more raw token would add both a kept token and a sentinel.
    """
    _check_noise(noise_density, mean_noise_span_length)
    if inputs_length < 3:
        raise ValueError(f"inputs_length must be at least 3 (a kept token, a sentinel and EOS), not {inputs_length}")

    def inputs_of(raw_length: int) -> int:
        noise, spans = noise_counts(raw_length, noise_density, mean_noise_span_length)
        return raw_length - noise + spans + 1

    raw_length = inputs_length - 1  # fits: K <= N, so its inputs are at most inputs_length
    while inputs_of(raw_length + 1) <= inputs_length:
        raw_length += 1
    lengths = lengths_at(raw_length, noise_density, mean_noise_span_length)
    if noise_density == 0.5 and lengths.target_length > lengths.input_length:
        # T5's "minor hack" so that the targets are no longer than the (round-numbered) inputs
        lengths = lengths_at(raw_length - 1, noise_density, mean_noise_span_length)
    return lengths


def longest_inputs_within(spans: int, noise_density: float = 0.15, mean_noise_span_length: float = 3.0) -> int:
    """The longest inputs_length (the sharder's --max-length) whose corruption makes at most `spans` noise spans
    (a binary search: the spans grow with the length; a length the settings cannot corrupt counts as too long)."""
    def fits(inputs_length: int) -> bool:
        try:
            return span_lengths(inputs_length, noise_density, mean_noise_span_length).noise_spans <= spans
        except ValueError:
            return False

    low, high = 3, 4
    while fits(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


class TooFewSentinels(ValueError):
    """The tokenizer has fewer sentinels than the corruption makes noise spans (`have` 0: none at all)."""

    def __init__(self, lengths: SpanLengths, have: int):
        self.lengths, self.have = lengths, have
        needed = lengths.noise_spans
        what = (f"{have} (<extra_id_0>..<extra_id_{have - 1}>, ids counting down by one)" if have else
                "none (<extra_id_0>, <extra_id_1>, ... with ids counting down by one, as T5's tokenizer has)")
        super().__init__(f"span corruption of {lengths.raw_length}-token rows makes {needed} noise spans, each "
                         f"needing its own sentinel token, and the tokenizer has {what}")


def first_sentinel_id(tokenizer, lengths: SpanLengths) -> int:
    """The id of <extra_id_0>, once the tokenizer is checked to have EOS, pad and the K sentinels counting down
    from it (T5's convention); TooFewSentinels naming how many are needed and had, ValueError without EOS or pad."""
    if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise ValueError("span corruption needs a tokenizer with an EOS and a pad token (a T5 tokenizer)")
    needed = lengths.noise_spans
    first = tokenizer.convert_tokens_to_ids("<extra_id_0>")
    have = 0
    if first is not None and first != tokenizer.unk_token_id:
        while first - have not in (-1, tokenizer.unk_token_id) and \
                tokenizer.convert_tokens_to_ids(f"<extra_id_{have}>") == first - have:
            have += 1
    if have < needed:
        raise TooFewSentinels(lengths, have)
    return first
