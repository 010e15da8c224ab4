"""A continued checkpoint grown to a --tokenizer that extends its own (`mlm-tpu tokenizer extend`), for every task
that continues one (the masked LM, ELECTRA's two models, T5's span corruption): the `--new-embeddings` flag, the new
ids found with the pieces the checkpoint's tokenizer cuts them into, and the grown model said in the log. The rows
themselves are model_folder/new_embeddings.py's."""

from dataclasses import dataclass
from typing import List, Optional, Tuple

from mlm_tpu.configuration import setting
from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.new_embeddings import DEFAULT_RULE, RULE_WORDS, RULES, CorpusFrequencies

FLAG = "--model-name-or-path"


class Growth(dict):
    """Each id the extended tokenizer adds: the ids of the base pieces it was cut into; and `frequencies`, where the
    extension recorded them, what it counted on its corpus (new_embeddings.corpus_frequencies), which mean-of-pieces
    sets the new output biases by; `mask`, the extended tokenizer's framing of one mask token and its position there
    (None without a mask token), where mean-of-pieces reads the model's prior."""

    frequencies: Optional[CorpusFrequencies] = None
    mask: Optional[Tuple[List[int], int]] = None


@dataclass
class NewEmbeddingsSettings:
    """How a continued checkpoint grows to an extended --tokenizer (the tasks that continue one take it)."""

    # how the rows of the pieces an extended --tokenizer adds start (None: mean-of-pieces, where it adds any)
    new_embeddings: Optional[str] = setting(
        None, group="task", choices=tuple(RULES),
        help="--task mlm, electra and span-corruption with --model-name-or-path and a --tokenizer that extends the "
             "checkpoint's (`mlm-tpu tokenizer extend`): the embeddings, the tied decoder and the output bias "
             "(ELECTRA: the generator's too; T5: the shared embeddings and lm_head) grow to the new pieces, each "
             "new row initialised as: mean-of-pieces (the mean of the rows of the pieces the checkpoint's "
             "tokenizer cut the piece into; its output bias set so that, at a mask with no context, its logit is "
             "that of an old piece as frequent on the corpus `tokenizer extend` read), mean (of all rows), or random "
             "(TensorFlow's truncated normal of the config's initializer_range and a zero bias, as transformers' "
             "resize) (default: mean-of-pieces).")


def check_new_embeddings(config) -> None:
    """--new-embeddings is for a continued run: a model from scratch has its vocabulary fitted to --tokenizer."""
    if getattr(config, "new_embeddings", None) and not config.model_name_or_path:
        raise UserError(f"--new-embeddings {config.new_embeddings} initialises the rows of the pieces an extended "
                        "--tokenizer adds to a checkpoint's; it needs --model-name-or-path (a model trained from "
                        "scratch has its vocabulary fitted to --tokenizer)")


def vocabulary_growth(name_or_path: str, tokenizer, rule: Optional[str]) -> Growth:
    """The ids `tokenizer` adds to the tokenizer of the checkpoint `name_or_path` (a folder holding one), each with
    the ids of the pieces the checkpoint's tokenizer cuts its piece into (new_embeddings.base_cuts: refused unless it
    extends it); none where it adds none, and then --new-embeddings (`rule`) is refused."""
    from mlm_tpu.model_folder.new_embeddings import base_cuts, corpus_frequencies
    from mlm_tpu.tokenizer.load import holds_tokenizer, load_tokenizer

    own = load_tokenizer(name_or_path, FLAG) if holds_tokenizer(name_or_path) else None
    cuts = Growth(base_cuts(own, tokenizer) if own is not None and len(tokenizer) > len(own) else {})
    cuts.frequencies = corpus_frequencies(tokenizer) if cuts else None
    if cuts and tokenizer.mask_token_id is not None:
        row = tokenizer(tokenizer.mask_token)["input_ids"]
        cuts.mask = (row, row.index(tokenizer.mask_token_id))
    if rule and not cuts:
        why = (f"{name_or_path} holds no tokenizer to compare it with" if own is None else
               f"the --tokenizer adds no piece to {name_or_path}'s")
        raise UserError(f"--new-embeddings {rule} initialises the rows of the pieces an extended --tokenizer adds to "
                        f"{FLAG}'s tokenizer, but {why}; drop --new-embeddings, or give a tokenizer made by `mlm-tpu "
                        f"tokenizer extend --tokenizer {name_or_path} ...`")
    return cuts


def grown(model, name_or_path: str, growth: Growth, rule: Optional[str], seed: int, which: str = ""):
    """`model` with its vocabulary grown to the new ids of `growth` by `rule` (None: the default), said in the log
    (`which`: the model's part in the run, as "ELECTRA's generator")."""
    from mlm_tpu.model_folder.new_embeddings import matches_prior, resized_model

    rule = rule or DEFAULT_RULE
    old_size = model.config.vocab_size
    frequencies, mask = getattr(growth, "frequencies", None), getattr(growth, "mask", None)
    model, changed = resized_model(model, growth, rule, seed, frequencies, mask)
    padding = sum(not pieces for pieces in growth.values())
    bias = ""
    if rule == "mean-of-pieces" and any("bias" in name for name in changed):
        bias = ("; its output bias set so that, at a mask with no context, its logit is that of an old piece as "
                "frequent on the extension's corpus" if matches_prior(rule, frequencies, mask) else
                "; its output bias their mean (the --tokenizer records no frequency of every base piece, as `mlm-tpu "
                "tokenizer extend` with a corpus does, or has no mask token)")
    log(f"The --tokenizer adds {len(growth):,} pieces to {name_or_path}'s (ids {min(growth):,} to {max(growth):,}"
        + (f", {padding} of them padding" if padding else "") + f"): {which or 'its'} vocabulary grows from "
        f"{old_size:,} to {model.config.vocab_size:,} ({', '.join(changed)}), each new row {RULE_WORDS[rule]}{bias} "
        f"(--new-embeddings {rule})")
    return model
