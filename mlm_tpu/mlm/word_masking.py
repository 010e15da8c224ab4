"""Which tokens whole-word and span masking mask, and ELECTRA's token masking (masking.py then replaces them),
vectorised over a batch in tf.data with static shapes (sorts of [rows, length], no ragged tensors), from draws
handed in.

Whole-word and span masking mask whole words, read from the tokenizer's own marks (tokenizer/word_starts.py) through
a table of one flag per id: a token starts a word when its piece says so (▁, Ġ, no ##), when it follows a special
token (byte-level BPE writes a document's first word after <s> without Ġ), or at the start of the row (a packed row
may begin inside a word: the row is all the model sees of it). Special tokens and padding are words of their own,
never masked.

- whole-word (BERT's create_pretraining_data): a budget per row of min(slots, max(1, round(mlm_probability x the
  row's tokens))), where the row's tokens are every token the attention mask keeps, its special tokens included
  (BERT's len(tokens) counts [CLS] and [SEP]; padding, added after, is not counted), rounded as Python's round
  (halves to even). Words are taken in a random order; a word that does not fit the budget left is skipped, and
  taking goes on with the next (`take_words`): a row never masks more than its budget, nor than its slots.
- ELECTRA's token masking (pretrain_helpers.mask): exactly min(slots, max(1, round(mlm_probability x the row's
  tokens))) tokens per row, counted as whole-word counts but in float32 as ELECTRA's TensorFlow does, chosen at
  random among the maskable ones (`take_words` with every token a word of its own). ELECTRA draws its positions
  with replacement, so its rows may repeat a position and mask fewer; these are drawn without.
- span (SpanBERT's): a budget of round(mlm_probability x the row's maskable tokens), halves up. Candidate spans are
  laid over the row's words, each after a gap of at least one word, their lengths in words drawn from SpanBERT's
  law (geometric, p = 0.2, at most 10 words: mean 3.80); spans are taken in a random order while they fit; the span
  that crosses the budget keeps the words that fit, and the word that crosses it if at least half of its pieces
  fit; then taking stops (`take_units`). The sparse head's prediction slots cap it: a word that would end beyond
  them is not masked. Unlike SpanBERT's code, spans never overlap or touch, so each masked run of words is one
  span of the law (but for the crossing one, and spans a special token or the row's end cuts)."""

import math
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf

SPAN_P = 0.2  # SpanBERT's geometric law of span lengths, in words
SPAN_MAX_WORDS = 10
NOT_TAKEN = 2.0  # a priority above every uniform draw: sorted after every unit


def span_length_law() -> np.ndarray:
    """P(a span is l words), l = 1..SPAN_MAX_WORDS: the geometric law truncated and renormalised, as SpanBERT's
    code draws it (mean 3.80 words)."""
    weights = SPAN_P * (1 - SPAN_P) ** np.arange(SPAN_MAX_WORDS)
    return weights / weights.sum()


def budget_of(mlm_probability: float, maskable: int) -> int:
    """Tokens span masking masks in a row of `maskable` tokens: round(mlm_probability x maskable), halves up (as
    `budgets`)."""
    return math.floor(mlm_probability * maskable + 0.5)


def budgets(mlm_probability: float, maskable: tf.Tensor) -> tf.Tensor:
    """`budget_of` for every row ([rows] counts of maskable tokens), in float64 as Python computes it."""
    return tf.cast(tf.floor(tf.cast(maskable, tf.float64) * mlm_probability + 0.5), tf.int32)


def row_budget(mlm_probability: float, tokens: int, dtype=np.float64) -> int:
    """Tokens whole-word masking (float64, BERT's Python) or ELECTRA's token masking (float32, ELECTRA's TensorFlow)
    masks at most in a row of `tokens` tokens, before the slots cap it: max(1, round(mlm_probability x tokens)),
    halves to even (as `row_budgets`)."""
    return max(1, int(np.round(dtype(tokens) * dtype(mlm_probability))))


def row_budgets(mlm_probability: float, tokens: tf.Tensor, cap: Optional[int], dtype=tf.float64) -> tf.Tensor:
    """`row_budget` for every row ([rows] counts of the row's tokens), capped by `cap` (the slots; None: no cap)."""
    # a Python float as it always was; a schedule's rate (a float64 tensor) cast
    rate = (tf.constant(mlm_probability, dtype) if isinstance(mlm_probability, float)
            else tf.cast(mlm_probability, dtype))
    product = tf.cast(tokens, dtype) * rate
    found = tf.maximum(1, tf.cast(tf.round(product), tf.int32))
    return found if cap is None else tf.minimum(found, cap)


def word_numbers(input_ids: tf.Tensor, special: tf.Tensor, starts_word: tf.Tensor) -> tf.Tensor:
    """[rows, length] int32: the number of each token's word in its row (0 for the first). `starts_word` [vocabulary]
    bool is the tokenizer's table (word_starts.word_start_table)."""
    after_special = tf.pad(special[:, :-1], [[0, 0], [1, 0]], constant_values=True)  # the row's first token too
    starts = tf.gather(starts_word, input_ids) | special | after_special
    return tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1


