"""Cutting a corpus into count-named TFRecord shards for TPU training (`python -m mlm_tpu.shard`, `shard_corpus`).

--task mlm (default): documents are tokenized in parallel batches, concatenated (each keeps its
[CLS] ... [SEP]) and cut into examples of exactly --max-length tokens; only the remainder at the
end of the split is dropped. Records: input_ids, attention_mask.

--task text2text (T5 classification and generation): each row becomes one example: --source-prefix
and the --input-column(s), joined by newlines, as input_ids/attention_mask of --max-length (a
longer input keeps its first and last halves), and the --target-column as labels of
--max-target-length, padded with -100.

--task sequence-classification (encoders: BERT, RoBERTa, ELECTRA...): each row becomes one example: the
--input-column (and the --pair-column, for pairs) as input_ids/attention_mask/token_type_ids of --max-length
(the longer text trimmed first), and the --target-column as a class id, or as a score when the labels are
numbers, some not whole (STS-B; --problem-type decides it). --task token-classification: a row's words
(--input-column: a list, or a string of words) and their tags (--target-column, as many), each tag on its
word's first piece. The label names are found by a first pass over the labels (or given with --labels) and
recorded in the manifest (encoder/labelled_rows.py).

--task span-corruption (T5 pretraining): documents are tokenized without special tokens,
concatenated and cut into raw rows of the length T whose corrupted inputs are --max-length tokens
(T5's arithmetic: 512 -> 568); the trainer corrupts them. Records: input_ids; the manifest records
the noise density, mean span length and the lengths.

Shards go to `<output-dir>/<split>/<prefix>-<index>-<count>.tfrecord`, locally or on gs://,
with a manifest.json written last. Re-running an interrupted job finishes it; a second job on a
split another one is writing stops with one line (claim.py).

--runner NAME [Beam pipeline options]: the same job as an Apache Beam pipeline on that runner
(DataflowRunner, FlinkRunner, SparkRunner; FnApiRunner on this machine), writing the same files
byte for byte, however many workers run it (beam_job.py, beam_pipeline.py). Needs `pip install
'mlm_tpu[beam]'`.
"""

import dataclasses
import re
import time
from typing import Tuple

from mlm_tpu.configuration import check_ranges
from mlm_tpu.console import log, progress, warn
from mlm_tpu.corpus import Corpus
from mlm_tpu.errors import Interrupted, UserError
from mlm_tpu.claim import Claim, claimed
from mlm_tpu.shards.config import ShardingConfig
from mlm_tpu.shards.format import MANIFEST, WRITER_RECORD
from mlm_tpu.shards.kinds import ShardKind, ShardKinds, example_maker
from mlm_tpu.shards.packing import ExampleMaker, check_max_length
from mlm_tpu.shards.storage import open_split_storage
from mlm_tpu.shards.writer import ResumePoint, ShardWriter
from mlm_tpu.tokenizer.load import load_tokenizer

SHARD_PREFIX = re.compile(r"^[\w.-]+$")


def check_config(config: ShardingConfig, kinds: ShardKinds) -> Tuple[ShardingConfig, ShardKind]:
    """The config checked, its --task the name of the kind of split it means, and that kind."""
    check_ranges(config)
    kind = kinds.of(config)
    if not SHARD_PREFIX.match(config.prefix):
        looks_like_a_task_prefix = " (a task prefix such as 'quality:' before every input is --source-prefix)"
        raise UserError(f"--prefix names the shard files and may hold letters, digits, '.', '_' and '-', not "
                        f"'{config.prefix}'{looks_like_a_task_prefix if 'source_prefix' in kind.flags else ''}")
    if config.pipeline_options and not config.runner:
        raise UserError(f"{config.pipeline_options[0]} is a Beam pipeline option, for sharding with --runner "
                        "(e.g. --runner FnApiRunner, or DataflowRunner); without --runner it is not a flag of shard")
    kinds.refuse_other_flags(config, kind)
    kind.check(config)
    return dataclasses.replace(config, task=kind.name), kind


