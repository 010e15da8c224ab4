"""Masked-LM masking of token batches inside tf.data, repeatable from a seed: --masking token, whole-word or span.

`token` is, for --task mlm, 🤗's `DataCollatorForLanguageModeling.tf_mask_tokens` (each token chosen with
probability --mlm-probability; of those, --mask-replace-prob become the mask token, --random-replace-prob a random
token, the rest stay: 80/10/10 by default, 🤗's names and meaning), with two changes of what it is fed: every
special token of the tokenizer is protected (the reference protected only [CLS], [SEP] and padding), and its random
draws come from a stateless generator keyed by (seed, batch number), so a batch's mask does not depend on thread
timing or on which batches came before: the same seed gives the same masks, in training, evaluation and after a
restart. For --task electra it is ELECTRA's (pretrain_helpers.mask, `ELECTRA_MASKING`): exactly
round(--mlm-probability x the row's tokens) tokens per row (word_masking.py), 85% of them the mask token, 15% left
as they are, none random, unless the replacement flags say otherwise.

`whole-word` (BERT's) and `span` (SpanBERT's) choose whole words, and spans of them, within a budget of
--mlm-probability of each row's tokens (word_masking.py), from the next draws of the same key; 🤗's function then
replaces the chosen tokens. BERT decides mask / random / unchanged per token, SpanBERT per span: whole-word does the
former, span the latter (each span's tokens all become the mask token, all random tokens, or all stay).

For the sparse head, the masked batch is then put into prediction slots (prediction_slots.py) from the next draws.
"""

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from transformers import DataCollatorForLanguageModeling

from mlm_tpu.errors import UserError
from mlm_tpu.mlm.prediction_slots import default_slots, into_slots
from mlm_tpu.mlm.word_masking import (budgets, candidate_spans, row_budget, row_budgets, take_units, take_words,
                                      word_numbers)
from mlm_tpu.tokenizer.word_starts import word_start_table
from mlm_tpu.training.settings import MASKINGS

TOKEN, WHOLE_WORD, SPAN = MASKINGS