def candidate_spans(words: tf.Tensor, length_draws: tf.Tensor, gap_draws: tf.Tensor,
                    mlm_probability: float) -> Tuple[tf.Tensor, tf.Tensor]:
    """SpanBERT's spans laid over rows of `words` (word_numbers) [rows, length]: (span, in_span), [rows, length] each:
    the number of the span a token's word falls in (the unit take_units takes), and whether it falls in one.

    Candidate k is a gap of g_k words then a span of l_k words (l_k from span_length_law, by `length_draws`; g_k >= 1,
    geometric, by `gap_draws`; the first gap may be 0), both draws [rows, length // 2 + 1] uniform in [0, 1): enough
    candidates to cover any row. The gaps' mean makes the candidates cover about twice the masking budget's share of
    words, so the budget takes about half of them, at random (spans cover at most 79% of a row: 3.80 / 4.80 words,
    so a larger --mlm-probability is not reached)."""
    law = span_length_law()
    lengths = 1 + tf.reduce_sum(tf.cast(length_draws[..., None] >= tf.constant(np.cumsum(law)[:-1], tf.float32),
                                        tf.int32), axis=-1)
    mean_length = float(np.sum(law * np.arange(1, SPAN_MAX_WORDS + 1)))
    covered = min(2 * mlm_probability, 1.0)
    mean_gap = max(1.0, mean_length * (1 - covered) / covered)
    if mean_gap > 1:  # geometric on 1, 2, ... with that mean, by inversion
        gaps = 1 + tf.cast(tf.floor(tf.math.log1p(-gap_draws) / math.log1p(-1 / mean_gap)), tf.int32)
    else:
        gaps = tf.ones_like(lengths)
    gaps = tf.concat([gaps[:, :1] - 1, gaps[:, 1:]], axis=1)
    ends = tf.cumsum(gaps + lengths, axis=1)  # [rows, candidates]: past each candidate's last word
    span = tf.searchsorted(ends, words, side="right", out_type=tf.int32)  # the candidate a word falls in
    in_span = words >= tf.gather(ends - lengths, span, batch_dims=1)
    return span, in_span


def take_words(words: tf.Tensor, maskable: tf.Tensor, budget: tf.Tensor, priorities: tf.Tensor) -> tf.Tensor:
    """The tokens masked [rows, length] bool, as BERT's whole-word masking takes them: words (`words` [rows,
    length], word_numbers) in the order of their `priorities` [rows, length] (word w's is priorities[:, w]), each
    masked when its `maskable` tokens fit the row's `budget` [rows] left, skipped when they do not (taking goes on
    with the next word); the tokens that are not maskable cost nothing and stay unmasked.

    The words taken before the first that does not fit are a prefix of the sorted words (their running sum within
    the budget); after it, each round takes every row's next word that fits what is left, which shrinks by at least
    one token a round: a few rounds, until no row finds one."""
    rows, length = tf.shape(words)[0], tf.shape(words)[1]
    word_ids = words + tf.range(rows)[:, None] * length
    sizes = tf.reshape(tf.math.unsorted_segment_sum(tf.cast(maskable, tf.int32), word_ids, rows * length),
                       [rows, length])  # each word's maskable tokens
    order = tf.argsort(tf.where(sizes > 0, priorities, NOT_TAKEN), axis=1, stable=True)
    sizes = tf.gather(sizes, order, batch_dims=1)  # in the order words are taken
    used = tf.cumsum(sizes, axis=1)
    taken = used <= budget[:, None]
    left = budget - tf.reduce_max(tf.where(taken, used, 0), axis=1)
    seen = tf.reduce_sum(tf.cast(taken, tf.int32), axis=1) - 1  # the last word decided
    places = tf.range(length)[None]

    def take_next(taken, left, seen):
        fits = (places > seen[:, None]) & (sizes > 0) & (sizes <= left[:, None])
        found = tf.reduce_any(fits, axis=1)
        first = tf.argmax(tf.cast(fits, tf.int32), axis=1, output_type=tf.int32)
        left -= tf.where(found, tf.gather(sizes, first, batch_dims=1), 0)
        return taken | (fits & tf.equal(places, first[:, None])), left, tf.where(found, first, length)

    taken, _, _ = tf.while_loop(lambda taken, left, seen: tf.reduce_any(seen < length), take_next,
                                [taken, left, seen])
    taken = tf.gather(taken, tf.argsort(order, axis=1), batch_dims=1)  # back in word order
    return maskable & tf.gather(taken, words, batch_dims=1)


def take_units(unit: tf.Tensor, maskable: tf.Tensor, words: tf.Tensor, budget: tf.Tensor, cap: Optional[int],
               priorities: tf.Tensor) -> tf.Tensor:
    """The tokens span masking masks [rows, length] bool: units (each token's `unit`, a number below length: its
    span) taken in the order of their `priorities` [rows, length] (unit u's is priorities[:, u]) while they fit
    each row's `budget` [rows]; a unit's tokens that are not `maskable` cost nothing and stay unmasked. Of the unit
    that crosses the budget, the words that fit are masked, and the word that crosses it if half of it fits; no
    word ends beyond `cap` tokens (the prediction slots; None: no cap).

    Sorting the tokens by their unit's priority (stably: each unit's tokens stay together, in row order) and
    counting the maskable ones in that order says how much of the budget each token uses: a word spends from its
    first token's count less one to its last token's."""
    rows, length = tf.shape(unit)[0], tf.shape(unit)[1]
    order = tf.argsort(tf.where(maskable, tf.gather(priorities, unit, batch_dims=1), NOT_TAKEN), axis=1, stable=True)
    used = tf.cumsum(tf.cast(tf.gather(maskable, order, batch_dims=1), tf.int32), axis=1)
    used = tf.gather(used, tf.argsort(order, axis=1), batch_dims=1)  # back in row order
    word_ids = words + tf.range(rows)[:, None] * length
    ends = tf.gather(tf.math.unsorted_segment_max(used, word_ids, rows * length), word_ids)
    starts = tf.gather(tf.math.unsorted_segment_min(used, word_ids, rows * length), word_ids) - 1
    fits = starts + ends <= 2 * budget[:, None]  # its middle within the budget
    if cap is not None:
        fits &= ends <= cap
    return maskable & fits
