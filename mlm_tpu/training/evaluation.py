"""Scoring a model over every example of a split, under any strategy: each epoch's validation, and
`python -m mlm_tpu.evaluate` (`evaluate_model`).

Every replica runs a step function on its batches (the evaluation pipeline fills the last batch
with unscored rows, so every example counts exactly once and shapes stay fixed); only small
results leave the device: sums of loss, tokens and hits (masked LM, ELECTRA, span corruption), or
class ids (one per example or per token: T5 classification, the encoder's tasks) or a few generated
tokens per example (T5 generation), which the host then scores.
"""

import math
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import numpy as np
import tensorflow as tf

from mlm_tpu.configuration import check_ranges
from mlm_tpu.console import log, progress
from mlm_tpu.errors import UserError
from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.shards.pipeline import distributed_evaluation_dataset, evaluation_steps, next_per_replica, reading_errors
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.training.config import EvaluationConfig
from mlm_tpu.training.hardware import describe
from mlm_tpu.training.task import Scores, Task, Validation


class ShardRunner:
    """Runs `replica_step(batch) -> {name: tensor}` over every example of `shards`; `run()` returns the outputs,
    summed over replicas and steps (`gather=False`) or as one row per example slot, padding rows included."""

    def __init__(self, strategy, shards: ShardSet, per_replica_batch_size: int,
                 make_transform: Callable[[int], Optional[Callable]], seed: int,
                 replica_step: Callable[[Dict[str, tf.Tensor]], Dict[str, tf.Tensor]], *, vocab_size: int,
                 jit_compile: bool, gather: bool):
        self.shards = shards
        self.gather = gather
        self.steps = evaluation_steps(shards, per_replica_batch_size, strategy)
        self.vocab_size = vocab_size
        self.dataset = distributed_evaluation_dataset(strategy, shards, per_replica_batch_size, make_transform, seed,
                                                      vocab_size)
        on_replica = tf.function(replica_step, jit_compile=jit_compile, autograph=False)  # see make_train_steps

        @tf.function
        def step(iterator) -> Dict[str, tf.Tensor]:
            outputs = strategy.run(on_replica, args=(next_per_replica(strategy, iterator),))
            if gather:
                return {name: strategy.gather(value, axis=0) for name, value in outputs.items()}
            return {name: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
                    for name, value in outputs.items()}

        self.step = step

    def run(self, show_progress: bool = False) -> Dict[str, np.ndarray]:
        iterator = iter(self.dataset)
        results = []
        with reading_errors(self.shards, self.vocab_size), \
                progress(total=self.steps, desc="evaluating", unit=" steps", disable=not show_progress) as bar:
            for _ in range(self.steps):
                results.append({name: value.numpy() for name, value in self.step(iterator).items()})
                bar.update(1)
        if self.gather:
            return {name: np.concatenate([result[name] for result in results]) for name in results[0]}
        return {name: np.sum([result[name] for result in results], axis=0, dtype=np.float64) for name in results[0]}


def token_sums(model, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Over the positions that take a loss: the summed cross-entropy, how many there are, and how many the
    model's top guess gets right. The model is given the labels too (T5 makes its decoder inputs from them)."""
    logits = tf.cast(model(**batch, training=False).logits, tf.float32)
    labels = tf.cast(batch["labels"], tf.int32)
    scored = tf.not_equal(labels, IGNORE_INDEX)
    weights = tf.cast(scored, tf.float32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.where(scored, labels, 0), logits=logits)
    hits = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels), tf.float32)
    return {"loss": tf.reduce_sum(losses * weights), "tokens": tf.reduce_sum(weights),
            "hits": tf.reduce_sum(hits * weights)}


def token_scores(sums: Dict[str, float], accuracy_name: str, tokens_name: str) -> Scores:
    """Loss (mean over every scored token, not a mean of batch means), perplexity and accuracy from the sums."""
    tokens = float(sums["tokens"])
    if not tokens:
        return {tokens_name: 0, "loss": float("nan"), "perplexity": float("nan"), accuracy_name: float("nan")}
    loss = float(sums["loss"]) / tokens
    return {tokens_name: int(tokens), "loss": loss, "perplexity": perplexity(loss),
            accuracy_name: float(sums["hits"]) / tokens}


