"""The tasks mlm_tpu trains, called by one word each in every command, and the plug-in that runs each.

What each task is, in words (TaskWords: the model, its shards, how it starts, its validation), is declared here
with it: `task_table()` is the README's table of tasks and `task_help()` is `train --task`'s help, made from those
words, so neither is written by hand.

The trainer's old `--head mlm|t5` is still accepted: mlm is --task mlm, t5 needs a T5 task.

Each task is declared once here (TASKS_DECLARED): its plug-in, its settings (a dataclass in its folder, whose
fields are its flags), the kind of shards it trains on and, where its saved models' head names it, that head (class,
pipeline, PEFT's task type), from which the maps of heads below derive. TrainingConfig joins the trunk's config and
every task's and delta method's settings; `check_settings` refuses another's in one line.

This registry sits above the stages and the product lines: the commands (api.py, cli/) look a plug-in
up here and hand it to the trainer, evaluation, inspection or export, which never import a task.
"""

import dataclasses
import importlib
import os
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from mlm_tpu.configuration import joined_dataclass, refuse_others_settings
from mlm_tpu.delta import METHOD_SETTINGS
from mlm_tpu.electra.settings import ElectraSettings
from mlm_tpu.embedding.settings import SentenceEmbeddingSettings
from mlm_tpu.encoder.heads import SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION
from mlm_tpu.encoder.settings import EncoderSettings, SequenceClassificationSettings
from mlm_tpu.errors import UserError
from mlm_tpu.mlm.settings import ContinuedMaskedLmSettings
from mlm_tpu.t5.settings import ClassificationSettings, GenerationSettings, SpanCorruptionSettings
from mlm_tpu.training.config import TrunkConfig
from mlm_tpu.training.task import Head


# how a task starts, as the tables say it: a pretraining task (TaskWords.pretrains) or one that fine-tunes
STARTS = {True: "from scratch, or continuing a checkpoint (--model-name-or-path)",
          False: "fine-tuning --model-name-or-path, or from scratch"}


@dataclass(frozen=True)
class TaskWords:
    """What the table of tasks and `--task`'s help say of a task."""

    model: str  # what it trains
    shards: str  # what a row of its shards holds
    scores: str  # its validation each epoch
    pretrains: bool = False  # from scratch, or continuing a checkpoint (its plug-in's validates_before_training)
    more: str = ""  # what --help adds


@dataclass(frozen=True)
class TaskDeclaration:
    """Everything the shared code knows of a task: its plug-in (module, class of a training.task.Task), its settings
    (a dataclass of fields made with `setting()`: the flags of `train --task <name>`), the kind of shards it trains on
    (a name in SHARD_KINDS) and, where its saved models' head says which task made them, that head."""

    plug_in: Tuple[str, str]
    settings: type
    shard_kind: str
    words: TaskWords
    head: Optional[Head] = None

    @staticmethod
    def shard_kinds():
        """Every kind of split, which its plug-in hands to the reading of splits (they never import the registry)."""
        return shard_kinds()


