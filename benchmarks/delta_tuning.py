"""Delta-tuning against full fine-tuning, on the test suite's tiny tasks: does a delta trained on a frozen T5 come
close, at what share of the parameters, and how fast does it get there?

The base: a tiny T5 (the t5-tiny preset: 2 layers, d_model 64) pretrained by mlm_tpu's span corruption on
WikiText-2 (the suite's `pretrained_t5`, 2 epochs). The tasks, as the suite makes them from real WikiText words:
classification (the 3-class "quality" task, 600 training / 150 validation examples; accuracy) and generation
(copying a two-word span out of filler words; exact match). Each method trains from that same base with the same
batch (16), epochs and schedule; full fine-tuning at learning rate 3e-3 (the suite's), every delta at 3e-2 (deltas
are trained with larger rates, as in their papers and PEFT's examples). Each run is `python train.py` in its own process.

Figures per method: trainable parameters (count, share of the model), the validation score after each epoch and
at the end, steps until it first reaches the target (validated at each epoch's end, so in steps of an epoch),
training step time (the median epoch after the first, which traces), optimizer state (AdamW's two float32 slots
per trainable weight: the optimizer holds state for the delta alone, tests/test_delta_units.py), and the peak
resident memory of the training process (ru_maxrss; on a TPU it would be device memory).
Usage: python benchmarks/delta_tuning.py [--epochs 6] [--generation-epochs 4]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
WIKITEXT = ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"
METHODS = ("full", "lora", "ia3", "prompt", "prefix", "adapter")
LEARNING_RATES = {"full": "3e-3", "lora": "3e-2", "ia3": "3e-2", "prompt": "3e-2", "prefix": "3e-2",
                  "adapter": "3e-2"}
TASKS = {"classification": ("accuracy", 0.9), "generation": ("exact_match", 0.5)}  # metric, target
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


def run(*arguments) -> str:
    """A command of ours (`-m module ...` or a script), in its own process; its stderr (the logs)."""
    result = subprocess.run([sys.executable, *map(str, arguments)], env=ENV, cwd=ROOT, capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"{' '.join(map(str, arguments[:3]))} failed:\n{result.stderr[-3000:]}")
    return result.stderr


def make_data(work: Path) -> None:
    """The suite's tokenizer and tasks (tests/conftest.py), the span-corruption shards, and the pretrained base."""
    from conftest import make_t5_data, write_copy_rows

    data = make_t5_data(work, WIKITEXT)
    tokenizer, words = data.tokenizer, data.words
    for split in ("train", "validation"):
        run("-m", "mlm_tpu.shard", "--task", "text2text", "--tokenizer", tokenizer, "--text-files",
            work / f"quality-{split}.jsonl", "--split", split, "--output-dir", work / "classification",
            "--input-column", "title", "--input-column", "body", "--target-column", "label", "--source-prefix",
            "quality:", "--max-length", 48, "--max-target-length", 4, "--shard-size", 200)
    for split, count, seed in (("train", 1000, 3), ("validation", 100, 4)):
        path = write_copy_rows(work / f"copy-{split}.csv", words, tokenizer, count, seed)
        run("-m", "mlm_tpu.shard", "--task", "text2text", "--tokenizer", tokenizer, "--text-files", path, "--split",
            split, "--output-dir", work / "generation", "--input-column", "source", "--target-column", "target",
            "--source-prefix", "copy:", "--max-length", 16, "--max-target-length", 4, "--shard-size", 1000)
    for split, limit in (("train", 2500), ("validation", 300)):
        run("-m", "mlm_tpu.shard", "--task", "span-corruption", "--tokenizer", tokenizer, "--text-files", WIKITEXT,
            "--limit", limit, "--split", split, "--max-length", 64, "--output-dir", work / "span-corruption")
    run("train.py", "--task", "span-corruption", "--train-dataset", work / "span-corruption" / "train",
        "--eval-dataset", work / "span-corruption" / "validation", "--tokenizer", tokenizer, "--model-config",
        "t5-tiny", "--learning-rate", "3e-3", "--per-replica-batch-size", 32, "--num-epochs", 2, "--output-dir",
        work / "base")


