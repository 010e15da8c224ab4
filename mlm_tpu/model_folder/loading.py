"""Loading a saved model (a `save_pretrained` folder or a Hub name) as a TensorFlow model: as it is, or as a base
given a new head; the checks first (checks.py), its config (configs.py), then its weights (checkpoint.py)."""

import os
from typing import Optional

from mlm_tpu.errors import UserError, reason_of
from mlm_tpu.hub import is_local
from mlm_tpu.model_folder import families
from mlm_tpu.model_folder.checkpoint import read_checkpoint
from mlm_tpu.model_folder.checks import (check_model_folder, check_tensorflow_weights, check_weights_there,
                                         refuse_missing_encoder_weights)
from mlm_tpu.model_folder.configs import (architecture, check_overrides_keep_shapes, config_problem,
                                          read_model_config, tensorflow_config)
from mlm_tpu.model_folder.pooling import follow_classifier_pooling
from mlm_tpu.tokenizer.load import load_tokenizer

# An ELECTRA run's folder (mlm_tpu/electra/folders.py): the discriminator, whose head tells replaced tokens from
# original ones and fills no masks, and in GENERATOR_FOLDER the masked LM trained beside it.
DISCRIMINATOR_ARCHITECTURE = "ElectraForPreTraining"
GENERATOR_FOLDER = "generator"
# transformers' maps of its TensorFlow classes whose models hold a masked-LM head (a BERT's pretraining heads hold one
# too), or no head at all (a bare encoder, which gets a new one): any other class of theirs has a task head instead
MASKED_LM_HEAD_MAPS = ("TF_MODEL_FOR_MASKED_LM_MAPPING_NAMES", "TF_MODEL_FOR_PRETRAINING_MAPPING_NAMES",
                       "TF_MODEL_MAPPING_NAMES")


def load_model(name_or_path: str, model_class, flag: str = "--model", use: str = "use"):
    """`model_class` from `python train.py`'s --output-dir, any save_pretrained folder (TensorFlow or PyTorch
    weights), or a Hub name, every weight of it the checkpoint's (one it lacks is one error line: a model to use as
    it is would run with it random); a classifier pooling as its config says (pooling.py), as wherever a model is
    loaded."""
    check_model_folder(name_or_path, flag)
    check_masked_lm_head(name_or_path, model_class, flag, use)
    family = families.of_folder(name_or_path)
    if family is not families.GENERIC:  # a hand-written family reads its own folders (families.py)
        model, info = family.load(name_or_path, families.head_of_class(model_class), f"{flag} {name_or_path}")
        missing = info["missing"]
    else:
        model, missing = _read_transformers_model(name_or_path, model_class, flag)
    if missing:
        raise UserError(f"{flag} {name_or_path} lacks {len(missing)} weights of {model_class.__name__}, or holds them "
                        f"in other shapes ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); is it a "
                        "checkpoint of this model?")
    return model if family.pools_natively else follow_classifier_pooling(model)


def _read_transformers_model(name_or_path: str, model_class, flag: str):
    """(model, weights the checkpoint lacks) of transformers' TF class `model_class`."""
    check_tensorflow_weights(name_or_path, flag)
    try:
        config = tensorflow_config(name_or_path)
    except (OSError, ValueError) as error:
        problem = (config_problem(name_or_path, flag, error) if is_local(name_or_path) else
                   f"{flag} {name_or_path}: cannot load {model_class.__name__} from it ({reason_of(error)})")
        raise UserError(problem) from None
    return read_checkpoint(name_or_path, model_class, config, flag)


def load_pretrained(name_or_path: str, model_class, flag: str = "--model", use: str = "use"):
    """(model, tokenizer), both from the same folder or Hub name; the quick checks first."""
    check_model_folder(name_or_path, flag)
    tokenizer = load_tokenizer(name_or_path, flag)
    model = load_model(name_or_path, model_class, flag, use)
    keep_inputs_the_model_takes(tokenizer, model)
    return model, tokenizer


