"""The model card (README.md) of an adapter folder, as PEFT's `save_pretrained` starts it: `library_name: peft`
(AdapterHub's `adapter-transformers` for bottleneck adapters), the base model, then the method, how much of the
model trained, the validation figures, the loss plot, and how to load it in PyTorch and with mlm_tpu."""

import os
from types import SimpleNamespace
from typing import List

from mlm_tpu.delta.record import read_delta_record, recorded_head_settings
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.card import LOSS_PLOT
from mlm_tpu.model_folder.pooling import MODELING_FILE, pools_mean, pytorch_class_name

METHOD_NAMES = {"lora": "LoRA", "ia3": "(IA)³", "prompt": "prompt tuning", "prefix": "prefix tuning",
                "adapter": "bottleneck adapters"}


def trained_parameters(method) -> int:
    return sum(int(variable.shape.num_elements()) for variable in method.delta_variables())


def _base_line(base_model: str, record: dict, name: str) -> List[str]:
    """How the snippet builds the base: a classifier's with its head's labels (the base's config has none: PEFT
    loads the trained head into a head of that shape) and, for a mean-pooled one, as the class that comes with the
    adapter folder (model_folder/pooling.py), or with its pooling where the family's own class reads it; any other as
    its task's class."""
    head = recorded_head_settings(record)
    if not head:
        return ["from transformers import AutoModel", "",
                f'base = AutoModel.from_pretrained("{base_model}")  # the class of the base model\'s task']
    native = families.of_values({"model_type": record["model_type"]}).pools_natively
    arguments = [f"num_labels={len(head['id2label'])}", *(f"{key}={value!r}" for key, value in head.items()
                                                          if key != "classifier_pooling" or native)]
    comment = "# the base has no head for these labels: build it with them, and PEFT loads the trained head into it"
    if pools_mean(SimpleNamespace(**head), record["architecture"]) and not native:
        class_path = f"{MODELING_FILE[:-3]}.{pytorch_class_name(record['architecture'])}"
        return ["from transformers.dynamic_module_utils import get_class_from_dynamic_module", "", comment,
                "# its head reads the mean of the last hidden states (classifier_pooling 'mean'), which transformers' "
                "own class does not: the class that does comes with this folder",
                f'model_class = get_class_from_dynamic_module("{class_path}", "{name}")',
                f'base = model_class.from_pretrained(\n    "{base_model}", {", ".join(arguments)})']
    auto_class = "AutoModelFor" + record["architecture"].split("For", 1)[1]
    return [f"from transformers import {auto_class}", "", comment,
            f'base = {auto_class}.from_pretrained(\n    "{base_model}", {", ".join(arguments)})']


def _usage(method, base_model: str, name: str, record: dict) -> List[str]:
    if method.name == "adapter":
        return ["## Use it", "", "With AdapterHub's `adapters` (transformers 4.57, PyTorch):", "", "```python",
                "import adapters", "from transformers import AutoModelForSeq2SeqLM", "",
                f'model = AutoModelForSeq2SeqLM.from_pretrained("{base_model}")', "adapters.init(model)",
                f'model.load_adapter("{name}", set_active=True, use_safetensors=True)', "```", "",
                "(`use_safetensors=True`: the folder holds `adapter.safetensors`, which `adapters` reads only when "
                "asked to.)"]
    return ["## Use it", "", "With PEFT (PyTorch):", "", "```python", "from peft import PeftModel",
            *_base_line(base_model, record, name), f'model = PeftModel.from_pretrained(base, "{name}")', "```", "",
            f"or with mlm_tpu: `mlm-tpu predict ... --model {name}` (the base model is read from "
            "`base_model_name_or_path`; `--base-model` overrides it), `mlm-tpu export --merge`"
            + (" folds it into a full model." if method.name in ("lora", "ia3") else ".")]


def adapter_card_text(method, facts, base_model: str, name: str, has_loss_plot: bool, record: dict) -> str:
    from huggingface_hub import ModelCard, ModelCardData

    library = "adapter-transformers" if method.name == "adapter" else "peft"
    data = ModelCardData(library_name=library, base_model=base_model if not os.path.isabs(base_model) else None,
                         tags=["mlm_tpu", method.name, facts.model_type, facts.task, "delta-tuning"])
    trained = trained_parameters(method)
    total = facts.parameters
    lines = [f"# {name}", "", f"A {METHOD_NAMES[method.name]} adapter for `{base_model}` ({facts.task}), trained "
             "with mlm_tpu on TensorFlow: the base model's weights stayed frozen.", "", "## How it was made", "",
             f"- **Base model**: {base_model} ({facts.architecture})",
             f"- **Method**: {METHOD_NAMES[method.name]}: {trained:,} trained parameters, {trained / total:.3%} of "
             f"{total:,}" + (f", the new head's included (saved whole, PEFT's modules_to_save: "
                             f"{', '.join(record['modules_to_save'])})" if record.get("modules_to_save") else "")]
    if facts.steps:
        lines.append(f"- **Training**: {facts.steps:,} steps" + (f" (epoch {facts.epoch} saved)" if facts.epoch
                                                                   else ""))
    if facts.validation:
        lines += ["", "## Validation", "", "| " + " | ".join(facts.validation) + " |",
                  "|" + " --- |" * len(facts.validation),
                  "| " + " | ".join(f"{value:.4f}" for value in facts.validation.values()) + " |"]
    if has_loss_plot:
        lines += ["", "## Loss", "", f"![training and validation loss]({LOSS_PLOT})"]
    body = "\n".join(lines + [""] + _usage(method, base_model, name, record)) + "\n"
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}").content


def write_adapter_card(folder: str, method, facts, base_model: str, name: str, has_loss_plot: bool) -> None:
    """README.md, atomically and recorded in the folder's record (mlm_tpu/output_dir.py); what the adapter is for
    comes from the folder's mlm_tpu_delta.json."""
    from mlm_tpu.output_dir import write_file

    write_file(os.path.join(folder, "README.md"), adapter_card_text(method, facts, base_model, name, has_loss_plot,
                                                                    read_delta_record(folder)).encode())
