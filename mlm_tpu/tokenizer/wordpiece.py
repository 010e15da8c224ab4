"""The WordPiece family (`--algorithm wordpiece`): BERT's tokenizer.

BERT's normalizer (control characters dropped, CJK characters set apart, lowercasing and accent stripping with
`--lowercase`, as BERT's uncased models) and pre-tokenizer (words and punctuation), and a WordPiece vocabulary
in which a piece that continues a word starts with ##. A word the vocabulary cannot spell becomes [UNK].

The trainer (BPE's, underneath) numbers the continuation characters ##a, ##b, ... in the order of a hash map,
which changes from run to run, and those numbers break ties between equally frequent merges, so the same
corpus could give another vocabulary. So the corpus is read twice: once to find the continuation characters,
then to train with them numbered in character order; the result is the same on every run.
The first read also counts the alphabet (every character, and ##c for those inside words), which the trainer
keeps whatever the vocabulary size: a --vocab-size it fills is refused then, before the training read.
"""

from typing import Callable, Iterator, List, Tuple

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import WordPiece
from tokenizers.trainers import WordPieceTrainer

from mlm_tpu.tokenizer.templates import BERT_TEMPLATE, Options, Template, check_room

CONTINUATION = "##"
MIN_FREQUENCY = 2  # as 🤗's BertWordPieceTokenizer trains


def _untrained(template: Template, options: Options, vocab=None) -> Tokenizer:
    """BERT's pipeline around a WordPiece model of `vocab` (none: for the trainer to fill)."""
    tokenizer = Tokenizer(WordPiece(vocab, unk_token=template.roles["unk_token"], continuing_subword_prefix=CONTINUATION))
    bert = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                      lowercase=options.lowercase)
    tokenizer.normalizer = normalizers.Sequence([*options.unicode_steps(), bert]) if options.unicode_steps() else bert
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix=CONTINUATION)
    return tokenizer


def _alphabet(read_batches, template: Template, options: Options, show_progress: bool) -> Tuple[List[str], List[str]]:
    """(characters, continuation characters): every character of the corpus, and ##c for every character c that
    occurs inside a word; the trainer adds them all before any merge, however small the vocabulary asked for."""
    counter = _untrained(template, options)
    counter.train_from_iterator(read_batches(), trainer=WordPieceTrainer(vocab_size=0, show_progress=show_progress))
    pieces = sorted(counter.get_vocab())
    return ([piece for piece in pieces if len(piece) == 1],
            [piece for piece in pieces if piece.startswith(CONTINUATION) and len(piece) == len(CONTINUATION) + 1])


def train_wordpiece(read_batches: Callable[[], Iterator[List[str]]], vocab_size: int,
                    template: Template = BERT_TEMPLATE, options: Options = Options(),
                    show_progress: bool = True) -> Tokenizer:
    """Train WordPiece on the batches of documents `read_batches()` gives (read twice), framed as the template says.

    `vocab_size` counts everything: special tokens, characters, continuation characters and merged pieces.
    """
    corpus_characters, continuations = _alphabet(read_batches, template, options, show_progress)
    check_room(vocab_size, template.reserved + len(corpus_characters) + len(continuations),
               f"the {template.name} template's special tokens and the corpus' {len(corpus_characters)} characters and "
               f"{len(continuations)} {CONTINUATION} continuations")
    special = [template.added_token(token) for token in template.tokens]
    trainer = WordPieceTrainer(vocab_size=vocab_size, min_frequency=MIN_FREQUENCY, show_progress=show_progress,
                               continuing_subword_prefix=CONTINUATION,
                               special_tokens=special + [AddedToken(piece) for piece in continuations])
    trained = _untrained(template, options)
    trained.train_from_iterator(read_batches(), trainer=trainer)
    # In id order: special tokens, continuation characters (numbered first, above), characters, merged pieces.
    # Saved as BERT's vocabularies are: special tokens, characters, continuation characters, the rest.
    pieces = [piece for piece, _ in sorted(trained.get_vocab().items(), key=lambda item: item[1])][len(special):]
    assert pieces[:len(continuations)] == continuations, "the trainer numbered the continuation characters anew"
    characters = [piece for piece in pieces[len(continuations):] if len(piece) == 1]
    rest = pieces[len(continuations) + len(characters):]
    order = template.tokens + characters + continuations + rest
    tokenizer = _untrained(template, options, vocab={piece: index for index, piece in enumerate(order)})
    tokenizer.add_special_tokens(special)
    tokenizer.post_processor = template.post_processor(tokenizer)
    return tokenizer