TASKS_DECLARED: Dict[str, TaskDeclaration] = {
    "mlm": TaskDeclaration(("mlm_tpu.mlm.task", "MaskedLmTask"), ContinuedMaskedLmSettings, "mlm", TaskWords(
        "a masked LM (RoBERTa by default; any family transformers' TensorFlow classes build)",
        "packed documents", "masked-LM loss, perplexity, masked accuracy", pretrains=True)),
    "electra": TaskDeclaration(("mlm_tpu.electra.task", "ElectraTask"), ElectraSettings, "mlm", TaskWords(
        "ELECTRA's generator and discriminator", "packed documents",
        "both models' loss and accuracy, replaced-token precision/recall", pretrains=True,
        more="The output folder holds the discriminator, generator/ the generator."), Head("TFElectraForPreTraining")),
    "span-corruption": TaskDeclaration(("mlm_tpu.t5.span_corruption_task", "SpanCorruptionTask"),
                                       SpanCorruptionSettings, "span-corruption", TaskWords(
        "T5 (T5 1.1, mT5) by T5's objective", "raw rows, corrupted afresh each batch",
        "target loss, perplexity, token accuracy", pretrains=True,
        more="The noise settings are those the shards' manifest records.")),
    "classification": TaskDeclaration(("mlm_tpu.t5.text2text_task", "Text2TextTask"), ClassificationSettings,
                                      "text2text", TaskWords(
        "T5, one class token per example", "a text and its target",
        "accuracy, macro F1, per-class precision/recall/F1")),
    "generation": TaskDeclaration(("mlm_tpu.t5.text2text_task", "Text2TextTask"), GenerationSettings, "text2text",
                                  TaskWords("T5, free text (XLA-compiled generate)", "a text and its target",
                                            "exact match, token F1, ROUGE-1/2/L")),
    "sequence-classification": TaskDeclaration(
        ("mlm_tpu.encoder.task", "SequenceClassificationTask"), SequenceClassificationSettings,
        "sequence-classification", TaskWords("any encoder with a class (or score) head",
                                             "a text or a pair, and a label or score",
                                             "accuracy, macro F1, Matthews; Pearson, Spearman (scores)"),
        SEQUENCE_CLASSIFICATION),
    "token-classification": TaskDeclaration(
        ("mlm_tpu.encoder.task", "TokenClassificationTask"), EncoderSettings, "token-classification",
        TaskWords("any encoder with a tag per word", "words and their tags", "entity precision, recall, F1 (seqeval)"),
        TOKEN_CLASSIFICATION),
    "sentence-embedding": TaskDeclaration(
        ("mlm_tpu.embedding.task", "SentenceEmbeddingTask"), SentenceEmbeddingSettings, "sentence-embedding",
        TaskWords("any encoder, pooled into one vector per text (a sentence-transformers model)",
                  "a query, its positive and maybe hard negatives",
                  "each query ranked against the split's positives: accuracy@1, MRR@10",
                  more="The loss takes the whole global batch as negatives (gathered across replicas); "
                       "--grad-cache-mini-batch-size trains a batch larger than memory.")),
}
TASKS = tuple(TASKS_DECLARED)
TASK_SETTINGS = {name: declared.settings for name, declared in TASKS_DECLARED.items()}  # task -> its settings class
# One training run: the trunk's fields (what the stages read), then each task's and each delta method's settings, in
# one flat dataclass: training_args.json stays flat too, keyed by the flags' names, so a run's file replays, and a
# backup's recorded settings compare, with any version that has those flags.
TrainingConfig = joined_dataclass("TrainingConfig", TrunkConfig, (*TASK_SETTINGS.values(), *METHOD_SETTINGS.values()),
                                  "One training run: data, model, optimisation, output and hardware (TrunkConfig), and "
                                  "the settings of every task and delta method, those of others than its own at their "
                                  "defaults.")
ENCODER_TASKS = ("sequence-classification", "token-classification")
T5_TASKS = tuple(task for task in TASKS if task not in ("mlm", "electra", "sentence-embedding", *ENCODER_TASKS))
# the maps derived from the heads: how a saved model's architecture ends -> its task; a pipeline -> its task
HEADS = {declared.head.suffix: name for name, declared in TASKS_DECLARED.items() if declared.head}
PIPELINES = {declared.head.pipeline_tag: name for name, declared in TASKS_DECLARED.items()
             if declared.head and declared.head.pipeline_tag}


def task_table() -> str:
    """The table of tasks (Markdown), from their declared words: the README's."""
    rows = [f"| `{name}`{_default(name)} | `{declared.shard_kind}`: {words.shards} | {words.model} | "
            f"{STARTS[words.pretrains]} | {words.scores} |"
            for name, declared in TASKS_DECLARED.items() for words in [declared.words]]
    return "\n".join(["| `--task` | shards (`shard --task`) | model | starts | validation each epoch |",
                      "| --- | --- | --- | --- | --- |", *rows]) + "\n"


def task_help() -> str:
    """`train --task`'s help, from the tasks' declared words."""
    return " ".join(f"{name}{_default(name)}: {words.model}, {STARTS[words.pretrains]}, on `shard --task "
                    f"{declared.shard_kind}` shards ({words.shards}); scored by {words.scores}."
                    f"{' ' + words.more if words.more else ''}"
                    for name, declared in TASKS_DECLARED.items() for words in [declared.words])


def _default(name: str) -> str:
    """What follows the name of the task a run without --task trains: " (default)"."""
    default = next(field.default for field in dataclasses.fields(TrunkConfig) if field.name == "task")
    return " (default)" if name == default else ""


