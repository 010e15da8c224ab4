"""The Unigram tokenizer recipes (templates): the 🤗 TPU language-modeling example's, and T5's.

Both: `` and '' become ", a Metaspace pre-tokenizer and decoder (SentencePiece-style ▁ word
starts, so decoding gives back ordinary spaced text), a Unigram model trained on the corpus.
They differ in special tokens and framing:
- `mlm` (RoBERTa): [CLS]=0 <pad>=1 [SEP]=2 <unk>=3 [MASK]=4, RoBERTa's own layout (<s> <pad> </s> <unk>):
  TF RoBERTa numbers positions from a padding index hard-coded to 1, and PyTorch's embedding gives the
  pad id's row no gradient, so id 1 must be the pad. `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`.
  (Tokenizers of mlm_tpu 0.2, like the 🤗 TPU example's, have [SEP]=1 <unk>=2 <pad>=3; they still load
  and train, their models aligned as model_folder/pytorch.py says.)
- `t5`: <pad>=0 </s>=1 <unk>=2, and the 100 sentinels <extra_id_0>...<extra_id_99> at the end of
  the vocabulary (<extra_id_0> the last id, as in T5's own); `A </s>` or `A </s> B </s>`; runs of
  whitespace, newlines included, become one space, as T5's SentencePiece normalizer does.
"""

import json
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Tuple

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import Unigram
from tokenizers.trainers import UnigramTrainer
from transformers import PreTrainedTokenizerFast, T5TokenizerFast


@dataclass(frozen=True)
class Template:
    """A tokenizer recipe: special tokens in id order with their roles, framing, sentinels, transformers class."""

    name: str
    roles: Dict[str, str]  # role (cls_token, eos_token, ...) -> token; insertion order = id order, from 0
    single: str  # TemplateProcessing framing of one sequence
    pair: str
    framing_tokens: Tuple[str, ...]
    sentinels: Tuple[str, ...] = ()  # appended at the end of the vocabulary, the first one last
    collapse_whitespace: bool = False
    wrapper: type = PreTrainedTokenizerFast
    wrapper_arguments: Dict[str, object] = field(default_factory=dict)

    @property
    def tokens(self) -> List[str]:
        return list(self.roles.values())

    @property
    def reserved(self) -> int:
        """Ids the recipe takes whatever the corpus: its special tokens and sentinels."""
        return len(self.roles) + len(self.sentinels)

    def added_token(self, token: str) -> AddedToken:
        """Mask and sentinel tokens take the space before them (as RoBERTa's <mask> does), so "the [MASK] of"
        tokenizes like "the capital of", not with a stray "▁" piece."""
        takes_space = token == self.roles.get("mask_token") or token in self.sentinels
        return AddedToken(token, lstrip=takes_space, special=True, normalized=False)


MLM_TEMPLATE = Template(
    name="mlm",
    roles={"cls_token": "[CLS]", "pad_token": "<pad>", "sep_token": "[SEP]", "unk_token": "<unk>",
           "mask_token": "[MASK]"},
    single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", framing_tokens=("[CLS]", "[SEP]"),
    wrapper_arguments={"model_input_names": ["input_ids", "attention_mask"]},  # RoBERTa has no token types
)
T5_SENTINELS = tuple(f"<extra_id_{index}>" for index in range(100))
T5_TEMPLATE = Template(
    name="t5",
    roles={"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"},
    single="$A:0 </s>:0", pair="$A:0 </s>:0 $B:0 </s>:0", framing_tokens=("</s>",),
    sentinels=T5_SENTINELS, collapse_whitespace=True, wrapper=T5TokenizerFast,
    wrapper_arguments={"extra_ids": len(T5_SENTINELS), "additional_special_tokens": list(T5_SENTINELS)},
)
TEMPLATES = {template.name: template for template in (MLM_TEMPLATE, T5_TEMPLATE)}


