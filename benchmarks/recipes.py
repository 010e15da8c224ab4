"""Pretraining recipes judged downstream, at equal CPU time: the sparse masked-LM head against the dense one, and
token against whole-word against span masking.

Each recipe is benchmarks/downstream.py's pretraining (the same IMDB corpus, tokenizer, shape, batch, learning rate
and CPU budget; its `mlm` run is the first row, cached if downstream.py made it) with train.py flags on top. Each
model is then fine-tuned on the offline tasks (Rotten Tomatoes, IMDB) under the downstream benchmark's protocol,
median and min-max over seeds, beside the same shape from scratch and the TF-IDF floor. A recipe's masked accuracy
is on its own masks (whole words and spans are harder to guess): the downstream scores are the comparable figures.

Usage: python benchmarks/recipes.py [--cpu-minutes M] [--seeds 5] [--root runs/bench-downstream]
"""

import argparse
import time
from pathlib import Path

from downstream import CPU_PROTOCOL, DEFAULT_CPU_MINUTES, DEFAULT_ROOT, DEFAULT_SEEDS, MAX_TRAIN_SAMPLES, compare

RECIPES = {
    "mlm": [],  # the sparse head (the default) and token masking: downstream.py's run
    "dense-head": ["--dense-mlm-head"],
    "whole-word": ["--masking", "whole-word"],
    "span": ["--masking", "span"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-minutes", type=float, default=DEFAULT_CPU_MINUTES, help="Each recipe's budget.")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args()
    started = time.perf_counter()
    print(compare(RECIPES, args.cpu_minutes * 60, args.seeds, args.root))
    print(f"\n({(time.perf_counter() - started) / 60:.0f} min wall; protocol {CPU_PROTOCOL}, each task's first "
          f"{MAX_TRAIN_SAMPLES:,} training rows)")


if __name__ == "__main__":
    main()
