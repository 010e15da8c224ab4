"""The checks made on a model folder before it is read (a path that holds no model, a folder copied without its
weights or cut short, a checkpoint TensorFlow would read wrongly, a model of the wrong type, an encoder missing
weights), each one error line that says what to do, where transformers would fail later or say less."""

import glob
import os
from typing import Optional, Tuple

from mlm_tpu.errors import UserError, reason_of
from mlm_tpu.hub import hub_file, is_local
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.pytorch import TF_POSITION_PADDING_IDX

WEIGHT_FILES = ("tf_model*.h5", "model*.safetensors", "pytorch_model*.bin")  # what save_pretrained writes, sharded too
# config.json fields that make transformers 4.56 to 5.2's PyTorch `from_pretrained` download and import a Hub kernel
# repository's code, trust_remote_code=False or not, wherever the `kernels` package is installed (CVE-2026-4372): set,
# the internal one; naming a Hub repository ("owner/name"), the public one
KERNEL_FIELDS = ("_attn_implementation_internal", "attn_implementation")


def check_model_folder(name_or_path: str, flag: str) -> None:
    """A local path must be a saved model; anything else is taken for a Hub name; neither may name code to run."""
    if is_local(name_or_path) and not os.path.isfile(os.path.join(name_or_path, "config.json")):
        if _is_unsaved_run(name_or_path):
            raise UserError(f"{flag} {name_or_path} is the output folder of a training run that has saved no model yet "
                            "(no config.json: it stopped before its first save); run its command again to resume it "
                            "and let it save, or give a folder that holds a saved model")
        raise UserError(f"{flag} {name_or_path}: not a saved model (no config.json there); give the --output-dir "
                        "of `python train.py`, or any save_pretrained folder")
    check_config_names_no_code(name_or_path, flag)


def check_config_names_no_code(name_or_path: str, flag: str) -> None:
    """A saved model's config (a folder's, a config.json file, a Hub model's: the cached or downloaded file) that
    names code to run (KERNEL_FIELDS) is refused before anything reads it: mlm_tpu's TensorFlow classes would ignore
    the field, but a folder saved from it, or the same folder loaded in PyTorch, would run that code."""
    path = (os.path.join(name_or_path, "config.json") if os.path.isdir(name_or_path) else
            name_or_path if os.path.isfile(name_or_path) else None if is_local(name_or_path) else
            hub_file(name_or_path, "config.json"))
    found = next(_kernel_fields((_json_values(path) if path else None) or {}), None)
    if found:
        field, value = found
        raise UserError(f"{flag} {name_or_path}: its config.json sets {field} to {value!r}, which makes transformers "
                        "before 5.3 download and run a Hub repository's code when PyTorch loads the model "
                        "(CVE-2026-4372); mlm_tpu reads no config that names code: delete the field from config.json "
                        "if you trust the rest of the folder, or use another model")


def _kernel_fields(values: dict):
    """(field, value) of each KERNEL_FIELDS entry set in a config's values, its sub-configs' too (an encoder-decoder's,
    a multimodal model's)."""
    internal, public = KERNEL_FIELDS
    if values.get(internal) is not None:
        yield internal, values[internal]
    named = values.get(public)  # one implementation, or one per sub-config
    named_each = named.values() if isinstance(named, dict) else [named]
    if any(isinstance(value, str) and "/" in value for value in named_each):
        yield public, named
    for value in values.values():
        if isinstance(value, dict):
            yield from _kernel_fields(value)


def _json_values(path: str) -> Optional[dict]:
    """A config.json's values; None when it cannot be read as a JSON object (its loading says why)."""
    import json

    try:
        with open(path, encoding="utf-8") as file:
            values = json.load(file)
    except (OSError, ValueError):
        return None
    return values if isinstance(values, dict) else None


def _is_unsaved_run(folder: str) -> bool:
    """Whether `folder` is a training run's output folder that holds no model yet: what a run writes before its first
    save (its settings, its backups, its logs) is there."""
    from mlm_tpu.output_dir import RUN_INFO_FILE

    return os.path.isdir(folder) and any(os.path.exists(os.path.join(folder, name))
                                         for name in (RUN_INFO_FILE, "backup", "logs"))


