"""`python -m mlm_tpu.tokenizer train`: train a Unigram tokenizer on a corpus and save it.

The result is a `save_pretrained` folder that `AutoTokenizer.from_pretrained` loads, plus
`tokenizer_training.json` saying how it was made. It is always saved locally, and pushed to the
Hub when asked.
"""

import argparse
import json
import os
import platform
import sys
import time

import tokenizers
import transformers
from tqdm.auto import tqdm

import mlm_tpu
from mlm_tpu.cli import add_flag
from mlm_tpu.corpus import Corpus, add_corpus_arguments, corpus_source_from_args
from mlm_tpu.errors import UserError
from mlm_tpu.hub import push_folder_to_hub
from mlm_tpu.output_dir import check_output_dir, staged_output_dir
from mlm_tpu.tokenizer.unigram import TEMPLATES, as_transformers_tokenizer, train_unigram

TRAINING_INFO_FILE = "tokenizer_training.json"
DEFAULT_VOCAB_SIZE = 10048  # the reference recipe's; a multiple of 64 keeps TPU matmuls aligned


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_corpus_arguments(parser)
    group = parser.add_argument_group("tokenizer")
    add_flag(group, "--template", choices=sorted(TEMPLATES), default="mlm",
             help="Special tokens and framing: 'mlm' (RoBERTa: [CLS]=0 [SEP]=1 <unk>=2 <pad>=3 [MASK]=4, "
                  "[CLS] A [SEP]) or 't5' (<pad>=0 </s>=1 <unk>=2, </s> after every sequence, sentinels "
                  "<extra_id_0>..<extra_id_99> at the end of the vocabulary; loads as T5TokenizerFast). Default: mlm.")
    add_flag(group, "--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE,
             help=f"Vocabulary size to aim for, special tokens included (default: {DEFAULT_VOCAB_SIZE}). "
                  "A small corpus may yield fewer pieces; the summary says how many.")
    add_flag(group, "--batch-size", type=int, default=1000,
             help="Documents handed to the trainer at a time (default: 1000).")
    add_flag(group, "--model-max-length", type=int, default=512,
             help="Longest sequence models using this tokenizer accept (default: 512).")
    add_flag(group, "--output-dir", required=True, help="Folder to save the tokenizer in (created if missing).")
    add_flag(group, "--overwrite", "--overwrite-output-dir", action="store_true",
             help="Allow --output-dir to hold files already; the tokenizer's files replace theirs.")
    hub = parser.add_argument_group("hub")
    add_flag(hub, "--push-to-hub", action="store_true",
             help="After saving locally, upload the folder to the 🤗 Hub (login with "
                  "`huggingface-cli login` or set HF_TOKEN).")
    add_flag(hub, "--hub-model-id", default=None,
             help="Hub repo to push to, e.g. user/my-tokenizer (default: --output-dir's name); implies --push-to-hub.")


def check_arguments(args: argparse.Namespace) -> None:
    reserved = TEMPLATES[args.template].reserved
    if args.vocab_size <= reserved:
        raise UserError(f"--vocab-size {args.vocab_size} is too small: the {args.template} template's special tokens "
                        f"alone take {reserved} ids; use at least {reserved + 1} (the reference uses {DEFAULT_VOCAB_SIZE})")
    if args.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, not {args.batch_size}")
    if args.model_max_length < 2:
        raise UserError(f"--model-max-length must leave room for the tokens framing a sequence: at least 2, not {args.model_max_length}")
    check_output_dir(args.output_dir, args.overwrite)


def _training_info(args: argparse.Namespace, corpus: Corpus, vocab_size: int, seconds: float) -> dict:
    return {
        "corpus": corpus.source.describe(),
        "documents": corpus.documents_read,
        "characters": corpus.characters_read,
        "template": args.template,
        "vocab_size_requested": args.vocab_size,
        "vocab_size": vocab_size,
        "model_max_length": args.model_max_length,
        "seconds": round(seconds, 2),
        "versions": {"mlm_tpu": mlm_tpu.__version__, "tokenizers": tokenizers.__version__,
                     "transformers": transformers.__version__, "python": platform.python_version()},
    }


def _progress_batches(corpus: Corpus, batch_size: int) -> "tqdm":
    """The corpus' batches, counting documents on a progress bar as the trainer consumes them."""
    with tqdm(desc=f"reading {corpus.name()}", unit=" docs", total=corpus.source.limit, file=sys.stderr) as bar:
        for batch in corpus.batches(batch_size):
            bar.update(len(batch))
            yield batch


def train(args: argparse.Namespace) -> str:
    """Train, save (atomically) and optionally push; return the output folder."""
    check_arguments(args)
    corpus = Corpus(corpus_source_from_args(args))
    template = TEMPLATES[args.template]
    print(f"Training a Unigram tokenizer ({template.name} template, vocabulary {args.vocab_size}) on {corpus.name()}",
          file=sys.stderr)
    started = time.perf_counter()
    # The trainer draws its own bars on stdout; off a terminal they are only blank lines.
    tokenizer = train_unigram(_progress_batches(corpus, args.batch_size), args.vocab_size, template,
                              show_progress=sys.stdout.isatty())
    seconds = time.perf_counter() - started
    wrapped = as_transformers_tokenizer(tokenizer, args.model_max_length, template)
    info = _training_info(args, corpus, tokenizer.get_vocab_size(), seconds)
    with staged_output_dir(args.output_dir) as staging:
        wrapped.save_pretrained(staging)
        with open(os.path.join(staging, TRAINING_INFO_FILE), "w", encoding="utf-8") as stream:
            json.dump(info, stream, indent=2)
            stream.write("\n")
    short = "" if info["vocab_size"] >= args.vocab_size else " (the corpus is too small for more)"
    print(f"Trained on {info['documents']:,} documents, {info['characters']:,} characters: vocabulary "
          f"{info['vocab_size']:,}{short}, {seconds:.1f} s. Saved to {args.output_dir}", file=sys.stderr)
    if args.push_to_hub or args.hub_model_id:
        repo_id = args.hub_model_id or os.path.basename(os.path.abspath(args.output_dir))
        url = push_folder_to_hub(args.output_dir, repo_id, "Upload Unigram tokenizer trained with mlm_tpu")
        print(f"Pushed to the Hub: {url}", file=sys.stderr)
    return args.output_dir

