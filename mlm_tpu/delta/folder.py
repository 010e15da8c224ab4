"""The adapter folder: what PEFT's `save_pretrained` writes (`adapter_config.json`, `adapter_model.safetensors`
with PEFT's key names), or AdapterHub's files for bottleneck adapters, plus the tokenizer, a model card, the
trainer's records and `mlm_tpu_delta.json` (the base model's task settings, so predict and evaluate run the
adapter as it was trained; for a classifier, the modules saved whole and the labels its head was built for, which
the base's own config lacks). Written with numpy and safetensors, no PyTorch; through a staging folder."""

import dataclasses
import os
from typing import Dict, Optional

from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json, write_json
from mlm_tpu.output_dir import MODEL_FOLDER, staged_output_dir

DELTA_RECORD = "mlm_tpu_delta.json"
HEAD_SETTINGS = ("id2label", "label2id", "problem_type")  # a classifier's config settings its base lacks


def head_settings(config) -> Dict[str, object]:
    """The config settings a classifier's head was built with (num_labels follows from id2label)."""
    return {name: getattr(config, name) for name in HEAD_SETTINGS if getattr(config, name, None) is not None}


def recorded_head_settings(record: dict) -> Dict[str, object]:
    """The head settings of an adapter folder's record, id2label's keys as numbers again (JSON made them text)."""
    settings = dict(record.get("head") or {})
    if "id2label" in settings:
        settings["id2label"] = {int(key): value for key, value in settings["id2label"].items()}
    return settings


def save_adapter_folder(folder: str, method, model, tokenizer, base_model: str, facts, records: Optional[Dict],
                        name: str) -> None:
    from safetensors.numpy import save_file

    from mlm_tpu.delta.card import LOSS_PLOT, write_adapter_card

    with staged_output_dir(folder, folders=MODEL_FOLDER.folders) as staging:
        save_file(method.state_dict(model), os.path.join(staging, method.weights_file), metadata={"format": "pt"})
        write_json(os.path.join(staging, method.config_file), method.adapter_config(model, base_model))
        write_json(os.path.join(staging, DELTA_RECORD), {
            "delta": method.name, "settings": dataclasses.asdict(method.settings),
            "base_model_name_or_path": base_model, "model_type": model.config.model_type,
            "architecture": type(model).__name__.removeprefix("TF"),
            "task_specific_params": model.config.task_specific_params,
            **({"modules_to_save": list(method.modules_to_save), "head": head_settings(model.config)}
               if method.modules_to_save else {})})
        tokenizer.save_pretrained(staging)
        for record, payload in (records or {}).items():
            write_json(os.path.join(staging, record), payload)
        write_adapter_card(staging, method, facts, base_model, name,
                           has_loss_plot=os.path.isfile(os.path.join(folder, LOSS_PLOT)))


def is_adapter_folder(path: str) -> bool:
    return os.path.isfile(os.path.join(path, DELTA_RECORD))


def read_delta_record(path: str) -> dict:
    return read_json(os.path.join(path, DELTA_RECORD), f"{path}'s {DELTA_RECORD}", "train the adapter again")


def load_adapter(folder: str, base_model: Optional[str] = None, flag: str = "--model"):
    """(model, method): the base model (`base_model`, else the one the folder names) with the folder's delta
    applied and its weights loaded, and the task settings it was trained with."""
    import transformers

    from mlm_tpu.delta import method_class
    from mlm_tpu.model_folder.loading import SafetensorsWeights, load_model, load_with_new_head, read_model_config

    record = read_delta_record(folder)
    base = base_model or record["base_model_name_or_path"]
    if not base_model and os.path.isabs(base) and not os.path.isdir(base):
        raise UserError(f"{flag} {folder} is an adapter for the base model {base}, which is not there; give the "
                        "base model with --base-model")
    method = method_class(record["delta"]).from_record(record["settings"], record.get("modules_to_save", ()))
    weights = os.path.join(folder, method.weights_file)
    if not os.path.isfile(weights):
        raise UserError(f"{flag} {folder} has no {method.weights_file}; train the adapter again")
    state = dict(SafetensorsWeights(weights, f"{flag} {folder}", "copy the adapter folder again, or train it again"))
    model_class, where = getattr(transformers, "TF" + record["architecture"]), \
        "--base-model" if base_model else f"{flag} {folder}'s base model"
    if record.get("head"):  # a classifier: the base with a head of the adapter's labels, its weights from the folder
        config = read_model_config(base, where)
        config.update(recorded_head_settings(record))
        model, _ = load_with_new_head(base, model_class, config, where)
    else:
        model = load_model(base, model_class, where)
    model.build_in_name_scope()
    method.apply(model)
    try:
        method.load_state_dict(model, state)
    except (KeyError, ValueError) as error:
        raise UserError(f"{flag} {folder}: its {method.weights_file} does not fit the base model {base} "
                        f"({error}); give the base it was trained on with --base-model") from None
    if record.get("task_specific_params"):
        model.config.task_specific_params = record["task_specific_params"]
    return model, method
