"""The two families `--task electra` trains, ELECTRA's (Clark et al. 2020; presets.py) and DeBERTa-v3's (He, Gao,
Chen 2023; deberta.py): which one a run trains, the embedding sharing each allows and defaults to (sharing.py), and
a pair of new models of either. Everything else (masking, sampling, the loss, validation, saving) is one task's."""

from typing import Optional, Tuple

from mlm_tpu.electra import deberta, presets
from mlm_tpu.electra.sharing import DEFAULT_SHARING
from mlm_tpu.errors import UserError

ELECTRA, DEBERTA = "electra", deberta.MODEL_TYPE
FAMILY_WORDS = {ELECTRA: "ELECTRA", DEBERTA: "DeBERTa-v3"}


def family_of_model_config(name_or_path: str) -> str:
    """The family --model-config names: a preset of either, else its config.json's model type."""
    if deberta.is_deberta_preset(name_or_path):
        return DEBERTA
    if name_or_path in presets.PRESETS:
        return ELECTRA
    from transformers import ElectraConfig

    from mlm_tpu.model_folder.configs import load_config

    found = load_config(name_or_path, {}, ElectraConfig).model_type
    return DEBERTA if found == DEBERTA else ELECTRA  # another type: presets.discriminator_config says what is wrong


def family_of_model(discriminator) -> str:
    return DEBERTA if isinstance(discriminator, deberta.DebertaDiscriminator) else ELECTRA


def check_sharing(family: str, given: Optional[str]) -> None:
    """GDES is DeBERTa-v3's: ELECTRA's two models share a whole embeddings layer (positions, token types and their
    LayerNorm too) that its generator, narrower, projects to its own width; GDES as the paper measures it shares the
    token tables of two models of one width."""
    if given == "gdes" and family == ELECTRA:
        raise UserError("--embedding-sharing gdes is DeBERTa-v3's gradient-disentangled sharing (a generator of the "
                        "discriminator's width, token tables only); ELECTRA's models share one whole embeddings "
                        "layer: give --embedding-sharing shared or none for ELECTRA, or train DeBERTa-v3 "
                        f"(--model-config {', '.join(name for name in deberta.PRESETS if name != 'deberta-v3-tiny')})")


def sharing_of(family: str, given: Optional[str]) -> str:
    """--embedding-sharing, else the family's paper's."""
    return given or DEFAULT_SHARING[family]


def new_models(name_or_path: str, tokenizer, max_length: int, overrides: Optional[str],
               generator_size_ratio: Optional[float]) -> Tuple[object, object, str]:
    """(generator, discriminator, what the log says of their shapes), both new, of --model-config's family."""
    from transformers import TFElectraForMaskedLM, TFElectraForPreTraining

    if family_of_model_config(name_or_path) == DEBERTA:
        discriminator = deberta.discriminator_config(name_or_path, tokenizer, max_length, overrides)
        generator = deberta.generator_config(discriminator)
        shapes = (f"DeBERTa-v3: a discriminator of {discriminator.num_hidden_layers} layers of width "
                  f"{discriminator.hidden_size}, a generator of half its depth ({generator.num_hidden_layers}) and "
                  "that width")
        return deberta.new_generator(generator), deberta.new_discriminator(discriminator), shapes
    discriminator = presets.discriminator_config(name_or_path, tokenizer, max_length, overrides)
    ratio = presets.generator_size_ratio(name_or_path, generator_size_ratio)
    generator = presets.generator_config(discriminator, ratio)
    shapes = (f"ELECTRA: a discriminator of {discriminator.num_hidden_layers} layers of width "
              f"{discriminator.hidden_size}, a generator of width {generator.hidden_size} ({ratio:.3g} of it, "
              f"{generator.num_attention_heads} heads), embeddings of {discriminator.embedding_size}")
    return TFElectraForMaskedLM(generator), TFElectraForPreTraining(discriminator), shapes
