"""The tokenizer families `tokenizer train --algorithm` makes, each with its trainer and the templates it fits.

| --algorithm | template mlm: special tokens, ids 0-4 | loads as | word starts |
| unigram (default) | [CLS] <pad> [SEP] <unk> [MASK] | PreTrainedTokenizerFast | a piece starting with ▁ |
| bpe (byte-level) | <s> <pad> </s> <unk> <mask> | RobertaTokenizerFast | a piece starting with Ġ |
| wordpiece | [CLS] [PAD] [SEP] [UNK] [MASK] | BertTokenizerFast | a piece not starting with ## |

Only Unigram has a `t5` template: T5's vocabulary is a SentencePiece Unigram model, and transformers'
T5 tokenizer class rebuilds one whatever tokenizer.json holds.
"""

from dataclasses import dataclass
from typing import Callable, Dict

from mlm_tpu.tokenizer.bpe import BYTES, train_bpe
from mlm_tpu.tokenizer.templates import BERT_TEMPLATE, MLM_TEMPLATE, ROBERTA_TEMPLATE, T5_TEMPLATE, Options, Template
from mlm_tpu.tokenizer.unigram import BYTE_PIECES, train_unigram
from mlm_tpu.tokenizer.wordpiece import train_wordpiece


@dataclass(frozen=True)
class Family:
    """One --algorithm: how it trains, the templates it fits, and the ids its vocabularies always hold."""

    algorithm: str  # what --algorithm says
    title: str  # in words, for logs and cards
    train: Callable  # (read_batches, vocab_size, template, options, show_progress) -> tokenizers.Tokenizer
    templates: Dict[str, Template]
    alphabet: int = 0  # ids every vocabulary of the family holds beside the template's (BPE's 256 bytes; WordPiece's
    # are the corpus' characters, which train_wordpiece counts and checks)
    byte_fallback: bool = False  # whether --byte-fallback applies
    reads_twice: bool = False  # whether training reads the corpus twice

    def reserved(self, template: Template, options: Options) -> int:
        """Ids taken whatever the corpus: special tokens, sentinels, the family's alphabet, byte pieces."""
        return template.reserved + self.alphabet + (len(BYTE_PIECES) if options.byte_fallback else 0)


FAMILIES = {family.algorithm: family for family in (
    Family("unigram", "Unigram", train_unigram, {"mlm": MLM_TEMPLATE, "t5": T5_TEMPLATE}, byte_fallback=True),
    Family("bpe", "byte-level BPE", train_bpe, {"mlm": ROBERTA_TEMPLATE}, alphabet=BYTES),
    Family("wordpiece", "WordPiece", train_wordpiece, {"mlm": BERT_TEMPLATE}, reads_twice=True),
)}
DEFAULT_ALGORITHM = "unigram"
TEMPLATE_NAMES = ("mlm", "t5")