@dataclass(frozen=True)
class Masking:
    """What a masked-LM run masks: --masking, --mlm-probability, and what the masked tokens become."""

    mode: str = TOKEN
    mlm_probability: float = 0.15
    mask_replace_prob: float = 0.8  # of the masked tokens, the share that becomes the mask token
    random_replace_prob: float = 0.1  # the share that becomes a random token; the rest stay as they were
    # token masking: exactly ELECTRA's count of tokens per row (False: each token on its own, 🤗's)
    counted_per_row: bool = False
    # --mlm-probability-schedule: (rate, until step) per phase, training's rate by step (empty: mlm_probability)
    schedule: Tuple[Tuple[float, int], ...] = ()

    @classmethod
    def of(cls, config, defaults: Optional["Masking"] = None) -> "Masking":
        """The masking a training, evaluation or inspection config asks for, over a task's `defaults` (None: the
        masked LM's)."""
        given = {name: getattr(config, name) for name in ("mlm_probability", "mask_replace_prob", "random_replace_prob")
                 if getattr(config, name) is not None}
        schedule = masking_phases(getattr(config, "mlm_probability_schedule", None) or ())
        masking = replace(defaults or cls(), mode=config.masking or TOKEN, schedule=schedule, **given)
        if masking.mode not in MASKINGS:
            raise UserError(f"--masking must be one of {', '.join(MASKINGS)}, not {masking.mode!r}")
        if schedule and masking.mode == SPAN:
            raise UserError("--mlm-probability-schedule takes token and whole-word masking; --masking span lays its "
                            "spans out for one rate")
        if masking.mask_replace_prob + masking.random_replace_prob > 1 + 1e-9:
            mask_share, random_share = (f"--{name.replace('_', '-')} {getattr(masking, name):g}"
                                        + ("" if name in given else " (its default here)")
                                        for name in ("mask_replace_prob", "random_replace_prob"))
            raise UserError(f"{mask_share} and {random_share} add up to more than 1: they are shares of the masked "
                            "tokens (the rest stay unchanged)")
        return masking

    def for_validation(self, config) -> "Masking":
        """Validation's masking: --eval-mlm-probability (else --mlm-probability) throughout, no schedule."""
        rate = getattr(config, "eval_mlm_probability", None) or self.mlm_probability
        return replace(self, mlm_probability=rate, schedule=())

    def check_steps(self, total_steps: int) -> None:
        """A schedule whose phases end before the run does is refused (what would the rest mask?)."""
        if self.schedule and self.schedule[-1][1] < total_steps:
            raise UserError(f"--mlm-probability-schedule's phases end at step {self.schedule[-1][1]:,}, but the run "
                            f"has {total_steps:,} steps: give the last phase's UNTIL as {total_steps} or more")

    @property
    def highest_probability(self) -> float:
        """The highest rate the run masks at (what the sparse head's slots are sized for)."""
        return max([self.mlm_probability, *(rate for rate, _ in self.schedule)])

    @property
    def whole_words(self) -> bool:
        """Whether it masks whole words within a budget (whole-word, span) rather than tokens one by one."""
        return self.mode != TOKEN

    @property
    def within_row_budget(self) -> bool:
        """Whether no row masks more than the budget of a full row (whole-word, and ELECTRA's token masking)."""
        return self.mode == WHOLE_WORD or (self.mode == TOKEN and self.counted_per_row)

    def default_slots(self, length: int) -> int:
        """The sparse head's prediction slots for rows of `length` tokens: the budget of a full row where no row
        masks more (word_masking.row_budget), else prediction_slots.default_slots."""
        if self.within_row_budget:
            return min(length, row_budget(self.highest_probability, length, self.budget_precision))
        return default_slots(self.highest_probability, length, spans=self.mode == SPAN)

    @property
    def budget_precision(self):
        """The float a row's budget is counted in: ELECTRA's TensorFlow's float32, BERT's Python's float64."""
        return np.float32 if self.mode == TOKEN else np.float64

    def word_starts(self, tokenizer) -> Optional[List[bool]]:
        """What whole-word and span masking read words from (word_starts.word_start_table; None for token masking);
        a tokenizer that marks no words is refused here, in one line."""
        return word_start_table(tokenizer) if self.whole_words else None

    def masker(self, tokenizer, seed: int, prediction_slots: Optional[int] = None,
               word_starts: Optional[Sequence[bool]] = None) -> "MlmMasker":
        """The masker of one input pipeline (`word_starts`: self.word_starts(tokenizer), made once for all)."""
        return MlmMasker(tokenizer, self.mlm_probability, seed, prediction_slots, masking=self.mode,
                         mask_replace_prob=self.mask_replace_prob, random_replace_prob=self.random_replace_prob,
                         word_starts=word_starts, counted_per_row=self.counted_per_row, schedule=self.schedule)

    def describe(self) -> str:
        kept = 1 - self.mask_replace_prob - self.random_replace_prob
        per = " per span" if self.mode == SPAN else ""
        counted = " (ELECTRA's: that many in every row)" if self.mode == TOKEN and self.counted_per_row else ""
        rate = (", ".join(f"{rate:.0%} until step {until:,}" for rate, until in self.schedule) if self.schedule
                else f"{self.mlm_probability:.0%}")
        return (f"{self.mode} masking of {rate} of tokens{counted} ({self.mask_replace_prob:.0%} "
                f"the mask token, {self.random_replace_prob:.0%} a random token, {max(kept, 0):.0%} unchanged{per})")


