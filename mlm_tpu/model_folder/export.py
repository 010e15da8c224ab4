"""Turning a TensorFlow model folder into one the whole ecosystem loads (`python -m mlm_tpu.export`, `export_model`).

The folder (ours, or one of the 🤗 TPU example's: `tf_model.h5` + `config.json` + tokenizer files)
is copied with its weights added in PyTorch's layout (`model.safetensors`) and a model card, into
`--output-dir` or in place, through a staging folder so nothing is left half-written; then pushed
to the Hub when asked.
"""

import os
import shutil
from dataclasses import dataclass
from typing import Optional

from mlm_tpu.configuration import check_ranges
from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json
from mlm_tpu.model_folder.card import CardFacts, DescribesItsModels, write_model_card
from mlm_tpu.model_folder.pytorch import align_positions_with_pytorch, save_pytorch_weights
from mlm_tpu.output_dir import staged_output_dir

TF_WEIGHTS = ("tf_model.h5", "tf_model.h5.index.json")
NOT_COPIED = ("backup", "logs")  # a training run's resumable backup and TensorBoard logs stay where they are


@dataclass
class ExportConfig:
    """What `python -m mlm_tpu.export` does."""

    model: str  # a TensorFlow save_pretrained folder
    output_dir: Optional[str] = None  # where the exported folder goes (None: into `model` itself)
    hub_model_id: Optional[str] = None  # push the exported folder to this Hub repo


def pytorch_class_name(config: dict, folder: str) -> str:
    """The transformers PyTorch class of the folder's model (from config.json), checked to exist."""
    import importlib

    modeling_auto = importlib.import_module("transformers.models.auto.modeling_auto")  # the names only: no torch
    model_type = config.get("model_type")
    architectures = config.get("architectures") or []
    known = {name for attribute, mapping in vars(modeling_auto).items() if attribute.endswith("_MAPPING_NAMES")
             for names in mapping.values() for name in ((names,) if isinstance(names, str) else names)}
    if not architectures:
        raise UserError(f"--model {folder}: its config.json names no architecture (model class); add "
                        "\"architectures\": [\"RobertaForMaskedLM\"] or the like")
    name = architectures[0].removeprefix("TF")
    if name not in known:
        raise UserError(f"--model {folder}: a {model_type} model ({architectures[0]}), for which transformers has no "
                        "PyTorch class, so no PyTorch checkpoint can be made of it")
    return name


def load_tensorflow_model(folder: str, class_name: str):
    import transformers

    from mlm_tpu.model_folder.loading import load_model

    model_class = getattr(transformers, f"TF{class_name}", None)
    if model_class is None:
        raise UserError(f"--model {folder}: transformers has no TensorFlow class TF{class_name} to read its weights")
    return load_model(folder, model_class)


def check_output_dir(source: str, output_dir: str, config: dict) -> None:
    """The output folder may be new, empty, the model folder itself, or an earlier export of the same model."""
    if not os.path.exists(output_dir) or os.path.samefile(source, output_dir):
        return
    if not os.path.isdir(output_dir):
        raise UserError(f"--output-dir {output_dir} is a file; choose a folder")
    theirs = os.path.join(output_dir, "config.json")
    if os.path.isfile(theirs) and _identity(read_json(theirs, f"{output_dir}'s config.json",
                                                      "choose another --output-dir")) != _identity(config):
        raise UserError(f"--output-dir {output_dir} holds another model (its config.json differs); choose an empty "
                        "or new folder")


def _identity(config: dict) -> dict:
    """A config without what an export may change in it (the pad id of the positions) or that tells no model apart."""
    return {key: value for key, value in config.items()
            if key not in ("pad_token_id", "transformers_version", "_name_or_path")}


def card_facts(folder: str, model, tokenizer, task: DescribesItsModels) -> CardFacts:
    """What a folder says of itself: its model, and mlm_tpu's records when it was trained here."""
    info_path, best_path = os.path.join(folder, "training_args.json"), os.path.join(folder, "best_model.json")
    info = read_json(info_path, "the run's settings", "or delete it") if os.path.isfile(info_path) else {}
    best = read_json(best_path, "the best-epoch record", "or delete it") if os.path.isfile(best_path) else {}
    run = info.get("run", info) if isinstance(info, dict) else {}  # mlm_tpu 0.2 kept these at the top level
    return CardFacts.of_model(task, model, tokenizer, steps=best.get("step") or
                              run.get("total_steps"), epoch=best.get("epoch"),
                              global_batch_size=run.get("global_batch_size"), max_length=run.get("max_length"),
                              hardware=run.get("strategy"))


def export_model(config: ExportConfig, task: DescribesItsModels) -> str:
    """Write the exported folder; return where it is (`task`: the plug-in of the task the model was trained for,
    mlm_tpu.tasks.plug_in_of_saved_model, which says what the card says of the model)."""
    from mlm_tpu.tokenizer.load import load_tokenizer

    check_ranges(config)
    folder = config.model
    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise UserError(f"--model {folder} is not a model folder (no config.json); give a save_pretrained folder such "
                        "as `python train.py`'s --output-dir")
    model_config = read_json(os.path.join(folder, "config.json"), f"--model {folder}'s config.json",
                             "give a save_pretrained folder")
    if not any(os.path.isfile(os.path.join(folder, name)) for name in TF_WEIGHTS):
        raise UserError(f"--model {folder} holds no TensorFlow weights (tf_model.h5); export reads TensorFlow folders")
    class_name = pytorch_class_name(model_config, folder)
    output_dir = config.output_dir or folder
    check_output_dir(folder, output_dir, model_config)
    tokenizer = load_tokenizer(folder, "--model")
    model = load_tensorflow_model(folder, class_name)
    log(f"Exporting {folder} ({class_name}, {model.count_params():,} parameters) -> {output_dir}")
    with staged_output_dir(output_dir) as staging:
        if os.path.abspath(output_dir) != os.path.abspath(folder):
            for name in sorted(os.listdir(folder)):
                source = os.path.join(folder, name)
                if name not in NOT_COPIED and not name.startswith(".") and os.path.isfile(source):
                    shutil.copy2(source, os.path.join(staging, name))
        if align_positions_with_pytorch(model.config):
            model.config.to_json_file(os.path.join(staging, "config.json"))
            log(f"config.json: pad_token_id set to {model.config.pad_token_id}, the padding index TensorFlow's "
                f"{class_name} numbers positions from, so PyTorch computes the same positions")
        written = save_pytorch_weights(model, staging)
        write_model_card(staging, card_facts(folder, model, tokenizer, task),
                         config.hub_model_id or os.path.basename(os.path.abspath(output_dir)))
    log(f"Wrote {', '.join(written)} (PyTorch layout) and README.md (model card) in {output_dir}")
    if config.hub_model_id:
        from mlm_tpu.hub import push_folder_to_hub

        log(f"Pushed to the Hub: {push_folder_to_hub(output_dir, config.hub_model_id, 'Upload model exported with mlm_tpu')}")
    return output_dir
