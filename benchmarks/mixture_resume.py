"""Start-up of a resumed mixture's input pipeline, as a function of the step it resumes at.

A resumed mixture must start each member where the steps before left it: how many examples each virtual input
pipeline took from each member before the step. Seconds from building one machine's input pipeline (the
trainer's, shards/mixture.py) to its first batch, 3 members mixed 0.5 / 0.3 / 0.2, global batch 256, V = 8
virtual pipelines (the review's case), resuming at each step of --steps:
- mlm_tpu 0.4.0 (reference): the members of every step before drawn again, one step at a time (its
  taken_before: tf.map_fn in eager mode, in chunks of 4,096 steps);
- now: the counts from the backup (mixture.MemberCounts, which every backup stores): nothing is drawn again;
- now, from a backup of 0.4.0 (no counts): the steps before counted once, in one traced loop.
And what keeping the counts costs while training: advancing them over 1,000 steps (a backup every 1,000 steps).
Seconds are wall-clock / CPU (every thread of the process: steadier on a shared machine), the best of --repeats
runs each; the reference runs once, and not past --reference-up-to (it grows as the step: ~20 minutes at step
500,000).
Usage: python benchmarks/mixture_resume.py [--steps 0 4096 40960 409600] [--repeats 2] [--reference-up-to 40960]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RATES, BATCH, PIPELINES = [0.5, 0.3, 0.2], 256, 8


def write_members(folder: Path) -> list:
    """3 members of text-to-text shards (16 shards of 64 records each, 16-token inputs): the mixture's data."""
    import tensorflow as tf

    def feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    folders = []
    for member in range(3):
        folders.append(folder / f"member{member}")
        folders[-1].mkdir()
        for index in range(16):
            with tf.io.TFRecordWriter(str(folders[-1] / f"dataset-{index:05d}-64.tfrecord")) as writer:
                for example in range(64):
                    writer.write(tf.train.Example(features=tf.train.Features(feature={
                        "input_ids": feature([member + 5, example + 5] + [0] * 14),
                        "attention_mask": feature([1, 1] + [0] * 14),
                        "labels": feature([5, 1] + [-100] * 2)})).SerializeToString())
    return folders


def reference_taken_before(step, rates, global_batch_size, seed, pipelines, chunk=4096):
    """mlm_tpu 0.4.0's count: every step's members drawn again (shards/mixture.py as released)."""
    import numpy as np
    import tensorflow as tf

    from mlm_tpu.shards.mixture import members_of_step

    counts = np.zeros([pipelines, len(rates)], np.int64)
    for first in range(0, step, chunk):
        steps = tf.range(first, min(first + chunk, step), dtype=tf.int64)
        members = tf.map_fn(lambda s: members_of_step(s, rates, global_batch_size, seed), steps,
                            fn_output_signature=tf.int32).numpy()
        members = members.reshape([-1, pipelines, global_batch_size // pipelines])
        for pipeline in range(pipelines):
            counts[pipeline] += np.bincount(members[:, pipeline].ravel(), minlength=len(rates))
    return counts.tolist()


class Seconds:
    """The best wall-clock and CPU seconds (every thread of this process) of a few runs of `work`."""

    def __init__(self, work, repeats: int):
        self.wall = self.cpu = float("inf")
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            work()
            self.wall, self.cpu = min(self.wall, time.perf_counter() - wall), min(self.cpu, time.process_time() - cpu)

    def __str__(self) -> str:
        return f"{self.wall:.3g} / {self.cpu:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[0, 4096, 40960, 409600])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--reference-up-to", type=int, default=40960)
    args = parser.parse_args()
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras)
    from mlm_tpu.console import import_tensorflow

    import_tensorflow()
    from mlm_tpu.shards.layout import BatchLayout
    from mlm_tpu.shards.mixture import MemberCounts, host_mixture_batches, mix
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.t5.shard_kinds import TEXT2TEXT_ROWS
    from mlm_tpu.tasks import shard_kinds

    with tempfile.TemporaryDirectory() as work:
        members = [find_shards(str(folder), shard_kinds(), TEXT2TEXT_ROWS.name, TEXT2TEXT_ROWS.features(None, None))
                   for folder in write_members(Path(work))]
        mixture = mix(members, ["a", "b", "c"], RATES)
        layout = BatchLayout(PIPELINES, BATCH, 1, 1)

        def first_batch(step, taken):
            next(iter(host_mixture_batches(mixture, layout, 0, lambda seed: None, seed=42, window=1024,
                                           start_step=step, taken=taken)))

        first_batch(0, None)  # TensorFlow's one-off start-up, out of the figures
        print(f"3 members ({', '.join(f'{rate:.0%}' for rate in RATES)}), global batch {BATCH}, V = {PIPELINES}; "
              f"wall / CPU seconds to the first batch of a resumed run (best of {args.repeats})")
        print("| resuming at step | mlm_tpu 0.4.0 (draws every step again) | now (the backup's counts) | "
              "now, from a 0.4.0 backup (counted once, traced) |")
        print("| --- | --- | --- | --- |")
        for step in args.steps:
            kept = MemberCounts(RATES, BATCH, 42, PIPELINES).at(step)  # what the backup of `step` holds
            now = Seconds(lambda: first_batch(step, kept), args.repeats)
            replayed = Seconds(lambda: first_batch(step, MemberCounts(RATES, BATCH, 42, PIPELINES, step).taken),
                               args.repeats)
            if step <= args.reference_up_to:
                found = {}

                def replay_as_0_4_0():
                    found["taken"] = reference_taken_before(step, RATES, BATCH, 42, PIPELINES)
                    first_batch(step, found["taken"])

                reference = Seconds(replay_as_0_4_0, 1)
                assert found["taken"] == kept  # the same counts, the same batches
                shown = f"{reference} ({reference.wall / now.wall:.0f}x / {reference.cpu / now.cpu:.0f}x)"
            else:
                shown = "not run"
            print(f"| {step:,} | {shown} | {now} | {replayed} |", flush=True)
        counts = MemberCounts(RATES, BATCH, 42, PIPELINES)
        counts.at(1000)  # traced once, as at a run's first backup
        advance = Seconds(lambda: counts.at(counts.step + 1000), args.repeats)
        print(f"Keeping the counts while training: {advance.wall * 1000:.0f} ms per backup of 1,000 steps "
              f"({advance.wall * 1000:.0f} us a step; CPU {advance.cpu * 1000:.0f} us)")


if __name__ == "__main__":
    main()
