"""Masked-LM masking of token batches inside tf.data, repeatable from a seed.

The masking is 🤗's `DataCollatorForLanguageModeling.tf_mask_tokens` (15% of tokens chosen;
of those 80% become [MASK], 10% a random token, 10% stay), with two changes of what it is fed:
every special token of the tokenizer is protected (the reference protected only [CLS], [SEP]
and padding), and its random draws come from a stateless generator keyed by (seed, batch
number), so a batch's mask does not depend on thread timing or on which batches came before:
the same seed gives the same masks, in training, evaluation and after a restart. For the sparse head, the masked
batch is then put into prediction slots (prediction_slots.py) from the next draws of the same key.
"""

from typing import Dict, Optional

import tensorflow as tf
from transformers import DataCollatorForLanguageModeling

from mlm_tpu.mlm.prediction_slots import into_slots


class _StatelessDraws:
    """Stands in for `tf.random.Generator` in `tf_mask_tokens`: each draw depends only on its key."""

    def __init__(self, key: tf.Tensor):
        self.key = key
        self.draws = 0

    def uniform(self, shape, minval=0, maxval=None, dtype=tf.float32):
        self.draws += 1
        seed = tf.random.experimental.stateless_fold_in(self.key, self.draws)
        return tf.random.stateless_uniform(shape, seed=seed, minval=minval, maxval=maxval, dtype=dtype)


class MlmMasker:
    """Turns a batch `{input_ids, attention_mask}` into `{input_ids (masked), attention_mask, labels}`; with
    `prediction_slots`, into the sparse head's batch of that many slots per row (prediction_slots.into_slots)."""

    def __init__(self, tokenizer, mlm_probability: float = 0.15, seed: int = 0,
                 prediction_slots: Optional[int] = None):
        if not 0 < mlm_probability < 1:
            raise ValueError(f"mlm_probability must be between 0 and 1, not {mlm_probability}")
        if tokenizer.mask_token_id is None:
            raise ValueError("the tokenizer has no mask token")
        self.collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=mlm_probability,
                                                        return_tensors="tf")
        self.vocab_size = len(tokenizer)
        self.mask_token_id = tokenizer.mask_token_id
        self.special_ids = tf.constant(sorted(set(tokenizer.all_special_ids)), dtype=tf.int64)
        self.seed = seed
        self.prediction_slots = prediction_slots

    def __call__(self, batch_number: tf.Tensor, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        input_ids = batch["input_ids"]
        special = tf.reduce_any(tf.equal(tf.cast(input_ids, tf.int64)[..., None], self.special_ids), axis=-1)
        key = tf.stack([tf.cast(self.seed, tf.int64), tf.cast(batch_number, tf.int64)])
        draws = self.collator.generator = _StatelessDraws(key)
        masked, labels = self.collator.tf_mask_tokens(input_ids, vocab_size=self.vocab_size,
                                                      mask_token_id=self.mask_token_id, special_tokens_mask=special)
        batch = {"input_ids": masked, "attention_mask": batch["attention_mask"], "labels": labels}
        if self.prediction_slots is None:
            return batch
        return into_slots(batch, self.prediction_slots, draws.uniform(tf.shape(input_ids)))
