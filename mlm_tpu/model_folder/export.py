"""Turning a TensorFlow model folder into one the whole ecosystem loads (`python -m mlm_tpu.export`, `export_model`).

The folder (ours, or one of the 🤗 TPU example's: `tf_model.h5` + `config.json` + tokenizer files)
is copied with its weights added in PyTorch's layout (`model.safetensors`; a mean-pooled classifier's class and
sentence-transformers' files too: pooling.py) and a model card, into
`--output-dir` or in place, through a staging folder so nothing is left half-written; then pushed
to the Hub when asked. By the rule of output folders (output_dir.py), it replaces only files an
earlier mlm_tpu command wrote, and only with --overwrite. The card says at least what the folder's
own card said: the trainer keeps what its card says (card.FACTS_FILE), and an earlier version's
trainer card, which no export could write again, is kept as it is. A ModernBERT folder (a hand-written family's,
saved in transformers 5's layout already) is exported as it is: its weights checked by loading them, its card
refreshed.
"""

import os
import shutil
from dataclasses import dataclass
from types import SimpleNamespace
from typing import List, Optional

from mlm_tpu.configuration import check_ranges
from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.card import (FACTS_FILE, LOSS_PLOT, CardFacts, DescribesItsModels, recorded_card_facts,
                                      write_model_card)
from mlm_tpu.model_folder.checks import check_config_names_no_code
from mlm_tpu.model_folder.configs import longest_input
from mlm_tpu.model_folder.pooling import (MEAN_POOLED_FILES, POOLING_FOLDER, name_pytorch_class, pools_mean,
                                          write_pytorch_pooling_files)
from mlm_tpu.model_folder.pytorch import align_positions_with_pytorch, save_pytorch_weights
from mlm_tpu.model_folder.saving import drop_foreign_auto_map, has_foreign_auto_map
from mlm_tpu.output_dir import BEST_RECORD, CARD_PHRASE, RUN_INFO_FILE, check_output_dir, staged_output_dir

TF_WEIGHTS = ("tf_model.h5", "tf_model.h5.index.json")
WEIGHTS = ("model*.safetensors", "model.safetensors.index.json")  # what save_pytorch_weights may write


@dataclass
class ExportConfig:
    """What `python -m mlm_tpu.export` does."""

    model: str  # a TensorFlow save_pretrained folder
    output_dir: Optional[str] = None  # where the exported folder goes (None: into `model` itself)
    hub_model_id: Optional[str] = None  # push the exported folder to this Hub repo
    overwrite: bool = False  # replace what an earlier mlm_tpu command wrote there (never a file it did not write)
    merge: bool = False  # `model` is a LoRA or IA3 adapter folder: fold it into its base, write the full model
    base_model: Optional[str] = None  # with merge: the adapter's base (None: the one its adapter_config.json names)


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


def load_native_model(folder: str, family, class_name: str):
    """A hand-written family's model (`class_name`: its config's architecture), every weight of it read."""
    from mlm_tpu.model_folder.loading import load_model

    return load_model(folder, family.model_class(families.head_of_class(class_name)))


def check_same_model(output_dir: str, config: dict) -> None:
    """An --output-dir holding a model already must hold this one (an earlier export of it): files of two models
    would mix."""
    theirs = os.path.join(output_dir, "config.json")
    if os.path.isfile(theirs) and _identity(read_json(theirs, f"{output_dir}'s config.json",
                                                      "choose another --output-dir")) != _identity(config):
        raise UserError(f"--output-dir {output_dir} holds another model (its config.json differs); choose an empty "
                        "or new folder")


def _identity(config: dict) -> dict:
    """A config without what an export may change in it (the pad id of the positions) or that tells no model apart."""
    return {key: value for key, value in config.items()
            if key not in ("pad_token_id", "transformers_version", "_name_or_path")}