def keep_inputs_the_model_takes(tokenizer, model) -> None:
    """A BERT tokenizer gives token_type_ids, which a family without token types (DistilBERT, continued with its
    BERT tokenizer) refuses: the tokenizer then gives none."""
    import inspect

    if "token_type_ids" not in inspect.signature(model.call).parameters:
        tokenizer.model_input_names = [name for name in tokenizer.model_input_names if name != "token_type_ids"]


def load_with_new_head(name_or_path: str, model_class, config, flag: str, overrides: Optional[str] = None):
    """`model_class` with `config` (the saved model's, with other settings of its head, or `overrides`: checked to
    change no weight), its weights read from the folder (TensorFlow or PyTorch layout) or Hub name; the weights it
    lacks, or holds in other shapes (a head of other labels), are new. Returns (model, the PyTorch names of the new
    weights); a missing weight of the encoder itself is one error line."""
    check_model_folder(name_or_path, flag)
    check_weights_there(name_or_path, flag)
    check_tensorflow_weights(name_or_path, flag)
    check_overrides_keep_shapes(name_or_path, model_class, config, overrides, flag)
    model, new_weights = read_checkpoint(name_or_path, model_class, config, flag)
    refuse_missing_encoder_weights(model, new_weights, f"{flag} {name_or_path}")
    return follow_classifier_pooling(model), new_weights


def load_with_head_settings(name_or_path: str, model_class, settings: dict, where: str):
    """(model, the PyTorch names of its new weights): a saved model as `model_class`, its config given a head's
    settings its own lacks (a classifier's labels and pooling), new weights where the folder has none of their shape;
    a hand-written family reads its own folders (families.py)."""
    family = families.of_folder(name_or_path)
    if family is not families.GENERIC:
        check_model_folder(name_or_path, where)
        config = family.with_settings(family.read_config(name_or_path), settings)
        model, info = family.load(name_or_path, families.head_of_class(model_class), where, config)
        refuse_missing_encoder_weights(model, info["missing"], where)
        return model, info["missing"]
    config = read_model_config(name_or_path, where)
    config.update(settings)
    return load_with_new_head(name_or_path, model_class, config, where)


def check_masked_lm_head(name_or_path: str, model_class, flag: str, use: str = "use") -> None:
    """A masked LM (`model_class`) loaded from an ELECTRA discriminator or a fine-tuned classifier or tagger would
    get a new, untrained head, and guess every piece at about 1/vocabulary: refused, pointing to the masked LM (`use`
    it: "continue", "fill masks with")."""
    if not model_class.__name__.endswith("ForMaskedLM"):
        return
    saved = architecture(name_or_path) or ""
    if has_task_head(saved):
        raise UserError(f"{flag} {name_or_path} is a fine-tuned {saved} (it has no masked-LM head); {use} the masked "
                        "LM it was fine-tuned from")
    if saved != DISCRIMINATOR_ARCHITECTURE:
        return
    generator = os.path.join(name_or_path, GENERATOR_FOLDER)
    use = (f"use its generator: {generator}" if os.path.isfile(os.path.join(generator, "config.json")) else
           "use its generator, the masked LM trained beside it")
    raise UserError(f"{flag} {name_or_path} is an ELECTRA discriminator (it has no masked-LM head); {use}")


def has_task_head(architecture_name: str) -> bool:
    """Whether a saved model of this class (its config's `architectures`) holds a task head in place of a masked-LM
    head (a classifier, a tagger, a question answerer...), as transformers' own maps of its TensorFlow classes say:
    one of its classes, and none with a masked-LM head or no head (MASKED_LM_HEAD_MAPS)."""
    from transformers.models.auto import modeling_tf_auto

    def classes(map_name: str) -> set:
        values = getattr(modeling_tf_auto, map_name).values()
        return {name.removeprefix("TF") for value in values for name in ((value,) if isinstance(value, str) else value)}

    known = set().union(*(classes(name) for name in dir(modeling_tf_auto) if name.endswith("_MAPPING_NAMES")
                          and name != "CONFIG_MAPPING_NAMES"))
    return architecture_name in known - set().union(*map(classes, MASKED_LM_HEAD_MAPS))
