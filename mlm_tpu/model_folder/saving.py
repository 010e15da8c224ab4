"""Writing a model folder that both ecosystems load: transformers 4's TensorFlow classes (`tf_model.h5`, through
`save_pretrained`) and transformers 5's PyTorch ones (`model.safetensors` in PyTorch's layout; a mean-pooled
classifier's class and sentence-transformers' files too: pooling.py), with the tokenizer, a model card (README.md),
and mlm_tpu's records beside them.

The folder is written through a staging folder (output_dir.py), so a kill mid-save leaves the
previous save intact, and other entries of the output folder (backup/, logs/, the user's files) are
kept; a file of a name the save writes that mlm_tpu did not write is never replaced.
"""

import os
from typing import Dict, Optional

from mlm_tpu.model_folder.card import FACTS_FILE, LOSS_PLOT, CardFacts, write_model_card
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.configs import longest_input
from mlm_tpu.model_folder.pooling import MODELING_FILE
from mlm_tpu.output_dir import MODEL_FOLDER, check_output_dir, staged_output_dir, write_json


def check_training_output_dir(folder: str) -> None:
    """Before a training run writes anything: refuse an --output-dir holding files (or backup/, logs/) of the names
    the run writes that mlm_tpu did not write there. Its own files from an earlier start are fine: it goes on."""
    check_output_dir(folder, (*MODEL_FOLDER.names(), FACTS_FILE), overwrite=True)


def save_model_folder(folder: str, model, tokenizer, facts: CardFacts, records: Optional[Dict[str, dict]] = None,
                      name: Optional[str] = None) -> None:
    """Save model (both layouts), tokenizer and card into `folder`, with `records` (file name -> JSON) beside them;
    `name` is what the card calls the model (its Hub repo, else the folder's name)."""
    with staged_output_dir(folder, folders=MODEL_FOLDER.folders) as staging:
        write_model_files(staging, folder, model, tokenizer, facts, records, name)


def write_model_files(staging: str, folder: str, model, tokenizer, facts: CardFacts,
                      records: Optional[Dict[str, dict]] = None, name: Optional[str] = None) -> None:
    """What save_model_folder saves, written into `staging`, the staging folder of `folder` (or of a sub-folder
    published with it: ELECTRA's generator/)."""
    # its weights in both layouts, its config
    families.of_model(model).save(model, staging, facts.max_length or longest_input(model.config))
    tokenizer.save_pretrained(staging)
    for record, payload in (records or {}).items():
        write_json(os.path.join(staging, record), payload)
    write_model_card(staging, facts, name or os.path.basename(os.path.abspath(folder)),
                     has_loss_plot=os.path.isfile(os.path.join(folder, LOSS_PLOT)))
    drop_foreign_auto_map(staging)


def drop_foreign_auto_map(folder: str) -> None:
    """The `auto_map` of the folder's config.json kept to mlm_tpu's own mean-pooled class (pooling.py), the only code
    its folders hold: a checkpoint's own entries (`modeling_evil.EvilModel`, a Hub repository's module) name code
    the folder does not hold, or that no one here has read, which PyTorch's `trust_remote_code=True` would fetch and
    run, so a folder continued, fine-tuned or exported from it never carries them."""
    from mlm_tpu.jsonfiles import read_json

    path = os.path.join(folder, "config.json")
    values = read_json(path, "the saved config.json", "save the model again") if os.path.isfile(path) else None
    if isinstance(values, dict) and has_foreign_auto_map(values):
        kept = own_auto_map(values["auto_map"])
        write_json(path, {**{key: value for key, value in values.items() if key != "auto_map"},
                          **({"auto_map": kept} if kept else {})})


def has_foreign_auto_map(values: dict) -> bool:
    """Whether a config.json's values name code in `auto_map` other than mlm_tpu's own."""
    auto_map = values.get("auto_map") or {}
    return own_auto_map(auto_map) != auto_map


def own_auto_map(auto_map: dict) -> dict:
    """The entries of an `auto_map` that name the modeling file mlm_tpu writes beside a mean-pooled classifier."""
    own = f"{os.path.splitext(MODELING_FILE)[0]}."
    return {auto_class: target for auto_class, target in auto_map.items()
            if isinstance(target, str) and target.startswith(own)}
