"""`python -m mlm_tpu.tokenizer {train,encode,extend}` (also `mlm-tpu tokenizer ...`)."""

import argparse
import json
from typing import Optional, Sequence

from mlm_tpu.cli.flags import ConfigFlags, add_corpus_flags, add_flag
from mlm_tpu.cli.inputs import read_texts
from mlm_tpu.tokenizer import encode, extension, training
from mlm_tpu.tokenizer.extension import DEFAULT_MIN_FREQUENCY, TokenizerExtensionConfig, extend_tokenizer
from mlm_tpu.tokenizer.families import FAMILIES, TEMPLATE_NAMES
from mlm_tpu.tokenizer.load import load_tokenizer
from mlm_tpu.tokenizer.templates import NORMALIZATIONS
from mlm_tpu.tokenizer.training import DEFAULT_VOCAB_SIZE, TokenizerTrainingConfig, train_tokenizer

TRAIN_FLAGS = ConfigFlags(TokenizerTrainingConfig)
EXTEND_FLAGS = ConfigFlags(TokenizerExtensionConfig)


def add_train_flags(parser: argparse.ArgumentParser) -> None:
    add_corpus_flags(TRAIN_FLAGS, parser)
    group = parser.add_argument_group("tokenizer")
    TRAIN_FLAGS.add(group, "--algorithm", choices=list(FAMILIES),
                    help="The tokenizer family (default: unigram). 'unigram': SentencePiece-style pieces, ▁ starting "
                         "a word, as the 🤗 TPU example trains them. 'bpe': byte-level BPE as RoBERTa's (<s>=0 <pad>=1 "
                         "</s>=2 <unk>=3 <mask>=4, <s> A </s></s> B </s>, Ġ before a word; any text is spelled in its "
                         "bytes at worst, so nothing becomes <unk>; loads as RobertaTokenizerFast). 'wordpiece': as "
                         "BERT's (BERT's normalizer and pre-tokenizer, ## before a piece that continues a word, "
                         "[CLS] A [SEP] B [SEP] with token type ids; [CLS]=0 [PAD]=1 [SEP]=2 [UNK]=3 [MASK]=4, the "
                         "pad at 1 as RoBERTa models need; loads as BertTokenizerFast; reads the corpus twice).")
    TRAIN_FLAGS.add(group, "--template", choices=list(TEMPLATE_NAMES),
                    help="Special tokens and framing: 'mlm' (the default: the family's own for a masked LM; for "
                         "unigram RoBERTa's layout [CLS]=0 <pad>=1 [SEP]=2 <unk>=3 [MASK]=4, [CLS] A [SEP]) or 't5' "
                         "(unigram only: <pad>=0 </s>=1 <unk>=2, </s> after every sequence, sentinels "
                         "<extra_id_0>..<extra_id_99> at the end of the vocabulary; loads as T5TokenizerFast).")
    TRAIN_FLAGS.add(group, "--byte-fallback", action="store_true",
                    help="unigram only: add the 256 byte pieces <0x00>..<0xFF>, which spell any character the "
                         "vocabulary lacks (emoji, rare scripts), so nothing becomes <unk> (they count in "
                         "--vocab-size).")
    TRAIN_FLAGS.add(group, "--lowercase", action="store_true",
                    help="Lowercase text before tokenizing (wordpiece: also strips accents, as BERT's uncased "
                         "models; bpe: the folder names PreTrainedTokenizerFast, see --normalization). Default: "
                         "cased. Not with --template t5.")
    TRAIN_FLAGS.add(group, "--normalization", choices=list(NORMALIZATIONS),
                    help="Unicode normalization before the family's own: 'none' (the default) or 'nfkc' "
                         "(compatibility forms folded: ﬁ -> fi, full-width letters -> ASCII, ² -> 2). Where "
                         "transformers 5's class of the family would rebuild the pipeline without what is asked "
                         "(RobertaTokenizer: any normalization, --lowercase too; BertTokenizer: nfkc), the folder "
                         "names PreTrainedTokenizerFast, which loads tokenizer.json as it is. Not with --template t5.")
    TRAIN_FLAGS.add(group, "--vocab-size", type=int,
                    help=f"Vocabulary size to aim for, special tokens included (default: {DEFAULT_VOCAB_SIZE}). "
                         "A small corpus may yield fewer pieces; the summary says how many.")
    TRAIN_FLAGS.add(group, "--batch-size", type=int, help="Documents handed to the trainer at a time.")
    TRAIN_FLAGS.add(group, "--model-max-length", type=int, help="Longest sequence models using this tokenizer accept.")
    TRAIN_FLAGS.add(group, "--sample-documents", type=int, metavar="N",
                    help="Train on N documents drawn uniformly from the whole corpus (read once, holding only the "
                         "sample: memory follows N, not the corpus size), as for a C4-sized corpus; the README's "
                         "'Train a tokenizer' says how large a sample takes how much memory (default: every document).")
    TRAIN_FLAGS.add(group, "--seed", type=int,
                    help="Which sample --sample-documents draws; the same seed and corpus give the same tokenizer "
                         "(default: 42).")
    TRAIN_FLAGS.add(group, "--output-dir", required=True,
                    help="Folder to save the tokenizer in (created if missing; other files in it are left alone). "
                         "A tokenizer already there is refused, unless --overwrite.")
    TRAIN_FLAGS.add(group, "--overwrite", "--overwrite-output-dir", action="store_true",
                    help="Replace the tokenizer files an earlier mlm_tpu command wrote in --output-dir. A file "
                         "mlm_tpu did not write (or that was changed since) is never replaced, even so.")
    hub = parser.add_argument_group("hub")
    TRAIN_FLAGS.add(hub, "--push-to-hub", action="store_true",
                    help="After saving locally, upload the folder to the 🤗 Hub (login with "
                         "`huggingface-cli login` or set HF_TOKEN).")
    TRAIN_FLAGS.add(hub, "--hub-model-id",
                    help="Hub repo to push to, e.g. user/my-tokenizer (default: --output-dir's name); implies "
                         "--push-to-hub.")


