"""`python -m mlm_tpu.shard`: cut a corpus into count-named TFRecord shards for TPU training.

--task mlm (default): documents are tokenized in parallel batches, concatenated (each keeps its
[CLS] ... [SEP]) and cut into examples of exactly --max-length tokens; only the remainder at the
end of the split is dropped. Records: input_ids, attention_mask.

--task text2text (T5): each row becomes one example: --source-prefix and the --input-column(s),
joined by newlines, as input_ids/attention_mask of --max-length (a longer input keeps its first
and last halves), and the --target-column as labels of --max-target-length, padded with -100.

Shards go to `<output-dir>/<split>/<prefix>-<index>-<count>.tfrecord`, locally or on gs://,
with a manifest.json written last. Re-running an interrupted job finishes it.
"""

import argparse
import os
import re
import sys
import time
from typing import Optional, Sequence

from tqdm.auto import tqdm

from mlm_tpu.cli import add_flag, run_command
from mlm_tpu.corpus import Corpus, add_corpus_arguments, corpus_source_from_args
from mlm_tpu.errors import UserError
from mlm_tpu.sharding.packing import ExampleMaker, PackedExamples, check_max_length
from mlm_tpu.sharding.storage import open_split_storage
from mlm_tpu.sharding.text2text import Text2TextExamples
from mlm_tpu.sharding.writer import ShardWriter
from mlm_tpu.tokenizer.load import load_tokenizer

SHARD_PREFIX = re.compile(r"^[\w.-]+$")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mlm_tpu.shard", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "--tokenizer", "--tokenizer-name-or-path", required=True,
             help="Tokenizer folder (from `python -m mlm_tpu.tokenizer train`) or Hub name.")
    add_flag(parser, "--task", choices=("mlm", "text2text"), default="mlm",
             help="mlm: pack documents into fixed-length examples for masked-LM pretraining (default). text2text: "
                  "one input/target example per row, for T5 (needs --input-column and --target-column).")
    add_corpus_arguments(parser)
    text2text = parser.add_argument_group("text2text (T5) examples")
    add_flag(text2text, "--input-column", action="append", default=None, metavar="COLUMN",
             help="Column holding the input; repeat it to join several (title, body, ...) with newlines.")
    add_flag(text2text, "--target-column", default=None, metavar="COLUMN",
             help="Column holding the target text (a class name such as 'high', an answer, a summary).")
    add_flag(text2text, "--source-prefix", default="",
             help='Task prefix put before every input, followed by a space, e.g. "quality:" or "summarize:".')
    add_flag(text2text, "--max-target-length", type=int, default=128,
             help="Tokens per target, </s> included (default: 128); longer targets keep their head and </s>.")
    group = parser.add_argument_group("shards")
    add_flag(group, "--max-length", type=int, default=512,
             help="Tokens per example, or per input with --task text2text (default: 512); a multiple of 8 suits "
                  "TPUs. Longer text2text inputs keep their first and last halves.")
    add_flag(group, "--shard-size", type=int, default=1000, help="Examples per shard (default: 1000).")
    add_flag(group, "--output-dir", required=True,
             help="Local folder or gs://BUCKET/PATH; shards go to <output-dir>/<split>/.")
    add_flag(group, "--prefix", default="dataset",
             help="Shard file name prefix: letters, digits, '.', '_', '-' (default: dataset). Not the task prefix "
                  "of T5 inputs: that is --source-prefix.")
    add_flag(group, "--num-workers", type=int, default=os.cpu_count() or 1,
             help=f"Tokenizer threads (default: all {os.cpu_count()} cores).")
    add_flag(group, "--batch-size", type=int, default=1000,
             help="Documents tokenized at a time (default: 1000); memory grows with it, not with the corpus.")
    add_flag(group, "--overwrite", action="store_true",
             help="Replace the shards and manifest already in <output-dir>/<split>/ instead of refusing.")
    add_flag(group, "--storage-retry-seconds", type=float, default=120.0,
             help="How long gs:// calls retry transient errors before giving up (default: 120).")
    return parser


