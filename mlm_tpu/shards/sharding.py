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
recorded in the manifest (labelled.py).

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
import os
import re
import time
from dataclasses import dataclass, field
from typing import Optional, Tuple

from mlm_tpu.configuration import check_ranges, setting
from mlm_tpu.console import log, progress, warn
from mlm_tpu.corpus import Corpus, CorpusSource
from mlm_tpu.errors import Interrupted, UserError
from mlm_tpu.claim import Claim, claimed
from mlm_tpu.shards.format import (ENCODER_KINDS, KINDS, MANIFEST, MLM, SEQUENCE_CLASSIFICATION, SPAN_CORRUPTION,
                                   TEXT2TEXT, WRITER_RECORD, span_corruption_settings)
from mlm_tpu.shards.labelled import PROBLEM_TYPES, SequenceExamples, TokenExamples, find_labels
from mlm_tpu.shards.packing import MIN_MAX_LENGTH, ExampleMaker, PackedExamples, RawRows, check_max_length
from mlm_tpu.shards.storage import open_split_storage
from mlm_tpu.shards.text2text import Text2TextExamples
from mlm_tpu.shards.writer import ResumePoint, ShardWriter
from mlm_tpu.shards.span_lengths import (SpanLengths, TooFewSentinels, first_sentinel_id, longest_inputs_within,
                                         span_lengths)
from mlm_tpu.tokenizer.load import load_tokenizer

SHARD_PREFIX = re.compile(r"^[\w.-]+$")
TASK_ALIASES = {"classification": TEXT2TEXT, "generation": TEXT2TEXT, "masked-lm": MLM}  # the trainer's words


@dataclass
class ShardingConfig:
    """What `python -m mlm_tpu.shard` does; the flags of the same names fill it."""

    tokenizer: str  # tokenizer folder or Hub name (a fast tokenizer)
    output_dir: str  # local folder or gs://BUCKET/PATH; shards go to <output_dir>/<split>/
    task: str = MLM  # the kind of examples: mlm, text2text (or classification/generation), span-corruption
    corpus: CorpusSource = field(default_factory=CorpusSource)
    input_columns: Tuple[str, ...] = ()  # text2text: the columns joined into the input
    target_column: Optional[str] = None  # text2text: the column holding the target
    source_prefix: str = ""  # text2text: task prefix put before every input
    pair_column: Optional[str] = None  # sequence-classification: the column of each text's pair (None: single texts)
    labels: Tuple[str, ...] = ()  # sequence/token-classification: the label names, in order (): found in the split
    # sequence-classification: single_label_classification | regression (None: found by the first pass)
    problem_type: Optional[str] = None
    max_length: int = setting(512, low=MIN_MAX_LENGTH)  # tokens per example (per input, for text2text)
    max_target_length: int = setting(128, low=2)  # text2text: tokens per target, </s> included
    noise_density: float = setting(0.15, low=0, high=1, low_open=True, high_open=True)  # span-corruption: N / T
    mean_noise_span_length: float = setting(3.0, low=1)  # span-corruption: N / K
    shard_size: int = setting(1000, low=1)  # examples per shard
    prefix: str = "dataset"  # shard file name prefix
    num_workers: Optional[int] = setting(None, low=1)  # tokenizer threads (None: every core)
    batch_size: int = setting(1000, low=1)  # documents tokenized at a time
    overwrite: bool = False  # replace the shards and manifest an earlier job wrote in the split's folder
    storage_retry_seconds: float = setting(120.0, low=0)  # how long gs:// calls retry transient errors
    runner: Optional[str] = None  # run as an Apache Beam pipeline on this runner (None: in this process)
    pipeline_options: Tuple[str, ...] = ()  # with runner: Beam pipeline options, passed through
    text_part_bytes: int = setting(64 * 2**20, low=1)  # with runner: .txt files are read in parts of this size