def add_encode_flags(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--tokenizer", "--tokenizer-name-or-path", required=True,
             help="A tokenizer folder (from `train`) or a Hub name.")
    add_flag(parser, "--json", action="store_true", help="Print one JSON object per text instead of a table.")
    parser.add_argument("texts", nargs="*", help="Texts to encode (default: one per line on stdin).")


def add_extend_flags(parser: argparse.ArgumentParser) -> None:
    add_corpus_flags(EXTEND_FLAGS, parser)
    group = parser.add_argument_group("extension")
    EXTEND_FLAGS.add(group, "--tokenizer", "--tokenizer-name-or-path",
                     help="The base: a tokenizer folder (WordPiece, BPE or Unigram; saved by transformers 4 or 5), a "
                          "model folder or a Hub name. Its pieces keep their ids.")
    EXTEND_FLAGS.add(group, "--num-new-pieces", type=int, metavar="N",
                     help="Add the N words of the corpus that save the most pieces: frequency x (pieces the base "
                          "cuts them into - 1). With BPE, the merge steps a word needs count among the N. Give this "
                          "or --new-pieces-file.")
    EXTEND_FLAGS.add(group, "--new-pieces-file", metavar="FILE",
                     help="Add these words instead, one a line, as written in text (each must be one word to the "
                          "base's pre-tokenizer, cut into two pieces or more); a corpus is then optional, for the "
                          "before-and-after figures.")
    EXTEND_FLAGS.add(group, "--min-frequency", type=int,
                     help=f"Corpus words seen fewer times are not candidates (default: {DEFAULT_MIN_FREQUENCY}).")
    EXTEND_FLAGS.add(group, "--pad-to-multiple-of", type=int, metavar="M",
                     help="Round the vocabulary up to a multiple of M (64 keeps TPU matmuls aligned) with padding "
                          "pieces '[unused N]' that no text reaches (default: no padding).")
    EXTEND_FLAGS.add(group, "--output-dir", required=True,
                     help="Folder to save the extended tokenizer in, with tokenizer_extension.json (the new pieces, "
                          "how the base cut each, pieces per word before and after). A tokenizer already there is "
                          "refused, unless --overwrite.")
    EXTEND_FLAGS.add(group, "--overwrite", "--overwrite-output-dir", action="store_true",
                     help="Replace the tokenizer files an earlier mlm_tpu command wrote in --output-dir. A file "
                          "mlm_tpu did not write (or that was changed since) is never replaced, even so.")


def run_train(args: argparse.Namespace) -> None:
    train_tokenizer(TRAIN_FLAGS.build(args))


def run_extend(args: argparse.Namespace) -> None:
    extend_tokenizer(EXTEND_FLAGS.build(args))


def run_encode(args: argparse.Namespace) -> None:
    texts = read_texts(args.texts, "texts")
    tokenizer = load_tokenizer(args.tokenizer)
    starts = encode.word_starts_if_known(tokenizer)
    if not args.json and starts:
        print(f"family:  {starts.family}; {starts.describe()}\n")
    for item in encode.encode_texts(tokenizer, texts):
        if args.json:
            print(json.dumps(item, ensure_ascii=False))
        else:
            print(f"text:    {item['text']}\ntokens:  {' '.join(item['pieces'])}\nids:     "
                  f"{' '.join(map(str, item['ids']))}\ndecoded: {item['decoded']}\n")


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Train a tokenizer (Unigram, byte-level BPE or "
                                                            "WordPiece), look at how one encodes text, or extend one "
                                                            "with new pieces.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{train,encode,extend}")
    for name, module, add_flags, run in (("train", training, add_train_flags, run_train),
                                         ("encode", encode, add_encode_flags, run_encode),
                                         ("extend", extension, add_extend_flags, run_extend)):
        sub = commands.add_parser(name, help=module.__doc__.splitlines()[0], description=module.__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        add_flags(sub)
        sub.set_defaults(run=run)
    return parser


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.tokenizer") -> None:
    args = build_parser(prog).parse_args(argv)
    args.run(args)

