"""What an ELECTRA run's output folder holds: the discriminator as the folder's own model (ElectraForPreTraining:
`tf_model.h5`, `model.safetensors`, config, tokenizer, card), and the generator in `generator/`, a model folder of
its own (ElectraForMaskedLM, with the same tokenizer: `mlm-tpu predict --model <folder>/generator` fills masks).
The shared embeddings are saved into both. A DeBERTa-v3 run's discriminator is a DebertaV2Model folder with its
replaced-token head beside it (deberta.py), its generator a DebertaV2ForMaskedLM; under GDES the discriminator's
token embeddings are saved as it reads them, E_G + E_Δ (sharing.py), and a run that loads the folders takes E_Δ back
as their difference."""

import os
from typing import Dict, Optional

from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json
from mlm_tpu.model_folder.card import CardFacts
from mlm_tpu.model_folder.loading import GENERATOR_FOLDER
from mlm_tpu.model_folder.saving import write_model_files
from mlm_tpu.output_dir import MODEL_FOLDER, RUN_INFO_FILE, staged_output_dir


def save_electra_folders(folder: str, model, tokenizer, facts: CardFacts, generator_facts: CardFacts,
                         records: Optional[Dict[str, dict]], name: str) -> None:
    """The discriminator into `folder` and the generator into `folder`/generator/, both written into one staging
    folder before either is published (output_dir.py): a kill while saving leaves both from the previous save, never
    one save apart."""
    from mlm_tpu.electra.deberta import DebertaDiscriminator
    from mlm_tpu.electra.sharing import merged

    generator_folder = os.path.join(folder, GENERATOR_FOLDER)
    discriminator = model.discriminator
    with staged_output_dir(folder, folders=MODEL_FOLDER.folders) as staging, merged(model.sharing, model.generator,
                                                                                      discriminator):
        if isinstance(discriminator, DebertaDiscriminator):
            write_model_files(staging, folder, discriminator.encoder, tokenizer, facts, records, name)
            discriminator.save_head(staging)
        else:
            write_model_files(staging, folder, discriminator, tokenizer, facts, records, name)
        os.mkdir(os.path.join(staging, GENERATOR_FOLDER))
        write_model_files(os.path.join(staging, GENERATOR_FOLDER), generator_folder, model.generator, tokenizer,
                          generator_facts, None, f"{name}/{GENERATOR_FOLDER}")


def load_electra_folders(folder: str, flag: str = "--model"):
    """(ElectraPretrainer, tokenizer) of an ELECTRA or DeBERTa-v3 output folder: the discriminator and its
    generator/, with the loss weight and the embedding sharing the run trained with (its training_args.json, else
    the family's paper's)."""
    from mlm_tpu.electra.model import DEFAULT_DISCRIMINATOR_WEIGHT, ElectraPretrainer
    from mlm_tpu.electra.pairs import sharing_of
    from mlm_tpu.electra.sharing import start_from_tables
    from mlm_tpu.model_folder.configs import read_model_config

    family = read_model_config(folder, flag).model_type
    generator_folder = os.path.join(folder, GENERATOR_FOLDER)
    if not os.path.isfile(os.path.join(generator_folder, "config.json")):
        raise UserError(f"{flag} {folder} holds a discriminator but no {GENERATOR_FOLDER}/ beside it, whose samples "
                        "its scores need; give the --output-dir of `python train.py --task electra`")
    discriminator, tokenizer = _load_discriminator(folder, family, flag)
    generator = _load_generator(generator_folder, family, flag)
    run_info = os.path.join(folder, RUN_INFO_FILE)
    recorded = read_json(run_info, "the run's settings", "or delete it") if os.path.isfile(run_info) else {}
    recorded = recorded if isinstance(recorded, dict) else {}
    sharing = sharing_of(family, recorded.get("embedding_sharing"))
    model = ElectraPretrainer(generator, discriminator, recorded.get("discriminator_weight") or
                              DEFAULT_DISCRIMINATOR_WEIGHT, sharing)
    start_from_tables(sharing, generator, discriminator)
    return model, tokenizer


def _load_discriminator(folder: str, family: str, flag: str):
    """(discriminator, tokenizer): ELECTRA's ElectraForPreTraining, or DeBERTa-v3's encoder and head."""
    from mlm_tpu.electra.deberta import MODEL_TYPE, DebertaDiscriminator
    from mlm_tpu.model_folder.loading import load_pretrained

    if family != MODEL_TYPE:
        from transformers import TFElectraForPreTraining

        return load_pretrained(folder, TFElectraForPreTraining, flag)
    from transformers import TFDebertaV2Model

    encoder, tokenizer = load_pretrained(folder, TFDebertaV2Model, flag)
    discriminator = DebertaDiscriminator(encoder)
    discriminator.build_in_name_scope()
    if not discriminator.load_head(folder):
        raise UserError(f"{flag} {folder} holds a DeBERTa-v2 encoder without the replaced-token head a run of "
                        "`python train.py --task electra` saves beside it; give such a run's --output-dir")
    return discriminator, tokenizer


def _load_generator(generator_folder: str, family: str, flag: str):
    from transformers import TFDebertaV2ForMaskedLM, TFElectraForMaskedLM

    from mlm_tpu.electra.deberta import MODEL_TYPE, with_keyed_dropout
    from mlm_tpu.model_folder.loading import load_model

    if family != MODEL_TYPE:
        return load_model(generator_folder, TFElectraForMaskedLM, flag)
    return with_keyed_dropout(load_model(generator_folder, TFDebertaV2ForMaskedLM, flag))