def task_from_head(task: Optional[str], head: Optional[str]) -> str:
    """The task meant by the flags --task and the old --head."""
    if head == "t5" and task is None:
        raise UserError(f"--head t5 needs --task: one of {', '.join(T5_TASKS)}")
    if head == "t5" and task not in T5_TASKS:
        raise UserError(f"--task {task} is not a T5 task; --head t5 trains {', '.join(T5_TASKS)}")
    if head == "mlm" and task not in (None, "mlm"):
        raise UserError(f"--head mlm is --task mlm, not --task {task}")
    return task or "mlm"


def make_task(name: str):
    """The plug-in that runs task `name` (its module is imported only when used)."""
    if name not in TASKS_DECLARED:
        raise UserError(f"--task must be one of {', '.join(TASKS)}, not '{name}'")
    module, attribute = TASKS_DECLARED[name].plug_in
    return getattr(importlib.import_module(module), attribute)(name, TASKS_DECLARED[name])


def check_settings(config) -> None:
    """Refuse, in one line naming whose it is, a setting of another task than --task, or of another delta method
    than --delta (or of one without --delta)."""
    refuse_others_settings(config, TASK_SETTINGS, config.task, "--task")
    refuse_others_settings(config, METHOD_SETTINGS, config.delta, "--delta", "a run without --delta (every weight "
                           "trains)")


def training_task(config):
    """The plug-in a training run drives: `config.task`'s, with `config.delta`'s method when delta-tuning."""
    check_settings(config)
    task = make_task(config.task)
    if config.delta is None:
        return task
    from mlm_tpu.delta.task import DeltaTask

    return DeltaTask(task, config)


def task_of_saved_model(name_or_path: str) -> str:
    """The task a saved model was trained for: a T5 model's settings say (a T5 trained elsewhere: generation); other
    models' heads say (RobertaForSequenceClassification: sequence-classification; an ELECTRA discriminator,
    ElectraForPreTraining: electra); any other model is a masked LM (loading it will say if it is not). An adapter
    folder records its base's."""
    from types import SimpleNamespace

    from mlm_tpu.delta.record import is_adapter_folder, read_delta_record
    from mlm_tpu.model_folder.configs import T5_MODEL_TYPES, model_type
    from mlm_tpu.model_folder.task_settings import task_settings

    if is_adapter_folder(name_or_path):
        record = read_delta_record(name_or_path)
        if record.get("model_type") not in T5_MODEL_TYPES:
            return task_of_architecture(record.get("architecture", "")) or "mlm"
        config = SimpleNamespace(task_specific_params=record.get("task_specific_params"))
        return (task_settings(config) or {}).get("task", "generation")
    if model_type(name_or_path) not in T5_MODEL_TYPES:
        return task_of_head(name_or_path) or "mlm"
    from transformers import AutoConfig

    return (task_settings(AutoConfig.from_pretrained(name_or_path)) or {}).get("task", "generation")


def task_of_head(name_or_path: str) -> Optional[str]:
    """The task of a saved model's head (from its config's architectures: HEADS), or None."""
    from mlm_tpu.model_folder.configs import architecture

    found = architecture(name_or_path)
    return task_of_architecture(found) if found else None


def task_of_architecture(architecture: str) -> Optional[str]:
    """The task of a head class (RobertaForSequenceClassification: sequence-classification; ElectraForPreTraining:
    electra), or None."""
    return next((task for suffix, task in HEADS.items() if architecture.endswith(suffix)), None)


def plug_in_of_saved_model(name_or_path: str, base_model: Optional[str] = None):
    """The plug-in of the task a saved model was trained for (evaluation, prediction, export); for an adapter folder
    (train.py --delta) one that loads it onto its base model (`base_model`, else the one the folder names)."""
    from mlm_tpu.delta.record import is_adapter_folder

    task = make_task(task_of_saved_model(name_or_path))
    if not is_adapter_folder(name_or_path):
        if base_model:
            raise UserError(f"--base-model is for adapter folders (made by train.py --delta); --model {name_or_path} "
                            "is a whole model: drop --base-model")
        return task
    from mlm_tpu.delta.task import SavedAdapterTask

    return SavedAdapterTask(task, name_or_path, base_model)


