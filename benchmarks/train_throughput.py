"""Training throughput on the CPU: mlm_tpu's training loop, with and without deterministic kernels, against the
reference TPU example's method and against mlm_tpu 0.2's trainer (Keras `fit`).

Same shards (WikiText-2 validation, 128-token examples), same tokenizer, same RoBERTa shape
(--model-config, default small), same global batch, same `create_optimizer`. The reference method
is the 🤗 TPU example's: int64 batches, masking with the global RNG and only [CLS]/[SEP]/padding
protected, Keras `fit` with its plain "accuracy". mlm_tpu 0.2 trained with Keras `fit` on its own
pipeline. mlm_tpu now runs its own loop (training/loop.py: step-keyed dropout, per-step losses,
`--steps-per-execution`), by default with `tf.config.experimental.enable_op_determinism()`
(`--deterministic`), which makes a run and its resumption compute the same bits. Each figure is
measured in its own process (determinism cannot be switched off once on), the best of the timed
rounds after a warm-up round (tracing). Also the input pipelines alone, in examples/s.
With --jit-compile it measures instead mlm_tpu's loop with each replica's step compiled by XLA (`--jit-compile`)
and without, both with the deterministic kernels the trainer uses on CPUs by default.
Usage: python benchmarks/train_throughput.py [--model-config small] [--steps 40] [--batch-size 16] [--jit-compile]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WIKITEXT = ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"
MAX_LENGTH = 128
METHODS = ("reference", "mlm_tpu 0.2", "mlm_tpu", "mlm_tpu --deterministic")
JIT_METHODS = ("mlm_tpu --deterministic", "mlm_tpu --deterministic --jit-compile")


def reference_dataset(shards, tokenizer, batch_size):
    """The reference script's prepare_dataset + mask_with_collator."""
    import tensorflow as tf
    from transformers import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, return_tensors="tf")
    schema = {name: tf.io.FixedLenFeature([MAX_LENGTH], tf.int64) for name in ("input_ids", "attention_mask")}

    def mask(batch):
        special = (~tf.cast(batch["attention_mask"], tf.bool) | (batch["input_ids"] == tokenizer.cls_token_id)
                   | (batch["input_ids"] == tokenizer.sep_token_id))
        batch["input_ids"], batch["labels"] = collator.tf_mask_tokens(
            batch["input_ids"], vocab_size=len(tokenizer), mask_token_id=tokenizer.mask_token_id,
            special_tokens_mask=special)
        return batch

    dataset = tf.data.Dataset.from_tensor_slices(shards.files).shuffle(len(shards.files))
    dataset = tf.data.TFRecordDataset(dataset, num_parallel_reads=tf.data.AUTOTUNE)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(shards.records))
    dataset = dataset.map(lambda r: tf.io.parse_single_example(r, schema), num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.shuffle(2**18).repeat().batch(batch_size, drop_remainder=True)
    return dataset.map(mask, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def our_dataset(shards, tokenizer, batch_size):
    from mlm_tpu.mlm.masking import MlmMasker
    from mlm_tpu.shards.pipeline import training_batches

    return training_batches(shards, batch_size, MlmMasker(tokenizer, 0.15, seed=0), seed=0, pipeline=0,
                            window=2**18, batches_per_epoch=shards.records // batch_size)


def keras_fit_seconds_per_step(dataset, model, optimizer, metric, steps, rounds=3):
    """Seconds per step of Keras `fit` (the reference's and mlm_tpu 0.2's loop), best epoch after the first."""
    import tf_keras as keras

    class EpochTimer(keras.callbacks.Callback):
        seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self.started)

    model.compile(optimizer=optimizer, metrics=[metric])
    timer = EpochTimer()
    model.fit(dataset, steps_per_epoch=steps, epochs=rounds + 1, callbacks=[timer], verbose=0)
    return min(timer.seconds[1:]) / steps


def own_loop_seconds_per_step(dataset, model, optimizer, steps, rounds=3, jit_compile=False, task=None,
                              cpu_seconds_too=False):
    """Seconds per step of mlm_tpu's loop: the same step function the trainer runs, one step per execution
    (`task`: the plug-in whose outputs, loss weights and counts it computes, as make_train_steps takes it); the best
    timed round after a warm-up round (tracing). `cpu_seconds_too`: (wall, CPU) seconds per step, the CPU time of
    every thread of this process, steadier than wall time on a shared machine."""
    import tensorflow as tf

    from mlm_tpu.shards.layout import BatchLayout
    from mlm_tpu.training.dropout import key_dropout_by_step
    from mlm_tpu.training.step import make_train_steps

    strategy = tf.distribute.get_strategy()
    layout = BatchLayout(1, next(iter(dataset))["input_ids"].shape[0], 1, 1)
    train_steps = make_train_steps(strategy, model, optimizer, key_dropout_by_step(model, 0, layout), jit_compile,
                                   task)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    one = tf.constant(1)
    best, best_cpu = float("inf"), float("inf")
    for round_number in range(rounds + 1):
        started, started_cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            train_steps(iterator, one).numpy()
        if round_number:
            best = min(best, (time.perf_counter() - started) / steps)
            best_cpu = min(best_cpu, (time.process_time() - started_cpu) / steps)
    return (best, best_cpu) if cpu_seconds_too else best


def pipeline_examples_per_second(dataset, batch_size, batches=300, rounds=3):
    """Best of a few rounds (the machine is shared), after a warm-up that fills the buffers."""
    iterator = iter(dataset)
    for _ in range(50):
        next(iterator)
    best = 0.0
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(batches):
            next(iterator)
        best = max(best, batches * batch_size / (time.perf_counter() - started))
    return best


def measure(method: str, work: Path, model_config: str, steps: int, batch_size: int) -> dict:
    """One method's figures, in this process."""
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras)
    from mlm_tpu.console import import_tensorflow

    tf = import_tensorflow()
    if "--deterministic" in method:
        tf.config.experimental.enable_op_determinism()
    import tf_keras as keras
    from transformers import TFAutoModelForMaskedLM, create_optimizer

    from mlm_tpu.mlm.presets import config_for
    from mlm_tpu.mlm.shard_kind import MASKED_LM
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import shard_kinds
    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(work / "tokenizer"))
    shards = find_shards(str(work / "shards" / "train"), shard_kinds(), MASKED_LM.name, MASKED_LM.features(MAX_LENGTH))
    make_dataset = reference_dataset if method == "reference" else our_dataset
    figures = {"pipeline": pipeline_examples_per_second(make_dataset(shards, tokenizer, batch_size), batch_size)}
    keras.utils.set_random_seed(0)
    model = TFAutoModelForMaskedLM.from_config(config_for(model_config, tokenizer, MAX_LENGTH))
    model.build_in_name_scope()
    optimizer, _ = create_optimizer(1e-4, steps * 10, 0, weight_decay_rate=1e-3)
    dataset = make_dataset(shards, tokenizer, batch_size)
    if method.startswith("mlm_tpu") and method != "mlm_tpu 0.2":
        figures["seconds_per_step"] = own_loop_seconds_per_step(dataset, model, optimizer, steps,
                                                                jit_compile="--jit-compile" in method)
    else:  # 0.2 reported an accuracy too, over the masked positions; the cost is the same
        metric = "accuracy" if method == "reference" else keras.metrics.SparseCategoricalAccuracy()
        figures["seconds_per_step"] = keras_fit_seconds_per_step(dataset, model, optimizer, metric, steps)
    figures["shape"] = f"{model.config.num_hidden_layers} layers, hidden {model.config.hidden_size}"
    return figures


