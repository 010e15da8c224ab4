"""`--task classification|generation`: T5 (T5, T5 1.1 or mT5: t5/family.py) fine-tuned, or trained from scratch,
on text-to-text shards.

The model computes its own loss from the labels (-100 where there is no target token), shifting
them right into decoder inputs itself. Each epoch, validation predicts on every eval example:
class ids for classification (one decoder step, argmax over the label tokens on the device),
generated text for generation (XLA-compiled `generate`), and the output folder keeps the epoch
with the best score. What the task is, its labels and its lengths are written into the saved
config (`task_specific_params`), where `python -m mlm_tpu.predict text2text` finds them.
"""

from typing import Dict, List, Optional

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.card import CardWords
from mlm_tpu.model_folder.loading import load_model
from mlm_tpu.model_folder.task_settings import record_task_settings, task_settings
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.t5.classification import ClassificationScorer, LabelSet
from mlm_tpu.t5.family import TFT5FamilyForConditionalGeneration
from mlm_tpu.t5.evaluation import can_compile_per_replica
from mlm_tpu.t5.shard_kinds import TEXT2TEXT_ROWS
from mlm_tpu.t5.generation import GENERATION_SCORES, GenerationScorer
from mlm_tpu.t5.packed import packed_outputs
from mlm_tpu.t5.presets import DEFAULT_PRESET, config_for
from mlm_tpu.training.evaluation import PredictionValidation
from mlm_tpu.training.flops import ExampleCost, t5_cost
from mlm_tpu.training.task import BestMetric, Task, Validation, check_one_start, refuse_masking, run_tokenizer
from mlm_tpu.training.vocabulary_growth import Growth, grown

BEST_METRICS = {"classification": ("accuracy", "macro_f1"), "generation": GENERATION_SCORES}


def build_t5(config, tokenizer, settings: Dict[str, object], growth: Optional[Growth] = None):
    """A T5 from --model-name-or-path's weights (with `growth`, vocabulary_growth: its shared embeddings and lm_head
    grown to the extended tokenizer by --new-embeddings), or from scratch with --model-config; `settings` go into its
    config."""
    if config.model_name_or_path:
        model = load_model(config.model_name_or_path, TFT5FamilyForConditionalGeneration, "--model-name-or-path")
        if growth:
            model = grown(model, config.model_name_or_path, growth, config.new_embeddings, config.seed)
        if len(tokenizer) > model.config.vocab_size:
            raise UserError(f"the tokenizer has {len(tokenizer)} tokens but {config.model_name_or_path} only "
                            f"{model.config.vocab_size} embeddings; use the model's own tokenizer")
    else:
        model = TFT5FamilyForConditionalGeneration.from_config(config_for(config.model_config or DEFAULT_PRESET,
                                                                          tokenizer, config.config_overrides))
    record_task_settings(model.config, settings)
    return model


def make_scorer(settings: Dict[str, object], tokenizer, default_max_new_tokens: int):
    """The scorer for these settings: classification over their labels, or generation."""
    if settings["task"] == "classification":
        return ClassificationScorer(LabelSet.from_names(settings["labels"], tokenizer))
    return GenerationScorer(tokenizer, settings.get("max_new_tokens") or default_max_new_tokens)


def t5_card_words(summary: str, widget_text: str, labels=()) -> CardWords:
    """What a T5 model's card says: it runs in the text2text-generation pipeline and `predict text2text`."""
    return CardWords("text2text-generation", summary, widget_text, "python -m mlm_tpu.predict text2text", tuple(labels))


