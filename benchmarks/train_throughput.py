"""Training throughput on the CPU: mlm_tpu's trainer against the reference TPU example's method.

Same shards (WikiText-2 validation, 128-token examples), same tokenizer, same RoBERTa shape
(--model-config, default small), same global batch, same `create_optimizer`. The reference
method is the 🤗 TPU example's: int64 batches, masking with the global RNG and only [CLS]/[SEP]/
padding protected, Keras' plain "accuracy". Also the input pipelines alone (no model), in
examples/s. Each figure is the best of the timed epochs after a warm-up epoch (compilation).
Usage: python benchmarks/train_throughput.py [--model-config small] [--steps 40] [--batch-size 16]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WIKITEXT = ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"
MAX_LENGTH = 128

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402
from transformers import DataCollatorForLanguageModeling, TFAutoModelForMaskedLM, create_optimizer  # noqa: E402

from mlm_tpu.data import build_dataset, find_shards, masked_lm_features  # noqa: E402
from mlm_tpu.masking import MlmMasker  # noqa: E402
from mlm_tpu.metrics import MaskedAccuracy  # noqa: E402
from mlm_tpu.model_config import config_for  # noqa: E402
from mlm_tpu.tokenizer.load import load_tokenizer  # noqa: E402


def reference_dataset(shards, tokenizer, batch_size):
    """The reference script's prepare_dataset + mask_with_collator."""
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
    return build_dataset(shards, batch_size, MlmMasker(tokenizer, 0.15, seed=0), shuffle=True, seed=0,
                         repeat=True)


class EpochTimer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.started = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds = getattr(self, "seconds", []) + [time.perf_counter() - self.started]


def train_seconds_per_step(dataset, config, metric, steps, epochs=3):
    keras.utils.set_random_seed(0)
    model = TFAutoModelForMaskedLM.from_config(config)
    model.build_in_name_scope()
    optimizer, _ = create_optimizer(1e-4, steps * epochs, 0, weight_decay_rate=1e-3)
    model.compile(optimizer=optimizer, metrics=[metric])
    timer = EpochTimer()
    model.fit(dataset, steps_per_epoch=steps, epochs=epochs, callbacks=[timer], verbose=0)
    return min(timer.seconds[1:]) / steps  # the first epoch pays for tracing


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-config", default="small")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    if not WIKITEXT.is_file():
        sys.exit(f"needs {WIKITEXT}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as work:
        tokenizer_dir, shards_dir = Path(work) / "tokenizer", Path(work) / "shards"
        for command in (["-m", "mlm_tpu.tokenizer", "train", "--text-files", WIKITEXT, "--vocab-size", "8000",
                         "--output-dir", tokenizer_dir],
                        ["-m", "mlm_tpu.shard", "--tokenizer", tokenizer_dir, "--text-files", WIKITEXT,
                         "--max-length", str(MAX_LENGTH), "--output-dir", shards_dir]):
            subprocess.run([sys.executable, *map(str, command)], check=True, env=env, capture_output=True, cwd=ROOT)
        tokenizer = load_tokenizer(str(tokenizer_dir))
        shards = find_shards(str(shards_dir / "train"), masked_lm_features(MAX_LENGTH))
        config = config_for(args.model_config, tokenizer, MAX_LENGTH)
        tokens_per_step = args.batch_size * MAX_LENGTH
        print(f"RoBERTa '{args.model_config}' ({config.num_hidden_layers} layers, hidden {config.hidden_size}), "
              f"batch {args.batch_size} x {MAX_LENGTH} tokens, {shards.records:,} examples, CPU, {args.steps} steps/epoch")
        pipelines = {"reference pipeline": 0.0, "mlm_tpu pipeline": 0.0}
        for _ in range(2):  # alternate, so neither gets the quieter moment
            for name, make in (("reference pipeline", reference_dataset), ("mlm_tpu pipeline", our_dataset)):
                rate = pipeline_examples_per_second(make(shards, tokenizer, args.batch_size), args.batch_size)
                pipelines[name] = max(pipelines[name], rate)
        for name, rate in pipelines.items():
            print(f"  {name:<28}{rate:>12,.0f} examples/s (input pipeline alone)")
        reference = train_seconds_per_step(reference_dataset(shards, tokenizer, args.batch_size), config, "accuracy",
                                           args.steps)
        ours = train_seconds_per_step(our_dataset(shards, tokenizer, args.batch_size), config, MaskedAccuracy(),
                                      args.steps)
        for name, seconds in (("reference trainer", reference), ("mlm_tpu trainer", ours)):
            print(f"  {name:<28}{tokens_per_step / seconds:>12,.0f} tokens/s ({seconds * 1000:.0f} ms/step)")
        print(f"  mlm_tpu / reference: {reference / ours:.2f}x training, "
              f"{pipelines['mlm_tpu pipeline'] / pipelines['reference pipeline']:.2f}x input pipeline; the pipeline "
              f"alone feeds {pipelines['mlm_tpu pipeline'] / (args.batch_size / ours):.0f}x what training consumes")


if __name__ == "__main__":
    main()
