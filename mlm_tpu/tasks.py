"""The tasks mlm_tpu trains, called by one word each in every command, and the plug-in that runs each.

| task            | shards (`shard --task`) | model                  | validation each epoch                       |
|-----------------|-------------------------|------------------------|---------------------------------------------|
| mlm             | mlm                     | RoBERTa, from scratch  | masked-LM loss, perplexity, masked accuracy |
| electra         | mlm                     | ELECTRA generator and  | both models' loss and accuracy, replaced    |
|                 |                         | discriminator, scratch | tokens' precision and recall                |
| span-corruption | span-corruption         | T5, from scratch       | target loss, perplexity, token accuracy     |
| classification  | text2text               | T5                     | accuracy, macro F1, per-class P/R/F1        |
| generation      | text2text               | T5                     | exact match, token F1, ROUGE-1/2/L          |
| sequence-       | sequence-classification | any encoder (BERT,     | accuracy, macro F1, Matthews correlation;   |
|  classification |                         |  RoBERTa, ELECTRA...)  |  Pearson, Spearman (regression)             |
| token-          | token-classification    | any encoder            | entity precision/recall/F1 (seqeval)        |
|  classification |                         |                        |                                             |

The trainer's old `--head mlm|t5` is still accepted: mlm is --task mlm, t5 needs a T5 task.

This registry sits above the stages and the product lines: the commands (api.py, cli/) look a plug-in
up here and hand it to the trainer, evaluation, inspection or export, which never import a task.
"""

import dataclasses
import importlib
import os
from typing import Dict, Optional, Tuple

from mlm_tpu.errors import UserError

PLUG_INS: Dict[str, Tuple[str, str]] = {  # task -> (module, class) of its mlm_tpu.training.task.Task
    "mlm": ("mlm_tpu.mlm.task", "MaskedLmTask"),
    "electra": ("mlm_tpu.electra.task", "ElectraTask"),
    "span-corruption": ("mlm_tpu.t5.span_corruption_task", "SpanCorruptionTask"),
    "classification": ("mlm_tpu.t5.text2text_task", "Text2TextTask"),
    "generation": ("mlm_tpu.t5.text2text_task", "Text2TextTask"),
    "sequence-classification": ("mlm_tpu.encoder.task", "SequenceClassificationTask"),
    "token-classification": ("mlm_tpu.encoder.task", "TokenClassificationTask"),
}
TASKS = tuple(PLUG_INS)
ENCODER_TASKS = ("sequence-classification", "token-classification")
T5_TASKS = tuple(task for task in TASKS if task not in ("mlm", "electra", *ENCODER_TASKS))
HEADS = {"ElectraForPreTraining": "electra", "ForSequenceClassification": "sequence-classification",
         "ForTokenClassification": "token-classification"}  # how a saved model's architecture ends -> its task


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
    if name not in PLUG_INS:
        raise UserError(f"--task must be one of {', '.join(TASKS)}, not '{name}'")
    module, attribute = PLUG_INS[name]
    return getattr(importlib.import_module(module), attribute)(name)


def training_task(config):
    """The plug-in a training run drives: `config.task`'s, with `config.delta`'s method when delta-tuning."""
    from mlm_tpu.delta import check_delta_settings

    check_delta_settings(config)
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

    from mlm_tpu.delta.folder import is_adapter_folder, read_delta_record
    from mlm_tpu.model_folder.loading import model_type
    from mlm_tpu.model_folder.task_settings import task_settings

    if is_adapter_folder(name_or_path):
        record = read_delta_record(name_or_path)
        if record.get("model_type") != "t5":
            return task_of_architecture(record.get("architecture", "")) or "mlm"
        config = SimpleNamespace(task_specific_params=record.get("task_specific_params"))
        return (task_settings(config) or {}).get("task", "generation")
    if model_type(name_or_path) != "t5":
        return task_of_head(name_or_path) or "mlm"
    from transformers import AutoConfig

    return (task_settings(AutoConfig.from_pretrained(name_or_path)) or {}).get("task", "generation")


def task_of_head(name_or_path: str) -> Optional[str]:
    """The task of a saved model's head (from its config's architectures: HEADS), or None."""
    from mlm_tpu.model_folder.loading import architecture

    found = architecture(name_or_path)
    return task_of_architecture(found) if found else None


def task_of_architecture(architecture: str) -> Optional[str]:
    """The task of a head class (RobertaForSequenceClassification: sequence-classification; ElectraForPreTraining:
    electra), or None."""
    return next((task for suffix, task in HEADS.items() if architecture.endswith(suffix)), None)


def plug_in_of_saved_model(name_or_path: str, base_model: Optional[str] = None):
    """The plug-in of the task a saved model was trained for (evaluation, prediction, export); for an adapter folder
    (train.py --delta) one that loads it onto its base model (`base_model`, else the one the folder names)."""
    from mlm_tpu.delta.folder import is_adapter_folder

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
    from mlm_tpu.delta.folder import is_adapter_folder

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
    from mlm_tpu.delta.folder import is_adapter_folder
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
    """The plug-in of `task`, else of the first task that trains on splits of `kind` (mlm_tpu.shards.format.KINDS):
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