@contextmanager
def prepared_wikitext(*shard_flags: str):
    """(a temporary folder holding prepare_wikitext's tokenizer and shards, the environment of child processes)."""
    if not WIKITEXT.is_file():
        sys.exit(f"needs {WIKITEXT}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as work:
        prepare_wikitext(Path(work), env, *shard_flags)
        yield Path(work), env


def prepare_wikitext(work: Path, env: dict, *shard_flags: str) -> None:
    """An 8,000-piece tokenizer (work/tokenizer) and shards of 128-token examples (work/shards/train) of WikiText-2
    validation, made by the real commands."""
    for command in (["-m", "mlm_tpu.tokenizer", "train", "--text-files", WIKITEXT, "--vocab-size", "8000",
                     "--output-dir", work / "tokenizer"],
                    ["-m", "mlm_tpu.shard", "--tokenizer", work / "tokenizer", "--text-files", WIKITEXT,
                     "--max-length", str(MAX_LENGTH), "--output-dir", work / "shards", *shard_flags]):
        subprocess.run([sys.executable, *map(str, command)], check=True, env=env, capture_output=True, cwd=ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-config", default="small")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--jit-compile", action="store_true",
                        help="measure mlm_tpu's loop with and without XLA instead of the methods above")
    parser.add_argument("--measure", choices=METHODS + JIT_METHODS, help=argparse.SUPPRESS)  # the child processes' job
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, Path(args.work), args.model_config, args.steps, args.batch_size)))
        return
    with prepared_wikitext() as (work, env):
        results = {}
        for method in JIT_METHODS if args.jit_compile else METHODS:
            child = subprocess.run([sys.executable, __file__, "--measure", method, "--work", str(work),
                                    "--model-config", args.model_config, "--steps", str(args.steps), "--batch-size",
                                    str(args.batch_size)], env=env, capture_output=True, text=True)
            if child.returncode:
                sys.exit(f"measuring {method} failed:\n{child.stderr[-3000:]}")
            results[method] = json.loads(child.stdout.strip().splitlines()[-1])
        tokens_per_step = args.batch_size * MAX_LENGTH
        if args.jit_compile:
            off, on = (results[method]["seconds_per_step"] for method in JIT_METHODS)
            print(f"RoBERTa '{args.model_config}' ({results[JIT_METHODS[0]]['shape']}), batch {args.batch_size} x "
                  f"{MAX_LENGTH} tokens, CPU, deterministic kernels, {args.steps} steps per timed round")
            for method, seconds in zip(("--no-jit-compile", "--jit-compile"), (off, on)):
                print(f"  {method:<20}{tokens_per_step / seconds:>10,.0f} tokens/s ({seconds * 1000:.0f} ms/step)")
            print(f"  XLA / no XLA: {off / on:.2f}x the throughput")
            return
        print(f"RoBERTa '{args.model_config}' ({results['mlm_tpu']['shape']}), batch {args.batch_size} x {MAX_LENGTH} "
              f"tokens, CPU, {args.steps} steps per timed round")
        for method, figures in results.items():
            seconds = figures["seconds_per_step"]
            print(f"  {method:<26}{tokens_per_step / seconds:>10,.0f} tokens/s ({seconds * 1000:.0f} ms/step); "
                  f"input pipeline alone {figures['pipeline']:>9,.0f} examples/s")
        reference, ours = results["reference"]["seconds_per_step"], results["mlm_tpu"]["seconds_per_step"]
        deterministic = results["mlm_tpu --deterministic"]["seconds_per_step"]
        print(f"  mlm_tpu / reference: {reference / ours:.2f}x training; mlm_tpu / mlm_tpu 0.2: "
              f"{results['mlm_tpu 0.2']['seconds_per_step'] / ours:.2f}x; deterministic kernels cost "
              f"{deterministic / ours - 1:.0%} of the step time; the pipeline alone feeds "
              f"{results['mlm_tpu']['pipeline'] / (args.batch_size / ours):.0f}x what training consumes")


if __name__ == "__main__":
    main()
