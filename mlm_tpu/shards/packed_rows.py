"""`--pack`'s steps per epoch, counted once: how many packed rows epoch 1 makes in each virtual input pipeline.

Counting packs the whole training set (text2text_packing.packed_rows_per_pipeline: about 4,400 examples/s on 2
cores, 40 minutes for 10 M examples), so the count is kept under a key of everything it depends on: each shard's
name, record count and crc32c (from the split's manifest.json), the examples' lengths, the seed, the number V of
virtual pipelines, each one's shuffling window, and the packing's chunk. Two places keep it:
- every backup (loop.LoopState.packed_rows), so a resumed run counts nothing, on whatever machine it resumes;
- the user's cache folder (user_cache_folder(): a local folder, so shards on gs:// or in a read-only folder are no
  matter), for any later run on the same shards and settings.
A kept count is used only where its key is this run's. Shards without a manifest have no checksums to key a count
by, so they are counted at every start. A cache folder that cannot be written is counted around, with a warning.
"""

import hashlib
import json
import os
from typing import Optional

from mlm_tpu.console import log, warn
from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json
from mlm_tpu.output_dir import write_json
from mlm_tpu.shards.layout import BatchLayout
from mlm_tpu.shards.pipeline import pipeline_window
from mlm_tpu.shards.reading import ShardSet
from mlm_tpu.shards.text2text_packing import CHUNK, packed_rows_per_pipeline

CACHE_VARIABLE = "MLM_TPU_CACHE"
PACKING = 1  # the packing's version: greedy in order, chunks of CHUNK examples (text2text_packing.py)


def user_cache_folder() -> str:
    """$MLM_TPU_CACHE, else $XDG_CACHE_HOME/mlm_tpu, else ~/.cache/mlm_tpu."""
    return os.environ.get(CACHE_VARIABLE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "mlm_tpu")


def count_key(shards: ShardSet, layout: BatchLayout, *, seed: int, window: int) -> Optional[str]:
    """A digest of everything the count depends on; None for shards whose manifest gives no checksums."""
    checksums = {entry.get("name"): entry.get("crc32c") for entry in (shards.manifest or {}).get("shards", [])}
    names = [os.path.basename(path) for path in shards.files]
    if not names or not all(checksums.get(name) for name in names):
        return None
    key = {"packing": PACKING, "chunk": CHUNK, "features": shards.features, "seed": seed,
           "pipelines": layout.input_pipelines, "window": pipeline_window(window, layout),
           "shards": [[name, count, checksums[name]] for name, count in zip(names, shards.counts)]}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def packed_rows(shards: ShardSet, layout: BatchLayout, *, seed: int, window: int,
                recorded: Optional[dict] = None) -> dict:
    """{"key": count_key(...), "rows": epoch 1's packed rows in each virtual pipeline}: `recorded`'s (a backup's)
    when its key is this run's, else the cache's, else counted (and cached)."""
    key = count_key(shards, layout, seed=seed, window=window)
    if key and recorded and recorded.get("key") == key:
        return recorded
    path = os.path.join(user_cache_folder(), "packed-rows", f"{key}.json") if key else None
    cached = _read(path) if path else None
    if cached and cached.get("key") == key and _is_count(cached.get("rows"), layout.input_pipelines):
        log(f"--pack: epoch 1's packed rows counted before, for these shards and settings ({path})")
        return cached
    log(f"--pack: counting the packed rows of the {shards.records:,} training examples (each virtual input pipeline "
        f"packs its part once{'; kept for later runs in ' + path if path else ': no manifest.json, so not kept'})")
    counted = {"key": key, "rows": packed_rows_per_pipeline(shards, layout.input_pipelines, seed=seed,
                                                            window=pipeline_window(window, layout))}
    if path:
        _write(path, counted)
    return counted


def steps_of(count: dict, layout: BatchLayout) -> int:
    """Steps per epoch: the rows of the virtual pipeline that packs fewest, in whole parts of a step."""
    return min(count["rows"]) // layout.rows_per_pipeline


def _is_count(rows, pipelines: int) -> bool:
    return isinstance(rows, list) and len(rows) == pipelines and all(isinstance(row, int) for row in rows)


def _read(path: str) -> Optional[dict]:
    if not os.path.isfile(path):
        return None
    try:
        found = read_json(path, "a cached --pack count", "")
    except UserError:  # cut short or edited: counted again, and written over
        return None
    return found if isinstance(found, dict) else None


def _write(path: str, count: dict) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json(path, count)
    except (OSError, UserError) as error:
        warn(f"could not keep the --pack count in {path} ({getattr(error, 'strerror', None) or error}); later runs "
             f"count again (set {CACHE_VARIABLE} to a writable folder)")
