"""Continued DeBERTa-v3 pretraining (`--task electra --model-name-or-path M`, M a DeBERTa-v2/v3 folder or Hub name,
PyTorch-only weights as every checkpoint on the Hub): the discriminator is M's encoder, with the replaced-token head
of M's run where mlm_tpu saved one (deberta.py's HEAD_FILE), else a new one; the generator is
--generator-name-or-path, else M/generator/ (the folder `--task electra` saves), else new at the recipe's depth (half
the discriminator's) starting from M's token embeddings, since microsoft/DeBERTa released discriminators only
(microsoft/DeBERTa#96). The two then share their embeddings as --embedding-sharing says (sharing.py): under GDES,
E_Δ = M's table - E_G, so the discriminator reads exactly M's embeddings before the first step."""

import os
from typing import Tuple

from mlm_tpu.console import log
from mlm_tpu.electra.continued import GENERATOR_FLAG
from mlm_tpu.electra.deberta import (MODEL_TYPE, DebertaDiscriminator, generator_config, new_generator,
                                     with_keyed_dropout)
from mlm_tpu.electra.sharing import SHARING_WORDS, start_from_tables, token_table
from mlm_tpu.errors import UserError
from mlm_tpu.mlm.continued import FLAG, continued_config
from mlm_tpu.model_folder.loading import GENERATOR_FOLDER

SAME_SHAPE = ("vocab_size", "hidden_size", "embedding_size")  # what sharing the token tables needs equal


def generator_source(config) -> Tuple[str, str]:
    """(name or path, flag naming it) of the generator: --generator-name-or-path, else M/generator/, else ("", "")
    (a new one)."""
    if config.generator_name_or_path:
        return config.generator_name_or_path, GENERATOR_FLAG
    inside = os.path.join(config.model_name_or_path, GENERATOR_FOLDER)
    return (inside, FLAG) if os.path.isfile(os.path.join(inside, "config.json")) else ("", "")


def check_generator(name: str, flag: str, generator, discriminator) -> None:
    """A DeBERTa-v2 masked LM no deeper than the discriminator, whose token table can be the discriminator's."""
    where = f"{flag} {name}"
    if generator.model_type != MODEL_TYPE:
        raise UserError(f"{where} is a {generator.model_type} model, not a DeBERTa-v2/v3 generator (a "
                        "DebertaV2ForMaskedLM); give the generator trained beside the discriminator, or drop "
                        f"{GENERATOR_FLAG} to start a new one at half the discriminator's depth")
    if generator.num_hidden_layers > discriminator.num_hidden_layers:
        raise UserError(f"{where} has {generator.num_hidden_layers} layers, the discriminator "
                        f"{discriminator.num_hidden_layers}: DeBERTa-v3's generator is shallower (half its depth, "
                        "rtd_*.json); give a generator of at most the discriminator's depth, or drop "
                        f"{GENERATOR_FLAG} to start a new one")
    for setting in SAME_SHAPE:
        own, discriminators = getattr(generator, setting, None), getattr(discriminator, setting, None)
        if own != discriminators:
            raise UserError(f"{where} has {setting} {own}, the discriminator {discriminators}: the two share their "
                            "token embeddings, so the generator must be of the discriminator's vocabulary and width "
                            f"(the one trained beside it), or drop {GENERATOR_FLAG} to start a new one")


def continued_deberta_pretrainer(config, tokenizer, discriminator_weight: float, sharing: str):
    """The ElectraPretrainer of --model-name-or-path's DeBERTa encoder and a generator, weights loaded, embeddings
    shared by `sharing` from the discriminator's."""
    from transformers import TFDebertaV2ForMaskedLM, TFDebertaV2Model

    from mlm_tpu.electra.model import ElectraPretrainer
    from mlm_tpu.model_folder.loading import load_with_new_head

    name = config.model_name_or_path
    discriminator_config = continued_config(name, tokenizer, config.config_overrides)
    generator_name, generator_flag = generator_source(config)
    if generator_name:
        generator_settings = continued_config(generator_name, tokenizer, config.config_overrides, generator_flag)
        check_generator(generator_name, generator_flag, generator_settings, discriminator_config)
    encoder, missing = load_with_new_head(name, TFDebertaV2Model, discriminator_config, FLAG, config.config_overrides)
    if missing:
        raise UserError(f"{FLAG} {name} lacks {len(missing)} weights of the DeBERTa-v2 encoder "
                        f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); is it a checkpoint of this "
                        "model?")
    discriminator = DebertaDiscriminator(encoder)
    if generator_name:
        generator, _ = load_with_new_head(generator_name, TFDebertaV2ForMaskedLM, generator_settings, generator_flag,
                                          config.config_overrides)
        generator = with_keyed_dropout(generator)
    else:
        generator = new_generator(generator_config(discriminator_config))
    model = ElectraPretrainer(generator, discriminator, discriminator_weight, sharing)
    model.build_in_name_scope()
    own_head = os.path.isdir(name) and discriminator.load_head(name)
    if not generator_name:
        token_table(generator).assign(token_table(discriminator))
    start_from_tables(sharing, generator, discriminator)
    log(f"DeBERTa-v3: continuing the discriminator of {name} ({discriminator_config.num_hidden_layers} layers of "
        f"width {discriminator_config.hidden_size}, {'its' if own_head else 'a new'} replaced-token head) and "
        + (f"the generator of {generator_name} (depth {generator.config.num_hidden_layers})" if generator_name else
           f"a new generator of half its depth ({generator.config.num_hidden_layers}) starting from its token "
              "embeddings")
        + f"; embeddings {SHARING_WORDS[sharing]}; loss = generator loss + {discriminator_weight:g} x discriminator "
        "loss")
    return model