def files_written(folder: str, output_dir: str, config: dict, native: bool) -> List[str]:
    """The names (fnmatch patterns) the export writes in `output_dir`: the copies, the weights (none for a `native`
    folder, which holds them in PyTorch's layout already), the card, and config.json where it changes."""
    card = [] if keeps_earlier_card(folder) else ["README.md", FACTS_FILE]
    values = SimpleNamespace(**{"model_type": None, "pad_token_id": None, **config})  # a copy, to ask
    pooling = list(MEAN_POOLED_FILES) if not native and pools_mean(values, values.architectures[0]) else []
    weights = [] if native else list(WEIGHTS)
    if os.path.exists(output_dir) and os.path.samefile(folder, output_dir):
        aligned = not native and align_positions_with_pytorch(values)
        changes_config = aligned or pooling or has_foreign_auto_map(config)
        return [*weights, *card, *pooling, *(["config.json"] if changes_config else [])]
    return [*copied_files(folder), *weights, *card, *pooling, "config.json"]


def copied_files(folder: str) -> List[str]:
    """What an export into another folder copies: the files, not a run's backup/ and logs/ or hidden records."""
    return sorted(name for name in os.listdir(folder)
                  if not name.startswith(".") and os.path.isfile(os.path.join(folder, name)))


def keeps_earlier_card(folder: str) -> bool:
    """Whether the folder's card was written by an earlier mlm_tpu, which kept no facts beside it: a trainer's says
    more (validation figures, corpus, loss plot) than an export could find out, so it is kept as it is."""
    card = os.path.join(folder, "README.md")
    if not os.path.isfile(card) or os.path.isfile(os.path.join(folder, FACTS_FILE)):
        return False
    with open(card, encoding="utf-8", errors="replace") as stream:
        return CARD_PHRASE in stream.read()


def card_facts(folder: str, model, tokenizer, task: DescribesItsModels) -> CardFacts:
    """What a folder says of itself: the facts its card said, when mlm_tpu kept them; else its model and mlm_tpu's
    records when it was trained here (training_args.json, best_model.json, the training shards' manifest)."""
    recorded = recorded_card_facts(folder)
    if recorded:
        return recorded
    info_path, best_path = os.path.join(folder, RUN_INFO_FILE), os.path.join(folder, BEST_RECORD)
    info = read_json(info_path, "the run's settings", "or delete it") if os.path.isfile(info_path) else {}
    best = read_json(best_path, "the best-epoch record", "or delete it") if os.path.isfile(best_path) else {}
    run = info.get("run", info) if isinstance(info, dict) else {}  # mlm_tpu 0.2 kept these at the top level
    return CardFacts.of_model(task, model, tokenizer, steps=best.get("step") or
                              run.get("total_steps"), epoch=best.get("epoch"),
                              global_batch_size=run.get("global_batch_size"), max_length=run.get("max_length"),
                              hardware=run.get("strategy"), corpus=_corpus_of(info))


def _corpus_of(info) -> Optional[dict]:
    """The corpus of the run's training shards, from their manifest while it is where the run read it."""
    shards = info.get("train_dataset") if isinstance(info, dict) else None
    manifest = os.path.join(shards, "manifest.json") if isinstance(shards, str) else ""
    try:
        recorded = read_json(manifest, "the training shards' manifest", "") if os.path.isfile(manifest) else None
    except UserError:  # damaged since: the card says the corpus is not recorded
        return None
    return recorded.get("settings", {}).get("corpus") if isinstance(recorded, dict) else None


