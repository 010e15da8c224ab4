"""Filling masks with a trained masked LM (`python -m mlm_tpu.predict`, `fill_mask`): the 🤗 fill-mask pipeline.

The top-k words for each masked position. The mask may be written [MASK] or <mask> whatever the
model's own mask token is; a sentence may hold several masks (each is predicted on its own).
"""

from dataclasses import dataclass
from functools import partial
from typing import Dict, List, Optional, Tuple

from mlm_tpu.configuration import check_ranges, setting
from mlm_tpu.errors import UserError

MASK_SPELLINGS = ("[MASK]", "<mask>")

Predictions = List[List[Dict]]  # per masked position, the top-k candidates


def with_mask_token(sentence: str, mask_token: str) -> str:
    """The sentence with either mask spelling replaced by the model's own mask token."""
    for spelling in MASK_SPELLINGS:
        sentence = sentence.replace(spelling, mask_token)
    if mask_token not in sentence:
        raise UserError(f"no mask in {sentence!r}: write [MASK] (or <mask>) where the missing word goes")
    return sentence


def predict(fill_mask_pipeline, sentence: str, top_k: int) -> Predictions:
    """Top-k candidates for each mask of one sentence (the pipeline nests one level less for one mask)."""
    output = fill_mask_pipeline(sentence, top_k=top_k)
    per_mask = [output] if output and isinstance(output[0], dict) else output
    frame = _framing_tokens(fill_mask_pipeline.tokenizer)
    return [[{"token": int(c["token"]), "token_str": c["token_str"], "score": float(c["score"]),
              "sequence": _unframed(c["sequence"], frame)} for c in candidates] for candidates in per_mask]


def _framing_tokens(tokenizer) -> List[str]:
    return [token for token in (tokenizer.cls_token, tokenizer.bos_token, tokenizer.sep_token, tokenizer.eos_token)
            if token]


def _unframed(sequence: str, frame: List[str]) -> str:
    """Drop [CLS]/[SEP] the pipeline leaves around sentences with several masks (it cannot skip special tokens
    there, the other masks being special too)."""
    sequence = sequence.strip()
    for token in frame:
        sequence = sequence.removeprefix(token).removesuffix(token)
    return sequence.strip()


@dataclass
class FillMaskConfig:
    """What `python -m mlm_tpu.predict [fill-mask]` does."""

    model: str  # train.py's --output-dir, a save_pretrained folder or a Hub name
    sentences: Tuple[str, ...]  # each with [MASK] (or <mask>) where a word is missing
    top_k: int = setting(5, low=1)  # candidates per mask
    base_model: Optional[str] = None  # an adapter folder's base (None: its adapter_config.json's)


def fill_mask(config: FillMaskConfig, load=None) -> List[Predictions]:
    """For each sentence, for each mask in it, the top-k candidates: {token, token_str, score, sequence}.
    `load(name_or_path, model_class)` -> (model, tokenizer) reads the model (default: load_pretrained)."""
    from transformers import pipeline

    from mlm_tpu.model_folder import families
    from mlm_tpu.model_folder.configs import T5_MODEL_TYPES, longest_input, model_type
    from mlm_tpu.model_folder.loading import keep_inputs_the_model_takes, load_pretrained

    check_ranges(config)
    if model_type(config.model) in T5_MODEL_TYPES:
        raise UserError(f"--model {config.model} is a T5 model, which does not fill masks; use "
                        "`python -m mlm_tpu.predict text2text --model ...`")
    masked_lm_class = families.of_folder(config.model).model_class("masked_lm")  # its family's (families.py)
    model, tokenizer = (load or partial(load_pretrained, use="fill masks with"))(config.model, masked_lm_class)
    keep_inputs_the_model_takes(tokenizer, model)  # an adapter's loader too: a ModernBERT takes no token_type_ids
    if tokenizer.mask_token is None:
        raise UserError(f"--model {config.model}: its tokenizer has no mask token, so it cannot fill masks")
    prepared = [with_mask_token(sentence, tokenizer.mask_token) for sentence in config.sentences]
    limit = longest_input(model.config)
    for number, text in enumerate(prepared, start=1):
        tokens = len(tokenizer(text)["input_ids"])
        if limit and tokens > limit:
            raise UserError(f"sentence {number} is {tokens:,} tokens long, and {config.model} reads at most "
                            f"{limit:,}; shorten it (keep the words around the mask)")
    # dtype=None: without it transformers 4.57 reaches for torch, which is not installed (STACK.md).
    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, framework="tf", dtype=None)
    return [predict(fill, text, min(config.top_k, len(tokenizer))) for text in prepared]
