"""The byte-level BPE family (`--algorithm bpe`): RoBERTa's (and GPT-2's) tokenizer.

Text is cut into words by GPT-2's pattern, and each word is spelled in its UTF-8 bytes, shown as printable
characters (Ġ is the space byte a word after the first starts with). The 256 bytes are the alphabet, so any
text, emoji, code and CJK included, is spelled with them at worst: nothing ever becomes <unk>. Merges are
learned from pairs seen at least twice, as 🤗's RoBERTa recipe does. The trainer is deterministic (alphabet in
byte order, ties between pairs broken by their ids), so the same corpus gives the same tokenizer.json.
"""

from typing import Callable, Iterator, List

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

from mlm_tpu.tokenizer.templates import ROBERTA_TEMPLATE, Options, Template

BYTES = 256  # the alphabet every byte-level vocabulary holds
MIN_FREQUENCY = 2  # a pair seen once is no pattern


def train_bpe(read_batches: Callable[[], Iterator[List[str]]], vocab_size: int,
              template: Template = ROBERTA_TEMPLATE, options: Options = Options(),
              show_progress: bool = True) -> Tokenizer:
    """Train byte-level BPE on the batches of documents `read_batches()` gives, framed as the template says.

    `vocab_size` counts everything: special tokens, the 256 bytes and the merges.
    """
    tokenizer = Tokenizer(BPE())
    steps = options.unicode_steps() + options.lowercase_steps()
    if steps:
        tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # RoBERTa's: "Hello" != " Hello"
    tokenizer.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(vocab_size=vocab_size, min_frequency=MIN_FREQUENCY,
                         special_tokens=[template.added_token(token) for token in template.tokens],
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=show_progress)
    tokenizer.train_from_iterator(read_batches(), trainer=trainer)
    tokenizer.post_processor = template.post_processor(tokenizer)
    return tokenizer
