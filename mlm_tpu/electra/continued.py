"""Continued ELECTRA pretraining (`--task electra --model-name-or-path M`): M's discriminator and its generator, from
M/generator/ (the folder `--task electra` saves) or from --generator-name-or-path (a pair published apart, as
google/electra-small-discriminator and google/electra-small-generator), go on training as ElectraPretrainer trains
them: through one embeddings layer. The discriminator's embeddings are the ones kept; a published pair was trained
sharing them, so the generator's are the same, and where they are not the log says by how much they differed."""

import os
from typing import Optional, Tuple

import numpy as np

from mlm_tpu.console import log
from mlm_tpu.electra.deberta import MODEL_TYPE as DEBERTA_TYPE
from mlm_tpu.errors import UserError
from mlm_tpu.mlm.continued import FLAG, continued_config
from mlm_tpu.model_folder.loading import GENERATOR_FOLDER
from mlm_tpu.training.vocabulary_growth import Growth, grown

GENERATOR_FLAG = "--generator-name-or-path"
GENERATOR_ARCHITECTURE = "ElectraForMaskedLM"
# what the shared embeddings layer's shape depends on: the generator's must be the discriminator's
SHARED_SETTINGS = ("vocab_size", "embedding_size", "max_position_embeddings", "type_vocab_size")
SAME_EMBEDDINGS = 1e-6  # the largest difference between the two models' embeddings still called the same
PUBLISHED_PAIR = "google/electra-small-discriminator with --generator-name-or-path google/electra-small-generator"


def check_discriminator(base_config, where: str) -> None:
    """--model-name-or-path must be an ELECTRA discriminator or a DeBERTa-v2/v3 encoder (its config; nothing is
    loaded yet). DeBERTa v1 (model type `deberta`) is refused: its absolute positions and attention are another
    model than the v2 classes DeBERTa-v3's checkpoints and this task build."""
    if base_config.model_type == "deberta":
        raise UserError(f"{where} is a DeBERTa v1 model (model type deberta); --task electra continues DeBERTa-v3 "
                        "and v2 encoders (model type deberta-v2, e.g. microsoft/deberta-v3-base) or ELECTRA: continue "
                        "a v1 model with --task mlm")
    if base_config.model_type == DEBERTA_TYPE:
        return
    if base_config.model_type != "electra":
        raise UserError(f"--task electra continues an ELECTRA discriminator and its generator, or a DeBERTa-v2/v3 "
                        f"encoder; {where} is a {base_config.model_type} model: continue it with --task mlm, or give "
                        f"an ELECTRA discriminator (a folder --task electra saved, or {PUBLISHED_PAIR}) or a "
                        "DeBERTa-v3 one")
    if (base_config.architectures or [None])[0] == GENERATOR_ARCHITECTURE:
        raise UserError(f"{where} is an ELECTRA generator ({GENERATOR_ARCHITECTURE}); give the discriminator trained "
                        f"beside it with --model-name-or-path and this generator with {GENERATOR_FLAG} (or continue "
                        "it alone as a masked LM with --task mlm)")


def generator_source(config) -> Tuple[str, str]:
    """(name or path, flag naming it) of the generator: --generator-name-or-path, else M/generator/."""
    if config.generator_name_or_path:
        return config.generator_name_or_path, GENERATOR_FLAG
    inside = os.path.join(config.model_name_or_path, GENERATOR_FOLDER)
    if not os.path.isfile(os.path.join(inside, "config.json")):
        raise UserError(f"{FLAG} {config.model_name_or_path} has no {GENERATOR_FOLDER}/ folder (it was not saved by "
                        f"--task electra); give its generator with {GENERATOR_FLAG} (an {GENERATOR_ARCHITECTURE} "
                        f"folder or Hub name, as {PUBLISHED_PAIR})")
    return inside, FLAG


def check_generator_type(name: str, flag: str) -> None:
    """The generator must be an ELECTRA masked LM (its config; before its size is compared with anything)."""
    from mlm_tpu.model_folder.configs import read_model_config

    config = read_model_config(name, flag)
    found = (config.architectures or [config.model_type])[0]
    if config.model_type != "electra" or found != GENERATOR_ARCHITECTURE:
        raise UserError(f"{flag} {name} holds {found}, not an ELECTRA generator (an {GENERATOR_ARCHITECTURE}, a "
                        f"masked LM); give the generator trained beside the discriminator, as {PUBLISHED_PAIR}")