def check_config(config: ShardingConfig) -> ShardingConfig:
    """The config checked, with the task's other spellings turned into the kind of split they mean."""
    check_ranges(config)
    task = TASK_ALIASES.get(config.task, config.task)
    if task not in KINDS:
        raise UserError(f"--task must be one of {', '.join(KINDS)}, not '{config.task}'")
    if not SHARD_PREFIX.match(config.prefix):
        looks_like_a_task_prefix = " (a task prefix such as 'quality:' before every input is --source-prefix)"
        raise UserError(f"--prefix names the shard files and may hold letters, digits, '.', '_' and '-', not "
                        f"'{config.prefix}'{looks_like_a_task_prefix if task == TEXT2TEXT else ''}")
    if config.pipeline_options and not config.runner:
        raise UserError(f"{config.pipeline_options[0]} is a Beam pipeline option, for sharding with --runner "
                        "(e.g. --runner FnApiRunner, or DataflowRunner); without --runner it is not a flag of shard")
    text2text_flags = {"--input-column": config.input_columns, "--target-column": config.target_column,
                       "--source-prefix": config.source_prefix}
    labelled_flags = {"--pair-column": config.pair_column, "--labels": config.labels,
                      "--problem-type": config.problem_type}
    if task not in (TEXT2TEXT, *ENCODER_KINDS):
        given = [flag for flag, value in {**text2text_flags, **labelled_flags}.items() if value]
        if given:
            raise UserError(f"{given[0]} is for --task text2text, sequence-classification or token-classification; "
                            f"--task {task} reads --text-column")
        if task != SPAN_CORRUPTION and (config.noise_density, config.mean_noise_span_length) != (0.15, 3.0):
            raise UserError(f"--noise-density and --mean-noise-span-length are for --task span-corruption, not {task}")
        return dataclasses.replace(config, task=task)
    if task in ENCODER_KINDS:
        return dataclasses.replace(_check_labelled(config, task), task=task)
    given = [flag for flag, value in labelled_flags.items() if value]
    if given:
        raise UserError(f"{given[0]} is for --task sequence-classification or token-classification, not text2text")
    if not config.input_columns or not config.target_column:
        raise UserError("--task text2text needs --input-column (one or more) and --target-column, e.g. "
                        "--input-column question --target-column answer")
    if config.target_column in config.input_columns:
        raise UserError(f"--target-column '{config.target_column}' is also an --input-column; the model would see "
                        "the answer in its input")
    return dataclasses.replace(config, task=task)


def _check_labelled(config: ShardingConfig, task: str) -> ShardingConfig:
    """The flags of --task sequence-classification and token-classification, checked."""
    words = task != SEQUENCE_CLASSIFICATION
    if len(config.input_columns) != 1 or not config.target_column:
        example = ("--input-column tokens --target-column ner_tags" if words else
                   "--input-column sentence --target-column label (and --pair-column sentence2 for pairs)")
        raise UserError(f"--task {task} needs one --input-column (the {'words' if words else 'text'}) and "
                        f"--target-column (the {'tags' if words else 'label'}), e.g. {example}")
    if config.source_prefix:
        raise UserError(f"--source-prefix is for T5's text2text examples; --task {task} feeds the text as it is")
    if words and (config.pair_column or config.problem_type):
        raise UserError(f"{'--pair-column' if config.pair_column else '--problem-type'} is for --task "
                        "sequence-classification; token-classification tags each word of one text")
    if config.problem_type and config.problem_type not in PROBLEM_TYPES:
        raise UserError(f"--problem-type must be one of {', '.join(PROBLEM_TYPES)}, not '{config.problem_type}'")
    if config.problem_type == "regression" and config.labels:
        raise UserError("--labels names classes; a regression split's labels are scores: drop one of them")
    columns = [config.input_columns[0], config.pair_column, config.target_column]
    if len({column for column in columns if column}) < len([column for column in columns if column]):
        raise UserError(f"--input-column, --pair-column and --target-column must be different columns, not "
                        f"{', '.join(column for column in columns if column)}")
    if len(set(config.labels)) < len(config.labels):
        raise UserError(f"--labels names a label twice: {' '.join(config.labels)}")
    return config


