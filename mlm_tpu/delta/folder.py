"""The adapter folder: what PEFT's `save_pretrained` writes (`adapter_config.json`, `adapter_model.safetensors`
with PEFT's key names), or AdapterHub's files for bottleneck adapters, plus the tokenizer, a model card, the
trainer's records and `mlm_tpu_delta.json` (record.py: what predict and evaluate need to run the adapter as it
was trained). Written with numpy and safetensors, no PyTorch; through a staging folder."""

import os
from typing import Dict, Optional

from mlm_tpu.delta.record import DELTA_RECORD, delta_record, read_delta_record, recorded_head_settings
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.pooling import MODELING_FILE, modeling_text, pools_mean
from mlm_tpu.output_dir import MODEL_FOLDER, staged_output_dir, write_file, write_json


def save_adapter_folder(folder: str, method, model, tokenizer, base_model: str, facts, records: Optional[Dict],
                        name: str) -> None:
    from safetensors.numpy import save_file

    from mlm_tpu.delta.card import LOSS_PLOT, write_adapter_card

    with staged_output_dir(folder, folders=MODEL_FOLDER.folders) as staging:
        save_file(method.state_dict(model), os.path.join(staging, method.weights_file), metadata={"format": "pt"})
        write_json(os.path.join(staging, method.config_file), method.adapter_config(model, base_model))
        write_json(os.path.join(staging, DELTA_RECORD), delta_record(method, model, base_model))
        tokenizer.save_pretrained(staging)
        if pools_mean(model.config, type(model).__name__) and not families.of_model(model).pools_natively:
            # the class the card's snippet builds the base with (a family's own class reads classifier_pooling)
            write_file(os.path.join(staging, MODELING_FILE), modeling_text(type(model).__name__[2:]).encode())
        for record, payload in (records or {}).items():
            write_json(os.path.join(staging, record), payload)
        write_adapter_card(staging, method, facts, base_model, name,
                           has_loss_plot=os.path.isfile(os.path.join(folder, LOSS_PLOT)))


def load_adapter(folder: str, base_model: Optional[str] = None, flag: str = "--model"):
    """(model, method): the base model (`base_model`, else the one the folder names) with the folder's delta
    applied and its weights loaded, and the task settings it was trained with."""
    from mlm_tpu.delta import method_class
    from mlm_tpu.model_folder.checkpoint import SafetensorsWeights
    from mlm_tpu.model_folder.loading import load_model, load_with_head_settings

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
    model_class = families.of_values({"model_type": record["model_type"]}).architecture_class(record["architecture"])
    where = "--base-model" if base_model else f"{flag} {folder}'s base model"
    if record.get("head"):  # a classifier: the base with a head of the adapter's labels, its weights from the folder
        model, _ = load_with_head_settings(base, model_class, recorded_head_settings(record), where)
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