def check_shared_embeddings(name: str, flag: str, generator_config, discriminator_config, tokenizer) -> None:
    """The generator's embeddings must be able to be the discriminator's: the same shapes, and (where it has a
    tokenizer of its own) the pieces of the run's tokenizer at its ids (those of the checkpoints, where the run's
    extends them)."""
    from mlm_tpu.tokenizer.load import holds_tokenizer, load_tokenizer

    for setting in SHARED_SETTINGS:
        own, discriminators = getattr(generator_config, setting), getattr(discriminator_config, setting)
        if own != discriminators:
            raise UserError(f"{flag} {name} has {setting} {own}, the discriminator {discriminators}: the two share one "
                            "embeddings layer, so the generator must be the one trained beside this discriminator "
                            "(the same vocabulary and embeddings)")
    if holds_tokenizer(name) and load_tokenizer(name, flag).get_vocab() != {
            piece: index for piece, index in tokenizer.get_vocab().items() if index < generator_config.vocab_size}:
        raise UserError(f"{flag} {name} has another vocabulary than the discriminator's tokenizer (the same number "
                        "of pieces, not the same pieces at the same ids): give the generator trained beside this "
                        "discriminator")


def embeddings_difference(generator, discriminator) -> float:
    """The largest difference between the generator's own embeddings (token, position and type tables, LayerNorm)
    and the discriminator's."""
    def by_name(layer):
        return {weight.name.split("embeddings/", 1)[-1]: weight.numpy() for weight in layer.weights}

    own, shared = by_name(generator.electra.embeddings), by_name(discriminator.electra.embeddings)
    return max(float(np.max(np.abs(own[name] - shared[name]))) for name in shared)


def continued_pretrainer(config, tokenizer, discriminator_weight: float, growth: Optional[Growth] = None,
                         sharing: str = "shared"):
    """The ElectraPretrainer of --model-name-or-path's discriminator and its generator, weights loaded, embeddings
    tied (the discriminator's kept) unless `sharing` is none; with `growth` (vocabulary_growth), both grown to the
    extended tokenizer by --new-embeddings, each from its own rows (the generator's output bias by its own; its
    embeddings are then the discriminator's)."""
    from transformers import TFElectraForMaskedLM, TFElectraForPreTraining

    from mlm_tpu.electra.model import ElectraPretrainer
    from mlm_tpu.electra.sharing import start_from_tables
    from mlm_tpu.model_folder.loading import load_with_new_head

    name = config.model_name_or_path
    generator_name, generator_flag = generator_source(config)
    check_generator_type(generator_name, generator_flag)
    discriminator_config = continued_config(name, tokenizer, config.config_overrides, grows=bool(growth))
    generator_config = continued_config(generator_name, tokenizer, config.config_overrides, generator_flag,
                                        grows=bool(growth))
    check_shared_embeddings(generator_name, generator_flag, generator_config, discriminator_config, tokenizer)
    discriminator, new_weights = load_with_new_head(name, TFElectraForPreTraining, discriminator_config, FLAG,
                                                    config.config_overrides)
    generator, _ = load_with_new_head(generator_name, TFElectraForMaskedLM, generator_config, generator_flag,
                                      config.config_overrides)
    if growth:
        discriminator = grown(discriminator, name, growth, config.new_embeddings, config.seed, "the discriminator's")
        generator = grown(generator, generator_name, growth, config.new_embeddings, config.seed, "the generator's")
    model = ElectraPretrainer(generator, discriminator, discriminator_weight, sharing)
    model.build_in_name_scope()
    difference = embeddings_difference(generator, discriminator)
    start_from_tables(sharing, generator, discriminator)
    head = (f"a new replaced-token head ({', '.join(sorted({weight.rsplit('.', 1)[0] for weight in new_weights}))})"
            if new_weights else "its replaced-token head")
    embeddings = ("its own were the same" if difference <= SAME_EMBEDDINGS else
                  f"its own, replaced, differed by up to {difference:.3g}")
    reads = (f"the generator reads the discriminator's embeddings ({embeddings})" if sharing == "shared" else
             f"each keeps its own embeddings (they differ by up to {difference:.3g})")
    log(f"ELECTRA: continuing the discriminator of {name} ({discriminator_config.num_hidden_layers} layers of width "
        f"{discriminator_config.hidden_size}, {head}) and the generator of {generator_name} (width "
        f"{generator_config.hidden_size}); {reads}; loss = generator loss + {discriminator_weight:g} x discriminator "
        "loss")
    return model
