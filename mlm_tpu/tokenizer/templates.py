"""What a trained tokenizer is wrapped in: special tokens and their ids, framing, sentinels, and the transformers
class its folder names, for each family (`--algorithm`) and template (`--template mlm|t5`).

- `mlm`, Unigram (the 🤗 TPU language-modeling example's recipe): [CLS]=0 <pad>=1 [SEP]=2 <unk>=3 [MASK]=4,
  RoBERTa's own layout (<s> <pad> </s> <unk>): TF RoBERTa numbers positions from a padding index hard-coded to 1,
  and PyTorch's embedding gives the pad id's row no gradient, so id 1 must be the pad. `[CLS] A [SEP]` or
  `[CLS] A [SEP] B [SEP]`. (Tokenizers of mlm_tpu 0.2, like the 🤗 TPU example's, have [SEP]=1 <unk>=2 <pad>=3;
  they still load and train, their models aligned as model_folder/pytorch.py says.)
- `mlm`, byte-level BPE: RoBERTa's: <s>=0 <pad>=1 </s>=2 <unk>=3 <mask>=4, `<s> A </s>` or `<s> A </s></s> B </s>`
  (RoBERTa's post-processor), loads as RobertaTokenizerFast.
- `mlm`, WordPiece: BERT's tokens in RoBERTa's order, [CLS]=0 [PAD]=1 [SEP]=2 [UNK]=3 [MASK]=4 (BERT numbers them
  [PAD]=0 [UNK]=1 ..., but our models are RoBERTa's, whose pad must be id 1), `[CLS] A [SEP] B [SEP]` with token
  type ids 0 then 1, loads as BertTokenizerFast.
- `t5`, Unigram: <pad>=0 </s>=1 <unk>=2, and the 100 sentinels <extra_id_0>...<extra_id_99> at the end of the
  vocabulary (<extra_id_0> the last id, as in T5's own); `A </s>` or `A </s> B </s>`; runs of whitespace,
  newlines included, become one space, as T5's SentencePiece normalizer does.

transformers 5 rebuilds a RobertaTokenizer's, BertTokenizer's or T5Tokenizer's pipeline from its own arguments
rather than reading tokenizer.json's (it keeps only the vocabulary and framing). A normalization that class
cannot rebuild (any for RoBERTa's, NFKC for BERT's) would be lost there, so such a folder names
PreTrainedTokenizerFast, which both transformers 4 and 5 load from tokenizer.json as it is.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from tokenizers import AddedToken, Tokenizer, normalizers, processors
from transformers import BertTokenizerFast, PreTrainedTokenizerFast, RobertaTokenizerFast, T5TokenizerFast

from mlm_tpu.errors import UserError

DEFAULT_VOCAB_SIZE = 10048  # the reference recipe's; a multiple of 64 keeps TPU matmuls aligned
NORMALIZATIONS = ("none", "nfkc")
WITHOUT_TOKEN_TYPES = ["input_ids", "attention_mask"]  # RoBERTa has no token types


@dataclass(frozen=True)
class Options:
    """What `tokenizer train` does to text beyond its family's recipe: the same for every family."""

    lowercase: bool = False
    normalization: str = "none"  # or "nfkc": Unicode compatibility forms (ﬁ -> fi, full-width -> ASCII, ...)
    byte_fallback: bool = False  # Unigram: the 256 byte pieces <0x00>..<0xFF> stand in for unknown characters

    def unicode_steps(self) -> list:
        """The normalizers that come first, before a family's own."""
        return [normalizers.NFKC()] if self.normalization == "nfkc" else []

    def lowercase_steps(self) -> list:
        return [normalizers.Lowercase()] if self.lowercase else []


