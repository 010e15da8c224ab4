"""What an ELECTRA run's output folder holds: the discriminator as the folder's own model (ElectraForPreTraining:
`tf_model.h5`, `model.safetensors`, config, tokenizer, card), and the generator in `generator/`, a model folder of
its own (ElectraForMaskedLM, with the same tokenizer: `mlm-tpu predict --model <folder>/generator` fills masks).
The shared embeddings are saved into both."""

import os
from typing import Dict, Optional

from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json
from mlm_tpu.model_folder.card import CardFacts
from mlm_tpu.model_folder.loading import GENERATOR_FOLDER
from mlm_tpu.model_folder.saving import write_model_files
from mlm_tpu.output_dir import MODEL_FOLDER, staged_output_dir

RUN_INFO_FILE = "training_args.json"  # the trainer's record of the run, beside the model


def save_electra_folders(folder: str, model, tokenizer, facts: CardFacts, generator_facts: CardFacts,
                         records: Optional[Dict[str, dict]], name: str) -> None:
    """The discriminator into `folder` and the generator into `folder`/generator/, both written into one staging
    folder before either is published (output_dir.py): a kill while saving leaves both from the previous save, never
    one save apart."""
    generator_folder = os.path.join(folder, GENERATOR_FOLDER)
    with staged_output_dir(folder, folders=MODEL_FOLDER.folders) as staging:
        write_model_files(staging, folder, model.discriminator, tokenizer, facts, records, name)
        os.mkdir(os.path.join(staging, GENERATOR_FOLDER))
        write_model_files(os.path.join(staging, GENERATOR_FOLDER), generator_folder, model.generator, tokenizer,
                          generator_facts, None, f"{name}/{GENERATOR_FOLDER}")


def load_electra_folders(folder: str, flag: str = "--model"):
    """(ElectraPretrainer, tokenizer) of an ELECTRA output folder: the discriminator and its generator/, with the
    loss weight the run trained with (its training_args.json, else the paper's)."""
    from transformers import TFElectraForMaskedLM, TFElectraForPreTraining

    from mlm_tpu.electra.model import DEFAULT_DISCRIMINATOR_WEIGHT, ElectraPretrainer
    from mlm_tpu.model_folder.loading import load_model, load_pretrained

    discriminator, tokenizer = load_pretrained(folder, TFElectraForPreTraining, flag)
    generator_folder = os.path.join(folder, GENERATOR_FOLDER)
    if not os.path.isfile(os.path.join(generator_folder, "config.json")):
        raise UserError(f"{flag} {folder} holds an ELECTRA discriminator but no {GENERATOR_FOLDER}/ beside it, whose "
                        "samples its scores need; give the --output-dir of `python train.py --task electra`")
    generator = load_model(generator_folder, TFElectraForMaskedLM, flag)
    run_info = os.path.join(folder, RUN_INFO_FILE)
    recorded = read_json(run_info, "the run's settings", "or delete it") if os.path.isfile(run_info) else {}
    weight = (recorded.get("discriminator_weight") if isinstance(recorded, dict) else None)
    return ElectraPretrainer(generator, discriminator, weight or DEFAULT_DISCRIMINATOR_WEIGHT), tokenizer
