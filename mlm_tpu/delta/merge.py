"""`mlm-tpu export --merge`: a LoRA or IA3 adapter folded into its base model's weights, written as a full model
folder (tf_model.h5, model.safetensors in PyTorch's layout, tokenizer, card) whose outputs are the adapter's.
LoRA adds scaling·A·B to each target kernel; IA3 scales a kernel's columns (keys, values) or rows (feed-forward).
Prompt and prefix tuning and bottleneck adapters add tokens or layers, so no weights of the base can hold them."""

import os

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.output_dir import BEST_RECORD, MODEL_FOLDER, check_output_dir

MERGED_FROM = "merged_from.json"  # what the full model was made of: the adapter folder, its method and base


def check_mergeable(config, record: dict) -> None:
    from mlm_tpu.delta import method_class
    from mlm_tpu.delta.card import METHOD_NAMES

    folder, method = config.model, record["delta"]
    if not method_class(method).mergeable:
        raise UserError(f"--model {folder} holds {METHOD_NAMES[method]} (--delta {method}), which adds to the model "
                        "and cannot be folded into its weights (only lora and ia3 can); use the adapter folder "
                        "itself with predict and evaluate")
    if not config.merge:
        raise UserError(f"--model {folder} is a {METHOD_NAMES[method]} adapter folder, not a model; pass --merge (and "
                        "an --output-dir) to fold it into its base model")
    if not config.output_dir or (os.path.exists(config.output_dir)
                                 and os.path.samefile(config.output_dir, folder)):
        raise UserError("--merge writes a full model beside the adapter: give a new --output-dir (not the adapter "
                        "folder)")


def export_merged(config, task) -> str:
    """Write the merged model into config.output_dir (an ExportConfig with merge); `task`: the adapter folder's
    plug-in (mlm_tpu.tasks.plug_in_of_saved_model), which loads it onto its base and says what the card says."""
    from mlm_tpu.delta.folder import load_adapter
    from mlm_tpu.delta.record import is_adapter_folder, read_delta_record
    from mlm_tpu.jsonfiles import read_json
    from mlm_tpu.model_folder.card import CardFacts
    from mlm_tpu.model_folder.saving import save_model_folder
    from mlm_tpu.tokenizer.load import load_tokenizer

    folder = config.model
    if not is_adapter_folder(folder):
        raise UserError(f"--merge folds an adapter folder (made by train.py --delta lora|ia3) into its base; --model "
                        f"{folder} is not one (no mlm_tpu_delta.json)")
    record = read_delta_record(folder)
    check_mergeable(config, record)
    tokenizer = load_tokenizer(folder, "--model")
    model, method = load_adapter(folder, config.base_model)  # what it reads is checked before where it writes
    check_output_dir(config.output_dir, MODEL_FOLDER.names(), config.overwrite)
    method.merge(model)
    base = config.base_model or record["base_model_name_or_path"]
    best_path = os.path.join(folder, BEST_RECORD)
    best = read_json(best_path, "the best-epoch record", "or delete it") if os.path.isfile(best_path) else {}
    facts = CardFacts.of_model(task, model, tokenizer, steps=best.get("step"), epoch=best.get("epoch"))
    log(f"Merged the {method.name} adapter {folder} into {base}: {model.count_params():,} parameters -> "
        f"{config.output_dir}")
    save_model_folder(config.output_dir, model, tokenizer, facts,
                      {MERGED_FROM: {"adapter": os.path.abspath(folder), "delta": method.name,
                                     "settings": record["settings"], "base_model_name_or_path": base}},
                      config.hub_model_id or os.path.basename(os.path.abspath(config.output_dir)))
    if config.hub_model_id:
        from mlm_tpu.hub import push_folder_to_hub

        log(f"Pushed to the Hub: {push_folder_to_hub(config.output_dir, config.hub_model_id, 'Upload merged model')}")
    return config.output_dir