def train(work: Path, task: str, method: str, epochs: int) -> dict:
    """One run in its own process: its figures from its logs, and its peak memory from the kernel (kept in the work
    folder: a benchmark stopped half-way goes on from the next run)."""
    done = work / "runs" / f"{task}-{method}.json"
    if done.is_file():
        return json.loads(done.read_text())
    flags = ["--task", task, "--model-name-or-path", work / "base", "--train-dataset", work / task / "train",
             "--eval-dataset", work / task / "validation", "--learning-rate", LEARNING_RATES[method],
             "--per-replica-batch-size", 16, "--num-epochs", epochs, "--output-dir", work / "runs" / task / method]
    if method != "full":
        flags += ["--delta", method, "--num-virtual-tokens", 8] if method in ("prompt", "prefix") else \
            ["--delta", method]
    log_path = work / "runs" / f"{task}-{method}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        child = subprocess.Popen(["nice", "-n", "10", sys.executable, "train.py", *map(str, flags)], env=ENV,
                                 cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
        _, status, usage = os.wait4(child.pid, 0)
    text = log_path.read_text()
    if status:
        sys.exit(f"{task} {method} failed:\n{text[-3000:]}")
    metric, _ = TASKS[task]
    name = {"accuracy": "accuracy", "exact_match": "exact match"}[metric]
    scores = [float(value) / 100 for value in re.findall(rf"validation: .*?{name} ([\d.]+)%", text)]
    epochs_seen = re.findall(r"Epoch \d+ training: .*?\((\d+) steps, ([\d.]+) s", text)
    steps_per_epoch = int(epochs_seen[0][0])
    seconds = [float(taken) / int(steps) for steps, taken in epochs_seen[1:]] or \
        [float(epochs_seen[0][1]) / steps_per_epoch]
    delta = re.search(r"Delta-tuning with \w+: ([\d,]+) of ([\d,]+) parameters", text)
    if delta:
        trainable, total = (int(number.replace(",", "")) for number in delta.groups())
    else:
        trainable = total = int(re.search(r"([\d,]+) parameters", (work / "base" / "README.md").read_text())
                                .group(1).replace(",", ""))
    figures = {"trainable": trainable, "total": total, "scores": scores, "steps_per_epoch": steps_per_epoch,
               "seconds_per_step": statistics.median(seconds), "peak_rss_mb": usage.ru_maxrss / 1024}
    done.write_text(json.dumps(figures))
    return figures


def table(task: str, results: dict, epochs: int) -> str:
    metric, target = TASKS[task]
    full = results["full"]
    lines = [f"{task} ({metric}, target {target:.0%}), {epochs} epochs of {full['steps_per_epoch']} steps:", "",
             f"| method | trainable parameters | {metric} at the end | best | steps to {target:.0%} | ms/step | "
             "optimizer state | peak memory |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for method, figures in results.items():
        reached = next((epoch + 1 for epoch, score in enumerate(figures["scores"]) if score >= target), None)
        steps = f"{reached * figures['steps_per_epoch']}" if reached else "not reached"
        state = 2 * 4 * figures["trainable"]
        ratio = lambda value, reference: f" ({value / reference:.2f}x)" if method != "full" else ""  # noqa: E731
        lines.append(
            f"| {method} | {figures['trainable']:,} ({figures['trainable'] / figures['total']:.2%}) | "
            f"{figures['scores'][-1]:.1%} | {max(figures['scores']):.1%} | {steps} | "
            f"{figures['seconds_per_step'] * 1000:.0f}{ratio(figures['seconds_per_step'], full['seconds_per_step'])}"
            f" | {state / 1024:,.1f} KiB{ratio(state, 8 * full['trainable'])} | "
            f"{figures['peak_rss_mb']:,.0f} MB{ratio(figures['peak_rss_mb'], full['peak_rss_mb'])} |")
    lines.append("")
    lines.append("score after each epoch: " + "; ".join(
        f"{method} " + " ".join(f"{score:.0%}" for score in figures["scores"]) for method, figures in results.items()))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10, help="classification epochs (37 steps each)")
    parser.add_argument("--generation-epochs", type=int, default=4, help="generation epochs (62 steps each)")
    parser.add_argument("--work", help="keep the data, the base and the runs here (default: a temporary folder)")
    args = parser.parse_args()
    if not WIKITEXT.is_file():
        sys.exit(f"needs {WIKITEXT}")
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(args.work or temporary)
        work.mkdir(parents=True, exist_ok=True)
        if not (work / "base" / "config.json").is_file():
            print("making the tasks and pretraining the base T5 (span corruption)...", file=sys.stderr, flush=True)
            make_data(work)
        for task, epochs in (("classification", args.epochs), ("generation", args.generation_epochs)):
            results = {}
            for method in METHODS:
                print(f"{task}: {method}...", file=sys.stderr, flush=True)
                results[method] = train(work, task, method, epochs)
            (work / f"{task}.json").write_text(json.dumps(results, indent=1))
            print(table(task, results, epochs) + "\n", flush=True)


if __name__ == "__main__":
    main()
