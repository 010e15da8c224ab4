"""What a sharding job does (`python -m mlm_tpu.shard`, `shard_corpus`): its typed config, read by the job here and
by its Beam workers (beam_pipeline.py), and by each kind of split (kinds.py) for the flags it takes."""

from dataclasses import dataclass, field
from typing import Optional, Tuple

from mlm_tpu.configuration import setting
from mlm_tpu.corpus import CorpusSource
from mlm_tpu.shards.format import MLM
from mlm_tpu.shards.packing import MIN_MAX_LENGTH


@dataclass
class ShardingConfig:
    """What `python -m mlm_tpu.shard` does; the flags of the same names fill it."""

    tokenizer: str  # tokenizer folder or Hub name (a fast tokenizer)
    output_dir: str  # local folder or gs://BUCKET/PATH; shards go to <output_dir>/<split>/
    # the kind of examples, by its name in the registry of kinds (tasks.py): mlm, text2text (or classification,
    # generation), span-corruption, sequence-classification, token-classification
    task: str = MLM
    corpus: CorpusSource = field(default_factory=CorpusSource)
    input_columns: Tuple[str, ...] = ()  # text2text: the columns joined into the input
    target_column: Optional[str] = None  # text2text: the column holding the target
    source_prefix: str = ""  # text2text: task prefix put before every input
    pair_column: Optional[str] = None  # sequence-classification: the column of each text's pair (None: single texts)
    negative_columns: Tuple[str, ...] = ()  # sentence-embedding: the columns of each query's hard negatives
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
