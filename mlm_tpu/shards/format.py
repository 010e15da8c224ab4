"""The shard format, both sides of it: file names and the manifest.

The writer (sharding.py, writer.py) and the reader (reading.py, pipeline.py) take these from
here; nothing else spells them. The features each kind of split holds are its kind's to say (kinds.py's
ShardKind, owned by its product line). A split is `<prefix>-<index>-<count>.tfrecord` files (`<count>`
the exact number of records, as the 🤗 TPU example's `-\\d+-(\\d+)\\.tfrecord` regex expects) of
`tf.train.Example`s with fixed-length int64 features, and a `manifest.json` written last.

The kinds of split made today (the sharder's `--task`), and the features each example holds:
- mlm: input_ids and attention_mask of max_length (packed documents, each framed [CLS] ... [SEP]);
- text2text: the same, plus labels of max_target_length (-100 where there is no target token);
- span-corruption: input_ids of the raw length T only (packed documents, corrupted while training);
- sequence-classification: input_ids, attention_mask and token_type_ids of max_length (one text, or a pair, per
  row), and labels of length 1: a class id, or a float32 score in a regression split;
- token-classification: the same inputs, and labels of max_length: each word's tag id on its first piece, -100 on
  its other pieces and on special tokens and padding.
Every feature is int64 but a regression split's labels (float32): the manifest says each feature's dtype.
"""

import glob
import os
import re
from typing import Dict, Optional

from mlm_tpu.errors import UserError

IGNORE_INDEX = -100  # the label of a position that takes no loss (the 🤗 convention)
MANIFEST = "manifest.json"
SHARD_SUFFIX = ".tfrecord"
SHARD_COUNT = re.compile(r"-\d+-(\d+)\.tfrecord$")  # the reference training script's regex

MLM, TEXT2TEXT, SPAN_CORRUPTION = "mlm", "text2text", "span-corruption"
SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION = "sequence-classification", "token-classification"
REGRESSION = "regression"  # a sequence-classification split's problem_type when its labels are scores


WRITER_RECORD = ".writer.json"  # in a split being written: which job writes it (host, pid), removed at the end


def shard_pattern(location: str) -> str:
    """The glob of a split's shards: `location` itself where it is a glob or a shard, else its folder's shards."""
    return location if "*" in location or location.endswith(SHARD_SUFFIX) else os.path.join(location, f"*{SHARD_SUFFIX}")


def no_shards(location: str, flag: str) -> UserError:
    return UserError(f"{flag} {location}: no shards (*{SHARD_SUFFIX}) found; make them with `python -m mlm_tpu.shard`")


def check_local_shards(location: str, flag: str) -> None:
    """Refuse a local split with no shards (a typo) before TensorFlow loads: its answer then takes a second, not the
    seconds of TensorFlow's start-up. A gs:// split is listed by TensorFlow, when the run reads it."""
    if "://" not in location and not glob.glob(shard_pattern(location)):
        raise no_shards(location, flag)


def shard_name(prefix: str, index: int, count: int) -> str:
    return f"{prefix}-{index:05d}-{count}{SHARD_SUFFIX}"


def is_shard_of(prefix: str, name: str) -> bool:
    """Whether `name` is a shard name `shard_name` gives with `prefix`."""
    return re.fullmatch(rf"{re.escape(prefix)}-\d{{5,}}-\d+{re.escape(SHARD_SUFFIX)}", name) is not None


def progress_name(prefix: str) -> str:
    """The hidden file saying how far an unfinished job got."""
    return f".{prefix}-progress.json"


def feature_dtypes(settings: Dict[str, object]) -> Dict[str, str]:
    """The features of a split with these settings (a manifest's) that are not int64: a regression split's labels."""
    return {"labels": "float32"} if settings.get("problem_type") == REGRESSION else {}


def manifest_features(lengths: Dict[str, int], dtypes: Optional[Dict[str, str]] = None) -> Dict[str, dict]:
    """How the manifest lists the features."""
    return {name: {"dtype": (dtypes or {}).get(name, "int64"), "length": length} for name, length in lengths.items()}


def manifest_dtypes(manifest: dict) -> Dict[str, str]:
    """The features a manifest lists with another dtype than int64."""
    return {name: feature["dtype"] for name, feature in manifest["features"].items()
            if isinstance(feature, dict) and feature.get("dtype", "int64") != "int64"}


def feature_lengths(manifest: dict) -> Dict[str, int]:
    """Each feature's length from a manifest (mlm_tpu 0.1 listed only types: its features were max_length long)."""
    return {name: feature["length"] if isinstance(feature, dict) else manifest["settings"]["max_length"]
            for name, feature in manifest["features"].items()}


def span_corruption_settings(lengths) -> Dict[str, object]:
    """What a span-corruption manifest records of its objective (a `span_lengths.SpanLengths`), for the trainer."""
    return {"objective": "span_corruption", "noise_density": lengths.noise_density,
            "mean_noise_span_length": lengths.mean_noise_span_length, "raw_length": lengths.raw_length,
            "input_length": lengths.input_length, "target_length": lengths.target_length}
