"""Start-up of a training run: how long `python train.py` takes before and through its first steps, with the
training step traced as written (mlm_tpu) against traced through AutoGraph (the reference: what Keras `fit` and a
plain `tf.function` do, and what mlm_tpu's trainer did before).

AutoGraph rewrites the Python of every function a traced function calls, and Keras has it convert every layer's
`call` of transformers' models: seconds of work before the first step, on every start and every resume, for graph
code that needs none of it (the weights come out bit-identical). Each run is the real command in its own process,
on WikiText-2 validation shards of 128-token examples, `--max-steps 4`, no validation; the reference run is the
same command with AutoGraph let in again (`tf.autograph.experimental.do_not_convert` made a no-op). Printed: the
whole command's seconds and its first epoch's (tracing and 4 steps, as the trainer logs it), median of --rounds.
Usage: python benchmarks/train_startup.py [--model-config tiny small t5-tiny t5-small] [--rounds 3]
"""

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from train_throughput import ROOT, WIKITEXT, prepared_wikitext

WITH_AUTOGRAPH = ("import sys, runpy, tensorflow as tf; tf.autograph.experimental.do_not_convert = lambda f: f; "
                  "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
EPOCH = re.compile(r"Epoch 1 training: .*\(\d+ steps, ([\d.]+) s")


def one_run(autograph: bool, work: Path, model_config: str, env: dict, index: int) -> tuple:
    """(whole command's seconds, first epoch's seconds) of one training run in its own process."""
    task = ["--task", "span-corruption", "--train-dataset", work / "span" / "train", "--tokenizer", work / "t5-tok"] \
        if model_config.startswith("t5") else ["--train-dataset", work / "shards" / "train", "--tokenizer",
                                               work / "tokenizer"]
    flags = [*task, "--model-config", model_config, "--max-steps", "4", "--per-replica-batch-size", "8",
             "--output-dir", work / "runs" / f"{model_config}-{autograph}-{index}"]
    command = [sys.executable, *(["-c", WITH_AUTOGRAPH] if autograph else []), str(ROOT / "train.py"),
               *map(str, flags)]
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    if result.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return seconds, float(EPOCH.search(result.stderr).group(1))


def prepare_t5(work: Path, env: dict) -> None:
    """A T5 tokenizer and span-corruption shards (inputs of 128 tokens) of the same text."""
    for command in (["-m", "mlm_tpu.tokenizer", "train", "--template", "t5", "--text-files", WIKITEXT,
                     "--vocab-size", "8000", "--output-dir", work / "t5-tok"],
                    ["-m", "mlm_tpu.shard", "--task", "span-corruption", "--tokenizer", work / "t5-tok",
                     "--text-files", WIKITEXT, "--max-length", "128", "--output-dir", work / "span"]):
        subprocess.run([sys.executable, *map(str, command)], check=True, env=env, capture_output=True, cwd=ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-config", nargs="+", default=["tiny", "small", "t5-tiny", "t5-small"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with prepared_wikitext() as (work, env):
        prepare_t5(work, env)
        print(f"python train.py --max-steps 4 (batch 8, 128-token examples), CPU; median of {args.rounds} runs; "
              "seconds of the whole command / of its first epoch (tracing and 4 steps)")
        for model_config in args.model_config:
            figures = {}
            for autograph in (True, False):
                runs = [one_run(autograph, work, model_config, env, index) for index in range(args.rounds)]
                figures[autograph] = [statistics.median(column) for column in zip(*runs)]
            (whole_ag, epoch_ag), (whole, epoch) = figures[True], figures[False]
            print(f"  {model_config:<9} AutoGraph (reference) {whole_ag:6.1f} / {epoch_ag:5.1f} s   mlm_tpu "
                  f"{whole:6.1f} / {epoch:5.1f} s   {whole_ag / whole:.2f}x / {epoch_ag / epoch:.2f}x faster")


if __name__ == "__main__":
    main()