def masking_phases(texts: Sequence[str]) -> Tuple[Tuple[float, int], ...]:
    """--mlm-probability-schedule's RATE:UNTIL values as (rate, until) pairs, checked: rates in (0, 1), steps rising."""
    phases = []
    for text in texts:
        rate, _, until = str(text).partition(":")
        try:
            phase = float(rate), int(until.replace(",", "").replace("_", ""))
        except ValueError:
            raise UserError(f"--mlm-probability-schedule {text}: each phase is RATE:UNTIL, a share of tokens and the "
                            "step it lasts until, e.g. 0.3:8000") from None
        if not 0 < phase[0] < 1 or phase[1] <= (phases[-1][1] if phases else 0):
            raise UserError(f"--mlm-probability-schedule {text}: the rate must be between 0 and 1 and each phase end "
                            "after the one before (and after step 0)")
        phases.append(phase)
    return tuple(phases)


# --task electra's: google-research/electra's pretrain_helpers.mask, 85% [MASK], 15% kept, no random token
ELECTRA_MASKING = Masking(mask_replace_prob=0.85, random_replace_prob=0.0, counted_per_row=True)


class _StatelessDraws:
    """Stands in for `tf.random.Generator` in `tf_mask_tokens`: each draw depends only on its key."""

    def __init__(self, key: tf.Tensor):
        self.key = key
        self.draws = 0

    def uniform(self, shape, minval=0, maxval=None, dtype=tf.float32):
        self.draws += 1
        seed = tf.random.experimental.stateless_fold_in(self.key, self.draws)
        return tf.random.stateless_uniform(shape, seed=seed, minval=minval, maxval=maxval, dtype=dtype)


class _DrawsPerUnit:
    """`tf_mask_tokens`'s draws with its decisions shared by the tokens of a unit (SpanBERT's 80/10/10 per span):
    a float draw is made [rows, length] and each token reads its unit's (`unit` [rows, length], below length);
    random tokens stay drawn per token."""

    def __init__(self, draws: _StatelessDraws, unit: tf.Tensor):
        self.draws = draws
        self.unit = unit

    def uniform(self, shape, minval=0, maxval=None, dtype=tf.float32):
        values = self.draws.uniform(shape, minval=minval, maxval=maxval, dtype=dtype)
        return tf.gather(values, self.unit, batch_dims=1) if dtype.is_floating else values


