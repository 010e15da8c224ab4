"""Train a tokenizer on a corpus and save it (`python -m mlm_tpu.tokenizer train`, `train_tokenizer`).

Unigram (the default), byte-level BPE or WordPiece (`--algorithm`, families.py), each with its family's
special tokens and framing. The result is a `save_pretrained` folder that `AutoTokenizer.from_pretrained`
loads, plus `tokenizer_training.json` saying how it was made. It is always saved locally, and pushed to the
Hub when asked. With `--sample-documents N` it trains on a uniform, seeded sample of N documents
of the corpus, read in one pass holding only the sample (sample.py): how a C4-sized corpus is done.
"""

import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Iterator, List, Optional

import tokenizers
import transformers

import mlm_tpu
from mlm_tpu.configuration import check_ranges, setting
from mlm_tpu.console import log, progress
from mlm_tpu.corpus import Corpus, CorpusSource
from mlm_tpu.errors import UserError, os_reason
from mlm_tpu.hub import push_folder_to_hub
from mlm_tpu.output_dir import TOKENIZER_FOLDER, check_output_dir, staged_output_dir
from mlm_tpu.tokenizer.card import tokenizer_card_text
from mlm_tpu.tokenizer.families import DEFAULT_ALGORITHM, FAMILIES, TEMPLATE_NAMES, Family
from mlm_tpu.tokenizer.sample import reservoir_sample
from mlm_tpu.tokenizer.templates import (DEFAULT_VOCAB_SIZE, NORMALIZATIONS, Options, Template,
                                         as_transformers_tokenizer, check_room)

TRAINING_INFO_FILE = "tokenizer_training.json"
MAX_VOCAB_SIZE = 2**20  # above the largest vocabularies in use (256 K); the trainer's memory grows with it
DEFAULT_SEED = 42


@dataclass
class TokenizerTrainingConfig:
    """What `python -m mlm_tpu.tokenizer train` does; the flags of the same names fill it."""

    output_dir: str  # folder to save the tokenizer in
    corpus: CorpusSource = field(default_factory=CorpusSource)
    algorithm: str = DEFAULT_ALGORITHM  # the family: unigram, bpe (byte-level) or wordpiece
    template: str = "mlm"  # special tokens and framing: mlm (RoBERTa) or t5
    byte_fallback: bool = False  # unigram: the 256 byte pieces stand in for unknown characters
    lowercase: bool = False
    normalization: str = "none"  # or nfkc
    vocab_size: int = setting(DEFAULT_VOCAB_SIZE, low=1, high=MAX_VOCAB_SIZE)  # special tokens included
    batch_size: int = setting(1000, low=1)  # documents handed to the trainer at a time
    model_max_length: int = setting(512, low=2)  # longest sequence a model using the tokenizer accepts
    sample_documents: Optional[int] = setting(None, low=1)  # train on a uniform sample of this many documents
    seed: Optional[int] = setting(None, low=0)  # which sample (default: DEFAULT_SEED)
    overwrite: bool = False  # replace the files an earlier mlm_tpu command wrote in output_dir (never others)
    push_to_hub: bool = False
    hub_model_id: Optional[str] = None  # implies push_to_hub


def check_config(config: TokenizerTrainingConfig) -> None:
    check_ranges(config)
    family = _family(config)
    if config.template not in TEMPLATE_NAMES:
        raise UserError(f"--template must be one of {', '.join(TEMPLATE_NAMES)}, not '{config.template}'")
    if config.template not in family.templates:
        raise UserError(f"--template {config.template} goes with --algorithm unigram only (T5's vocabulary is a "
                        f"SentencePiece Unigram model); --algorithm {config.algorithm} takes --template "
                        f"{', '.join(family.templates)}")
    if config.byte_fallback and not family.byte_fallback:
        raise UserError(f"--byte-fallback is for --algorithm unigram; --algorithm {config.algorithm} "
                        + ("is byte-level already: nothing becomes <unk>" if family.alphabet else
                           "has no byte pieces (use --algorithm bpe, or unigram --byte-fallback, where nothing "
                           "may become unknown)"))
    if config.normalization not in NORMALIZATIONS:
        raise UserError(f"--normalization must be one of {', '.join(NORMALIZATIONS)}, not '{config.normalization}'")
    template = _template(config)
    if not template.plain_class_fallback and not template.rebuilt_by_wrapper(_options(config)):
        raise UserError(f"--template {config.template} takes none of --byte-fallback, --lowercase, --normalization "
                        "nfkc: transformers 5's T5 tokenizer class rebuilds T5's pipeline without them, so the folder "
                        "would encode text differently there; drop them, or use --template mlm")
    check_room(config.vocab_size, family.reserved(template, _options(config)),
               f"the {config.template} template's special tokens{_and_alphabet(family, config)}")
    if config.seed is not None and config.sample_documents is None:
        raise UserError("--seed chooses the sample of --sample-documents; give --sample-documents N too, or drop --seed")


def _family(config: TokenizerTrainingConfig) -> Family:
    if config.algorithm not in FAMILIES:
        raise UserError(f"--algorithm must be one of {', '.join(FAMILIES)}, not '{config.algorithm}'")
    return FAMILIES[config.algorithm]


def _template(config: TokenizerTrainingConfig) -> Template:
    return _family(config).templates[config.template]


def _options(config: TokenizerTrainingConfig) -> Options:
    return Options(lowercase=config.lowercase, normalization=config.normalization, byte_fallback=config.byte_fallback)


