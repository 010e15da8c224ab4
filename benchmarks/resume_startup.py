"""Start-up time of a resumed run's input pipeline, as a function of the step it resumes at.

Time from building the training pipeline to its first (masked) batch, for a run resuming at
step N of a masked-LM run over WikiText-2 shards:
- mlm_tpu: the pipeline starts at step N (shards/pipeline.py): files wholly before N's shuffle
  window are skipped by the counts in their names, the batches before N in that window are dropped
  still serialized;
- replay: the same deterministic order read from the start and the first N batches decoded, masked
  and dropped (T5X's "deterministically replay from the beginning"), the correct way without
  positional restart;
- mlm_tpu 0.2: Keras `fit` restarted the dataset at its first batch: a constant start-up, but the
  wrong batches (the epoch's first ones again).
Two shuffle windows (--shuffle-buffer-size): one much smaller than an epoch (what a large corpus
has under the default 2^18 records), and the default, larger than this whole corpus, where the
window holding step N is the epoch itself. Best of --repeats runs each.
Usage: python benchmarks/resume_startup.py [--copies 8] [--repeats 3]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WIKITEXT = ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"
MAX_LENGTH, BATCH = 128, 32


def seconds_to_first_batch(make_dataset, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        next(iter(make_dataset()))
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=8, help="WikiText-2 validation copies in the corpus")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not WIKITEXT.is_file():
        sys.exit(f"needs {WIKITEXT}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras)
    from mlm_tpu.console import import_tensorflow

    import_tensorflow()
    from mlm_tpu.mlm.masking import MlmMasker
    from mlm_tpu.mlm.shard_kind import MASKED_LM
    from mlm_tpu.shards.pipeline import training_batches
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import shard_kinds
    from mlm_tpu.tokenizer.load import load_tokenizer

    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        corpus = work / "corpus.txt"
        corpus.write_text(WIKITEXT.read_text(encoding="utf-8") * args.copies, encoding="utf-8")
        for command in (["-m", "mlm_tpu.tokenizer", "train", "--text-files", WIKITEXT, "--vocab-size", "8000",
                         "--output-dir", work / "tokenizer"],
                        ["-m", "mlm_tpu.shard", "--tokenizer", work / "tokenizer", "--text-files", corpus,
                         "--max-length", str(MAX_LENGTH), "--shard-size", "500", "--output-dir", work / "shards"]):
            subprocess.run([sys.executable, *map(str, command)], check=True, env=env, capture_output=True, cwd=ROOT)
        tokenizer = load_tokenizer(str(work / "tokenizer"))
        shards = find_shards(str(work / "shards" / "train"), shard_kinds(), MASKED_LM.name,
                             MASKED_LM.features(MAX_LENGTH))
        per_epoch = shards.records // BATCH
        print(f"{shards.records:,} examples of {MAX_LENGTH} tokens in {len(shards.files)} shards; batch {BATCH}: "
              f"{per_epoch} steps per epoch. Seconds to the first batch after resuming at step N:")
        masker = MlmMasker(tokenizer, 0.15, seed=0)
        for window in (2048, 2**18):
            print(f"  shuffle window {window:,} records"
                  f"{' (more than the corpus: the window is the epoch)' if window >= shards.records else ''}")
            print(f"  {'step N':>8} {'into epoch':>10} {'mlm_tpu':>9} {'replay':>9} {'0.2 (wrong data)':>17} "
                  f"{'replay / mlm_tpu':>17}")

            def pipeline(start_batch):
                return training_batches(shards, BATCH, masker, seed=0, pipeline=0, window=window,
                                        batches_per_epoch=per_epoch, start_batch=start_batch)

            restart = seconds_to_first_batch(lambda: pipeline(0), args.repeats)
            for fraction in (0.0, 0.25, 0.5, 0.75, 0.99, 1.5):
                step = int(fraction * per_epoch)
                ours = seconds_to_first_batch(lambda: pipeline(step), args.repeats)
                replay = seconds_to_first_batch(lambda: pipeline(0).skip(step), args.repeats)
                print(f"  {step:>8} {fraction:>10.0%} {ours:>8.2f}s {replay:>8.2f}s {restart:>16.2f}s "
                      f"{replay / ours:>16.1f}x")


if __name__ == "__main__":
    main()