def perplexity(loss: float) -> float:
    """exp(loss), infinite where that is past a float (a loss above about 709: a run that diverged scores, and goes
    on, rather than failing over a figure)."""
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf


class TokenValidation(Validation):
    """Loss, perplexity and the accuracy of the positions that take a loss (masked tokens, target tokens)."""

    def __init__(self, strategy, model, shards: ShardSet, per_replica_batch_size: int,
                 make_transform: Callable[[int], Optional[Callable]], seed: int, *, accuracy_name: str,
                 tokens_name: str, jit_compile: bool):
        self.accuracy_name = accuracy_name
        self.tokens_name = tokens_name
        self.runner = ShardRunner(strategy, shards, per_replica_batch_size, make_transform, seed,
                                  lambda batch: token_sums(model, batch), vocab_size=model.config.vocab_size,
                                  jit_compile=jit_compile, gather=False)

    def run(self, show_progress: bool = False) -> Scores:
        return token_scores(self.runner.run(show_progress), self.accuracy_name, self.tokens_name)

    def describe(self, scores: Scores) -> str:
        perplexity = scores["perplexity"]  # a diverged run's has hundreds of digits: 2.83e+259
        return (f"loss {scores['loss']:.4f}, perplexity {perplexity:.{'2f' if perplexity < 1e6 else '3g'}}, "
                f"{self.accuracy_name.replace('_', ' ')} {scores[self.accuracy_name]:.2%}")


class PredictionValidation(Validation):
    """Runs `scorer.on_device(model, batch)` (a few ids or numbers per example: classes, generated tokens, tags)
    over every example of `shards` under `strategy`, gathers them to the host, where `scorer.score` scores them
    (padding rows left out) and `scorer.describe` says the scores in words."""

    def __init__(self, strategy, model, scorer, shards: ShardSet, per_replica_batch_size: int, jit_compile: bool):
        self.scorer = scorer
        self.runner = ShardRunner(strategy, shards, per_replica_batch_size, lambda seed: None, 0,
                                  lambda batch: scorer.on_device(model, batch), vocab_size=model.config.vocab_size,
                                  jit_compile=jit_compile, gather=True)

    def outputs(self) -> Dict[str, np.ndarray]:
        """The on-device outputs for every row of every step, padding rows included."""
        return self.runner.run()

    def run(self, show_progress: bool = False) -> Scores:
        return self.scorer.score(self.runner.run(show_progress))

    def describe(self, scores: Scores) -> str:
        return self.scorer.describe(scores)


@dataclass
class EvaluationResult:
    task: str  # the name of the task the model was trained for
    examples: int
    scores: Scores


def evaluate_model(config: EvaluationConfig, task: Task) -> EvaluationResult:
    """Score a saved model on shards the way its task's validation does (`task`: the plug-in of the task the model
    was trained for, mlm_tpu.tasks.plug_in_of_saved_model, which also loads it: an adapter folder on its base)."""
    from mlm_tpu.training.hardware import set_up
    from mlm_tpu.shards.reading import check_tokenizer, find_shards

    check_ranges(config)
    strategy = set_up(config.hardware)
    shards = find_shards(config.eval_dataset, task.shard_kinds, task.shard_kind, task.features(config.max_length, None),
                         "--eval-dataset")
    with strategy.scope():
        model, tokenizer = task.load_saved_model(config.model)
    check_tokenizer(shards, tokenizer, "--eval-dataset", f"the tokenizer of --model {config.model}")
    task.prepare_evaluation(config, model, tokenizer, shards)
    validation = task.validation(strategy, model, tokenizer, shards, config.per_replica_batch_size, config.seed,
                                 on_tpu=config.hardware.tpu is not None)
    log(f"Evaluating {config.model} ({task.name}) on {shards.records:,} examples of {shards.length} tokens "
        f"({len(shards.files)} shard{'s' if len(shards.files) != 1 else ''}) on {describe(strategy)}: "
        f"{validation.runner.steps} steps, seed {config.seed}")
    try:
        scores = validation.run(show_progress=True)
    except tf.errors.InvalidArgumentError as error:
        raise UserError(f"the model cannot read these shards ({error.message.splitlines()[0][:200]}); were they "
                        f"made with {config.model}'s tokenizer?") from None
    return EvaluationResult(task.name, shards.records, scores)
