"""The step time of each optimizer (training/optimizers.py): --optimizer stableadamw against adamw (and adafactor), on
the CPU, a RoBERTa of the `small` preset's shape (vocabulary 8,000) training on random 128-token rows with 15% of
them labelled, the dense head.

Each optimizer runs the same tf.function step (forward, backward, update) from the same weights; after a warm-up
(tracing), the optimizers take turns, --rounds rounds of --steps steps each, and each keeps its best round, in CPU
seconds of the process per step (the machine is shared); the update alone (apply_gradients on fixed gradients) is
timed the same way. StableAdamW's extra work is a per-tensor RMS of g^2 / v (one reduction per weight):
the question is what that costs a whole step.

Usage: python benchmarks/optimizers.py [--steps 10] [--rounds 3] [--batch-size 16]
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LENGTH, VOCABULARY = 128, 8000
OPTIMIZERS = ("adamw", "stableadamw", "adafactor")


def timed(run, steps: int) -> float:
    """CPU seconds of the process per call of `run` over `steps` calls (CPU time: the machine is shared)."""
    start = time.process_time()
    for _ in range(steps):
        run()
    return (time.process_time() - start) / steps


def runs_of(name: str, batch_size: int):
    """(one training step, one update alone) of optimizer `name` (--optimizer), each a traced function, warmed up."""
    import tensorflow as tf
    import tf_keras as keras
    from transformers import TFAutoModelForMaskedLM

    from mlm_tpu.mlm.presets import PRESETS, masked_lm_config
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.optimizers import create_state, make_optimizer, with_schedule_defaults

    keras.utils.set_random_seed(0)
    shape = masked_lm_config(vocab_size=VOCABULARY, max_position_embeddings=LENGTH + 2, **PRESETS["small"])
    model = TFAutoModelForMaskedLM.from_config(shape)
    model.build_in_name_scope()
    config = with_schedule_defaults(TrainingConfig("s", "o", optimizer=name, weight_decay_rate=0.01))
    optimizer = make_optimizer(config, total_steps=10_000)
    create_state(optimizer, model.trainable_variables)
    ids = tf.random.stateless_uniform([batch_size, LENGTH], [1, 2], 5, VOCABULARY, tf.int32)
    labels = tf.where(tf.random.stateless_uniform([batch_size, LENGTH], [3, 4]) < 0.15, ids, -100)
    batch = {"input_ids": ids, "attention_mask": tf.ones_like(ids), "labels": labels}

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(**batch, training=True).loss)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    gradients = [tf.random.stateless_normal(variable.shape, [5, index]) * 1e-3
                 for index, variable in enumerate(model.trainable_variables)]

    @tf.function
    def update():
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))

    step(), update()  # traced
    return step, update


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    from mlm_tpu.console import import_tensorflow

    import_tensorflow()
    runs = {name: runs_of(name, args.batch_size) for name in OPTIMIZERS}
    times = {name: [float("inf"), float("inf")] for name in OPTIMIZERS}
    for _ in range(args.rounds):  # the optimizers in turn in each round, so that they share the machine's load
        for name, functions in runs.items():
            times[name] = [min(best, timed(run, args.steps)) for best, run in zip(times[name], functions)]
    adamw_step, adamw_update = times["adamw"]
    print(f"| optimizer | step (s) | vs adamw | update alone (s) | vs adamw |\n|---|---|---|---|---|")
    for name, (step, update) in times.items():
        print(f"| {name} | {step:.3f} | {step / adamw_step:.2f}x | {update:.4f} | {update / adamw_update:.2f}x |")


if __name__ == "__main__":
    main()
