"""`python train.py --head t5`: fine-tune (or train from scratch) TFT5ForConditionalGeneration on text-to-text shards.

The model computes its own loss from the labels (-100 where there is no target token), shifting
them right into decoder inputs itself. Each epoch, validation predicts on every eval example:
class ids for `--task classification` (one decoder step, argmax over the label tokens on the
device), generated text for `--task generation` (XLA-compiled `generate`), and the output folder
keeps the epoch with the best score. What the task is, its labels and its lengths are written
into the saved config (`task_specific_params`), where `python -m mlm_tpu.predict text2text` finds them.
"""

import argparse
from typing import Dict, List, Optional

from transformers import TFT5ForConditionalGeneration

from mlm_tpu.cli import log
from mlm_tpu.data import ShardSet, text2text_features
from mlm_tpu.errors import UserError
from mlm_tpu.heads import Head
from mlm_tpu.model_config import t5_config_for
from mlm_tpu.pretrained import load_model
from mlm_tpu.t5.classification import LabelSet
from mlm_tpu.t5.evaluation import Text2TextEvaluator, Text2TextValidation, can_compile_per_replica
from mlm_tpu.t5.generation import GENERATION_SCORES
from mlm_tpu.t5.tasks import TASK_PARAMS, make_task
from mlm_tpu.tokenizer.load import load_tokenizer

DEFAULT_PRESET = "t5-small"
BEST_METRICS = {"classification": ("accuracy", "macro_f1"), "generation": GENERATION_SCORES}


class T5Head(Head):
    flags_not_for_this_head = {"--mlm-probability": "mlm_probability"}
    accuracy_name = "token_accuracy"

    def __init__(self):
        self.task = None  # ClassificationTask or GenerationTask, once the shards are known
        self.settings: Dict[str, object] = {}

    def check_arguments(self, args: argparse.Namespace) -> None:
        super().check_arguments(args)
        if args.task is None:
            raise UserError("--head t5 needs --task classification or --task generation")
        if args.labels and args.task != "classification":
            raise UserError("--labels is for --task classification")
        if args.max_new_tokens is not None and args.task != "generation":
            raise UserError("--max-new-tokens is for --task generation; classification takes one decoder step")
        if args.max_new_tokens is not None and args.max_new_tokens < 1:
            raise UserError(f"--max-new-tokens must be at least 1, not {args.max_new_tokens}")
        if args.metric_for_best_model and args.metric_for_best_model not in BEST_METRICS[args.task]:
            raise UserError(f"--metric-for-best-model for {args.task} is one of {', '.join(BEST_METRICS[args.task])}, "
                            f"not {args.metric_for_best_model}")
        if args.model_name_or_path and args.model_config:
            raise UserError("give --model-name-or-path (pretrained weights) or --model-config (from scratch), not both")

    def load_tokenizer(self, args: argparse.Namespace):
        if args.tokenizer:
            return load_tokenizer(args.tokenizer)
        if args.model_name_or_path:
            return load_tokenizer(args.model_name_or_path, "--model-name-or-path")
        raise UserError("--head t5 needs --tokenizer (the one the shards were made with), or --model-name-or-path "
                        "whose tokenizer made them")

    def features(self, args: argparse.Namespace) -> Dict[str, Optional[int]]:
        return text2text_features(args.max_length, args.max_target_length)

    def prepare(self, args: argparse.Namespace, tokenizer, train: ShardSet, evaluation: Optional[ShardSet]) -> None:
        manifest = train.manifest or {}
        self.settings = {"task": args.task, "source_prefix": manifest.get("settings", {}).get("source_prefix", ""),
                         "max_length": train.features["input_ids"]}
        if args.task == "classification":
            labels = LabelSet.from_names(_label_names(args.labels, train, evaluation), tokenizer)
            self.settings.update(labels.as_config())
            log(f"Classes: {', '.join(f'{name} (token {token})' for name, token in zip(labels.names, labels.token_ids))}")
        else:
            self.settings["max_new_tokens"] = args.max_new_tokens or train.features["labels"]
        self.task = make_task(self.settings, tokenizer, train.features["labels"])

    def build_model(self, args: argparse.Namespace, tokenizer, train: ShardSet):
        if args.model_name_or_path:
            model = load_model(args.model_name_or_path, TFT5ForConditionalGeneration, "--model-name-or-path")
            if len(tokenizer) > model.config.vocab_size:
                raise UserError(f"the tokenizer has {len(tokenizer)} tokens but {args.model_name_or_path} only "
                                f"{model.config.vocab_size} embeddings; use the model's own tokenizer")
        else:
            model = TFT5ForConditionalGeneration.from_config(t5_config_for(args.model_config or DEFAULT_PRESET,
                                                                           tokenizer))
        model.config.task_specific_params = {**(model.config.task_specific_params or {}), TASK_PARAMS: self.settings}
        return model

    def validation_callbacks(self, args: argparse.Namespace, strategy, model, evaluation: ShardSet) -> List:
        jit_compile = args.tpu is not None or (args.task == "generation" and can_compile_per_replica(strategy))
        evaluator = Text2TextEvaluator(strategy, model, self.task, evaluation, args.per_replica_batch_size, jit_compile)
        return [Text2TextValidation(evaluator)]

    def best_metric(self, args: argparse.Namespace) -> Optional[str]:
        return f"val_{args.metric_for_best_model or self.task.best_metric}"


def _label_names(given: Optional[List[str]], train: ShardSet, evaluation: Optional[ShardSet]) -> List[str]:
    """--labels, else the targets the training shards' manifest counted; every target the manifests count
    must be among them."""
    counted = {flag: (shards.manifest or {}).get("target_counts") if shards else None
               for flag, shards in (("--train-dataset", train), ("--eval-dataset", evaluation))}
    names = given or sorted(counted["--train-dataset"] or ())
    if not names:
        raise UserError("--task classification needs the class names: pass --labels (e.g. --labels none low high); "
                        "the training shards' manifest does not list their targets")
    for flag, counts in counted.items():
        unknown = sorted(set(counts or ()) - set(names))
        if unknown:
            raise UserError(f"{flag} has targets that are not among the labels {names}: {', '.join(unknown[:5])}; "
                            "pass --labels with every class")
    return names
