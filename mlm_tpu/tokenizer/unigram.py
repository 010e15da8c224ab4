"""The Unigram family (`--algorithm unigram`, the default): a SentencePiece-style Unigram model.

As the 🤗 TPU language-modeling example trains it: `` and '' become ", a Metaspace pre-tokenizer and
decoder (▁ marks a word start, so decoding gives back ordinary spaced text), a Unigram model trained on
the corpus; its special tokens and framing are the template's (templates.py: mlm or t5).

With byte fallback (`--byte-fallback`, as Llama's and Gemma's SentencePiece models have) the 256 pieces
<0x00>..<0xFF> stand in for any character the vocabulary lacks, so nothing becomes <unk>. The trainer
cannot train with them (tokenizers #1515), so they are added after training, with a score so low that
no text is ever cut into them except an unknown character: the literal text "<0x41>" stays itself.
"""

import json
from typing import Callable, Iterator, List, Tuple

from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import Unigram
from tokenizers.trainers import UnigramTrainer

from mlm_tpu.tokenizer.templates import MLM_TEMPLATE, Options, Template

BYTE_PIECES = tuple(f"<0x{byte:02X}>" for byte in range(256))
BYTE_PIECE_CHARACTERS = "<>x0123456789ABCDEF"  # kept in the vocabulary, so "<0x41>" as text is spelled with them


def train_unigram(read_batches: Callable[[], Iterator[List[str]]], vocab_size: int,
                  template: Template = MLM_TEMPLATE, options: Options = Options(),
                  show_progress: bool = True) -> Tokenizer:
    """Train the Unigram model on the batches of documents `read_batches()` gives; add the template's sentinels
    (and with `options.byte_fallback`, the 256 byte pieces) and framing.

    `vocab_size` counts everything: special tokens, sentinels, byte pieces and trained pieces.
    """
    tokenizer = Tokenizer(Unigram())
    steps = [*options.unicode_steps(), normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if template.collapse_whitespace:
        steps.append(normalizers.Replace(Regex(r"\s+"), " "))
    tokenizer.normalizer = normalizers.Sequence(steps + options.lowercase_steps())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    byte_pieces = BYTE_PIECES if options.byte_fallback else ()
    trainer = UnigramTrainer(vocab_size=vocab_size - len(template.sentinels) - len(byte_pieces),
                             unk_token=template.roles["unk_token"],
                             special_tokens=[template.added_token(token) for token in template.tokens],
                             initial_alphabet=list(BYTE_PIECE_CHARACTERS) if byte_pieces else [],
                             show_progress=show_progress)
    tokenizer.train_from_iterator(read_batches(), trainer=trainer)
    tokenizer.model = _canonical_model(tokenizer, template, byte_pieces)
    if byte_pieces:
        tokenizer.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace()])
    if template.sentinels:
        tokenizer.add_special_tokens([template.added_token(token) for token in reversed(template.sentinels)])
    tokenizer.post_processor = template.post_processor(tokenizer)
    return tokenizer


SCORE_DECIMALS = 6  # SentencePiece keeps float32 scores: ~7 digits are all that carry meaning
PENALTY_STEP = 1e-4  # the trainer's score step between required characters it had to add


def _canonical_model(tokenizer: Tokenizer, template: Template, byte_pieces: Tuple[str, ...]) -> Unigram:
    """The trained model made independent of the trainer's run-to-run randomness.

    The trainer sums its EM statistics in an order that varies between runs (hash maps,
    threads), so scores differ in their last bits; and it gives the characters it must keep
    scores `lowest + k * 1e-4` in hash-set order. Rounding the scores, handing those penalty
    scores out in character order, and sorting by (score, piece) make the same corpus give a
    byte-identical tokenizer.json. (A score whose run-to-run wobble, ~1e-14, straddles a rounding
    boundary would still differ: about once in 10,000 runs of a 10,000-piece vocabulary.)
    The template's sentinels go last, first sentinel last, with score 0 as in T5's conversion. Byte pieces go
    right after the special tokens, as SentencePiece puts them, scored below any spelling of their own text.
    """
    vocab = [tuple(entry) for entry in json.loads(tokenizer.to_str())["model"]["vocab"]]
    count = len(template.tokens)
    assert [piece for piece, _ in vocab[:count]] == template.tokens, "trainer moved the special tokens"
    pieces = [(piece, round(score, SCORE_DECIMALS)) for piece, score in vocab[count:]]
    pieces = _reassign_penalty_scores(pieces)
    pieces.sort(key=lambda entry: (-entry[1], entry[0]))
    sentinels = [(token, 0.0) for token in reversed(template.sentinels)]
    byte_score = _byte_piece_score(pieces) if byte_pieces else 0.0
    return Unigram(vocab[:count] + [(piece, byte_score) for piece in byte_pieces] + pieces + sentinels, template.tokens.index(template.roles["unk_token"]),
                   bool(byte_pieces))


def _byte_piece_score(pieces: List[Tuple[str, float]]) -> float:
    """Below what any cut of the 6 characters "<0xNN>" into known pieces scores (each piece scores at least the
    lowest), so Viterbi takes a byte piece only where nothing else covers the text: an unknown character."""
    lowest = min(score for _, score in pieces)
    return len(BYTE_PIECES[0]) * lowest - 1.0


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
