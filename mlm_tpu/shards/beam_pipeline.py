"""The sharder as an Apache Beam pipeline: the local sharder's shards, byte for byte, from any number of workers.

The local sharder reads the corpus in order, concatenates its units (tokens; rows for text2text)
and cuts the stream into examples and shards. Here the same stream is made in parallel:

1. EncodePart: each part of the corpus (a file, or the lines in a byte range of a large .txt
   file: corpus.CorpusPart) is read and encoded by the task's own example maker, in elements of
   about PART_EXAMPLES examples' worth of units, as compact bytes (compact.py), with what the
   maker counted. With --limit, CountDocuments first counts each part's documents, so that each
   part knows how many of its own fall under the limit.
2. unit_offsets: each element's place in the split's stream: prefix sums of the elements' unit
   counts in corpus order (a side input).
3. CutAtShards: each element cut where shards begin (shard s holds units [s, s + 1) x shard_size
   x units per example), keyed by shard index; GroupByKey brings each shard's pieces together.
4. WriteShard: one call writes one whole shard through writer.write_shard, its record count (and
   so its name) known; the last shard drops what is left after its last whole example.
5. WriteManifest: once every shard is written (a side input waits for all of them), the manifest
   through writer.write_manifest, from the shards' entries and the makers' counters, merged.

Every DoFn that needs the tokenizer loads it once per worker, in `setup`, from its folder: the job
graph holds only the settings. Writes are whole-file (storage.py), so a retried bundle rewrites
the same bytes. The result depends on the corpus order only, never on bundles or workers.
"""

import dataclasses
from typing import Dict, Iterator, List, Optional, Tuple

import apache_beam as beam
import numpy as np

from mlm_tpu.corpus import Corpus, CorpusPart
from mlm_tpu.shards.compact import compact_columns, expand_columns
from mlm_tpu.shards.kinds import ShardKind, example_maker
from mlm_tpu.shards.storage import open_split_storage
from mlm_tpu.shards.writer import ShardInfo, manifest_of, write_manifest, write_shard
from mlm_tpu.tokenizer.load import load_tokenizer

PART_EXAMPLES = 1024  # examples' worth of units in one element between stages (512 K tokens of 512-token examples)
STREAM = "units"  # the one column of a token stream (mlm, span-corruption); text2text has a column per feature

ElementKey = Tuple[int, int]  # (part index, element index within the part): corpus order


def _columns(units) -> Dict[str, np.ndarray]:
    """A maker's units as named columns (cut and joined along the first axis)."""
    return units if isinstance(units, dict) else {STREAM: units}


def _units(columns: Dict[str, np.ndarray]):
    return columns[STREAM] if STREAM in columns else columns


def _joined(pieces: List[Dict[str, np.ndarray]]) -> Dict[str, np.ndarray]:
    return {name: np.concatenate([piece[name] for piece in pieces]) for name in pieces[0]}


def _length(columns: Dict[str, np.ndarray]) -> int:
    return len(next(iter(columns.values())))


class _WithExampleMaker(beam.DoFn):
    """A DoFn that needs the kind's example maker; the tokenizer is loaded once per worker, never pickled."""

    def __init__(self, config, kind: ShardKind, corpus: Corpus):
        # a ShardingConfig, a ShardKind and a Corpus: settings, a kind of split and file names only
        self.config, self.kind, self.corpus = config, kind, corpus

    def setup(self) -> None:
        self.maker = example_maker(self.kind, self.config, load_tokenizer(self.config.tokenizer, fast=True))
        self.fresh = self.maker.snapshot()


class _WritingTheSplit(_WithExampleMaker):
    """A DoFn that writes into the split's storage (opened once per worker)."""

    def setup(self) -> None:
        super().setup()
        self.storage = open_split_storage(self.config.output_dir, self.corpus.source.split,
                                          self.config.storage_retry_seconds)


class CountDocuments(_WithExampleMaker):
    """(part index, part) -> (part index, its documents, or rows), as the maker reads them."""

    def process(self, indexed_part: Tuple[int, CorpusPart]) -> Iterator[Tuple[int, int]]:
        index, part = indexed_part
        self.maker.restore(self.fresh)
        yield index, sum(len(batch) for batch in self.maker.batches(self.corpus.part(part), self.config.batch_size))


class EncodePart(_WithExampleMaker):
    """(part index, part) -> ((part index, element index), (counters, compact columns)) for each element of it."""

    def process(self, indexed_part: Tuple[int, CorpusPart], document_counts: Optional[Dict[int, int]] = None):
        index, part = indexed_part
        limit = None
        if self.corpus.source.limit is not None:  # the documents of earlier parts come first
            limit = max(0, self.corpus.source.limit - sum(count for other, count in document_counts.items()
                                                          if other < index))
        maker = self.maker
        maker.restore(self.fresh)
        element_units = PART_EXAMPLES * maker.units_per_example
        pending, number = [], 0
        for batch in maker.batches(self.corpus.part(part, limit), self.config.batch_size):
            pending.append(_columns(maker.encode(batch)))
            if maker.counters["units"] >= element_units:
                yield (index, number), (maker.snapshot(), compact_columns(_joined(pending)))
                maker.restore(self.fresh)
                pending, number = [], number + 1
        if pending:
            yield (index, number), (maker.snapshot(), compact_columns(_joined(pending)))


def unit_offsets(unit_counts: List[Tuple[ElementKey, int]]) -> Dict[ElementKey, int]:
    """Where each element's units start in the split's stream: the units of the elements before it, in corpus order."""
    offsets, total = {}, 0
    for key, units in sorted(unit_counts):
        offsets[key] = total
        total += units
    return offsets