class MlmMasker:
    """Turns a batch `{input_ids, attention_mask}` into `{input_ids (masked), attention_mask, labels}`; with
    `prediction_slots`, into the sparse head's batch of that many slots per row (prediction_slots.into_slots), which
    also caps the whole-word, span and ELECTRA budgets (no row masks more than its slots). `counted_per_row`: token
    masking chooses ELECTRA's count of tokens per row, not each token on its own."""

    def __init__(self, tokenizer, mlm_probability: float = 0.15, seed: int = 0,
                 prediction_slots: Optional[int] = None, *, masking: str = TOKEN, mask_replace_prob: float = 0.8,
                 random_replace_prob: float = 0.1, word_starts: Optional[Sequence[bool]] = None,
                 counted_per_row: bool = False, schedule: Sequence[Tuple[float, int]] = ()):
        if not 0 < mlm_probability < 1:
            raise ValueError(f"mlm_probability must be between 0 and 1, not {mlm_probability}")
        if masking not in MASKINGS:
            raise ValueError(f"masking must be one of {MASKINGS}, not {masking!r}")
        if tokenizer.mask_token_id is None:
            raise ValueError("the tokenizer has no mask token")
        self.chooses = masking != TOKEN or counted_per_row
        # whole words, spans and ELECTRA's tokens are chosen here: the collator then takes every token it is not
        # told to avoid
        self.collator = DataCollatorForLanguageModeling(
            tokenizer, mlm_probability=1.0 if self.chooses else mlm_probability,
            mask_replace_prob=mask_replace_prob, random_replace_prob=random_replace_prob, return_tensors="tf")
        self.vocab_size = len(tokenizer)
        self.mask_token_id = tokenizer.mask_token_id
        self.special_ids = tf.constant(sorted(set(tokenizer.all_special_ids)), dtype=tf.int64)
        if masking != TOKEN:
            self.starts_word = tf.constant(word_starts or word_start_table(tokenizer), tf.bool)
        self.masking = masking
        self.mlm_probability = mlm_probability
        self.seed = seed
        self.prediction_slots = prediction_slots
        self.cap = prediction_slots
        self.schedule = tuple(schedule)

    def probability_at(self, batch_number: tf.Tensor):
        """The share masked at this step (the batch number): its phase's rate, float64, with a schedule; else the
        one rate, a Python float (the graph as it always was)."""
        if not self.schedule:
            return self.mlm_probability
        untils = tf.constant([until for _, until in self.schedule], tf.int64)
        phase = tf.searchsorted(untils, tf.reshape(tf.cast(batch_number, tf.int64), [1]), side="right")[0]
        rates = tf.constant([rate for rate, _ in self.schedule], tf.float64)
        return tf.gather(rates, tf.minimum(phase, len(self.schedule) - 1))

    def __call__(self, batch_number: tf.Tensor, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        input_ids = batch["input_ids"]
        special = tf.reduce_any(tf.equal(tf.cast(input_ids, tf.int64)[..., None], self.special_ids), axis=-1)
        key = tf.stack([tf.cast(self.seed, tf.int64), tf.cast(batch_number, tf.int64)])
        draws = self.collator.generator = _StatelessDraws(key)
        probability = self.probability_at(batch_number)
        if self.schedule and not self.chooses:  # the collator draws each token against its rate, in float32
            self.collator.mlm_probability = tf.cast(probability, tf.float32)
        avoided = special
        if self.chooses:
            chosen, unit = self.choose(input_ids, special, batch["attention_mask"], draws, probability)
            avoided = ~chosen
            if self.masking == SPAN:
                self.collator.generator = _DrawsPerUnit(draws, unit)
        masked, labels = self.collator.tf_mask_tokens(input_ids, vocab_size=self.vocab_size,
                                                      mask_token_id=self.mask_token_id, special_tokens_mask=avoided)
        batch = {"input_ids": masked, "attention_mask": batch["attention_mask"], "labels": labels}
        if self.prediction_slots is None:
            return batch
        return into_slots(batch, self.prediction_slots, draws.uniform(tf.shape(input_ids)))

    def choose(self, input_ids: tf.Tensor, special: tf.Tensor, attention_mask: tf.Tensor, draws: _StatelessDraws,
               probability):
        """(chosen, unit) [rows, length]: the tokens whole-word, span or ELECTRA's token masking masks at
        `probability` (probability_at's), and each token's unit (its word, its span, or itself)."""
        maskable = ~special
        if self.masking == SPAN:
            words = word_numbers(input_ids, special, self.starts_word)
            budget = budgets(self.mlm_probability, tf.reduce_sum(tf.cast(maskable, tf.int32), axis=1))
            candidates = tf.stack([tf.shape(input_ids)[0], tf.shape(input_ids)[1] // 2 + 1])
            spans, in_span = candidate_spans(words, draws.uniform(candidates), draws.uniform(candidates),
                                             self.mlm_probability)
            chosen = take_units(spans, maskable & in_span, words, budget, self.cap, draws.uniform(tf.shape(input_ids)))
            return chosen, spans
        tokens = tf.reduce_sum(tf.cast(attention_mask, tf.int32), axis=1)  # BERT's and ELECTRA's count: every token
        if self.masking == WHOLE_WORD:
            words = word_numbers(input_ids, special, self.starts_word)
            budget = row_budgets(probability, tokens, self.cap)
        else:  # ELECTRA's: each token a word of its own, the count in float32 as ELECTRA's TensorFlow counts it
            words = tf.broadcast_to(tf.range(tf.shape(input_ids)[1]), tf.shape(input_ids))
            budget = row_budgets(probability, tokens, self.cap, tf.float32)
        return take_words(words, maskable, budget, draws.uniform(tf.shape(input_ids))), words
