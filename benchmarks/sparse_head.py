"""The sparse masked-LM head against the dense head, on the CPU, in one process: training tokens/s and their ratio,
the model FLOPs of each (training/flops.py), and the loss difference on the same batch.

For each RoBERTa shape (--presets, default small and base) and vocabulary (--vocab-sizes, default 8,000 and
32,000): one model per head from the same seed, the same batches (random tokens of that vocabulary, masked by
mlm_tpu's masker at 15%; the sparse head's batches put into its default prediction slots), and mlm_tpu's training
step (training/step.py's make_train_steps, the task's forward). The machine is shared, so the two heads are
timed in alternation, --rounds times --steps steps each after a warm-up step, and the best round of each is kept;
the CPU seconds of the process (all its threads) are reported beside, as a check that is less sensitive to the
machine's other load.
Usage: python benchmarks/sparse_head.py [--presets small base] [--vocab-sizes 8000 32000] [--batch-size 16]
       [--length 128] [--steps 3] [--rounds 3]
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")  # ids 0-4, as mlm_tpu's tokenizers number them


def word_level_tokenizer(vocab_size: int):
    """A tokenizer of `vocab_size` ids with RoBERTa's special tokens: what the masker needs of one."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocabulary = {token: index for index, token in enumerate(SPECIALS)}
    vocabulary.update({f"w{index}": index for index in range(len(SPECIALS), vocab_size)})
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocabulary, unk_token="<unk>")),
                                   bos_token="<s>", pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                   mask_token="<mask>", cls_token="<s>", sep_token="</s>")


def batches(tokenizer, rows: int, length: int, slots, count: int = 4):
    """`count` masked batches of random tokens, the same for both heads (masks from the same seed)."""
    import tensorflow as tf

    from mlm_tpu.mlm.masking import MlmMasker

    masker = MlmMasker(tokenizer, 0.15, seed=0, prediction_slots=slots)
    ids = tf.random.stateless_uniform([count, rows, length], seed=[1, 2], minval=len(SPECIALS),
                                      maxval=len(tokenizer), dtype=tf.int32)
    ids = tf.concat([tf.zeros([count, rows, 1], tf.int32), ids[:, :, 1:-1], tf.fill([count, rows, 1], 2)], axis=2)
    return [masker(number, {"input_ids": ids[number], "attention_mask": tf.ones_like(ids[number])})
            for number in range(count)]


class Runner:
    """One head's model, optimizer and training step, over its batches in turn."""

    def __init__(self, tokenizer, preset: str, length: int, data):
        import tensorflow as tf
        import tf_keras as keras
        from transformers import TFAutoModelForMaskedLM

        from mlm_tpu.mlm.presets import config_for
        from mlm_tpu.mlm.task import MaskedLmTask
        from mlm_tpu.shards.layout import BatchLayout
        from mlm_tpu.training.dropout import key_dropout_by_step
        from mlm_tpu.training.step import make_train_steps

        keras.utils.set_random_seed(0)
        self.model = TFAutoModelForMaskedLM.from_config(config_for(preset, tokenizer, length))
        self.model.build_in_name_scope()
        rows = int(data[0]["input_ids"].shape[0])
        strategy = tf.distribute.get_strategy()
        self.task = MaskedLmTask("mlm")
        self.step = make_train_steps(strategy, self.model, keras.optimizers.Adam(1e-4),
                                     key_dropout_by_step(self.model, 0, BatchLayout(1, rows, 1, 1)), task=self.task)
        dataset = tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(lambda *parts: tf.stack(parts), *data))
        self.iterator = iter(strategy.experimental_distribute_dataset(dataset.repeat()))
        self.one = tf.constant(1)
        self.step(self.iterator, self.one).numpy()  # tracing
        self.best_seconds = self.best_cpu_seconds = float("inf")

    def time(self, steps: int, timed: bool = True) -> None:
        started, cpu_started = time.perf_counter(), time.process_time()
        for _ in range(steps):
            self.step(self.iterator, self.one).numpy()
        if not timed:
            return
        self.best_seconds = min(self.best_seconds, (time.perf_counter() - started) / steps)
        self.best_cpu_seconds = min(self.best_cpu_seconds, (time.process_time() - cpu_started) / steps)

    def loss(self, batch) -> float:
        return float(self.task.training_outputs(self.model, batch, False).loss[0])


def compare(preset: str, vocab_size: int, args) -> dict:
    from mlm_tpu.mlm.prediction_slots import default_slots
    from mlm_tpu.training.flops import masked_lm_cost

    tokenizer = word_level_tokenizer(vocab_size)
    slots = default_slots(0.15, args.length)
    dense_data, sparse_data = (batches(tokenizer, args.batch_size, args.length, s) for s in (None, slots))
    dense = Runner(tokenizer, preset, args.length, dense_data)
    sparse = Runner(tokenizer, preset, args.length, sparse_data)
    sparse.model.set_weights(dense.model.get_weights())  # the same weights for the loss on the same batch
    difference = abs(sparse.loss(sparse_data[0]) - dense.loss(dense_data[0]))
    for round_number in range(args.rounds + 1):  # round 0 warms up (the first steps after tracing run slower)
        for runner in (dense, sparse):
            runner.time(args.steps, timed=round_number > 0)

    tokens = args.batch_size * args.length
    flops = {name: masked_lm_cost(dense.model.config, args.length, predicted).flops
             for name, predicted in (("dense", args.length), ("sparse", slots))}
    return {"preset": preset, "vocab": vocab_size, "slots": slots,
            "dense": tokens / dense.best_seconds, "sparse": tokens / sparse.best_seconds,
            "cpu_ratio": dense.best_cpu_seconds / sparse.best_cpu_seconds, "flops_ratio": flops["dense"] / flops["sparse"],
            "loss_difference": difference}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["small", "base"])
    parser.add_argument("--vocab-sizes", nargs="+", type=int, default=[8000, 32000])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from mlm_tpu.console import import_tensorflow

    import_tensorflow()
    print(f"batch {args.batch_size} x {args.length} tokens, 15% masked; best of {args.rounds} alternating rounds of "
          f"{args.steps} steps")
    print("| model | vocabulary | slots | dense tokens/s | sparse tokens/s | faster (wall) | faster (CPU s) | "
          "fewer model FLOPs | loss difference |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for preset in args.presets:
        for vocab_size in args.vocab_sizes:
            row = compare(preset, vocab_size, args)
            print(f"| `{row['preset']}` | {row['vocab']:,} | {row['slots']} of {args.length} | {row['dense']:,.0f} | "
                  f"{row['sparse']:,.0f} | {row['sparse'] / row['dense']:.2f}x | {row['cpu_ratio']:.2f}x | "
                  f"{row['flops_ratio']:.2f}x | {row['loss_difference']:.1e} |", flush=True)


if __name__ == "__main__":
    main()
