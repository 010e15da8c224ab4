"""Span-corruption throughput: mlm_tpu's SpanCorrupter in tf.data against the 🤗 Flax example's numpy collator.

Both corrupt the same in-memory random token ids (raw length T from `span_lengths(--input-length)`, 568 for
512-token inputs) a batch at a time. Ours: `Dataset.from_tensor_slices(...).batch().enumerate().map(corrupter,
num_parallel_calls=AUTOTUNE)`, timed over whole passes after a first pass that traces it; also the same pipeline
with an identity map instead, the floor any transform pays. The reference: `FlaxDataCollatorForT5MLM`'s
noise mask (one row at a time in Python, as it does), sentinel ids and filtering, applied per batch.
Prints examples/s of each (best of --repeats passes) and the ratio. Asserts nothing about time.
Usage: python benchmarks/span_corruption.py [--examples 4096] [--batch-size 64] [--input-length 512]
"""

import argparse
import time
from typing import Callable, Dict

import numpy as np
import tensorflow as tf

from mlm_tpu.t5.span_corruption import SpanCorrupter
from mlm_tpu.shards.span_lengths import SpanLengths, span_lengths

VOCABULARY = 32100  # len() of T5's own tokenizers: <extra_id_0> is 32099


class FlaxT5MlmReference:
    """`FlaxDataCollatorForT5MLM` of transformers/examples/flax/language-modeling/run_t5_mlm_flax.py, its
    `random_spans_noise_mask`, `create_sentinel_ids` and `filter_input_ids` copied as they are there (with the
    example's `np.unique` segment count, and `len(self.tokenizer)` as the vocabulary size); `__call__` keeps the
    part that corrupts an already stacked batch (no list-of-dicts stacking, no `decoder_input_ids`, which
    SpanCorrupter does not make either)."""

    def __init__(self, noise_density: float, mean_noise_span_length: float, vocabulary_size: int, eos_token_id: int):
        self.noise_density = noise_density
        self.mean_noise_span_length = mean_noise_span_length
        self.vocabulary_size = vocabulary_size
        self.eos_token_id = eos_token_id

    def __call__(self, input_ids: np.ndarray) -> Dict[str, np.ndarray]:
        batch_size, expandend_input_length = input_ids.shape
        mask_indices = np.asarray([self.random_spans_noise_mask(expandend_input_length) for i in range(batch_size)])
        labels_mask = ~mask_indices
        input_ids_sentinel = self.create_sentinel_ids(mask_indices.astype(np.int8))
        labels_sentinel = self.create_sentinel_ids(labels_mask.astype(np.int8))
        return {"input_ids": self.filter_input_ids(input_ids, input_ids_sentinel),
                "labels": self.filter_input_ids(input_ids, labels_sentinel)}

    def create_sentinel_ids(self, mask_indices):
        start_indices = mask_indices - np.roll(mask_indices, 1, axis=-1) * mask_indices
        start_indices[:, 0] = mask_indices[:, 0]

        sentinel_ids = np.where(start_indices != 0, np.cumsum(start_indices, axis=-1), start_indices)
        sentinel_ids = np.where(sentinel_ids != 0, (self.vocabulary_size - sentinel_ids), 0)
        sentinel_ids -= mask_indices - start_indices

        return sentinel_ids

    def filter_input_ids(self, input_ids, sentinel_ids):
        batch_size = input_ids.shape[0]

        input_ids_full = np.where(sentinel_ids != 0, sentinel_ids, input_ids)
        # input_ids tokens and sentinel tokens are >= 0, tokens < 0 are
        # masked tokens coming after sentinel tokens and should be removed
        input_ids = input_ids_full[input_ids_full >= 0].reshape((batch_size, -1))
        input_ids = np.concatenate(
            [input_ids, np.full((batch_size, 1), self.eos_token_id, dtype=np.int32)], axis=-1
        )
        return input_ids

    def random_spans_noise_mask(self, length):
        orig_length = length

        num_noise_tokens = int(np.round(length * self.noise_density))
        num_nonnoise_tokens = length - num_noise_tokens
        # avoid degeneracy by ensuring positive numbers of noise and nonnoise tokens.
        num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)
        # num_noise_tokens should be less than num_noise_tokens and num_nonnoise_tokens
        num_noise_spans = int(np.round(min(num_noise_tokens, num_nonnoise_tokens) / self.mean_noise_span_length))

        # avoid degeneracy by ensuring positive number of noise spans
        num_noise_spans = max(num_noise_spans, 1)

        # pick the lengths of the noise spans and the non-noise spans
        def _random_segmentation(num_items, num_segments):
            mask_indices = np.arange(num_items - 1) < (num_segments - 1)
            np.random.shuffle(mask_indices)
            first_in_segment = np.pad(mask_indices, [[1, 0]])
            segment_id = np.cumsum(first_in_segment)
            # count length of sub segments assuming that list is sorted
            _, segment_length = np.unique(segment_id, return_counts=True)
            return segment_length

        noise_span_lengths = _random_segmentation(num_noise_tokens, num_noise_spans)
        nonnoise_span_lengths = _random_segmentation(num_nonnoise_tokens, num_noise_spans)

        interleaved_span_lengths = np.reshape(
            np.stack([nonnoise_span_lengths, noise_span_lengths], axis=1), [num_noise_spans * 2]
        )
        span_starts = np.cumsum(interleaved_span_lengths)[:-1]
        span_start_indicator = np.zeros((length,), dtype=np.int8)
        span_start_indicator[span_starts] = True
        span_num = np.cumsum(span_start_indicator)
        is_noise = np.equal(span_num % 2, 1)

        return is_noise[:orig_length]


