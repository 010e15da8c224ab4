"""The Unigram tokenizer recipe of the 🤗 TPU language-modeling example, as a transformers tokenizer.

Normalizer: `` and '' become "; Metaspace pre-tokenizer and decoder (SentencePiece-style ▁ word
starts, so decoding gives back ordinary spaced text); special tokens [CLS] [SEP] <unk> <pad>
[MASK]; every sequence framed as `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`.
"""

import json
from dataclasses import dataclass
from typing import Dict, Iterable, List, Tuple

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import Unigram
from tokenizers.trainers import UnigramTrainer
from transformers import PreTrainedTokenizerFast


@dataclass(frozen=True)
class SpecialTokens:
    """Special tokens in id order, and the transformers role each one fills."""

    roles: Dict[str, str]  # role (cls_token, sep_token, ...) -> token; insertion order = id order

    @property
    def tokens(self) -> List[str]:
        return list(self.roles.values())

    def for_trainer(self) -> List:
        """The tokens as the trainer adds them: the mask token takes the space before it (as RoBERTa's
        <mask> does), so "the [MASK] of" tokenizes like "the capital of", not with a stray "▁" piece."""
        mask = self.roles.get("mask_token")
        return [AddedToken(token, lstrip=True, special=True, normalized=False) if token == mask else token
                for token in self.tokens]


MLM_SPECIAL_TOKENS = SpecialTokens(roles={
    "cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "<unk>", "pad_token": "<pad>",
    "mask_token": "[MASK]",
})


def train_unigram(batches: Iterable[List[str]], vocab_size: int, show_progress: bool = True) -> Tokenizer:
    """Train the Unigram model on batches of documents and attach the [CLS]/[SEP] framing."""
    specials = MLM_SPECIAL_TOKENS
    tokenizer = Tokenizer(Unigram())
    tokenizer.normalizer = normalizers.Sequence([normalizers.Replace("``", '"'), normalizers.Replace("''", '"')])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = UnigramTrainer(vocab_size=vocab_size, unk_token=specials.roles["unk_token"],
                             special_tokens=specials.for_trainer(), show_progress=show_progress)
    tokenizer.train_from_iterator(batches, trainer=trainer)
    tokenizer.model = _canonical_model(tokenizer, specials)
    cls, sep = specials.roles["cls_token"], specials.roles["sep_token"]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0",
        pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, tokenizer.token_to_id(cls)), (sep, tokenizer.token_to_id(sep))],
    )
    return tokenizer


SCORE_DECIMALS = 6  # SentencePiece keeps float32 scores: ~7 digits are all that carry meaning
PENALTY_STEP = 1e-4  # the trainer's score step between required characters it had to add


def _canonical_model(tokenizer: Tokenizer, specials: SpecialTokens) -> Unigram:
    """The trained model made independent of the trainer's run-to-run randomness.

    The trainer sums its EM statistics in an order that varies between runs (hash maps,
    threads), so scores differ in their last bits; and it gives the characters it must keep
    scores `lowest + k * 1e-4` in hash-set order. Rounding the scores, handing those penalty
    scores out in character order, and sorting by (score, piece) make the same corpus give a
    byte-identical tokenizer.json. (A score whose run-to-run wobble, ~1e-14, straddles a rounding
    boundary would still differ: about once in 10,000 runs of a 10,000-piece vocabulary.)
    """
    vocab = [tuple(entry) for entry in json.loads(tokenizer.to_str())["model"]["vocab"]]
    count = len(specials.tokens)
    assert [piece for piece, _ in vocab[:count]] == specials.tokens, "trainer moved the special tokens"
    pieces = [(piece, round(score, SCORE_DECIMALS)) for piece, score in vocab[count:]]
    pieces = _reassign_penalty_scores(pieces)
    pieces.sort(key=lambda entry: (-entry[1], entry[0]))
    return Unigram(vocab[:count] + pieces, specials.tokens.index(specials.roles["unk_token"]), False)


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


def as_transformers_tokenizer(tokenizer: Tokenizer, model_max_length: int) -> PreTrainedTokenizerFast:
    """Wrap for transformers with every special-token role set, so collators and pipelines find them."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,  # decoding must give back the text as written
        model_input_names=["input_ids", "attention_mask"],  # RoBERTa has no token types
        **MLM_SPECIAL_TOKENS.roles,
    )
