"""`--task sequence-classification | token-classification`: an encoder (--model-name-or-path: one mlm_tpu
pretrained, or any BERT, RoBERTa, ELECTRA... folder or Hub name; or --model-config from scratch) fine-tuned with
a head on labelled shards (`shard --task sequence-classification | token-classification`).

The label names come from the training split's manifest, in its order: they are the head's ids, written into the
saved config (`id2label`, `label2id`, `problem_type`). The validation split's names are matched to them by name;
a label training never saw is one error line. The model computes its own loss (transformers' heads: cross-entropy,
or mean squared error for a regression; -100 labels take none). Each epoch, validation scores the model
(validation.py, metrics.py) and the output folder keeps the best epoch (--metric-for-best-model).
"""

from typing import Dict, List, Optional

import tensorflow as tf

from mlm_tpu.console import log
from mlm_tpu.encoder.metrics import CLASSIFICATION_SCORES, LOWER_IS_BETTER, REGRESSION_SCORES, TOKEN_SCORES
from mlm_tpu.encoder.models import (Labels, check_encoder, encoder_from_scratch, model_inputs, pretrained_encoder,
                                    saved_config)
from mlm_tpu.encoder.settings import check_kept_epoch
from mlm_tpu.encoder.validation import SequenceScorer, TokenScorer
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.card import CardWords
from mlm_tpu.model_folder.pooling import (CLASSIFIER_POOLINGS, CLS, MEAN, POOLING_WORDS, SEQUENCE_CLASSIFIER,
                                          classifier_pooling)
from mlm_tpu.model_folder.task_settings import ENCODER_PARAMS, record_task_settings, task_settings
from mlm_tpu.shards.mixture import members_of
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.training.evaluation import PredictionValidation
from mlm_tpu.training.task import (BestMetric, Task, Validation, check_length, check_one_start, refuse_masking,
                                   run_tokenizer)

DEFAULT_PRESET = "base"


def split_labels(shards: ShardSet, flag: str, token_level: bool) -> Labels:
    """The labels a split's manifest names (its ids are their positions)."""
    settings = (shards.manifest or {}).get("settings", {})
    if "labels" not in settings:
        kind = "token" if token_level else "sequence"
        raise UserError(f"{flag}: the shards in {shards.folder} have no manifest.json naming their labels; make them "
                        f"with `python -m mlm_tpu.shard --task {kind}-classification`")
    return Labels(tuple(settings["labels"]), None if token_level else settings.get("problem_type"))


def label_remap(split: Labels, model: Labels, flag: str) -> List[int]:
    """The model's id of each of a split's label ids; a label the model does not know is one error line."""
    if split.regression != model.regression:
        what = "scores (regression)" if split.regression else "classes"
        raise UserError(f"{flag} holds {what}, but the model predicts "
                        f"{'scores' if model.regression else 'classes'}; shard both splits with the same "
                        "--problem-type")
    if model.regression:
        return []
    ids = {name: index for index, name in enumerate(model.names)}
    unknown = [name for name in split.names if name not in ids]
    if unknown:
        raise UserError(f"{flag} has labels that training never saw ({', '.join(unknown[:5])}): the model cannot "
                        f"predict them (it knows {', '.join(model.names[:10])}); add training examples of them, or "
                        "leave those rows out of validation")
    return [ids[name] for name in split.names]