def with_label_names(config: ShardingConfig, corpus: Corpus) -> ShardingConfig:
    """An encoder split's config with its problem type and label names (--labels, else found), after a first pass
    over the split that checks every row before anything is written (labelled.py); the names are the same for
    every worker of a Beam job."""
    if config.task not in ENCODER_KINDS:
        return config
    log(f"Checking the rows and reading the labels ('{config.target_column}') of {corpus.name()}")
    columns = (config.input_columns[0], *([config.pair_column] if config.pair_column else []))
    problem_type, names = find_labels(corpus, config.task, columns, config.target_column, config.problem_type,
                                      config.labels)
    if problem_type == "regression":
        log("The labels are numbers, some not whole: a regression split (pass --problem-type "
            "single_label_classification if they are classes)" if not config.problem_type else "A regression split")
    else:
        shown = ", ".join(names[:20]) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
        log(f"{len(names)} label{'s' * (len(names) != 1)}: {shown}")
    return dataclasses.replace(config, problem_type=problem_type if config.task == SEQUENCE_CLASSIFICATION else None,
                               labels=tuple(names))


def corruption_lengths(config: ShardingConfig) -> SpanLengths:
    """--task span-corruption: the raw rows whose corrupted inputs are --max-length tokens (T5's arithmetic)."""
    try:
        return span_lengths(config.max_length, config.noise_density, config.mean_noise_span_length)
    except ValueError as error:
        raise UserError(f"--task span-corruption: {error}") from None


def example_maker(config: ShardingConfig, tokenizer) -> ExampleMaker:
    """What turns corpus batches into examples: packed documents (mlm) or one example per row (text2text)."""
    threads = config.num_workers or os.cpu_count() or 1
    if config.task == MLM:
        return PackedExamples(tokenizer, threads, config.max_length)
    if config.task == SPAN_CORRUPTION:
        lengths = corruption_lengths(config)
        try:
            first_sentinel_id(tokenizer, lengths)
        except TooFewSentinels as error:
            if not error.have:
                raise UserError(f"--tokenizer {config.tokenizer}: {error}; make a T5 tokenizer with "
                                "`python -m mlm_tpu.tokenizer train --template t5`") from None
            longest = longest_inputs_within(error.have, config.noise_density, config.mean_noise_span_length)
            raise UserError(f"--tokenizer {config.tokenizer}: {error}; make fewer spans: a --max-length of at most "
                            f"{longest} (not {config.max_length}), a lower --noise-density (not "
                            f"{config.noise_density}) or a longer --mean-noise-span-length (not "
                            f"{config.mean_noise_span_length})") from None
        except ValueError as error:
            raise UserError(f"--tokenizer {config.tokenizer}: {error}; make a T5 tokenizer with "
                            "`python -m mlm_tpu.tokenizer train --template t5`") from None
        return RawRows(tokenizer, threads, lengths.raw_length)
    if config.task == SEQUENCE_CLASSIFICATION:
        return SequenceExamples(tokenizer, threads, config.max_length, config.input_columns[0], config.pair_column,
                                config.target_column, config.problem_type, config.labels)
    if config.task in ENCODER_KINDS:
        return TokenExamples(tokenizer, threads, config.max_length, config.input_columns[0], config.target_column,
                             config.labels)
    return Text2TextExamples(tokenizer, threads, config.input_columns, config.target_column, config.source_prefix,
                             config.max_length, config.max_target_length)


