"""What starting a --pack run spends on counting its steps per epoch, as a function of the training set's size.

--pack's steps per epoch are the packed rows epoch 1 makes in each virtual input pipeline: counting them packs the
whole training set. Text-to-text shards of short examples (as benchmarks/packing.py's: 15 to 45 words of
WikiText-2, 128-token inputs) made by the real command in sizes of --examples; for each, seconds of the trainer's
call (shards/packed_rows.packed_rows, V = 8, the default window):
- mlm_tpu 0.4.0 (reference): counted at every start and every resume, on every worker (its
  packed_steps_per_epoch; the first start now does the same, and keeps the count);
- now, a later start on the same shards and settings: the count from the cache ($MLM_TPU_CACHE, here a temporary
  folder);
- now, a resume: the count from the backup's record (no cache, as on a fresh machine).
Seconds are wall-clock / CPU (every thread of the process: steadier on a shared machine), the best of --repeats
runs each.
Usage: python benchmarks/packed_start.py [--examples 4000 16000 64000] [--repeats 2]
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WIKITEXT = ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"
T5_TOKENIZER = ROOT / "tests" / "fixtures" / "made-by-0.2" / "t5-tokenizer"


def make_shards(work: Path, examples: int) -> Path:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    words = [word for word in WIKITEXT.read_text(encoding="utf-8").split() if word.isalpha()][:20000]
    rng = random.Random(0)
    rows = work / f"rows-{examples}.jsonl"
    with open(rows, "w", encoding="utf-8") as stream:
        for _ in range(examples):
            stream.write(json.dumps({"text": " ".join(rng.choices(words, k=rng.randint(15, 45))),
                                     "label": rng.choice(["yes", "no", "maybe"])}) + "\n")
    output = work / f"shards-{examples}"
    subprocess.run([sys.executable, "-m", "mlm_tpu.shard", "--task", "text2text", "--tokenizer", str(T5_TOKENIZER),
                    "--text-files", str(rows), "--input-column", "text", "--target-column", "label", "--max-length",
                    "128", "--max-target-length", "8", "--shard-size", "500", "--output-dir", str(output)],
                   check=True, env=env, capture_output=True, cwd=ROOT)
    return output / "train"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, nargs="+", default=[4000, 16000, 64000])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if not WIKITEXT.is_file():
        sys.exit(f"needs {WIKITEXT}")
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras)
    from mlm_tpu.console import import_tensorflow

    import_tensorflow()
    from mlm_tpu.shards.layout import BatchLayout
    from mlm_tpu.shards.packed_rows import packed_rows
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.shards.text2text_packing import packed_steps_per_epoch
    from mlm_tpu.t5.shard_kinds import TEXT2TEXT_ROWS
    from mlm_tpu.tasks import shard_kinds
    from mixture_resume import Seconds

    layout, window = BatchLayout(8, 64, 1, 1), 2**18
    with tempfile.TemporaryDirectory() as work:
        cache = Path(work) / "cache"
        os.environ["MLM_TPU_CACHE"] = str(cache)
        print(f"wall / CPU seconds to count --pack's steps per epoch at start (V = {layout.input_pipelines}; best "
              f"of {args.repeats})")
        print("| training examples | mlm_tpu 0.4.0: every start and resume (examples/s) | now, a later start "
              "(cache) | now, a resume (backup) |")
        print("| --- | --- | --- | --- |")
        for examples in args.examples:
            shards = find_shards(str(make_shards(Path(work), examples)), shard_kinds(), TEXT2TEXT_ROWS.name,
                                 TEXT2TEXT_ROWS.features(None, None))
            if examples == args.examples[0]:
                packed_steps_per_epoch(shards, layout, seed=42, window=window)  # TensorFlow's one-off start-up
            reference = Seconds(lambda: packed_steps_per_epoch(shards, layout, seed=42, window=window),
                                args.repeats)
            count = packed_rows(shards, layout, seed=42, window=window)  # the first start: counts and caches
            cached = Seconds(lambda: packed_rows(shards, layout, seed=42, window=window), args.repeats)
            shutil.rmtree(cache)
            resumed = Seconds(lambda: packed_rows(shards, layout, seed=42, window=window, recorded=count),
                              args.repeats)
            print(f"| {examples:,} | {reference} ({examples / reference.wall:,.0f}) | {cached} | {resumed} |",
                  flush=True)


if __name__ == "__main__":
    main()
