"""`--task mlm`: RoBERTa pretrained from scratch with 🤗's masking, the reference TPU language-modeling recipe.

The trainer reads packed masked-LM shards; the masker (masking.py) masks each batch in tf.data;
validation reports the masked-LM loss over every masked token, its perplexity, and the share of
masked tokens predicted right; the output folder holds the model of the last epoch.
"""

from typing import Callable, Dict, Optional

from transformers import TFAutoModelForMaskedLM

from mlm_tpu.errors import UserError
from mlm_tpu.mlm.masking import MlmMasker
from mlm_tpu.model_folder.card import CardWords
from mlm_tpu.mlm.presets import DEFAULT_PRESET, config_for, longest_input
from mlm_tpu.shards.format import MLM, features_of
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.tokenizer.load import load_tokenizer
from mlm_tpu.training.evaluation import TokenValidation
from mlm_tpu.training.task import Task, Validation, tokenizer_source

DEFAULT_MLM_PROBABILITY = 0.15


class MaskedLmTask(Task):
    shard_kind = MLM
    model_class = TFAutoModelForMaskedLM
    accuracy_name = "masked_accuracy"
    unused_settings = ("labels", "max_target_length", "max_new_tokens", "model_name_or_path", "metric_for_best_model",
                       "generator_size_ratio", "discriminator_weight")

    def __init__(self, name: str):
        super().__init__(name)
        self.mlm_probability = DEFAULT_MLM_PROBABILITY

    def load_tokenizer(self, config):
        source = tokenizer_source(config)  # with --delta, the base model's own when --tokenizer is not given
        if not source:
            raise UserError("--tokenizer is required: the tokenizer the shards were made with")
        name, flag = source
        tokenizer = load_tokenizer(name, flag)
        _check_mask_token(tokenizer, f"{flag} {name}")
        return tokenizer

    def features(self, max_length: Optional[int], max_target_length: Optional[int]) -> Dict[str, Optional[int]]:
        return features_of(MLM, max_length)

    def prepare(self, config, tokenizer, train: ShardSet, evaluation: Optional[ShardSet]) -> None:
        self.mlm_probability = config.mlm_probability or DEFAULT_MLM_PROBABILITY

    def prepare_evaluation(self, config, model, tokenizer, shards: ShardSet) -> None:
        self.mlm_probability = config.mlm_probability or DEFAULT_MLM_PROBABILITY
        _check_mask_token(tokenizer, f"--model {config.model}")
        if shards.length > longest_input(model.config):
            raise UserError(f"--eval-dataset holds {shards.length}-token examples, longer than {config.model} takes "
                            f"({longest_input(model.config)} tokens); evaluate on shards made with a smaller "
                            "--max-length")

    def prepare_inspection(self, config, tokenizer, shards: ShardSet) -> None:
        self.mlm_probability = config.mlm_probability or DEFAULT_MLM_PROBABILITY
        _check_mask_token(tokenizer, f"--tokenizer {config.tokenizer}")

    def build_model(self, config, tokenizer, train: ShardSet):
        return TFAutoModelForMaskedLM.from_config(config_for(config.model_config or DEFAULT_PRESET, tokenizer,
                                                             train.length, config.config_overrides))

    def make_transform(self, tokenizer) -> Callable[[int], MlmMasker]:
        probability = self.mlm_probability
        return lambda seed: MlmMasker(tokenizer, probability, seed)

    def card_words(self, model, tokenizer) -> CardWords:
        # the tokenizer's own mask token (the 🤗 TPU example's card wrote <mask> for a [MASK] tokenizer)
        return CardWords("fill-mask", "a masked language model pretrained from scratch",
                         f"Paris is the {tokenizer.mask_token or '[MASK]'} of France.", "python -m mlm_tpu.predict")

    def validation(self, strategy, model, tokenizer, shards: ShardSet, per_replica_batch_size: int, seed: int, *,
                   on_tpu: bool) -> Validation:
        return TokenValidation(strategy, model, shards, per_replica_batch_size, self.make_transform(tokenizer), seed,
                               accuracy_name=self.accuracy_name, tokens_name="masked_tokens", jit_compile=on_tpu)


def _check_mask_token(tokenizer, what: str) -> None:
    if tokenizer.mask_token_id is None:
        raise UserError(f"{what} has no mask token, so it cannot train or score a masked LM (is it a T5 tokenizer? "
                        "T5 pretrains with --task span-corruption); make one with `python -m mlm_tpu.tokenizer train`")
