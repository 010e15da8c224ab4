"""Multi-worker training on this machine: start-up time and steps/s of one run made by one process with two CPU
replicas (MirroredStrategy) against the same run made by two worker processes (`mlm-tpu launch --workers 2`,
MultiWorkerMirroredStrategy, ring collectives over loopback gRPC); one process with one replica for scale.

What this shows is overhead, not scaling: both workers share this machine's cores (2 here), so two processes
can only be slower than one; each pays its own TensorFlow import and tracing, and every step's gradients
cross gRPC instead of memory. Across real machines the same run gets each machine's cores and devices.

Each run is the real `train.py` (tiny RoBERTa by default, WikiText-2 validation, 128-token examples, global
batch 16, a loss logged every step). Start-up: from starting the command to the first step's loss in the
TensorBoard log (imports, forming the cluster, building the model, tracing the step). Steps/s: from the
TensorBoard wall times of the steps after the first fifth (warm), over the rest. After the last step: from its loss
to the command's end (the epoch's end and save, the input iterator's deletion, the processes' exit), where
TensorFlow 2.21 could lose 20-40 s deleting an autotuned input iterator (see the README).
Usage: python benchmarks/multi_worker.py [--model-config tiny] [--steps 60]
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from train_throughput import MAX_LENGTH, ROOT, prepared_wikitext

GLOBAL_BATCH = 16
RUNS = {  # name -> (launcher arguments before `train`, train flags)
    "1 process x 2 replicas": ([], ["--cpu-replicas", "2", "--per-replica-batch-size", str(GLOBAL_BATCH // 2)]),
    "2 workers x 1 replica": (["-m", "mlm_tpu.launch", "--workers", "2", "--"],
                              ["--per-replica-batch-size", str(GLOBAL_BATCH // 2), "--communication", "ring"]),
    "1 process x 1 replica": ([], ["--per-replica-batch-size", str(GLOBAL_BATCH)]),
}


def step_wall_times(log_dir: Path) -> dict:
    """{step: wall time} of the training loss in a run's TensorBoard folder."""
    from tensorboard.compat.proto.event_pb2 import Event

    from mlm_tpu.shards.tfrecord import iter_records

    times = {}
    for path in sorted(log_dir.glob("*.tfevents.*")):
        for record in iter_records(path.read_bytes(), str(path)):
            event = Event.FromString(record)
            if any(value.tag == "loss" for value in event.summary.value):
                times[event.step] = event.wall_time
    return times


def run(name: str, work: Path, model_config: str, steps: int, env: dict) -> dict:
    launcher, flags = RUNS[name]
    output_dir = work / name.replace(" ", "-")
    command = [sys.executable, *(launcher or [str(ROOT / "train.py")]), *(["train"] if launcher else []),
               "--train-dataset", str(work / "shards" / "train"), "--tokenizer", str(work / "tokenizer"),
               "--max-length", str(MAX_LENGTH), "--model-config", model_config, "--max-steps", str(steps),
               "--logging-steps", "1", "--output-dir", str(output_dir), *flags]
    started = time.time()
    child = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    if child.returncode:
        sys.exit(f"{name} failed:\n{child.stderr[-3000:]}")
    times = step_wall_times(output_dir / "logs" / "train")
    warm = max(steps // 5, 2)
    ended = time.time()
    return {"start_up": times[1] - started, "steps_per_second": (steps - warm) / (times[steps] - times[warm]),
            "after_last_step": ended - times[steps], "total": ended - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-config", default="tiny")
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    with prepared_wikitext("--shard-size", "500") as (work, env):
        results = {name: run(name, work, args.model_config, args.steps, env) for name in RUNS}
    print(f"RoBERTa '{args.model_config}', global batch {GLOBAL_BATCH} x {MAX_LENGTH} tokens, {args.steps} steps, "
          f"{os.cpu_count()} CPU cores shared by every process of a run (overhead, not scaling)")
    for name, figures in results.items():
        print(f"  {name:<24} start-up {figures['start_up']:5.1f} s, {figures['steps_per_second']:5.2f} steps/s "
              f"({GLOBAL_BATCH * MAX_LENGTH * figures['steps_per_second']:,.0f} tokens/s), after the last step "
              f"{figures['after_last_step']:.1f} s, whole run {figures['total']:.1f} s")
    one, two = results["1 process x 2 replicas"], results["2 workers x 1 replica"]
    print(f"  2 workers / 1 process x 2 replicas: start-up {two['start_up'] / one['start_up']:.2f}x, steps/s "
          f"{two['steps_per_second'] / one['steps_per_second']:.2f}x")


if __name__ == "__main__":
    main()
