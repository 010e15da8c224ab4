"""`--task span-corruption`: T5 pretrained from scratch with T5's own objective, on raw rows from the sharder; or a T5
checkpoint (T5, T5 1.1 or mT5: --model-name-or-path, its shape and tokenizer its own) continued with it.

The shards hold raw rows of T tokens (`python -m mlm_tpu.shard --task span-corruption`); each batch
is corrupted in tf.data (span_corruption.py), drawn afresh from (seed, batch number), into inputs
of the length the sharder was asked for and targets of noise spans, with the noise density and mean
span length its manifest records. Validation reports the loss over every target token, its
perplexity and the share of target tokens predicted right; the output folder keeps the epoch of the
lowest validation loss (without --eval-dataset: the last), ready to fine-tune with
`--task classification|generation --model-name-or-path`.
"""

from typing import Callable, Dict, Optional

from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.card import CardWords
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.shards.span_lengths import SpanLengths, lengths_at
from mlm_tpu.t5.family import TFT5FamilyForConditionalGeneration
from mlm_tpu.t5.shard_kinds import SPAN_CORRUPTION_ROWS, check_sentinels
from mlm_tpu.t5.span_corruption import SpanCorrupter
from mlm_tpu.t5.text2text_task import build_t5, t5_card_words
from mlm_tpu.training.evaluation import TokenValidation
from mlm_tpu.training.flops import ExampleCost, t5_cost
from mlm_tpu.training.task import BestMetric, Task, Validation, check_one_start, refuse_masking, run_tokenizer
from mlm_tpu.training.vocabulary_growth import Growth, check_new_embeddings, vocabulary_growth

DEFAULT_NOISE = {"noise_density": 0.15, "mean_noise_span_length": 3.0}  # T5's, for shards without a manifest


def recorded_lengths(shards: ShardSet, flag: str) -> SpanLengths:
    """The corruption the shards were cut for: the manifest's noise settings at the shards' raw length."""
    settings = (shards.manifest or {}).get("settings", {})
    noise = {name: settings.get(name, default) for name, default in DEFAULT_NOISE.items()}
    try:
        return lengths_at(shards.length, **noise)
    except ValueError as error:
        raise UserError(f"{flag}: the shards in {shards.folder} cannot be span-corrupted: {error}; re-shard them "
                        "with `python -m mlm_tpu.shard --task span-corruption`") from None


class SpanCorruptionTask(Task):
    model_class = TFT5FamilyForConditionalGeneration
    accuracy_name = "token_accuracy"
    validates_before_training = True  # a continued T5: the checkpoint scored before the first step
    grows_vocabulary = True  # continued with a --tokenizer that extends the checkpoint's (--new-embeddings)

    def __init__(self, name: str, declared=None):
        super().__init__(name, declared)
        self.lengths: Optional[SpanLengths] = None
        self.continued_from: Optional[str] = None  # --model-name-or-path, which the card names
        self.growth: Growth = {}  # the ids an extended --tokenizer adds to the checkpoint's: base pieces

    def check(self, config) -> None:
        super().check(config)
        check_one_start(config, "the T5 to continue")  # its shape is the checkpoint's
        check_new_embeddings(config)

    def load_tokenizer(self, config):
        return run_tokenizer(config)

    def features(self, max_length: Optional[int], max_target_length: Optional[int]) -> Dict[str, Optional[int]]:
        return SPAN_CORRUPTION_ROWS.features(None)  # --max-length is checked against the corrupted inputs

    def prepare(self, config, tokenizer, train: ShardSet, evaluation: Optional[ShardSet]) -> None:
        self._set_lengths(tokenizer, train, "--train-dataset")
        if config.max_length and config.max_length != self.lengths.input_length:
            raise UserError(f"--train-dataset's raw rows of {train.length} tokens make inputs of "
                            f"{self.lengths.input_length} tokens, not --max-length {config.max_length}; leave "
                            "--max-length out, or re-shard with it")
        if evaluation and recorded_lengths(evaluation, "--eval-dataset") != self.lengths:
            raise UserError("--eval-dataset was cut for another corruption (noise density, span length or raw "
                            "length) than --train-dataset; shard both with the same settings")
        if config.model_name_or_path:
            self.growth = vocabulary_growth(config.model_name_or_path, tokenizer, config.new_embeddings)

    def prepare_evaluation(self, config, model, tokenizer, shards: ShardSet) -> None:
        refuse_masking(config, f"{config.model} is a T5 model")
        self._set_lengths(tokenizer, shards, "--eval-dataset")

    def prepare_inspection(self, config, tokenizer, shards: ShardSet) -> None:
        self._set_lengths(tokenizer, shards, "--dataset")

    def _set_lengths(self, tokenizer, shards: ShardSet, flag: str) -> None:
        lengths = self.lengths = recorded_lengths(shards, flag)
        check_sentinels(tokenizer, lengths, flag, "use the T5 tokenizer the shards were made with",
                        "re-shard with fewer spans (`python -m mlm_tpu.shard --task span-corruption`)",
                        f"these rows make {lengths.input_length}-token inputs")

    def build_model(self, config, tokenizer, train: ShardSet):
        lengths = self.lengths
        self.continued_from = config.model_name_or_path
        return build_t5(config, tokenizer, {
            "task": self.name, "max_length": lengths.input_length, "max_new_tokens": lengths.target_length,
            "noise_density": lengths.noise_density, "mean_noise_span_length": lengths.mean_noise_span_length},
            self.growth)

    def make_transform(self, tokenizer) -> Callable[[int], SpanCorrupter]:
        lengths = self.lengths
        return lambda seed: SpanCorrupter.for_tokenizer(tokenizer, lengths, seed)

    def example_cost(self, model, shards: ShardSet) -> ExampleCost:
        return t5_cost(model.config, self.lengths.input_length, self.lengths.target_length)

    def card_words(self, model, tokenizer) -> CardWords:
        how = f"continued from {self.continued_from}" if self.continued_from else "pretrained from scratch"
        return t5_card_words(f"a T5 {how} by span corruption, to be fine-tuned "
                             "(`python train.py --task classification|generation --model-name-or-path ...`)",
                             "The <extra_id_0> walks in <extra_id_1> park.")

    def best_metric(self, config) -> Optional[BestMetric]:
        return BestMetric("loss", higher_is_better=False)

    def validation(self, strategy, model, tokenizer, shards: ShardSet, per_replica_batch_size: int, seed: int, *,
                   on_tpu: bool) -> Validation:
        return TokenValidation(strategy, model, shards, per_replica_batch_size, self.make_transform(tokenizer), seed,
                               accuracy_name=self.accuracy_name, tokens_name="target_tokens", jit_compile=on_tpu)
