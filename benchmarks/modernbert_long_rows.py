"""ModernBERT at long rows (issue 56): peak memory and CPU seconds of one training step as the row grows, mlm_tpu's
blocked/chunked attention side by side with transformers 5's PyTorch ModernBertForMaskedLM under sdpa; then a
local-only stack's growth, and train.py's peak memory for the same tokens per step packed 8,192 x 1 against
1,024 x 8.

- The shape: the issue's tiniest ModernBERT: 3 layers of 128 (layer 0 global, then two local ones with a window of
  128), 4 heads, GeGLU 192, a vocabulary of 4,096.
- One step: forward, the dense masked-LM head and its loss (30% of positions labelled), backward, the gradients of
  every weight; batch 1, one document per row, no XLA (train.py's default on CPUs). Each measurement runs in a
  process of its own: one step to trace and warm up, then --timed-steps steps (5), their median. Peak memory is the
  process's peak resident set (ru_maxrss: the libraries, the weights and the step's activations); CPU seconds are
  the process's, all its threads, over each timed step (steadier than wall time on a loaded machine).
- The local-only stack: the same shape with all three layers local, at --local-lengths; its step should grow
  linearly (8,192 at most 10x 1,024).
- train.py: a tokenizer of 4,096 pieces and shards of WikiText-2 validation at 8,192 and 1,024 tokens made by the
  real commands; `train.py --max-steps 2` with the shape above as --model-config, the sparse head (train.py's
  default), batch 1 of 8,192 against batch 8 of 1,024; the peak resident set of each run's process.
The PyTorch rows need a Python with torch and transformers 5: --pytorch-python, by default
$MLM_TPU_PYTORCH_PYTHON.
Usage: python benchmarks/modernbert_long_rows.py [--lengths 1024 2048 4096 8192] [--local-lengths 1024 8192]
       python benchmarks/modernbert_long_rows.py --parts local --timed-steps 5   # one table: the local-only stack
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIKITEXT = ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"
PARTS = ("steps", "local", "train")
REPLY = "@@reply "  # a worker's answer on stdout; anything else is the libraries' chatter
SHAPE = {"model_type": "modernbert", "vocab_size": 4096, "hidden_size": 128, "num_hidden_layers": 3,
         "num_attention_heads": 4, "intermediate_size": 192, "local_attention": 128, "max_position_embeddings": 8192,
         "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2,
         "layer_types": ["full_attention", "sliding_attention", "sliding_attention"]}
LABELLED = 0.3


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # Linux reports kilobytes


def batch_of(length: int):
    """One row of random tokens, 30% of them labelled (the others -100), as numpy arrays."""
    import numpy as np

    rng = np.random.default_rng(0)
    input_ids = rng.integers(3, SHAPE["vocab_size"], (1, length))
    labels = np.where(rng.random((1, length)) < LABELLED, input_ids, -100)
    return input_ids, labels


def tensorflow_step(length: int, layers: str, timed_steps: int) -> dict:
    import tensorflow as tf

    from mlm_tpu.modernbert.config import from_dict
    from mlm_tpu.modernbert.model import build

    shape = dict(SHAPE)
    if layers == "local":
        shape["layer_types"] = ["sliding_attention"] * 3
    model = build(from_dict(shape))
    input_ids, labels = batch_of(length)
    batch = {"input_ids": tf.constant(input_ids), "attention_mask": tf.ones_like(input_ids),
             "labels": tf.constant(labels)}

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            loss = model(batch, training=True).loss
        return loss, tape.gradient(loss, model.trainable_variables)

    step(batch)[0].numpy()
    return {"cpu_s": median_cpu_seconds(lambda: step(batch)[0].numpy(), timed_steps), "peak_gb": peak_gb()}


def pytorch_step(length: int, timed_steps: int) -> dict:
    import torch
    from transformers import ModernBertConfig, ModernBertForMaskedLM

    values = {key: value for key, value in SHAPE.items() if key != "model_type"}
    model = ModernBertForMaskedLM(ModernBertConfig(**values, global_rope_theta=160000.0)).train()
    model.set_attn_implementation("sdpa")
    input_ids, labels = (torch.tensor(values) for values in batch_of(length))

    def step():
        model.zero_grad(set_to_none=True)
        model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), labels=labels).loss.backward()

    step()
    return {"cpu_s": median_cpu_seconds(step, timed_steps), "peak_gb": peak_gb()}


def median_cpu_seconds(step, times: int) -> float:
    """The median process CPU time of `times` calls of `step` (one step is a fifth of a second at 1,024 tokens: a
    single one moves by a fifth between runs on a loaded machine)."""
    seconds = []
    for _ in range(times):
        started = time.process_time()
        step()
        seconds.append(time.process_time() - started)
    return statistics.median(seconds)


def train_run(arguments) -> dict:
    """train.py run in this process, its peak resident set."""
    import runpy

    sys.argv = ["train.py", *arguments]
    try:
        runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
    except SystemExit as stop:
        if stop.code:
            raise
    return {"peak_gb": peak_gb()}


def worker(python: str, *arguments, env=None) -> dict:
    """A measurement in a process of its own: its JSON answer."""
    result = subprocess.run([python, __file__, "--worker", *map(str, arguments)], capture_output=True, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                                           **(env or {})})
    replies = [line[len(REPLY):] for line in result.stdout.splitlines() if line.startswith(REPLY)]
    if result.returncode or not replies:
        sys.exit(f"{' '.join(map(str, arguments))} failed:\n{result.stderr[-3000:]}")
    return json.loads(replies[-1])


def prepare(work: Path) -> None:
    """A 4,096-piece tokenizer, shards of 8,192 and 1,024 tokens, and the shape's config.json."""
    commands = [["-m", "mlm_tpu.tokenizer", "train", "--text-files", WIKITEXT, "--vocab-size", "4096",
                 "--model-max-length", "8192", "--output-dir", work / "tokenizer"]]
    for length in (8192, 1024):
        commands.append(["-m", "mlm_tpu.shard", "--tokenizer", work / "tokenizer", "--text-files", WIKITEXT,
                         "--max-length", length, "--output-dir", work / f"shards-{length}"])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    for command in commands:
        subprocess.run([sys.executable, *map(str, command)], check=True, env=env, capture_output=True, cwd=ROOT)
    (work / "shape.json").write_text(json.dumps(SHAPE))