def export_model(config: ExportConfig, task: DescribesItsModels) -> str:
    """Write the exported folder; return where it is (`task`: the plug-in of the task the model was trained for,
    mlm_tpu.tasks.plug_in_of_saved_model, which says what the card says of the model)."""
    from mlm_tpu.tokenizer.load import load_tokenizer

    check_ranges(config)
    folder = config.model
    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise UserError(f"--model {folder} is not a model folder (no config.json); give a save_pretrained folder such "
                        "as `python train.py`'s --output-dir")
    check_config_names_no_code(folder, "--model")
    model_config = read_json(os.path.join(folder, "config.json"), f"--model {folder}'s config.json",
                             "give a save_pretrained folder")
    family = families.of_values(model_config) if isinstance(model_config, dict) else families.GENERIC
    native = family is not families.GENERIC  # a hand-written family's folder: transformers 5's layout already
    if not native and not any(os.path.isfile(os.path.join(folder, name)) for name in TF_WEIGHTS):
        raise UserError(f"--model {folder} holds no TensorFlow weights (tf_model.h5); export reads TensorFlow folders")
    class_name = (model_config.get("architectures") or [""])[0] if native else pytorch_class_name(model_config, folder)
    tokenizer = load_tokenizer(folder, "--model")
    # what it reads is checked before where it writes (a native folder's weights too: every one there, of its shape)
    model = load_native_model(folder, family, class_name) if native else load_tensorflow_model(folder, class_name)
    output_dir = config.output_dir or folder
    in_place = os.path.exists(output_dir) and os.path.samefile(folder, output_dir)
    if not in_place and os.path.isdir(output_dir):
        check_same_model(output_dir, model_config)
    # in place, the folder is the one the user gave as --model
    where, instead = (None, None) if config.output_dir else (f"--model {folder}", "give an --output-dir for a copy")
    check_output_dir(output_dir, files_written(folder, output_dir, model_config, native), config.overwrite,
                     where=where, instead=instead)
    log(f"Exporting {folder} ({class_name}, {model.count_params():,} parameters) -> {output_dir}")
    keep_card = keeps_earlier_card(folder)
    with staged_output_dir(output_dir, folders=(POOLING_FOLDER,)) as staging:
        for name in [] if in_place else copied_files(folder):
            shutil.copy2(os.path.join(folder, name), os.path.join(staging, name))
        facts = card_facts(folder, model, tokenizer, task)
        written = (_native_files(folder, staging, model_config, in_place) if native else
                   _pytorch_files(staging, model, class_name, model_config, facts))
        if not keep_card:
            write_model_card(staging, facts, config.hub_model_id or os.path.basename(os.path.abspath(output_dir)),
                             has_loss_plot=os.path.isfile(os.path.join(folder, LOSS_PLOT)))
    card = "; its model card, by an earlier mlm_tpu, is kept" if keep_card else " and README.md (model card)"
    weights = f"{', '.join(written)} (PyTorch layout)" if written else "no weights (its own are PyTorch's)"
    log(f"Wrote {weights}{card} in {output_dir}")
    if config.hub_model_id:
        from mlm_tpu.hub import push_folder_to_hub

        log(f"Pushed to the Hub: {push_folder_to_hub(output_dir, config.hub_model_id, 'Upload model exported with mlm_tpu')}")
    return output_dir


def _pytorch_files(staging: str, model, class_name: str, model_config: dict, facts: CardFacts) -> List[str]:
    """A TensorFlow folder's PyTorch files, written into `staging`: its weights in PyTorch's layout, a mean-pooled
    classifier's class and files, and config.json where PyTorch needs it changed; returns what was written."""
    aligned = align_positions_with_pytorch(model.config)
    if name_pytorch_class(model.config, class_name) or aligned or has_foreign_auto_map(model_config):
        model.config.to_json_file(os.path.join(staging, "config.json"))
        drop_foreign_auto_map(staging)
    if aligned:
        log(f"config.json: pad_token_id set to {model.config.pad_token_id}, the padding index TensorFlow's "
            f"{class_name} numbers positions from, so PyTorch computes the same positions")
    return save_pytorch_weights(model, staging) + write_pytorch_pooling_files(
        staging, model.config, class_name, facts.max_length or longest_input(model.config))


def _native_files(folder: str, staging: str, model_config: dict, in_place: bool) -> List[str]:
    """A hand-written family's folder (ModernBERT's) holds transformers 5's layout already: its files are kept as they
    are (checked: the model loaded from them), config.json only rid of a foreign auto_map; nothing is written."""
    if has_foreign_auto_map(model_config):
        if in_place:
            shutil.copy2(os.path.join(folder, "config.json"), os.path.join(staging, "config.json"))
        drop_foreign_auto_map(staging)
    log(f"{folder} is already in transformers 5's layout (config.json, model.safetensors), which PyTorch loads as it "
        "is: its files are exported as they are, their weights checked by loading them")
    return []