class EncoderTask(Task):
    """What the two encoder tasks share: labels from the shards, an encoder with a head, validation each epoch."""

    token_level: bool
    accuracy_name = "accuracy"
    token_features = ("input_ids",)  # its labels are classes, which inspection shows by name
    widget_text: str
    predict_command: str

    def __init__(self, name: str, declared=None):
        super().__init__(name, declared)
        self.labels: Optional[Labels] = None  # what the head predicts, once the shards (or the model) say
        self.remap: List[int] = []  # the validation split's label ids -> the model's
        self.inputs: List[str] = ["input_ids", "attention_mask"]  # what the model is called with
        self.settings: Dict[str, object] = {}

    model_class = Task.head_class

    @property
    def pipeline_tag(self) -> str:
        return self.declared.head.pipeline_tag

    def score_names(self) -> Dict[str, str]:
        """The validation scores, in words."""
        raise NotImplementedError

    def make_scorer(self):
        raise NotImplementedError

    def check_base(self, base_config, where: str) -> None:
        check_encoder(base_config, self.head_class, where)

    def check(self, config) -> None:
        super().check(config)
        check_one_start(config, "a pretrained encoder")
        check_kept_epoch(config.keep_epoch, config.metric_for_best_model)

    def load_tokenizer(self, config):
        return run_tokenizer(config)

    def features(self, max_length: Optional[int], max_target_length: Optional[int]) -> Dict[str, Optional[int]]:
        return self.split_kind.features(max_length)

    def prepare(self, config, tokenizer, train: ShardSet, evaluation: Optional[ShardSet]) -> None:
        self.labels = split_labels(train, "--train-dataset", self.token_level)
        for member in members_of(train):
            if split_labels(member, "--train-dataset", self.token_level) != self.labels:
                raise UserError(f"the --train-dataset folders name other labels ({member.folder}: "
                                f"{', '.join(split_labels(member, '', self.token_level).names[:10])}); shard them "
                                f"with the same --labels ({', '.join(self.labels.names[:10])})")
        if not self.labels.regression and len(self.labels.names) < (1 if self.token_level else 2):
            raise UserError(f"--train-dataset holds examples of one label only ({', '.join(self.labels.names)}): "
                            "there is nothing to tell apart; shard more data, or name every label with --labels")
        if evaluation:
            self.remap = label_remap(split_labels(evaluation, "--eval-dataset", self.token_level), self.labels,
                                     "--eval-dataset")
        if config.metric_for_best_model:
            self.check_best_metric(config.metric_for_best_model)
        settings = train.manifest["settings"]
        self.settings = {"task": self.name, "max_length": train.length, "input_column": settings.get("input_column"),
                         "pair_column": settings.get("pair_column"), "base_model": config.model_name_or_path}
        what = "scores (regression)" if self.labels.regression else \
            f"{len(self.labels.names)} {'tags' if self.token_level else 'classes'}: {', '.join(self.labels.names[:20])}"
        log(f"Predicting {what}")

    def build_model(self, config, tokenizer, train: ShardSet):
        pooling = self.pooling(config)
        if config.model_name_or_path:
            model, self.new_weights = pretrained_encoder(config.model_name_or_path, self.head_class, self.labels,
                                                         pooling=pooling)
            if len(tokenizer) > model.config.vocab_size:
                raise UserError(f"the tokenizer has {len(tokenizer)} tokens but {config.model_name_or_path} only "
                                f"{model.config.vocab_size} embeddings; shard with the model's own tokenizer")
        else:
            model = encoder_from_scratch(config.model_config or DEFAULT_PRESET, tokenizer, train.length,
                                         config.config_overrides, self.head_class, self.labels, pooling)
        _check_length(model.config, train.length, "--train-dataset", config.model_name_or_path or "the model")
        record_task_settings(model.config, self.settings, ENCODER_PARAMS)
        self.inputs = model_inputs(model.config, tokenizer)
        if "token_type_ids" in self.inputs:
            log(f"The model reads token_type_ids: its tokenizer makes them, and it embeds "
                f"{model.config.type_vocab_size} types (a pair's second text is type 1)")
        return model

    def pooling(self, config) -> Optional[str]:
        """What a sequence classifier's head reads (model_folder/pooling.py); None for a head of every token."""
        return None

    def training_outputs(self, model, batch: Dict, training: bool):
        return model(**{name: batch[name] for name in self.inputs}, labels=batch["labels"], training=training)

    def prepare_evaluation(self, config, model, tokenizer, shards: ShardSet) -> None:
        refuse_masking(config, f"{config.model} is a {self.name} model")
        self.labels = Labels.of_config(model.config, self.token_level)
        self.remap = label_remap(split_labels(shards, "--eval-dataset", self.token_level), self.labels,
                                 "--eval-dataset")
        _check_length(model.config, shards.length, "--eval-dataset", config.model)
        self.inputs = model_inputs(model.config, tokenizer)

    def validation(self, strategy, model, tokenizer, shards: ShardSet, per_replica_batch_size: int, seed: int, *,
                   on_tpu: bool) -> Validation:
        return PredictionValidation(strategy, model, self.make_scorer(), shards, per_replica_batch_size,
                                    jit_compile=on_tpu)

    def check_best_metric(self, name: str) -> None:
        """--metric-for-best-model names this task's scores: one, or several whose mean decides (not the loss, which
        falls as they rise)."""
        scores = self.score_names()
        names = BestMetric(name).names
        wrong = [score for score in names if score not in scores]
        if wrong:
            raise UserError(f"--metric-for-best-model for this {self.name} task is one of {', '.join(scores)} (or "
                            f"several, comma-separated: their mean), not {wrong[0]}")
        if len(names) > 1 and any(score in LOWER_IS_BETTER for score in names):
            raise UserError(f"--metric-for-best-model {name}: the loss falls as the other scores rise, so it cannot "
                            "be averaged with them; give the loss alone, or the scores without it")

    def best_metric(self, config) -> Optional[BestMetric]:
        """What picks the epoch the folder keeps; None with --keep-epoch last (the trainer then saves every epoch)."""
        if config.keep_epoch == "last":
            return None
        name = config.metric_for_best_model or self.make_scorer().best_metric
        return BestMetric(name, higher_is_better=name not in LOWER_IS_BETTER)  # the loss is never averaged

    def card_words(self, model, tokenizer) -> CardWords:
        base = (task_settings(model.config, ENCODER_PARAMS) or {}).get("base_model")
        self.labels = Labels.of_config(model.config, self.token_level)
        origin = f"on the encoder of {base}" if base else "from scratch"
        return CardWords(self.pipeline_tag, f"{self.summary(self.labels)}, {origin}", self.widget_text,
                         self.predict_command, tuple(self.labels.names), dict(self.score_names()))

    def summary(self, labels: Labels) -> str:
        raise NotImplementedError