def check_weights_there(folder: str, flag: str) -> None:
    """A local folder with a config but no weights (copied without its large files) named as such: transformers
    says only which files it looked for."""
    if os.path.isdir(folder) and not any(glob.glob(os.path.join(folder, pattern)) for pattern in WEIGHT_FILES):
        raise UserError(f"{flag} {folder} holds no weights (no tf_model.h5, model.safetensors or pytorch_model.bin "
                        "beside its config.json); copy the folder again with its weights")


def check_tensorflow_weights(folder: str, flag: str) -> None:
    """A local tf_model.h5 that HDF5 cannot open (cut short by a copy or a full disk) named as such: transformers
    says only "Unable to load weights from h5 file", and suggests from_pt=True."""
    import h5py

    path = os.path.join(folder, "tf_model.h5")
    if not os.path.isfile(path):
        return
    try:
        h5py.File(path, "r").close()
    except OSError as error:
        raise UserError(f"{flag} {folder}: its tf_model.h5 cannot be read ({reason_of(error)}; it may have been cut "
                        "short); copy the model folder again") from None


def check_position_padding(config, where: str) -> None:
    """A RoBERTa-family PyTorch checkpoint whose pad_token_id is not the padding index transformers' TensorFlow class
    numbers positions from (TF_POSITION_PADDING_IDX, hard-coded): its PyTorch class numbers them from pad_token_id,
    so every token would read another position's embedding in TensorFlow; refused in one line."""
    padding_idx = TF_POSITION_PADDING_IDX.get(config.model_type)
    if padding_idx is None or config.pad_token_id in (None, padding_idx):
        return
    shift = abs(config.pad_token_id - padding_idx)
    raise UserError(f"{where} is a {config.model_type} checkpoint whose pad_token_id is {config.pad_token_id}: its "
                    f"PyTorch class numbers positions from that id, transformers' TensorFlow class always from "
                    f"{padding_idx}, so every token would read a position embedding {shift} row(s) off; mlm_tpu "
                    f"reads PyTorch {config.model_type} checkpoints that pad with id {padding_idx} (as roberta-base "
                    "and xlm-roberta-base): give one of those")


def refuse_missing_encoder_weights(model, new_weights, where: str) -> None:
    """New weights may be a head's (a classifier's, a masked LM's; the pooler a BERT classifier puts on its encoder,
    which a masked LM has no use for and saves without, as transformers counts it): any other weight of the encoder
    is one error line."""
    prefix = f"{model.base_model_prefix}."
    encoder = [name for name in new_weights if name.startswith(prefix) and not name.startswith(f"{prefix}pooler.")]
    if encoder:
        raise UserError(f"{where} lacks {len(encoder)} weights of the {families.model_type(model.config)} encoder "
                        f"({', '.join(encoder[:3])}{', ...' if len(encoder) > 3 else ''}); is it a checkpoint of this "
                        "model?")


def model_types(model_class) -> Tuple[str, ...]:
    """The model types `model_class` can be built as: its config's, or every one an Auto class maps."""
    mapping = getattr(model_class, "_model_mapping", None)
    if mapping is None:
        return (model_class.config_class.model_type,)
    return tuple(config_class.model_type for config_class in mapping.keys())


def check_model_type(base_config, model_class, where: str, needed_by: str) -> None:
    """Refuse a saved model (its config) of a type `model_class` cannot be (a T5 task given a RoBERTa: transformers
    would build a T5 from the RoBERTa's config and fail at the first step); `where` names it ("--model-name-or-path
    runs/x"), `needed_by` says who needs it ("--task generation")."""
    found = base_config.model_type
    types = model_types(model_class)
    if found in types or families.of_values({"model_type": found}).builds(families.head_of_class(model_class)):
        return
    wanted = (f"a {types[0]} base" if len(types) == 1 else
              f"a base of one of the types {', '.join(types[:5])}{', ...' if len(types) > 5 else ''}")
    raise UserError(f"{needed_by} needs {wanted}; {where} is a {found} model: give such a base, or the --task of a "
                    f"{found} model")
