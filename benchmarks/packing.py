"""--pack against one example per row: training examples/s and the share of padding tokens, on a text-to-text set
with short inputs, same model, same batch of rows, same training step (the trainer's own, on the CPU).

The set: classification-like examples of 20 to 60 input tokens and 2 to 4 target tokens (random words from
WikiText-2, sharded by the real command), in rows of --max-length input tokens (default 512) and 32 target tokens,
as a 60-token classification set at --max-length 512 is. Each figure is the best of the timed rounds after a
warm-up (tracing), in examples (not rows) per second.
Usage: python benchmarks/packing.py [--model-config t5-tiny] [--max-length 512] [--batch-size 8] [--steps 10]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WIKITEXT = ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"
TARGET_LENGTH = 32  # room for several short targets per row: packing packs targets too


def make_shards(work: Path, max_length: int, examples: int) -> Path:
    """A T5 tokenizer trained on WikiText-2 validation, and text-to-text shards of short examples."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    words = [word for word in WIKITEXT.read_text(encoding="utf-8").split() if word.isalpha()][:20000]
    rng = random.Random(0)
    with open(work / "short.jsonl", "w", encoding="utf-8") as stream:
        for _ in range(examples):
            stream.write(json.dumps({"text": " ".join(rng.choices(words, k=rng.randint(15, 45))),
                                     "label": rng.choice(["yes", "no", "maybe"])}) + "\n")
    for command in (["-m", "mlm_tpu.tokenizer", "train", "--template", "t5", "--text-files", WIKITEXT,
                     "--vocab-size", "4000", "--output-dir", work / "tokenizer"],
                    ["-m", "mlm_tpu.shard", "--task", "text2text", "--tokenizer", work / "tokenizer", "--text-files",
                     work / "short.jsonl", "--input-column", "text", "--target-column", "label", "--max-length",
                     str(max_length), "--max-target-length", str(TARGET_LENGTH), "--output-dir", work / "shards"]):
        subprocess.run([sys.executable, *map(str, command)], check=True, env=env, capture_output=True, cwd=ROOT)
    return work / "shards" / "train"


def measure(folder: Path, model_config: str, batch_size: int, steps: int, pack: bool) -> dict:
    import tensorflow as tf
    import tf_keras as keras
    from transformers import TFT5ForConditionalGeneration

    from mlm_tpu.shards.layout import BatchLayout
    from mlm_tpu.shards.pipeline import training_batches
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.shards.text2text_packing import host_packed_batches, packed_steps_per_epoch
    from mlm_tpu.t5.presets import config_for
    from mlm_tpu.t5.shard_kinds import TEXT2TEXT_ROWS
    from mlm_tpu.t5.text2text_task import Text2TextTask
    from mlm_tpu.tasks import shard_kinds
    from mlm_tpu.tokenizer.load import load_tokenizer
    from mlm_tpu.training.optimizers import Adafactor
    from train_throughput import own_loop_seconds_per_step

    shards = find_shards(str(folder / "train"), shard_kinds(), TEXT2TEXT_ROWS.name, TEXT2TEXT_ROWS.features(None, None))
    tokenizer = load_tokenizer(str(folder.parent / "tokenizer"))
    keras.utils.set_random_seed(0)
    model = TFT5ForConditionalGeneration.from_config(config_for(model_config, tokenizer))
    model.build_in_name_scope()
    if pack:
        layout = BatchLayout(1, batch_size, 1, 1)  # one virtual pipeline, as the unpacked batches below
        per_epoch = packed_steps_per_epoch(shards, layout, seed=0, window=2**18)
        dataset = host_packed_batches(shards, layout, 0, seed=0, window=2**18, steps_per_epoch=per_epoch)
    else:
        per_epoch = shards.records // batch_size
        dataset = training_batches(shards, batch_size, None, seed=0, pipeline=0, window=2**18,
                                   batches_per_epoch=per_epoch)
    examples_per_row = shards.records / (per_epoch * batch_size)
    padding = []
    for batch in dataset.take(per_epoch):
        real = batch["input_segments"] > 0 if pack else batch["attention_mask"] > 0
        padding.append(1 - float(tf.reduce_mean(tf.cast(real, tf.float32))))
    best = own_loop_seconds_per_step(dataset.repeat(), model, Adafactor(1e-3), steps,
                                     task=Text2TextTask("generation"))  # packed rows or not, as its batches say
    return {"examples_per_second": batch_size * examples_per_row / best, "seconds_per_step": best,
            "examples_per_row": examples_per_row, "padding": sum(padding) / len(padding)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-config", default="t5-tiny")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--measure", choices=("packed", "unpacked"), help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.work), args.model_config, args.batch_size, args.steps,
                                 args.measure == "packed")))
        return
    if not WIKITEXT.is_file():
        sys.exit(f"needs {WIKITEXT}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as work:
        folder = make_shards(Path(work), args.max_length, args.examples)
        results = {}
        for method in ("unpacked", "packed"):
            child = subprocess.run([sys.executable, __file__, "--measure", method, "--work", str(folder.parent),
                                    "--model-config", args.model_config, "--batch-size", str(args.batch_size),
                                    "--steps", str(args.steps)], env=env, capture_output=True, text=True)
            if child.returncode:
                sys.exit(f"measuring {method} failed:\n{child.stderr[-3000:]}")
            results[method] = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"T5 '{args.model_config}', {args.examples} examples of 20-60 input tokens in rows of {args.max_length} "
          f"(targets {TARGET_LENGTH}), batch {args.batch_size} rows, Adafactor, CPU, {args.steps} steps per timed round")
    for method, figures in results.items():
        print(f"  {method:<10}{figures['examples_per_second']:>9,.1f} examples/s ({figures['seconds_per_step'] * 1000:,.0f}"
              f" ms/step, {figures['examples_per_row']:.1f} examples per row); padding {figures['padding']:.1%} of "
              "the input tokens")
    print(f"  packed / unpacked: {results['packed']['examples_per_second'] / results['unpacked']['examples_per_second']:.2f}x"
          " the examples/s")


if __name__ == "__main__":
    main()
