"""Scoring a masked LM on shards: summed loss, masked tokens and hits per batch, over every replica.

The library half of `python -m mlm_tpu.evaluate` (see there for what the figures mean).
"""

import argparse
import math
import sys
from dataclasses import dataclass

import numpy as np
import tensorflow as tf
import tf_keras as keras
import transformers
from tqdm.auto import tqdm
from transformers import TFAutoModelForMaskedLM

from mlm_tpu.data import distributed_dataset, evaluation_steps, find_corrupt_shard, find_shards, masked_lm_features
from mlm_tpu.errors import UserError
from mlm_tpu.hardware_flags import wants_bf16
from mlm_tpu.heads import MaskedLmHead
from mlm_tpu.labels import IGNORE_INDEX
from mlm_tpu.pretrained import load_pretrained
from mlm_tpu.strategy import describe, select_strategy


@dataclass
class MaskedLmScores:
    """What `python -m mlm_tpu.evaluate` reports; loss and accuracy are over masked tokens only."""

    examples: int
    masked_tokens: int
    loss: float
    perplexity: float
    masked_accuracy: float

    @classmethod
    def from_sums(cls, examples: int, loss_sum: float, masked_tokens: float, correct: float) -> "MaskedLmScores":
        loss = loss_sum / masked_tokens if masked_tokens else float("nan")
        return cls(examples, int(masked_tokens), loss, math.exp(loss) if masked_tokens else float("nan"),
                   correct / masked_tokens if masked_tokens else float("nan"))


def masked_lm_sums(model, batch):
    """[loss summed over masked tokens, masked tokens, masked tokens predicted right] of one batch."""
    logits = tf.cast(model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                           training=False).logits, tf.float32)
    labels = tf.cast(batch["labels"], tf.int32)
    scored = tf.not_equal(labels, IGNORE_INDEX)
    weights = tf.cast(scored, tf.float32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.where(scored, labels, 0), logits=logits)
    hits = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels), tf.float32)
    return tf.stack([tf.reduce_sum(losses * weights), tf.reduce_sum(weights), tf.reduce_sum(hits * weights)])


def evaluate_masked_lm(strategy, model, dataset, steps: int, compile_for_tpu: bool, progress=None):
    """Run `steps` steps over a distributed dataset; the three sums, added up over replicas and steps."""
    step_on_replica = tf.function(lambda batch: masked_lm_sums(model, batch), jit_compile=compile_for_tpu)

    @tf.function
    def step(iterator):
        sums = strategy.run(step_on_replica, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, sums, axis=None)

    totals = np.zeros(3, dtype=np.float64)
    iterator = iter(dataset)
    for _ in range(steps):
        totals += step(iterator).numpy()
        if progress is not None:
            progress.update(1)
    return totals


def evaluation_strategy(args: argparse.Namespace) -> tf.distribute.Strategy:
    """The strategy and precision the evaluate command's hardware flags ask for; deterministic off TPUs."""
    transformers.logging.set_verbosity_error()
    strategy = select_strategy(args.tpu, args.tpu_zone, args.gcp_project, args.cpu_replicas)
    if args.tpu is None:
        tf.config.experimental.enable_op_determinism()  # the same figures on every run, to the last digit
    if wants_bf16(args):
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    return strategy


def run_evaluation(args: argparse.Namespace) -> MaskedLmScores:
    """Everything `python -m mlm_tpu.evaluate` does for a masked LM between parsing its flags and printing."""
    strategy = evaluation_strategy(args)
    shards = find_shards(args.eval_dataset, masked_lm_features(args.max_length), "--eval-dataset")
    with strategy.scope():
        model, tokenizer = load_pretrained(args.model, TFAutoModelForMaskedLM)
    positions = getattr(model.config, "max_position_embeddings", None)
    if positions is not None and shards.length + (model.config.pad_token_id or 0) + 1 > positions:
        raise UserError(f"--eval-dataset holds {shards.length}-token examples, longer than {args.model} takes "
                        f"({positions} positions); evaluate on shards made with a smaller --max-length")
    steps = evaluation_steps(shards, args.per_replica_batch_size, strategy)
    print(f"Evaluating {args.model} on {shards.records:,} examples of {shards.length} tokens "
          f"({len(shards.files)} shard{'s' if len(shards.files) != 1 else ''}) on {describe(strategy)}: {steps} steps, "
          f"masking seed {args.seed}",
          file=sys.stderr, flush=True)
    dataset = distributed_dataset(strategy, shards, args.per_replica_batch_size,
                                  MaskedLmHead().make_transform(args, tokenizer), shuffle=False,
                                  seed=args.seed, pad_endlessly=True)
    try:
        with tqdm(total=steps, desc="evaluating", unit=" steps", file=sys.stderr) as progress:
            totals = evaluate_masked_lm(strategy, model, dataset, steps, args.tpu is not None, progress)
    except tf.errors.DataLossError:
        raise UserError(find_corrupt_shard(shards) or "a shard is corrupt; re-shard the data") from None
    except tf.errors.InvalidArgumentError as error:
        raise UserError(f"the model cannot read these shards ({error.message.splitlines()[0][:200]}); were they "
                        f"made with {args.model}'s tokenizer?") from None
    return MaskedLmScores.from_sums(shards.records, *totals)