class CutAtShards(beam.DoFn):
    """An element -> (shard index, (offset in the stream, its units in that shard)) for each shard it reaches."""

    def __init__(self, shard_units: int):
        self.shard_units = shard_units

    def process(self, element, offsets: Dict[ElementKey, int]):
        key, (counters, packed) = element
        start, count = offsets[key], counters["units"]
        columns = expand_columns(packed)
        position = 0
        while position < count:
            shard = (start + position) // self.shard_units
            end = min(count, (shard + 1) * self.shard_units - start)
            yield shard, (start + position, compact_columns({name: array[position:end]
                                                            for name, array in columns.items()}))
            position = end


class WriteShard(_WritingTheSplit):
    """(shard index, its pieces) -> (shard index, its manifest entry), once the shard is stored under its name."""

    def __init__(self, config, kind: ShardKind, corpus: Corpus, shard_units: int):
        super().__init__(config, kind, corpus)
        self.shard_units = shard_units

    def process(self, grouped):
        index, pieces = grouped
        pieces = sorted(pieces, key=lambda piece: piece[0])
        position = index * self.shard_units
        columns = []
        for offset, packed in pieces:
            if offset != position:
                raise RuntimeError(f"shard {index} has a gap or overlap at unit {position} (piece at {offset})")
            columns.append(expand_columns(packed))
            position += _length(columns[-1])
        examples = self.maker.whole_examples(_units(_joined(columns)))
        if len(examples["input_ids"]):  # (the last shard may hold only the end of the stream, too short for one)
            yield index, dataclasses.asdict(write_shard(self.storage, self.config.prefix, index, examples))


class MergeCounters(beam.CombineFn):
    """What every element's maker counted, as one maker reading the whole corpus would have counted it."""

    def __init__(self, maker_class: type):
        self.maker_class = maker_class

    def create_accumulator(self) -> Optional[dict]:
        return None  # no element yet

    def add_input(self, merged: Optional[dict], counters: dict) -> dict:
        return counters if merged is None else self.maker_class.merged_counters(merged, counters)

    def merge_accumulators(self, accumulators) -> Optional[dict]:
        merged = None
        for counters in accumulators:
            if counters is not None:
                merged = self.add_input(merged, counters)
        return merged

    def extract_output(self, merged: Optional[dict]) -> Optional[dict]:
        return merged


class WriteManifest(_WritingTheSplit):
    """Once every shard is written: check them against the counters, then write the manifest (the split is done)."""

    def __init__(self, config, kind: ShardKind, corpus: Corpus, settings: dict):
        super().__init__(config, kind, corpus)
        self.settings = settings

    def process(self, _, entries: List[Tuple[int, dict]], counters: Optional[dict]):
        if counters is None or not counters["documents"]:
            raise self.corpus.empty_error(rows=self.maker.unit_name == "rows")
        maker = self.maker
        maker.restore(self.fresh)
        maker.add_counters(counters)
        totals = maker.totals()  # refuses a corpus too short for one example
        entries = sorted(entries)
        shards = [ShardInfo(**entry) for _, entry in entries]
        whole = counters["units"] // maker.units_per_example
        full = [shard.count == self.config.shard_size for shard in shards[:-1]]
        if [index for index, _ in entries] != list(range(len(entries))) or not all(full) or \
                sum(shard.count for shard in shards) != whole:
            raise RuntimeError(f"the shards written ({[shard.name for shard in shards]}) do not hold the {whole} "
                               "examples the corpus makes")
        write_manifest(self.storage, self.config.prefix, manifest_of(self.settings, maker.feature_lengths, totals,
                                                                     shards))
        for name in self.storage.left_temporaries(self.storage.sizes()):  # of attempts killed writing a shard
            self.storage.delete(name)
        yield len(shards)


def build_pipeline(pipeline: beam.Pipeline, config, kind: ShardKind, corpus: Corpus, parts: List[CorpusPart],
                   settings: dict, maker_class: type, units_per_example: int) -> None:
    """The sharding job's transforms, added to `pipeline`."""
    shard_units = config.shard_size * units_per_example
    indexed = (pipeline | "Corpus parts" >> beam.Create(list(enumerate(parts)))
               | "Spread the parts" >> beam.Reshuffle())
    document_counts = None
    if corpus.source.limit is not None:
        document_counts = beam.pvalue.AsDict(indexed | "Count documents"
                                             >> beam.ParDo(CountDocuments(config, kind, corpus)))
    encoded = indexed | "Encode" >> beam.ParDo(EncodePart(config, kind, corpus), document_counts=document_counts)
    offsets = (encoded | "Unit counts" >> beam.Map(lambda element: (element[0], element[1][0]["units"]))
               | "All unit counts" >> beam.combiners.ToList() | "Offsets" >> beam.Map(unit_offsets))
    counters = (encoded | "Counters" >> beam.Map(lambda element: element[1][0])
                | "Merge counters" >> beam.CombineGlobally(MergeCounters(maker_class)))
    entries = (encoded | "Cut at shards" >> beam.ParDo(CutAtShards(shard_units), beam.pvalue.AsSingleton(offsets))
               | "Group by shard" >> beam.GroupByKey()
               | "Write shards" >> beam.ParDo(WriteShard(config, kind, corpus, shard_units)))
    (pipeline | "Once" >> beam.Create([None])
     | "Write manifest" >> beam.ParDo(WriteManifest(config, kind, corpus, settings), beam.pvalue.AsList(entries),
                                      beam.pvalue.AsSingleton(counters)))