def settings_of(config: ShardingConfig, kind: ShardKind, maker: ExampleMaker, corpus: Corpus) -> dict:
    """What makes a split what it is: a re-run with other settings must not mix into it."""
    return {"task": config.task, "split": corpus.source.split, "prefix": config.prefix,
            "max_length": config.max_length, "shard_size": config.shard_size,
            "tokenizer_fingerprint": maker.encoder.fingerprint, "corpus": corpus.source.describe(),
            **kind.settings(config)}


def shard_corpus(config: ShardingConfig, kinds: ShardKinds, verbose: bool = False) -> dict:
    """Run the whole job (here, or as a Beam pipeline with `config.runner`); return the split's manifest. `kinds`:
    the kinds of split, by name (the registry of tasks gathers them: `mlm_tpu.tasks.shard_kinds()`).

    `verbose`: with a runner on this machine, also show what Beam and its worker processes print.
    """
    config, kind = check_config(config, kinds)
    beam_job = None
    if config.runner:  # Beam, the runner and its options are checked before anything else
        from mlm_tpu.shards.beam_job import BeamJob

        beam_job = BeamJob(config, verbose)
    corpus = Corpus(config.corpus)
    tokenizer = load_tokenizer(config.tokenizer, fast=True)
    for warning in check_max_length(config.max_length, tokenizer):
        warn(warning)
    config = kind.with_corpus_facts(config, corpus)
    if beam_job:
        beam_job.config = config  # its workers make their examples with the labels found here
    maker = example_maker(kind, config, tokenizer)
    storage = open_split_storage(config.output_dir, corpus.source.split, config.storage_retry_seconds)
    with claimed(storage, WRITER_RECORD, "sharding job",
                 "write this split elsewhere (--output-dir or --split)") as claim:
        writer = ShardWriter(storage, config.prefix, config.shard_size, maker.feature_lengths,
                             settings_of(config, kind, maker, corpus))
        start = writer.resume_point(config.overwrite)
        if start.complete:
            log(f"{storage.location()} is already complete ({len(writer.shards)} shards, manifest verified); "
                "nothing to do. Pass --overwrite to make it again.")
            return writer.manifest
        try:
            if beam_job:
                return beam_job.run(kind, corpus, maker, writer, claim)
            return _write_split(config, kind, corpus, maker, writer, start, claim)
        except KeyboardInterrupt:
            raise Interrupted(f"every shard in {storage.location()} is whole, the split unfinished; run the same "
                              "command again to finish it") from None


def _write_split(config: ShardingConfig, kind: ShardKind, corpus: Corpus, maker: ExampleMaker,
                 writer: ShardWriter, start: ResumePoint, claim: Claim) -> dict:
    """Examples from where `start` says, into shards, then the manifest."""
    if start.counters:
        maker.restore(start.counters)
        log(f"Resuming: {start.shards} shards already written and verified; re-reading the corpus "
            f"from document {start.counters['documents']:,}")
    lengths = kind.describe(config, maker)
    log(f"Sharding {corpus.name()} into {lengths}, {config.shard_size} per shard, -> {writer.storage.location()}")
    started = time.perf_counter()
    units_at_start = maker.counters["units"]
    skip_units = start.shards * config.shard_size * maker.units_per_example - units_at_start  # already in kept shards
    with progress(desc="sharding", unit=" docs", total=corpus.source.limit, initial=maker.counters["documents"]) as bar:
        for batch in maker.batches(corpus, config.batch_size):
            before, shards = maker.snapshot(), len(writer.shards)
            piece = maker.encode(batch)
            if skip_units:
                piece, skip_units = maker.drop(piece, skip_units)
            writer.add(maker.examples(piece), before)
            if len(writer.shards) > shards:
                claim.refresh()
            bar.update(len(batch))
            bar.set_postfix(examples=f"{writer.records:,}", shards=len(writer.shards), refresh=False)
    manifest = writer.finish(maker.totals())
    seconds = time.perf_counter() - started
    shards = len(manifest["shards"])
    rate = (maker.counters["units"] - units_at_start) / max(seconds, 1e-9)
    log(f"Wrote {manifest['records']:,} {lengths} in {shards} shard{'s' * (shards != 1)} {maker.summary()} in "
        f"{seconds:.1f} s ({rate:,.0f} {maker.unit_name}/s). Manifest: {writer.storage.location(MANIFEST)}")
    return manifest
