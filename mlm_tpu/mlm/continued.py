"""Continued pretraining (DAPT, TAPT, language adaptation): a masked LM of any family transformers' TensorFlow
classes build, loaded from a folder mlm_tpu made, a 🤗 folder with TensorFlow or PyTorch-only weights, or a Hub
name, to go on training on the user's shards. A checkpoint without a masked-LM head (a sentence-transformers
BertModel) gets a new one, tied to the input embeddings as the family ties it; the log names the new weights.
"""

import os
from typing import Dict, List, Optional

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.training.vocabulary_growth import FLAG, grown


def continued_config(name_or_path: str, tokenizer, overrides: Optional[str] = None, flag: str = FLAG,
                     grows: bool = False):
    """The config of the checkpoint `name_or_path` with --config-overrides, checked to embed every token of the
    run's tokenizer (unless it `grows` to them: vocabulary_growth)."""
    from mlm_tpu.mlm.presets import check_masked_lm_type
    from mlm_tpu.model_folder.configs import read_model_config, with_overrides

    config = read_model_config(name_or_path, flag)
    check_masked_lm_type(config, f"{flag} {name_or_path}")
    config = with_overrides(config, overrides)
    if len(tokenizer) > config.vocab_size and not grows:
        raise UserError(f"the tokenizer has {len(tokenizer):,} tokens but {name_or_path} only {config.vocab_size:,} "
                        f"embeddings; {_own_tokenizer(name_or_path, config.vocab_size)}")
    return config


def continued_masked_lm(name_or_path: str, tokenizer, overrides: Optional[str] = None,
                        growth: Optional[Dict[int, List[int]]] = None, rule: Optional[str] = None, seed: int = 0):
    """The masked LM of `name_or_path` (with --config-overrides that change no weight), its weights loaded, to continue
    training; with `growth` (vocabulary_growth), its vocabulary grown to the tokenizer's, the new rows by `rule`."""
    from mlm_tpu.model_folder import families
    from mlm_tpu.model_folder.checkpoint import new_modules
    from mlm_tpu.model_folder.loading import check_masked_lm_head, load_with_new_head

    family = families.of_folder(name_or_path)
    masked_lm_class = family.model_class("masked_lm")
    # an ELECTRA discriminator: its generator; a fine-tuned classifier: the masked LM it was fine-tuned from
    check_masked_lm_head(name_or_path, masked_lm_class, FLAG, "continue")
    if family is not families.GENERIC:  # a hand-written family reads its own folders
        return _continued_hand_written(family, name_or_path, tokenizer, overrides, growth, rule, seed)
    config = continued_config(name_or_path, tokenizer, overrides, grows=bool(growth))
    model, new_weights = load_with_new_head(name_or_path, masked_lm_class, config, FLAG, overrides)
    if growth:
        model = grown(model, name_or_path, growth, rule, seed)
    base = (config.architectures or [config.model_type])[0]
    if new_weights:
        log(f"Continuing {name_or_path} ({base}); it has no masked-LM head, so a new one is initialised, its "
            f"decoder tied to the input embeddings: {new_modules(new_weights)}")
    else:
        log(f"Continuing {name_or_path} ({base}) with its masked-LM head")
    return model


def _continued_hand_written(family, name_or_path: str, tokenizer, overrides: Optional[str], growth,
                            rule: Optional[str], seed: int):
    """continued_masked_lm of a family the registry builds by hand (ModernBERT): its config (with
    --config-overrides) checked to embed every token of the tokenizer (unless it grows to them), then its
    weights, then with `growth` its vocabulary grown as any family's."""
    config = family.read_config(name_or_path, overrides)
    if len(tokenizer) > config.vocab_size and not growth:
        raise UserError(f"the tokenizer has {len(tokenizer):,} tokens but {name_or_path} only {config.vocab_size:,} "
                        f"embeddings; {_own_tokenizer(name_or_path, config.vocab_size)}")
    model, info = family.load(name_or_path, "masked_lm", f"{FLAG} {name_or_path}", config)
    if growth:
        model = grown(model, name_or_path, growth, rule, seed)
    if info["missing"]:
        log(f"Continuing {name_or_path} ({family.name}); it has no masked-LM head, so a new one is initialised, its "
            f"decoder tied to the input embeddings: {', '.join(info['missing'])}")
    else:
        log(f"Continuing {name_or_path} ({type(model).__name__}) with its masked-LM head")
    return model


def _own_tokenizer(name_or_path: str, vocab_size: int) -> str:
    """What to do about a tokenizer with ids past the checkpoint's embeddings: use the checkpoint's own tokenizer (a
    Hub model has one), or where its folder holds none, the one it was pretrained with."""
    from mlm_tpu.tokenizer.load import holds_tokenizer

    if holds_tokenizer(name_or_path) or not os.path.isdir(name_or_path):
        return (f"continue it with its own tokenizer (drop --tokenizer, and shard with `mlm-tpu shard --tokenizer "
                f"{name_or_path} ...`)")
    return (f"{name_or_path} holds no tokenizer: give the --tokenizer it was pretrained with (at most {vocab_size:,} "
            "pieces), and shard the text with it")