def train_unigram(batches: Iterable[List[str]], vocab_size: int, template: Template = MLM_TEMPLATE,
                  show_progress: bool = True) -> Tokenizer:
    """Train the Unigram model on batches of documents; add the template's sentinels and framing.

    `vocab_size` counts everything: special tokens, sentinels and trained pieces.
    """
    tokenizer = Tokenizer(Unigram())
    steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if template.collapse_whitespace:
        steps.append(normalizers.Replace(Regex(r"\s+"), " "))
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = UnigramTrainer(vocab_size=vocab_size - len(template.sentinels), unk_token=template.roles["unk_token"],
                             special_tokens=[template.added_token(token) for token in template.tokens],
                             show_progress=show_progress)
    tokenizer.train_from_iterator(batches, trainer=trainer)
    tokenizer.model = _canonical_model(tokenizer, template)
    if template.sentinels:
        tokenizer.add_special_tokens([template.added_token(token) for token in reversed(template.sentinels)])
    tokenizer.post_processor = processors.TemplateProcessing(
        single=template.single, pair=template.pair,
        special_tokens=[(token, tokenizer.token_to_id(token)) for token in template.framing_tokens])
    return tokenizer


SCORE_DECIMALS = 6  # SentencePiece keeps float32 scores: ~7 digits are all that carry meaning
PENALTY_STEP = 1e-4  # the trainer's score step between required characters it had to add


def _canonical_model(tokenizer: Tokenizer, template: Template) -> Unigram:
    """The trained model made independent of the trainer's run-to-run randomness.

    The trainer sums its EM statistics in an order that varies between runs (hash maps,
    threads), so scores differ in their last bits; and it gives the characters it must keep
    scores `lowest + k * 1e-4` in hash-set order. Rounding the scores, handing those penalty
    scores out in character order, and sorting by (score, piece) make the same corpus give a
    byte-identical tokenizer.json. (A score whose run-to-run wobble, ~1e-14, straddles a rounding
    boundary would still differ: about once in 10,000 runs of a 10,000-piece vocabulary.)
    The template's sentinels go last, first sentinel last, with score 0 as in T5's conversion.
    """
    vocab = [tuple(entry) for entry in json.loads(tokenizer.to_str())["model"]["vocab"]]
    count = len(template.tokens)
    assert [piece for piece, _ in vocab[:count]] == template.tokens, "trainer moved the special tokens"
    pieces = [(piece, round(score, SCORE_DECIMALS)) for piece, score in vocab[count:]]
    pieces = _reassign_penalty_scores(pieces)
    pieces.sort(key=lambda entry: (-entry[1], entry[0]))
    sentinels = [(token, 0.0) for token in reversed(template.sentinels)]
    return Unigram(vocab[:count] + pieces + sentinels, template.tokens.index(template.roles["unk_token"]), False)


def _reassign_penalty_scores(pieces: List[Tuple[str, float]]) -> List[Tuple[str, float]]:
    """Give the single characters on the penalty grid above the lowest score their scores in a fixed order."""
    if not pieces:
        return pieces
    lowest = min(score for _, score in pieces)
    characters = sum(1 for piece, _ in pieces if len(piece) == 1)

    def on_grid(piece: str, score: float) -> bool:
        steps = (score - lowest) / PENALTY_STEP
        return len(piece) == 1 and round(steps) <= characters and abs(steps - round(steps)) < 0.01

    grid = [index for index, (piece, score) in enumerate(pieces) if on_grid(piece, score)]
    names = sorted(pieces[index][0] for index in grid)
    scores = sorted((pieces[index][1] for index in grid), reverse=True)
    reassigned = list(pieces)
    for index, name, score in zip(grid, names, scores):
        reassigned[index] = (name, score)
    return reassigned


def as_transformers_tokenizer(tokenizer: Tokenizer, model_max_length: int,
                              template: Template = MLM_TEMPLATE) -> PreTrainedTokenizerFast:
    """Wrap for transformers with every special-token role set, so collators and pipelines find them."""
    return template.wrapper(
        tokenizer_object=tokenizer,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,  # decoding must give back the text as written
        **template.roles,
        **template.wrapper_arguments,
    )