class Text2TextTask(Task):
    model_class = TFT5FamilyForConditionalGeneration
    accuracy_name = "token_accuracy"
    packs = True

    def __init__(self, name: str, declared=None):
        super().__init__(name, declared)
        self.scorer = None  # ClassificationScorer or GenerationScorer, once the shards are known
        self.settings: Dict[str, object] = {}

    def check(self, config) -> None:
        super().check(config)
        if config.metric_for_best_model and config.metric_for_best_model not in BEST_METRICS[self.name]:
            raise UserError(f"--metric-for-best-model for {self.name} is one of {', '.join(BEST_METRICS[self.name])}, "
                            f"not {config.metric_for_best_model}")
        check_one_start(config, "pretrained weights")

    def load_tokenizer(self, config):
        return run_tokenizer(config)

    def features(self, max_length: Optional[int], max_target_length: Optional[int]) -> Dict[str, Optional[int]]:
        return TEXT2TEXT_ROWS.features(max_length, max_target_length)

    def prepare(self, config, tokenizer, train: ShardSet, evaluation: Optional[ShardSet]) -> None:
        manifest = train.manifest or {}
        self.settings = {"task": self.name, "source_prefix": manifest.get("settings", {}).get("source_prefix", ""),
                         "max_length": train.features["input_ids"]}
        if self.name == "classification":
            labels = LabelSet.from_names(_label_names(config.labels, train, evaluation), tokenizer)
            self.settings.update(labels.as_config())
            log(f"Classes: {', '.join(f'{name} (token {token})' for name, token in zip(labels.names, labels.token_ids))}")
        else:
            self.settings["max_new_tokens"] = config.max_new_tokens or train.features["labels"]
        self.scorer = make_scorer(self.settings, tokenizer, train.features["labels"])

    def prepare_evaluation(self, config, model, tokenizer, shards: ShardSet) -> None:
        refuse_masking(config, f"{config.model} is a T5 model")
        settings = task_settings(model.config) or {"task": "generation"}
        self.scorer = make_scorer(settings, tokenizer, shards.features["labels"])

    def training_outputs(self, model, batch, training: bool):
        if "input_segments" in batch:  # --pack
            return packed_outputs(model, batch, training)
        return model(**batch, training=training)

    def build_model(self, config, tokenizer, train: ShardSet):
        return build_t5(config, tokenizer, self.settings)

    def example_cost(self, model, shards: ShardSet) -> ExampleCost:
        return t5_cost(model.config, shards.features["input_ids"], shards.features["labels"])

    def validation(self, strategy, model, tokenizer, shards: ShardSet, per_replica_batch_size: int, seed: int, *,
                   on_tpu: bool) -> Validation:
        jit_compile = on_tpu or (self.name == "generation" and can_compile_per_replica(strategy))
        return PredictionValidation(strategy, model, self.scorer, shards, per_replica_batch_size, jit_compile)

    def card_words(self, model, tokenizer) -> CardWords:
        settings = task_settings(model.config) or {}
        prefix = settings.get("source_prefix") or ""
        summary = "a text-to-text classifier" if self.name == "classification" else "a text-to-text generator"
        return t5_card_words(summary, f"{prefix} Write your input here.".strip(), settings.get("labels") or ())

    def best_metric(self, config) -> Optional[BestMetric]:
        return BestMetric(config.metric_for_best_model or self.scorer.best_metric)


def _label_names(given: Optional[List[str]], train: ShardSet, evaluation: Optional[ShardSet]) -> List[str]:
    """--labels, else the targets the training shards' manifest counted; every target the manifests count
    must be among them."""
    counted = {flag: (shards.manifest or {}).get("target_counts") if shards else None
               for flag, shards in (("--train-dataset", train), ("--eval-dataset", evaluation))}
    names = list(given or sorted(counted["--train-dataset"] or ()))
    if not names:
        raise UserError("--task classification needs the class names: pass --labels (e.g. --labels none low high); "
                        "the training shards' manifest does not list their targets")
    for flag, counts in counted.items():
        unknown = sorted(set(counts or ()) - set(names))
        if unknown:
            raise UserError(f"{flag} has targets that are not among the labels {names}: {', '.join(unknown[:5])}; "
                            "pass --labels with every class")
    return names
