"""The adapter folder: what PEFT's `save_pretrained` writes (`adapter_config.json`, `adapter_model.safetensors`
with PEFT's key names), or AdapterHub's files for bottleneck adapters, plus the tokenizer, a model card, the
trainer's records and `mlm_tpu_delta.json` (the base model's task settings, so predict and evaluate run the
adapter as it was trained). Written with numpy and safetensors, no PyTorch; through a staging folder."""

import os
from typing import Dict, Optional

from mlm_tpu.jsonfiles import read_json, write_json
from mlm_tpu.output_dir import staged_output_dir

DELTA_RECORD = "mlm_tpu_delta.json"


def save_adapter_folder(folder: str, method, model, tokenizer, base_model: str, facts, records: Optional[Dict],
                        name: str) -> None:
    from safetensors.numpy import save_file

    from mlm_tpu.delta.card import LOSS_PLOT, write_adapter_card

    with staged_output_dir(folder) as staging:
        save_file(method.state_dict(model), os.path.join(staging, method.weights_file), metadata={"format": "pt"})
        write_json(os.path.join(staging, method.config_file), method.adapter_config(model, base_model))
        write_json(os.path.join(staging, DELTA_RECORD), {
            "delta": method.name, "base_model_name_or_path": base_model, "model_type": model.config.model_type,
            "architecture": type(model).__name__.removeprefix("TF"),
            "task_specific_params": model.config.task_specific_params})
        tokenizer.save_pretrained(staging)
        for record, payload in (records or {}).items():
            write_json(os.path.join(staging, record), payload)
        write_adapter_card(staging, method, facts, base_model, name,
                           has_loss_plot=os.path.isfile(os.path.join(folder, LOSS_PLOT)))


def is_adapter_folder(path: str) -> bool:
    return os.path.isfile(os.path.join(path, DELTA_RECORD))


def read_delta_record(path: str) -> dict:
    return read_json(os.path.join(path, DELTA_RECORD), f"{path}'s {DELTA_RECORD}", "train the adapter again")
