"""What the virtual input pipelines (--input-pipelines V, shards/layout.py) cost one machine, and what an epoch holds.

One host, one replica, a global batch of 64 masked 128-token examples (WikiText-2 validation, shards of
--shard-size examples, made by the real commands). For V = 1, 8 and 64 (64: one example per pipeline per
step, the worst case) it prints the examples/s the machine's pipeline delivers (host_training_batches, as the
trainer builds it; best of 3 rounds of 300 steps after a warm-up), against the one-pipeline reader
(`training_batches`, what V = 1 was before virtual pipelines), and the examples an epoch trains: each of the V
pipelines reads an equal part of the records, against the earlier order, where pipeline v read every V-th shard
and the smallest such group set the epoch.
Usage: python benchmarks/input_pipelines.py [--shard-size 20] [--pipelines 1 8 64]
"""

import argparse
import sys

from train_throughput import our_dataset, pipeline_examples_per_second, prepared_wikitext

GLOBAL_BATCH = 64


def every_vth_shard_epoch(counts, pipelines: int) -> int:
    """Examples an epoch trained in the earlier order: V x rows per pipeline x the smallest group's steps."""
    rows = GLOBAL_BATCH // pipelines
    return pipelines * rows * min(sum(counts[v::pipelines]) // rows for v in range(pipelines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shard-size", type=int, default=20)
    parser.add_argument("--pipelines", type=int, nargs="+", default=[1, 8, 64])
    args = parser.parse_args()
    with prepared_wikitext("--shard-size", str(args.shard_size)) as (work, _):
        import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
        from transformers import AutoTokenizer

        from mlm_tpu.mlm.masking import MlmMasker
        from mlm_tpu.mlm.shard_kind import MASKED_LM
        from mlm_tpu.shards.layout import BatchLayout
        from mlm_tpu.shards.pipeline import host_training_batches, steps_per_epoch
        from mlm_tpu.shards.reading import find_shards
        from mlm_tpu.tasks import shard_kinds

        shards = find_shards(str(work / "shards" / "train"), shard_kinds(), MASKED_LM.name, MASKED_LM.features(None))
        tokenizer = AutoTokenizer.from_pretrained(work / "tokenizer")
        print(f"{shards.records:,} examples in {len(shards.files)} shards; global batch {GLOBAL_BATCH}", file=sys.stderr)
        reference = pipeline_examples_per_second(our_dataset(shards, tokenizer, GLOBAL_BATCH), GLOBAL_BATCH)
        print("| pipelines | examples/s | vs one reader | examples an epoch | earlier order (every V-th shard) |")
        print("| --- | --- | --- | --- | --- |")
        whole_batches = shards.records // GLOBAL_BATCH * GLOBAL_BATCH
        print(f"| one reader (training_batches) | {reference:,.0f} | 1.00x | {whole_batches:,} | |")
        for pipelines in args.pipelines:
            layout = BatchLayout(pipelines, GLOBAL_BATCH, 1, 1)
            layout.check(len(shards.files), flag_given=True)
            per_epoch = steps_per_epoch(shards, layout)
            dataset = host_training_batches(shards, layout, 0, lambda seed: MlmMasker(tokenizer, 0.15, seed), seed=0,
                                            window=2**18, steps_per_epoch=per_epoch)
            speed = pipeline_examples_per_second(dataset, GLOBAL_BATCH)
            print(f"| V = {pipelines} | {speed:,.0f} | {speed / reference:.2f}x | {per_epoch * GLOBAL_BATCH:,} | "
                  f"{every_vth_shard_epoch(shards.counts, pipelines):,} |", flush=True)


if __name__ == "__main__":
    main()
