"""What --gradient-accumulation-steps costs: tokens/s of mlm_tpu's trainer with 1, 4 and 16 micro-batches per step at
the same micro-batch (RoBERTa `small` by default, 8 x 128 tokens, the sparse head, on the CPU), and their ratios to
no accumulation. The work per token is the same whatever N, so accumulation should cost next to nothing: a loop over
the micro-batches and a sum of gradients per micro-batch.

Each setting trains `python train.py` in its own process on the same shards (WikiText-2 validation, made by the real
commands), a Keras callback timing the calls into the device after the first few (tracing, warm-up): tokens/s over
the same number of micro-batches for every N. The settings are measured in turn, in rounds, and each one's best
round is kept (the CPU is shared).
Usage: python benchmarks/gradient_accumulation.py [--model-config small] [--micro-batch 8] [--micro-batches 64]
[--rounds 2]
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.train_throughput import MAX_LENGTH, prepared_wikitext  # noqa: E402

ACCUMULATIONS = (1, 4, 16)
WARM_UP_MICRO_BATCHES = 32  # the first steps' micro-batches, not timed (tracing, the input pipeline filling)


def measure(work: Path, model_config: str, micro_batch: int, accumulation: int, micro_batches: int) -> dict:
    """Tokens/s of `micro_batches` micro-batches of `micro_batch` rows, accumulated `accumulation` per step, after
    the warm-up (this process' job)."""
    import mlm_tpu
    import tf_keras as keras

    class Clock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.ends = []

        def on_train_batch_end(self, batch, logs=None):
            self.ends.append(time.perf_counter())

    warm_up = max(WARM_UP_MICRO_BATCHES // accumulation, 1)
    timed = micro_batches // accumulation
    clock = Clock()
    mlm_tpu.train_model(str(work / "shards" / "train"), str(work / f"model-{accumulation}"), callbacks=[clock],
                        tokenizer=str(work / "tokenizer"), model_config=model_config, max_steps=warm_up + timed,
                        per_replica_batch_size=micro_batch, gradient_accumulation_steps=accumulation,
                        shuffle_buffer_size=1024)
    seconds = clock.ends[warm_up + timed - 1] - clock.ends[warm_up - 1]
    return {"tokens_per_second": timed * accumulation * micro_batch * MAX_LENGTH / seconds,
            "seconds_per_micro_batch": seconds / (timed * accumulation)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-config", default="small")
    parser.add_argument("--micro-batch", type=int, default=8, help="--per-replica-batch-size (default: 8)")
    parser.add_argument("--micro-batches", type=int, default=64,
                        help="micro-batches timed for each setting, a multiple of 16 (default: 64)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # a child process' accumulation
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.work), args.model_config, args.micro_batch, args.measure,
                                 args.micro_batches)))
        return
    best = {}
    with prepared_wikitext() as (work, env):
        for round_ in range(args.rounds):
            for accumulation in ACCUMULATIONS:
                result = subprocess.run(
                    [sys.executable, __file__, "--measure", str(accumulation), "--work", str(work), "--model-config",
                     args.model_config, "--micro-batch", str(args.micro_batch), "--micro-batches",
                     str(args.micro_batches)], capture_output=True, text=True, env=env, cwd=ROOT)
                if result.returncode:
                    sys.exit(result.stderr[-3000:])
                figures = json.loads(result.stdout.strip().splitlines()[-1])
                print(f"round {round_ + 1}, accumulation {accumulation:2d}: {figures['tokens_per_second']:,.0f} "
                      "tokens/s", flush=True)
                if figures["tokens_per_second"] > best.get(accumulation, {}).get("tokens_per_second", 0):
                    best[accumulation] = figures
    print(f"\n{args.model_config}, micro-batch {args.micro_batch} x {MAX_LENGTH} tokens, best of {args.rounds} "
          f"round(s), {args.micro_batches} micro-batches timed each:")
    for accumulation in ACCUMULATIONS:
        tokens = best[accumulation]["tokens_per_second"]
        print(f"  --gradient-accumulation-steps {accumulation:2d} (global batch {accumulation * args.micro_batch:4d}): "
              f"{tokens:8,.0f} tokens/s, {tokens / best[1]['tokens_per_second']:.3f} x no accumulation")


if __name__ == "__main__":
    main()