def best_rate(run_pass: Callable[[], None], examples: int, repeats: int) -> float:
    """Examples per second of the fastest of `repeats` timed passes."""
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        run_pass()
        seconds.append(time.perf_counter() - started)
    return examples / min(seconds)


def tf_data_rate(ids: np.ndarray, batch_size: int, transform, repeats: int) -> float:
    dataset = tf.data.Dataset.from_tensor_slices({"input_ids": ids}).batch(batch_size, drop_remainder=True)
    dataset = dataset.enumerate().map(transform, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def run_pass() -> None:
        for _ in dataset:
            pass

    run_pass()  # warm-up: traces the map function and sizes AUTOTUNE
    return best_rate(run_pass, len(ids) // batch_size * batch_size, repeats)


def reference_rate(ids: np.ndarray, batch_size: int, reference: FlaxT5MlmReference, lengths: SpanLengths,
                   repeats: int) -> float:
    batches = [ids[start:start + batch_size] for start in range(0, len(ids) - batch_size + 1, batch_size)]
    first = reference(batches[0])  # warm-up, and a check that it corrupts to the same lengths as ours
    assert first["input_ids"].shape[1] == lengths.input_length and first["labels"].shape[1] == lengths.target_length

    def run_pass() -> None:
        for batch in batches:
            reference(batch)

    return best_rate(run_pass, len(batches) * batch_size, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=4096, help="raw examples per pass (default 4096)")
    parser.add_argument("--batch-size", type=int, default=64, help="examples per batch (default 64)")
    parser.add_argument("--input-length", type=int, default=512, help="corrupted input length (default 512)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes of each, best kept (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.examples < args.batch_size:
        parser.error(f"--examples {args.examples} is fewer than one batch of --batch-size {args.batch_size}")

    lengths = span_lengths(args.input_length)
    ids = np.random.default_rng(args.seed).integers(3, VOCABULARY - 100, size=(args.examples, lengths.raw_length))
    corrupter = SpanCorrupter(lengths.raw_length, lengths.noise_density, lengths.mean_noise_span_length,
                              eos_token_id=1, pad_token_id=0, first_sentinel_id=VOCABULARY - 1, seed=args.seed)
    np.random.seed(args.seed)  # the reference draws from numpy's global generator
    reference = FlaxT5MlmReference(lengths.noise_density, lengths.mean_noise_span_length, VOCABULARY, 1)

    print(f"raw length {lengths.raw_length} -> inputs {lengths.input_length}, targets {lengths.target_length} "
          f"({lengths.noise_tokens} noise tokens in {lengths.noise_spans} spans); {args.examples} examples, "
          f"batches of {args.batch_size}, {tf.config.threading.get_inter_op_parallelism_threads() or 'default'} "
          f"inter-op threads, best of {args.repeats}")
    floor = tf_data_rate(ids, args.batch_size, lambda number, batch: batch, args.repeats)
    ours = tf_data_rate(ids, args.batch_size, corrupter, args.repeats)
    theirs = reference_rate(ids, args.batch_size, reference, lengths, args.repeats)
    print(f"tf.data, identity map (floor):        {floor:12,.0f} examples/s")
    print(f"tf.data + SpanCorrupter:              {ours:12,.0f} examples/s")
    print(f"numpy FlaxDataCollatorForT5MLM logic: {theirs:12,.0f} examples/s")
    print(f"SpanCorrupter / reference:            {ours / theirs:12.1f}x")


if __name__ == "__main__":
    main()