@dataclass(frozen=True)
class Template:
    """A tokenizer recipe: special tokens in id order with their roles, framing, sentinels, transformers class."""

    name: str  # what --template says: mlm or t5
    roles: Dict[str, str]  # role (cls_token, eos_token, ...) -> token; first appearance = id order, from 0
    single: str  # TemplateProcessing framing of one sequence
    pair: str
    framing_tokens: Tuple[str, ...]  # for RoBERTa's post-processor: (cls, sep)
    sentinels: Tuple[str, ...] = ()  # appended at the end of the vocabulary, the first one last
    collapse_whitespace: bool = False
    roberta_processing: bool = False  # RoBERTa's post-processor (its class rebuilds it) instead of single/pair
    wrapper: type = PreTrainedTokenizerFast
    wrapper_arguments: Dict[str, object] = field(default_factory=dict)
    model_input_names: Optional[List[str]] = None  # None: the wrapper's own
    lowercase_argument: Optional[str] = None  # the wrapper's argument that rebuilds lowercasing (BERT's)
    # False: options the wrapper cannot rebuild are refused, not saved under PreTrainedTokenizerFast (the T5 line
    # reads its sentinels through T5TokenizerFast)
    plain_class_fallback: bool = True

    @property
    def tokens(self) -> List[str]:
        return list(dict.fromkeys(self.roles.values()))

    @property
    def reserved(self) -> int:
        """Ids the recipe takes whatever the corpus: its special tokens and sentinels."""
        return len(self.tokens) + len(self.sentinels)

    def added_token(self, token: str) -> AddedToken:
        """Mask and sentinel tokens take the space before them (as RoBERTa's <mask> does), so "the [MASK] of"
        tokenizes like "the capital of", not with a stray "▁" piece."""
        takes_space = token == self.roles.get("mask_token") or token in self.sentinels
        return AddedToken(token, lstrip=takes_space, special=True, normalized=False)

    def post_processor(self, tokenizer: Tokenizer):
        """The framing, with the ids the tokens have in `tokenizer`."""
        ids = [(token, tokenizer.token_to_id(token)) for token in self.framing_tokens]
        if self.roberta_processing:
            cls, sep = ids
            return processors.RobertaProcessing(sep=sep, cls=cls, trim_offsets=True, add_prefix_space=False)
        return processors.TemplateProcessing(single=self.single, pair=self.pair, special_tokens=ids)

    def rebuilt_by_wrapper(self, options: Options) -> bool:
        """Whether transformers 5's class of our wrapper rebuilds the normalization `options` ask for."""
        if self.wrapper is PreTrainedTokenizerFast:
            return True
        lowercase_kept = not options.lowercase or self.lowercase_argument is not None
        return lowercase_kept and options.normalization == "none" and not options.byte_fallback


MLM_TEMPLATE = Template(
    name="mlm",
    roles={"cls_token": "[CLS]", "pad_token": "<pad>", "sep_token": "[SEP]", "unk_token": "<unk>",
           "mask_token": "[MASK]"},
    single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", framing_tokens=("[CLS]", "[SEP]"),
    model_input_names=WITHOUT_TOKEN_TYPES,
)
ROBERTA_TEMPLATE = Template(
    name="mlm",
    roles={"bos_token": "<s>", "cls_token": "<s>", "pad_token": "<pad>", "eos_token": "</s>", "sep_token": "</s>",
           "unk_token": "<unk>", "mask_token": "<mask>"},
    single="<s>:0 $A:0 </s>:0", pair="<s>:0 $A:0 </s>:0 </s>:0 $B:0 </s>:0", framing_tokens=("<s>", "</s>"),
    roberta_processing=True, wrapper=RobertaTokenizerFast,
    wrapper_arguments={"add_prefix_space": False, "trim_offsets": True}, model_input_names=WITHOUT_TOKEN_TYPES,
)
BERT_TEMPLATE = Template(
    name="mlm",
    roles={"cls_token": "[CLS]", "pad_token": "[PAD]", "sep_token": "[SEP]", "unk_token": "[UNK]",
           "mask_token": "[MASK]"},
    single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", framing_tokens=("[CLS]", "[SEP]"),
    wrapper=BertTokenizerFast, wrapper_arguments={"tokenize_chinese_chars": True, "strip_accents": None},
    model_input_names=["input_ids", "token_type_ids", "attention_mask"], lowercase_argument="do_lower_case",
)
T5_SENTINELS = tuple(f"<extra_id_{index}>" for index in range(100))
T5_TEMPLATE = Template(
    name="t5",
    roles={"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"},
    single="$A:0 </s>:0", pair="$A:0 </s>:0 $B:0 </s>:0", framing_tokens=("</s>",),
    sentinels=T5_SENTINELS, collapse_whitespace=True, wrapper=T5TokenizerFast,
    wrapper_arguments={"extra_ids": len(T5_SENTINELS), "additional_special_tokens": list(T5_SENTINELS)},
    plain_class_fallback=False,
)


def as_transformers_tokenizer(tokenizer: Tokenizer, model_max_length: int, template: Template = MLM_TEMPLATE,
                              options: Options = Options()) -> PreTrainedTokenizerFast:
    """Wrap for transformers with every special-token role set, so collators and pipelines find them; in the
    family's class where transformers 5's class of that name rebuilds the same pipeline."""
    wrapper, arguments = template.wrapper, dict(template.wrapper_arguments)
    if not template.rebuilt_by_wrapper(options):
        wrapper, arguments = PreTrainedTokenizerFast, {}
    elif template.lowercase_argument:
        arguments[template.lowercase_argument] = options.lowercase
    if template.model_input_names:
        arguments["model_input_names"] = template.model_input_names
    return wrapper(
        tokenizer_object=tokenizer,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,  # decoding must give back the text as written
        **template.roles,
        **arguments,
    )


def check_room(vocab_size: int, reserved: int, taken_by: str) -> None:
    """Refuse a --vocab-size that the ids taken whatever the trainer learns fill already (`taken_by` says which):
    no piece would be learned, and a trainer keeps them all anyway (WordPiece every character of the corpus),
    giving a larger vocabulary than asked."""
    if vocab_size <= reserved:
        raise UserError(f"--vocab-size {vocab_size} is too small: {taken_by} alone take {reserved} ids; use at least "
                        f"{reserved + 1} (the reference uses {DEFAULT_VOCAB_SIZE})")
