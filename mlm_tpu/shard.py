"""`python -m mlm_tpu.shard`: cut a corpus into count-named TFRecord shards for TPU training.

Documents are tokenized in parallel batches, concatenated (each keeps its [CLS] ... [SEP]) and
cut into examples of exactly --max-length tokens; only the remainder at the end of the split is
dropped. Shards go to `<output-dir>/<split>/<prefix>-<index>-<count>.tfrecord`, locally or on
gs://, with a manifest.json written last. Re-running an interrupted job finishes it.
"""

import argparse
import os
import sys
import time
from typing import Optional, Sequence

from tqdm.auto import tqdm

from mlm_tpu.cli import add_flag, run_command
from mlm_tpu.corpus import Corpus, add_corpus_arguments, corpus_source_from_args
from mlm_tpu.errors import UserError
from mlm_tpu.sharding.packing import BatchTokenizer, ChunkPacker, check_max_length
from mlm_tpu.sharding.storage import open_split_storage
from mlm_tpu.sharding.writer import ShardWriter
from mlm_tpu.tokenizer.load import load_tokenizer


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mlm_tpu.shard", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "--tokenizer", "--tokenizer-name-or-path", required=True,
             help="Tokenizer folder (from `python -m mlm_tpu.tokenizer train`) or Hub name.")
    add_corpus_arguments(parser)
    group = parser.add_argument_group("shards")
    add_flag(group, "--max-length", type=int, default=512,
             help="Tokens per example (default: 512); a multiple of 8 suits TPUs.")
    add_flag(group, "--shard-size", type=int, default=1000, help="Examples per shard (default: 1000).")
    add_flag(group, "--output-dir", required=True,
             help="Local folder or gs://BUCKET/PATH; shards go to <output-dir>/<split>/.")
    add_flag(group, "--prefix", default="dataset", help="Shard file name prefix (default: dataset).")
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
    if not args.prefix or "/" in args.prefix:
        raise UserError(f"--prefix must be a plain file name part, not '{args.prefix}'")


def shard(args: argparse.Namespace) -> dict:
    """Run the whole job; return the split's manifest."""
    check_arguments(args)
    corpus = Corpus(corpus_source_from_args(args))
    tokenizer = load_tokenizer(args.tokenizer, fast=True)
    for warning in check_max_length(args.max_length, tokenizer):
        print(f"warning: {warning}", file=sys.stderr)
    encoder = BatchTokenizer(tokenizer, args.num_workers)
    storage = open_split_storage(args.output_dir, args.split, args.storage_retry_seconds)
    settings = {"split": args.split, "prefix": args.prefix, "max_length": args.max_length,
                "shard_size": args.shard_size, "tokenizer_fingerprint": encoder.fingerprint,
                "corpus": corpus.source.describe()}
    writer = ShardWriter(storage, args.prefix, args.shard_size, args.max_length, settings)
    start = writer.resume_point(args.overwrite)
    if start.complete:
        print(f"{storage.location()} is already complete ({len(writer.shards)} shards, manifest verified); "
              "nothing to do. Pass --overwrite to make it again.", file=sys.stderr)
        return writer.manifest
    if start.shards:
        print(f"Resuming: {start.shards} shards already written and verified; re-reading the corpus "
              f"from document {start.documents:,}", file=sys.stderr)
    print(f"Sharding {corpus.name()} into {args.max_length}-token examples, {args.shard_size} per shard, "
          f"-> {storage.location()}", file=sys.stderr)
    started = time.perf_counter()
    packer = ChunkPacker(args.max_length)
    documents, tokens = start.documents, start.tokens
    skip_tokens = start.shards * args.shard_size * args.max_length - start.tokens
    with tqdm(desc="sharding", unit=" docs", total=args.limit, initial=documents, file=sys.stderr) as bar:
        for batch in corpus.batches(args.batch_size, skip=start.documents):
            ids = encoder.encode(batch)
            before = (documents, tokens)
            documents, tokens = documents + len(batch), tokens + len(ids)
            if skip_tokens:  # tokens that went into the shards already kept
                cut = min(skip_tokens, len(ids))
                ids, skip_tokens = ids[cut:], skip_tokens - cut
            writer.add(packer.add(ids), *before)
            bar.update(len(batch))
            bar.set_postfix(tokens=f"{tokens:,}", shards=len(writer.shards), refresh=False)
    manifest = writer.finish({"documents": documents, "corpus_tokens": tokens, "dropped_tokens": packer.remainder})
    seconds = time.perf_counter() - started
    shards = len(manifest["shards"])
    print(f"Wrote {manifest['records']:,} examples of {args.max_length} tokens in {shards} shard{'s' * (shards != 1)} "
          f"from {documents:,} documents ({tokens:,} tokens, {packer.remainder:,} dropped at the end) in "
          f"{seconds:.1f} s ({(tokens - start.tokens) / max(seconds, 1e-9):,.0f} tokens/s). Manifest: "
          f"{storage.location('manifest.json')}", file=sys.stderr)
    return manifest


def main(argv: Optional[Sequence[str]] = None) -> None:
    shard(build_parser().parse_args(argv))


if __name__ == "__main__":
    run_command(main)