def _check_length(model_config, length: int, flag: str, model: str) -> None:
    check_length(model_config, length, model, f"{flag} holds {length}-token examples", "shard with")


class SequenceClassificationTask(EncoderTask):
    token_level = False
    widget_text = "I loved this film: the acting, the music, everything."
    predict_command = "python -m mlm_tpu.predict text-classification"

    def score_names(self) -> Dict[str, str]:
        return REGRESSION_SCORES if self.labels.regression else CLASSIFICATION_SCORES

    def make_scorer(self):
        return SequenceScorer(self.labels, self.remap, self.inputs)

    def check(self, config) -> None:
        super().check(config)
        if config.classifier_pooling not in (None, *CLASSIFIER_POOLINGS):
            raise UserError(f"--classifier-pooling must be {' or '.join(CLASSIFIER_POOLINGS)}, not "
                            f"'{config.classifier_pooling}'")

    def pooling(self, config) -> str:
        """--classifier-pooling, by default that of a classifier fine-tuned again (a mean-pooled one stays so), else
        cls; the log says when it is the mean."""
        base = saved_config(config.model_name_or_path, "--model-name-or-path") if config.model_name_or_path else None
        pooling = config.classifier_pooling or (classifier_pooling(base) if base else CLS)
        if pooling == MEAN:
            log("The head reads the mean of the last hidden states over the real tokens (--classifier-pooling mean)")
        was = classifier_pooling(base) if base is not None and any(
            name.endswith(SEQUENCE_CLASSIFIER) for name in base.architectures or ()) else None
        if was and was != pooling:
            log(f"{config.model_name_or_path} is a classifier whose head read {POOLING_WORDS[was]} (classifier_pooling "
                f"{was}); with --classifier-pooling {pooling} its head now reads {POOLING_WORDS[pooling]} instead, and "
                "the saved folder says so")
        return pooling

    def training_hits(self, logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        """Examples right: the class (argmax), or for a regression the score rounded to the label's whole number."""
        if logits.shape[-1] == 1:
            return tf.equal(tf.round(tf.cast(logits, tf.float32)), tf.round(tf.cast(labels, tf.float32)))
        return tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32)[:, None], tf.cast(labels, tf.int32))

    def prepare(self, config, tokenizer, train: ShardSet, evaluation: Optional[ShardSet]) -> None:
        super().prepare(config, tokenizer, train, evaluation)
        self.accuracy_name = "rounded_accuracy" if self.labels.regression else "accuracy"

    def summary(self, labels: Labels) -> str:
        if labels.regression:
            return "a text regression model (one score per text)"
        return f"a text classifier ({len(labels.names)} classes)"


class TokenClassificationTask(EncoderTask):
    token_level = True
    accuracy_name = "tag_accuracy"
    widget_text = "My name is Clara and I live in Berkeley, California."
    predict_command = "python -m mlm_tpu.predict token-classification"

    def score_names(self) -> Dict[str, str]:
        return TOKEN_SCORES

    def make_scorer(self):
        return TokenScorer(self.labels, self.remap, self.inputs)

    def training_hits(self, logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        return tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), tf.cast(labels, tf.int32))

    def summary(self, labels: Labels) -> str:
        return f"a token classifier ({len(labels.names)} tags)"