def settings_of(config: ShardingConfig, maker: ExampleMaker, corpus: Corpus) -> dict:
    """What makes a split what it is: a re-run with other settings must not mix into it."""
    settings = {"task": config.task, "split": corpus.source.split, "prefix": config.prefix,
                "max_length": config.max_length, "shard_size": config.shard_size,
                "tokenizer_fingerprint": maker.encoder.fingerprint, "corpus": corpus.source.describe()}
    if config.task == SPAN_CORRUPTION:
        settings.update(span_corruption_settings(corruption_lengths(config)))
    if config.task == TEXT2TEXT:
        settings.update({"input_columns": list(config.input_columns), "target_column": config.target_column,
                         "source_prefix": config.source_prefix, "max_target_length": config.max_target_length})
    if config.task in ENCODER_KINDS:
        settings.update({"input_column": config.input_columns[0], "target_column": config.target_column,
                         "labels": list(config.labels)})
        if config.task == SEQUENCE_CLASSIFICATION:
            settings.update({"pair_column": config.pair_column, "problem_type": config.problem_type})
    return settings


def example_description(config: ShardingConfig, maker: ExampleMaker) -> str:
    """What the job writes, in words, for its log lines."""
    return {MLM: f"{config.max_length}-token examples",
            SPAN_CORRUPTION: f"{maker.max_length}-token raw rows (corrupted while training into "
                             f"{config.max_length}-token inputs)",
            TEXT2TEXT: f"examples of {config.max_length} input and {config.max_target_length} target tokens",
            SEQUENCE_CLASSIFICATION: f"{config.max_length}-token {'pairs' if config.pair_column else 'texts'} with "
                                     f"{'a score' if config.problem_type == 'regression' else 'a label'} each",
            "token-classification": f"{config.max_length}-token rows of tagged words"}[config.task]


def shard_corpus(config: ShardingConfig, verbose: bool = False) -> dict:
    """Run the whole job (here, or as a Beam pipeline with `config.runner`); return the split's manifest.

    `verbose`: with a runner on this machine, also show what Beam and its worker processes print.
    """
    config = check_config(config)
    beam_job = None
    if config.runner:  # Beam, the runner and its options are checked before anything else
        from mlm_tpu.shards.beam_job import BeamJob

        beam_job = BeamJob(config, verbose)
    corpus = Corpus(config.corpus)
    tokenizer = load_tokenizer(config.tokenizer, fast=True)
    for warning in check_max_length(config.max_length, tokenizer):
        warn(warning)
    config = with_label_names(config, corpus)
    if beam_job:
        beam_job.config = config  # its workers make their examples with the labels found here
    maker = example_maker(config, tokenizer)
    storage = open_split_storage(config.output_dir, corpus.source.split, config.storage_retry_seconds)
    with claimed(storage, WRITER_RECORD, "sharding job",
                 "write this split elsewhere (--output-dir or --split)") as claim:
        writer = ShardWriter(storage, config.prefix, config.shard_size, maker.feature_lengths,
                             settings_of(config, maker, corpus))
        start = writer.resume_point(config.overwrite)
        if start.complete:
            log(f"{storage.location()} is already complete ({len(writer.shards)} shards, manifest verified); "
                "nothing to do. Pass --overwrite to make it again.")
            return writer.manifest
        try:
            if beam_job:
                return beam_job.run(corpus, maker, writer, claim)
            return _write_split(config, corpus, maker, writer, start, claim)
        except KeyboardInterrupt:
            raise Interrupted(f"every shard in {storage.location()} is whole, the split unfinished; run the same "
                              "command again to finish it") from None


def _write_split(config: ShardingConfig, corpus: Corpus, maker: ExampleMaker, writer: ShardWriter,
                 start: ResumePoint, claim: Claim) -> dict:
    """Examples from where `start` says, into shards, then the manifest."""
    if start.counters:
        maker.restore(start.counters)
        log(f"Resuming: {start.shards} shards already written and verified; re-reading the corpus "
            f"from document {start.counters['documents']:,}")
    lengths = example_description(config, maker)
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
