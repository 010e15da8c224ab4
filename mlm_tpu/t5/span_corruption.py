"""T5 span corruption of token batches inside tf.data, repeatable from a seed.

The objective is T5's `span_corruption` (t5/data/preprocessors.py: `random_spans_noise_mask`,
`noise_span_to_unique_sentinel` for the inputs, `nonnoise_span_to_unique_sentinel` for the targets):
a raw sequence of T tokens gets N = round(T * noise_density) noise tokens in K spans; the inputs keep
the other tokens and put one sentinel per noise span, the labels are the noise spans each after its
sentinel, both ending in EOS. Shards of the span-corruption kind hold only the raw `input_ids`, so the
corruption is drawn afresh while training, as T5 does, instead of being frozen into the shards.

Two choices differ from doing it one example at a time as T5 does:
- the whole batch is corrupted in a few vectorized TF ops (the span cuts are the top K-1 of random
  draws, which picks a uniform random set of cut points, as T5's shuffle does), since N and K are
  fixed for a given T and every row's inputs and labels have the same exact length: nothing to pad;
- the draws come from a stateless generator keyed by (seed, batch number), as `mlm.masking.MlmMasker`
  does, so a batch's corruption does not depend on thread timing or on the batches before it.

The lengths themselves (N, K, T for a wanted input length) are in span_lengths.py.
"""

from typing import Dict

import tensorflow as tf

from mlm_tpu.shards.span_lengths import SpanLengths, first_sentinel_id, lengths_at


class SpanCorrupter:
    """Turns a batch `{input_ids: [B, T]}` of raw tokens into `{input_ids, attention_mask, labels}` for T5.

    Sentinel i is `first_sentinel_id - i` (T5's convention: <extra_id_0> is the last id of the vocabulary).
    """

    def __init__(self, raw_length: int, noise_density: float, mean_noise_span_length: float, eos_token_id: int,
                 pad_token_id: int, first_sentinel_id: int, seed: int = 0):
        self.lengths = lengths_at(raw_length, noise_density, mean_noise_span_length)
        spans = self.lengths.noise_spans
        sentinels = range(first_sentinel_id - spans + 1, first_sentinel_id + 1)
        if sentinels.start < 0:
            raise ValueError(f"{spans} sentinels counting down from id {first_sentinel_id} would reach negative ids")
        for name, token_id in (("eos_token_id", eos_token_id), ("pad_token_id", pad_token_id)):
            if token_id in sentinels:
                raise ValueError(f"{name} {token_id} is among the sentinel ids {sentinels.start}..{sentinels.stop - 1}")
        self.eos_token_id = eos_token_id
        self.pad_token_id = pad_token_id  # nothing here is padded; T5 starts its decoder with it
        self.first_sentinel_id = first_sentinel_id
        self.seed = seed

    @classmethod
    def for_tokenizer(cls, tokenizer, lengths: SpanLengths, seed: int = 0) -> "SpanCorrupter":
        """A corrupter using a T5 tokenizer's EOS, pad and sentinels; ValueError if it lacks enough sentinels."""
        first = first_sentinel_id(tokenizer, lengths)
        return cls(lengths.raw_length, lengths.noise_density, lengths.mean_noise_span_length, tokenizer.eos_token_id,
                   tokenizer.pad_token_id, first, seed)

    def _segment_lengths(self, seed: tf.Tensor, rows: tf.Tensor, items: int, segments: int) -> tf.Tensor:
        """[rows, segments] int32: `items` cut into `segments` non-empty runs, every cut equally likely.

        The cuts are the top `segments - 1` of iid 64-bit draws over the `items - 1` gaps: a uniform random
        set of gaps, as T5 gets by shuffling a vector of `segments - 1` ones.
        """
        if segments == 1:
            return tf.fill([rows, 1], items)
        draws = tf.random.stateless_uniform([rows, items - 1], seed=seed, minval=None, maxval=None, dtype=tf.int64)
        cuts = tf.sort(tf.math.top_k(draws, segments - 1, sorted=False).indices, axis=1) + 1
        bounds = tf.concat([tf.zeros([rows, 1], tf.int32), cuts, tf.fill([rows, 1], items)], axis=1)
        return bounds[:, 1:] - bounds[:, :-1]

    def __call__(self, batch_number: tf.Tensor, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        raw, noise, spans = self.lengths.raw_length, self.lengths.noise_tokens, self.lengths.noise_spans
        input_ids = batch["input_ids"]
        if input_ids.shape[-1] is not None and input_ids.shape[-1] != raw:
            raise ValueError(f"span corruption was set up for {raw} raw tokens, the batch has {input_ids.shape[-1]}")
        input_ids = tf.ensure_shape(tf.cast(input_ids, tf.int64), [None, raw])
        rows = tf.shape(input_ids)[0]
        key = tf.stack([tf.constant(self.seed, tf.int64), tf.cast(batch_number, tf.int64)])
        fold_in = tf.random.experimental.stateless_fold_in
        noise_runs = self._segment_lengths(fold_in(key, 1), rows, noise, spans)
        kept_runs = self._segment_lengths(fold_in(key, 2), rows, raw - noise, spans)
        # spans alternate kept, noise, kept, ..., noise (T5's order); span_number[b, t]: which span t is in
        ends = tf.cumsum(tf.reshape(tf.stack([kept_runs, noise_runs], axis=2), [rows, 2 * spans]), axis=1)
        positions = tf.broadcast_to(tf.range(raw, dtype=tf.int32), [rows, raw])
        span_number = tf.searchsorted(ends[:, :-1], positions, side="right")
        is_noise = tf.equal(span_number % 2, 1)
        follows_noise = tf.pad(is_noise[:, :-1], [[0, 0], [1, 0]], constant_values=True)
        starts_span = tf.not_equal(is_noise, follows_noise)
        sentinel = self.first_sentinel_id - tf.cast(span_number // 2, tf.int64)  # kept span i and noise span i: i
        eos = tf.fill([rows, 1], tf.constant(self.eos_token_id, tf.int64))

        def keep(replace: tf.Tensor, drop: tf.Tensor, length: int) -> tf.Tensor:
            """T5's (non)noise_span_to_unique_sentinel on every row, then EOS: each row keeps `length - 1`."""
            tokens = tf.where(replace, sentinel, input_ids)
            kept = tf.reshape(tf.boolean_mask(tokens, tf.logical_not(drop)), [rows, length - 1])
            return tf.concat([kept, eos], axis=1)

        # inputs: a noise span's first token becomes its sentinel, the rest go; labels: the same for kept spans
        inputs = keep(tf.logical_and(starts_span, is_noise), tf.logical_and(is_noise, follows_noise),
                      self.lengths.input_length)
        labels = keep(tf.logical_and(starts_span, tf.logical_not(is_noise)),
                      tf.logical_not(tf.logical_or(is_noise, starts_span)), self.lengths.target_length)
        return {"input_ids": inputs, "attention_mask": tf.ones_like(inputs), "labels": labels}