def saved_model_loader(name_or_path: str, base_model: Optional[str], family: str):
    """How prediction reads --model (`family`: "mlm" for fill-mask, "t5" for text2text, "encoder" for text- and
    token-classification): None (as any saved model) unless it is an adapter folder, whose plug-in loads it onto its
    base; an adapter for another family is refused, as its models are."""
    from mlm_tpu.delta.record import is_adapter_folder

    task = plug_in_of_saved_model(name_or_path, base_model)
    if not is_adapter_folder(name_or_path):
        return None
    if (task.name in ENCODER_TASKS) != (family == "encoder"):
        raise UserError(f"--model {name_or_path} is an adapter for a {task.name} model; run it with the predict "
                        "command of that task")
    if (task.name == "mlm") != (family == "mlm"):
        other = "`predict text2text`" if family == "mlm" else "`predict` (fill-mask)"
        raise UserError(f"--model {name_or_path} is an adapter for a {'T5' if family == 'mlm' else 'masked-LM'} "
                        f"model; run it with {other}")
    return lambda path, model_class: task.load_saved_model(path, model_class)


def export_saved_model(config) -> str:
    """`mlm-tpu export` (an ExportConfig): a model folder gets its PyTorch weights and card; an adapter folder with
    --merge is folded into its base (mlm_tpu/delta/merge.py)."""
    from mlm_tpu.delta.record import is_adapter_folder
    from mlm_tpu.model_folder.export import export_model

    if config.merge or is_adapter_folder(config.model):
        from mlm_tpu.delta.merge import export_merged

        return export_merged(config, plug_in_of_saved_model(config.model, config.base_model))
    if config.base_model:
        raise UserError("--base-model goes with --merge (an adapter folder's base); drop it")
    task = plug_in_of_saved_model(config.model)
    for name in task.companion_folders:  # first, so that the folder's push holds them too
        companion = os.path.join(config.model, name)
        if os.path.isfile(os.path.join(companion, "config.json")):
            export_model(dataclasses.replace(config, model=companion, hub_model_id=None, output_dir=os.path.join(
                config.output_dir, name) if config.output_dir else None), task)
    return export_model(config, task)


def plug_in_of_split(kind: str, task: Optional[str] = None):
    """The plug-in of `task`, else of the first task that trains on splits of `kind` (a name in SHARD_KINDS):
    what inspection shows a split through."""
    if task is not None:
        plug_in = make_task(task)
        if plug_in.shard_kind != kind:
            raise UserError(f"--task {task} trains on {plug_in.shard_kind} splits; --dataset is a {kind} split")
        return plug_in
    for name in TASKS:
        task = make_task(name)
        if task.shard_kind == kind:
            return task
    raise UserError(f"no task trains on splits of the kind '{kind}'")


SHARD_KINDS: Dict[str, Tuple[str, str]] = {  # kind of split -> (module, object) of its mlm_tpu.shards.kinds.ShardKind
    "mlm": ("mlm_tpu.mlm.shard_kind", "MASKED_LM"),
    "text2text": ("mlm_tpu.t5.shard_kinds", "TEXT2TEXT_ROWS"),
    "span-corruption": ("mlm_tpu.t5.shard_kinds", "SPAN_CORRUPTION_ROWS"),
    "sequence-classification": ("mlm_tpu.encoder.shard_kinds", "SEQUENCE_CLASSIFICATION_ROWS"),
    "token-classification": ("mlm_tpu.encoder.shard_kinds", "TOKEN_CLASSIFICATION_ROWS"),
    "sentence-embedding": ("mlm_tpu.embedding.shard_kinds", "SENTENCE_EMBEDDING_ROWS"),
}
# `shard --task` also takes the trainer's words for a kind of split
SHARD_KIND_ALIASES = {"classification": "text2text", "generation": "text2text", "masked-lm": "mlm"}


def shard_kinds():
    """Every kind of split, for the sharder (mlm_tpu.shards.kinds.ShardKinds; modules imported when used)."""
    from mlm_tpu.shards.kinds import ShardKinds

    return ShardKinds([getattr(importlib.import_module(module), name) for module, name in SHARD_KINDS.values()],
                      SHARD_KIND_ALIASES)
