"""`python -m mlm_tpu.shard` (also `mlm-tpu shard`): cut a corpus into count-named TFRecord shards."""

import argparse
import dataclasses
import sys
from typing import Optional, Sequence

from mlm_tpu.cli.flags import ConfigFlags, add_corpus_flags, add_verbose_flag
from mlm_tpu.errors import UserError
from mlm_tpu.shards import sharding
from mlm_tpu.shards.beam_job import beam_options_in
from mlm_tpu.shards.config import ShardingConfig
from mlm_tpu.shards.sharding import shard_corpus
from mlm_tpu.tasks import shard_kinds

FLAGS = ConfigFlags(ShardingConfig)


def build_parser(prog: str = "python -m mlm_tpu.shard", with_runner: bool = False) -> argparse.ArgumentParser:
    """The flags; `with_runner` (--runner given): Beam's pipeline options are left for Beam, so no abbreviations,
    and --num_workers (Dataflow's worker count) is Beam's, not --num-workers'."""
    parser = argparse.ArgumentParser(prog=prog, description=sharding.__doc__, allow_abbrev=not with_runner,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    FLAGS.add(parser, "--tokenizer", "--tokenizer-name-or-path", required=True,
              help="Tokenizer folder, local or gs:// (from `python -m mlm_tpu.tokenizer train`), or Hub name.")
    FLAGS.add(parser, "--task", choices=("mlm", "text2text", "classification", "generation", "span-corruption",
                                         "sequence-classification", "token-classification", "sentence-embedding"),
              help="mlm: pack documents into fixed-length examples for masked-LM pretraining (default). text2text "
                   "(or the trainer's words for it, classification and generation): one input/target example per row, "
                   "for T5 (needs --input-column and --target-column). span-corruption: pack documents, without "
                   "special tokens, into raw rows that T5 pretraining corrupts into inputs of --max-length tokens "
                   "(a T5 tokenizer). sequence-classification: one text (or pair) and its label per row, for "
                   "encoders (--input-column, --target-column, maybe --pair-column). token-classification: one row of "
                   "words and a tag per word (--input-column words, --target-column tags). sentence-embedding: a "
                   "query, its positive and maybe hard negatives per row, for contrastive fine-tuning (--input-column "
                   "query, --target-column positive, maybe --negative-columns).")
    add_corpus_flags(FLAGS, parser)
    text2text = parser.add_argument_group("text2text (T5) and labelled (encoder) examples")
    FLAGS.add(text2text, "--input-column", action="append", metavar="COLUMN", field="input_columns",
              help="Column holding the input; text2text: repeat it to join several (title, body, ...) with newlines; "
                   "sequence-classification: the text; token-classification: the words.")
    FLAGS.add(text2text, "--target-column", metavar="COLUMN",
              help="Column holding the target text (a class name such as 'high', an answer, a summary); "
                   "sequence-classification: the label; token-classification: the tags.")
    FLAGS.add(text2text, "--source-prefix",
              help='Task prefix put before every input, followed by a space, e.g. "quality:" or "summarize:".')
    FLAGS.add(text2text, "--max-target-length", type=int,
              help="Tokens per target, </s> included (default: 128); longer targets keep their head and </s>.")
    labelled = parser.add_argument_group(
        "sequence-classification and token-classification (encoders)",
        "--input-column names the text (or the words: a list, as JSON lines or parquet hold them, or a string "
        "of words separated by spaces), --target-column the label (or the tags, one per word: names such as "
        "B-PER, or ids with --labels naming them).")
    FLAGS.add(labelled, "--pair-column", metavar="COLUMN",
              help="sequence-classification: the column of each text's second text (sentence pairs: MRPC, MNLI, ...).")
    FLAGS.add(labelled, "--labels", nargs="+", metavar="LABEL",
              help="The label (or tag) names, in order; a label given as a whole number i that is no name is the "
                   "i-th (🤗's ClassLabel ids, e.g. conll2003's ner_tags). Default: the distinct labels of the split, "
                   "sorted (numbers by value), found by a first pass over the label column.")
    FLAGS.add(labelled, "--problem-type", choices=("single_label_classification", "regression"),
              help="sequence-classification: classes, or regression (the labels are scores, as STS-B's). Default: "
                   "regression when every label is a number and some are not whole.")
    pairs = parser.add_argument_group(
        "sentence-embedding (contrastive) rows", "--input-column names the query, --target-column its positive.")
    FLAGS.add(pairs, "--negative-columns", nargs="+", metavar="COLUMN",
              help="sentence-embedding: the columns of each query's hard negatives (every row needs them all); the "
                   "rest of the global batch are negatives too. Default: none, in-batch negatives only.")
    spans = parser.add_argument_group("span-corruption (T5 pretraining) rows")
    FLAGS.add(spans, "--noise-density", type=float,
              help="Share of each raw row's tokens that become noise (default: 0.15, T5's).")
    FLAGS.add(spans, "--mean-noise-span-length", type=float,
              help="Mean length of a noise span (default: 3, T5's). With --max-length 512 the raw rows are 568 tokens "
                   "and the targets 114, as in T5.")
    group = parser.add_argument_group("shards")
    FLAGS.add(group, "--max-length", type=int,
              help="Tokens per example, or per input with --task text2text (default: 512); a multiple of 8 suits "
                   "TPUs. Longer text2text inputs keep their first and last halves; longer labelled texts (pairs: "
                   "the longer text first) and rows of words are cut at the end.")
    FLAGS.add(group, "--shard-size", type=int, help="Examples per shard (default: 1000).")
    FLAGS.add(group, "--output-dir", required=True,
              help="Local folder or gs://BUCKET/PATH; shards go to <output-dir>/<split>/ (other files there are left "
                   "alone).")
    FLAGS.add(group, "--prefix",
              help="Shard file name prefix: letters, digits, '.', '_', '-' (default: dataset). Not the task prefix "
                   "of T5 inputs: that is --source-prefix.")
    FLAGS.add(group, "--num-workers", underscored_too=not with_runner, type=int,
              help="Tokenizer threads (default: every core; with --runner, 1 per Beam worker process).")
    FLAGS.add(group, "--batch-size", type=int,
              help="Documents tokenized at a time (default: 1000); memory grows with it, not with the corpus.")
    FLAGS.add(group, "--overwrite", action="store_true",
              help="Replace the split an earlier mlm_tpu job wrote in <output-dir>/<split>/ (the shards its manifest "
                   "lists, and the manifest) instead of refusing. Files mlm_tpu did not write are never replaced, "
                   "even so. An interrupted job needs no --overwrite: the same command finishes it.")
    FLAGS.add(group, "--storage-retry-seconds", type=float,
              help="How long gs:// calls retry transient errors before giving up (default: 120).")
    beam = parser.add_argument_group(
        "Apache Beam", "With --runner, the job runs as an Apache Beam pipeline on that runner and writes the same files, "
        "byte for byte. Every other argument is a Beam pipeline option, passed to Beam as it is: e.g. --project, "
        "--region, --temp_location, --setup_file, --requirements_file, --sdk_container_image, --num_workers, "
        "--max_num_workers for DataflowRunner; --direct_running_mode multi_processing --direct_num_workers N for "
        "FnApiRunner. Needs `pip install 'mlm_tpu[beam]'`.")
    FLAGS.add(beam, "--runner", metavar="NAME",
              help="Beam runner: DataflowRunner (Google Cloud), FlinkRunner, SparkRunner, or FnApiRunner on this "
                   "machine (for trying a job; DirectRunner downloads Beam's Prism runner first). Default: no Beam, "
                   "this process shards.")
    FLAGS.add(beam, "--text-part-bytes", type=int, metavar="N",
              help="With --runner: .txt files larger than this are read as several parts, cut at line starts, by "
                   "different workers (default: 64 MiB).")
    add_verbose_flag(parser)
    return parser


def _parse_without_runner(parser: argparse.ArgumentParser, arguments: Sequence[str]) -> argparse.Namespace:
    """The flags; Beam's pipeline options, which only a --runner takes, are one line that says so."""
    args, unknown = parser.parse_known_args(arguments)
    if unknown:
        options = beam_options_in(unknown)
        if options:
            raise UserError(f"--{options[0]} is an Apache Beam pipeline option, which only a Beam job takes: add "
                            "--runner NAME (FnApiRunner on this machine, DataflowRunner on Google Cloud), or drop it")
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.shard") -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    with_runner = any(argument == "--runner" or argument.startswith("--runner=") for argument in arguments)
    parser = build_parser(prog, with_runner)
    args, beam_options = (parser.parse_known_args(arguments) if with_runner
                          else (_parse_without_runner(parser, arguments), []))
    config = FLAGS.build(args)
    shard_corpus(dataclasses.replace(config, pipeline_options=tuple(beam_options)), shard_kinds(), verbose=args.verbose)