def check_arguments(args: argparse.Namespace) -> None:
    if args.shard_size < 1:
        raise UserError(f"--shard-size must be at least 1 example, not {args.shard_size}")
    if args.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1 document, not {args.batch_size}")
    if not SHARD_PREFIX.match(args.prefix):
        looks_like_a_task_prefix = " (a task prefix such as 'quality:' before every input is --source-prefix)"
        raise UserError(f"--prefix names the shard files and may hold letters, digits, '.', '_' and '-', not "
                        f"'{args.prefix}'{looks_like_a_task_prefix if args.task == 'text2text' else ''}")
    text2text_flags = {"--input-column": args.input_column, "--target-column": args.target_column,
                       "--source-prefix": args.source_prefix}
    if args.task == "mlm":
        given = [flag for flag, value in text2text_flags.items() if value]
        if given:
            raise UserError(f"{given[0]} is for --task text2text; masked-LM sharding reads --text-column")
        return
    if not args.input_column or not args.target_column:
        raise UserError("--task text2text needs --input-column (one or more) and --target-column, e.g. "
                        "--input-column question --target-column answer")
    if args.target_column in args.input_column:
        raise UserError(f"--target-column '{args.target_column}' is also an --input-column; the model would see "
                        "the answer in its input")
    if args.max_target_length < 2:
        raise UserError(f"--max-target-length must leave room for a token and </s>: at least 2, not "
                        f"{args.max_target_length}")


def example_maker(args: argparse.Namespace, tokenizer) -> ExampleMaker:
    """What turns corpus batches into examples: packed documents (mlm) or one example per row (text2text)."""
    if args.task == "mlm":
        return PackedExamples(tokenizer, args.num_workers, args.max_length)
    return Text2TextExamples(tokenizer, args.num_workers, args.input_column, args.target_column, args.source_prefix,
                             args.max_length, args.max_target_length)


def settings_of(args: argparse.Namespace, maker: ExampleMaker, corpus: Corpus) -> dict:
    """What makes a split what it is: a re-run with other settings must not mix into it."""
    settings = {"task": args.task, "split": args.split, "prefix": args.prefix, "max_length": args.max_length,
                "shard_size": args.shard_size, "tokenizer_fingerprint": maker.encoder.fingerprint,
                "corpus": corpus.source.describe()}
    if args.task == "text2text":
        settings.update({"input_columns": args.input_column, "target_column": args.target_column,
                         "source_prefix": args.source_prefix, "max_target_length": args.max_target_length})
    return settings


def shard(args: argparse.Namespace) -> dict:
    """Run the whole job; return the split's manifest."""
    check_arguments(args)
    corpus = Corpus(corpus_source_from_args(args))
    tokenizer = load_tokenizer(args.tokenizer, fast=True)
    for warning in check_max_length(args.max_length, tokenizer):
        print(f"warning: {warning}", file=sys.stderr)
    maker = example_maker(args, tokenizer)
    storage = open_split_storage(args.output_dir, args.split, args.storage_retry_seconds)
    writer = ShardWriter(storage, args.prefix, args.shard_size, maker.feature_lengths, settings_of(args, maker, corpus))
    start = writer.resume_point(args.overwrite)
    if start.complete:
        print(f"{storage.location()} is already complete ({len(writer.shards)} shards, manifest verified); "
              "nothing to do. Pass --overwrite to make it again.", file=sys.stderr)
        return writer.manifest
    if start.counters:
        maker.restore(start.counters)
        print(f"Resuming: {start.shards} shards already written and verified; re-reading the corpus "
              f"from document {start.counters['documents']:,}", file=sys.stderr)
    lengths = (f"{args.max_length}-token examples" if args.task == "mlm" else
               f"examples of {args.max_length} input and {args.max_target_length} target tokens")
    print(f"Sharding {corpus.name()} into {lengths}, {args.shard_size} per shard, -> {storage.location()}",
          file=sys.stderr)
    started = time.perf_counter()
    units_at_start = maker.counters["units"]
    skip_units = start.shards * args.shard_size * maker.units_per_example - units_at_start  # already in kept shards
    with tqdm(desc="sharding", unit=" docs", total=args.limit, initial=maker.counters["documents"],
              file=sys.stderr) as bar:
        for batch in maker.batches(corpus, args.batch_size):
            before = maker.snapshot()
            piece = maker.encode(batch)
            if skip_units:
                piece, skip_units = maker.drop(piece, skip_units)
            writer.add(maker.examples(piece), before)
            bar.update(len(batch))
            bar.set_postfix(examples=f"{writer.records:,}", shards=len(writer.shards), refresh=False)
    manifest = writer.finish(maker.totals())
    seconds = time.perf_counter() - started
    shards = len(manifest["shards"])
    rate = (maker.counters["units"] - units_at_start) / max(seconds, 1e-9)
    print(f"Wrote {manifest['records']:,} {lengths} in {shards} shard{'s' * (shards != 1)} {maker.summary()} in "
          f"{seconds:.1f} s ({rate:,.0f} {maker.unit_name}/s). Manifest: {storage.location('manifest.json')}",
          file=sys.stderr)
    return manifest


def main(argv: Optional[Sequence[str]] = None) -> None:
    shard(build_parser().parse_args(argv))


if __name__ == "__main__":
    run_command(main)