def _and_alphabet(family: Family, config: TokenizerTrainingConfig) -> str:
    if family.alphabet:
        return f" and the {family.alphabet} bytes"
    return " and the 256 byte pieces" if config.byte_fallback else ""


def _training_info(config: TokenizerTrainingConfig, corpus: Corpus, trained_on: Optional[List[str]],
                   vocab_size: int, seconds: float) -> dict:
    """What tokenizer_training.json records; `trained_on`: the sample, if there was one."""
    sample = {}
    if trained_on is not None:
        sample = {"sample": {"documents": config.sample_documents, "seed": _seed(config),
                             "from_documents": corpus.documents_read, "from_characters": corpus.characters_read}}
    return {
        "corpus": corpus.source.describe(),
        **sample,
        "documents": corpus.documents_read if trained_on is None else len(trained_on),
        "characters": corpus.characters_read if trained_on is None else sum(map(len, trained_on)),
        "algorithm": config.algorithm,
        "template": config.template,
        "byte_fallback": config.byte_fallback,
        "lowercase": config.lowercase,
        "normalization": config.normalization,
        "vocab_size_requested": config.vocab_size,
        "vocab_size": vocab_size,
        "model_max_length": config.model_max_length,
        "seconds": round(seconds, 2),
        "versions": {"mlm_tpu": mlm_tpu.__version__, "tokenizers": tokenizers.__version__,
                     "transformers": transformers.__version__, "python": platform.python_version()},
    }


def _progress_batches(corpus: Corpus, batch_size: int) -> Iterator[List[str]]:
    """The corpus' batches, counting documents on a progress bar as the trainer consumes them."""
    with progress(desc=f"reading {corpus.name()}", unit=" docs", total=corpus.source.limit) as bar:
        for batch in corpus.batches(batch_size):
            bar.update(len(batch))
            yield batch


def _seed(config: TokenizerTrainingConfig) -> int:
    return DEFAULT_SEED if config.seed is None else config.seed


def _sample(corpus: Corpus, config: TokenizerTrainingConfig) -> List[str]:
    """--sample-documents documents of the corpus, drawn uniformly in one pass that holds only them."""
    with progress(corpus.documents(), desc=f"sampling {corpus.name()}", unit=" docs", total=corpus.source.limit) as read:
        sample = reservoir_sample(read, config.sample_documents, _seed(config))
    log(f"Sampled {len(sample):,} of {corpus.documents_read:,} documents (seed {_seed(config)}); training on them")
    return sample


def train_tokenizer(config: TokenizerTrainingConfig) -> str:
    """Train, save (atomically) and optionally push; return the output folder."""
    check_config(config)
    corpus = Corpus(config.corpus)
    check_output_dir(config.output_dir, TOKENIZER_FOLDER.files, config.overwrite)  # after what it reads
    family, template, options = _family(config), _template(config), _options(config)
    log(f"Training a {family.title} tokenizer ({template.name} template, vocabulary {config.vocab_size}) on "
        f"{corpus.name()}" + (" (reading it twice: see tokenizer/wordpiece.py)" if family.reads_twice else ""))
    started = time.perf_counter()
    sample = _sample(corpus, config) if config.sample_documents else None

    def read_batches() -> Iterator[List[str]]:
        if sample is None:
            return _progress_batches(corpus, config.batch_size)
        return (sample[start:start + config.batch_size] for start in range(0, len(sample), config.batch_size))

    # The trainer draws its own bars on stdout; off a terminal they are only blank lines.
    tokenizer = family.train(read_batches, config.vocab_size, template, options, show_progress=sys.stdout.isatty())
    seconds = time.perf_counter() - started
    wrapped = as_transformers_tokenizer(tokenizer, config.model_max_length, template, options)
    if type(wrapped) is not template.wrapper:
        log(f"The folder names {type(wrapped).__name__}, not {template.wrapper.__name__}: transformers 5's "
            f"{template.wrapper.__name__} rebuilds its pipeline without the normalization asked for")
    info = _training_info(config, corpus, sample, tokenizer.get_vocab_size(), seconds)
    name = config.hub_model_id or os.path.basename(os.path.abspath(config.output_dir))
    try:
        with staged_output_dir(config.output_dir) as staging:
            wrapped.save_pretrained(staging)
            with open(os.path.join(staging, TRAINING_INFO_FILE), "w", encoding="utf-8") as stream:
                json.dump(info, stream, indent=2)
                stream.write("\n")
            with open(os.path.join(staging, "README.md"), "w", encoding="utf-8") as stream:
                stream.write(tokenizer_card_text(info, name))
    except Exception as error:  # tokenizer.json is written by Rust: "No space left on device (os error 28)"
        reason = os_reason(error)
        if reason is None:
            raise
        folder = os.path.dirname(os.path.abspath(config.output_dir))
        raise UserError(f"cannot save the tokenizer in {folder}: {reason}; nothing was saved. Free space there, or "
                        "choose another --output-dir, and train again") from None
    short = "" if info["vocab_size"] >= config.vocab_size else " (the corpus is too small for more)"
    log(f"Trained on {info['documents']:,} documents, {info['characters']:,} characters: vocabulary "
        f"{info['vocab_size']:,}{short}, {seconds:.1f} s. Saved to {config.output_dir}")
    if config.push_to_hub or config.hub_model_id:
        repo_id = config.hub_model_id or os.path.basename(os.path.abspath(config.output_dir))
        url = push_folder_to_hub(config.output_dir, repo_id, f"Upload {family.title} tokenizer trained with mlm_tpu")
        log(f"Pushed to the Hub: {url}")
    return config.output_dir