def print_plan_check(measured: dict) -> None:
    """The memory plan (mlm_tpu/modernbert/memory.py) against the measured peaks: what each row length adds to the
    shortest one's peak (the libraries' memory cancels out), estimated and measured. The step here keeps no
    optimizer state, so the plan's is left out."""
    from mlm_tpu.modernbert import memory
    from mlm_tpu.modernbert.config import from_dict

    config, shortest = from_dict(SHAPE), min(measured)
    planned = {length: memory.plan(config, length, 1, optimizer_state=0).total / memory.GB for length in measured}
    print(f"\n| tokens per row | added to {shortest:,}'s peak: planned GB | measured GB |")
    print("| --- | --- | --- |")
    for length in sorted(measured):
        print(f"| {length:,} | {planned[length] - planned[shortest]:.2f} | "
              f"{measured[length]['peak_gb'] - measured[shortest]['peak_gb']:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--local-lengths", type=int, nargs="+", default=[1024, 8192])
    parser.add_argument("--timed-steps", type=int, default=5, help="Steps timed after the warm-up one; their median.")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                        help="Which tables: the step against PyTorch's (and the memory plan), the local-only stack, "
                             "train.py's packed rows (default: all).")
    parser.add_argument("--pytorch-python", default=os.environ.get("MLM_TPU_PYTORCH_PYTHON"))
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)  # a child process's measurement
    args, train_flags = parser.parse_known_args()  # a train.py worker's flags follow its --worker train
    if train_flags and not args.worker:
        parser.error(f"unrecognized arguments: {' '.join(train_flags)}")
    if args.worker:
        kind, *rest = args.worker + train_flags
        if kind == "tf":
            answer = tensorflow_step(int(rest[0]), rest[1], int(rest[2]))
        elif kind == "torch":
            answer = pytorch_step(int(rest[0]), int(rest[1]))
        else:
            answer = train_run(rest)
        print(REPLY + json.dumps(answer), flush=True)
        return

    if "steps" in args.parts:
        steps_table(args)
    if "local" in args.parts:
        local_table(args)
    if "train" in args.parts:
        train_table()


def steps_table(args) -> None:
    """One step at each length, mlm_tpu's beside transformers 5's, then the memory plan against the peaks."""
    print("| tokens per row | mlm_tpu: peak GB, CPU s | transformers 5 sdpa: peak GB, CPU s | memory ratio | CPU ratio |")
    print("| --- | --- | --- | --- | --- |")
    measured = {}
    for length in args.lengths:
        ours = measured[length] = worker(sys.executable, "tf", length, "mixed", args.timed_steps)
        line = f"| {length:,} | {ours['peak_gb']:.2f} GB, {ours['cpu_s']:.2f} s |"
        if args.pytorch_python:
            theirs = worker(args.pytorch_python, "torch", length, args.timed_steps)
            line += (f" {theirs['peak_gb']:.2f} GB, {theirs['cpu_s']:.2f} s | {ours['peak_gb'] / theirs['peak_gb']:.2f}x"
                     f" | {ours['cpu_s'] / theirs['cpu_s']:.2f}x |")
        else:
            line += " (no --pytorch-python) | | |"
        print(line, flush=True)

    print_plan_check(measured)


def local_table(args) -> None:
    """A stack of local layers only: its step should grow with the row, not its square."""
    print("\n| local-only stack, tokens per row | peak GB | CPU s | CPU s against the shortest |")
    print("| --- | --- | --- | --- |")
    first = None
    for length in args.local_lengths:
        local = worker(sys.executable, "tf", length, "local", args.timed_steps)
        first = first or local["cpu_s"]
        print(f"| {length:,} | {local['peak_gb']:.2f} | {local['cpu_s']:.2f} | {local['cpu_s'] / first:.1f}x |",
              flush=True)


def train_table() -> None:
    """train.py's peak memory for the same tokens per step, packed 8,192 x 1 against 1,024 x 8."""
    if not WIKITEXT.is_file():
        sys.exit(f"train.py's runs need {WIKITEXT}")
    print("\n| train.py, 8,192 tokens per step | peak GB |")
    print("| --- | --- |")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        prepare(work)
        peaks = {}
        for length, batch in ((8192, 1), (1024, 8)):
            peaks[length] = worker(sys.executable, "train", "--model-config", work / "shape.json", "--tokenizer",
                                   work / "tokenizer", "--train-dataset", work / f"shards-{length}" / "train",
                                   "--max-length", length, "--per-replica-batch-size", batch, "--max-steps", 2,
                                   "--output-dir", work / f"run-{length}")["peak_gb"]
            print(f"| {length:,} x {batch} | {peaks[length]:.2f} |", flush=True)
        print(f"\n8,192 x 1 against 1,024 x 8: {peaks[8192] / peaks[1024]:.2f}x")


if __name__ == "__main__":
    main()
