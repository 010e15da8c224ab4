"""Task mixtures: each example's member drawn from (seed, step), at the asked rates; bad rates one line each."""

from pathlib import Path

import numpy as np
import pytest

from mlm_tpu.errors import UserError


def test_the_members_of_2000_steps_come_at_the_asked_rates_within_2_points():
    from mlm_tpu.shards.mixture import member_order

    rates = [0.5, 0.3, 0.2]
    members = next(iter(member_order(rates, 16, seed=42).batch(2000 * 16))).numpy()
    shares = np.bincount(members, minlength=3) / len(members)
    assert np.all(np.abs(shares - rates) < 0.02), shares
    per_step = members.reshape(2000, 16)
    assert len({tuple(row) for row in per_step[:50]}) == 50  # steps draw afresh
    again = next(iter(member_order(rates, 16, seed=42, start_step=1500).batch(500 * 16))).numpy()
    np.testing.assert_array_equal(again, members[1500 * 16:])  # a resumed run draws the same from its step on
    other = next(iter(member_order(rates, 16, seed=43).batch(16))).numpy()
    assert not np.array_equal(other, members[:16])


def test_a_resumed_mixture_knows_what_each_member_gave():
    from mlm_tpu.shards.mixture import member_order, taken_before

    rates = [0.6, 0.4]
    members = next(iter(member_order(rates, 8, seed=1).batch(300 * 8))).numpy()
    assert taken_before(300, rates, 8, seed=1) == [np.bincount(members, minlength=2).tolist()]
    assert taken_before(0, rates, 8, seed=1) == [[0, 0]]
    halves = members.reshape(300, 2, 4)  # two virtual pipelines: rows 0-3 and 4-7 of each step
    assert taken_before(300, rates, 8, seed=1, pipelines=2) == [
        np.bincount(halves[:, pipeline].ravel(), minlength=2).tolist() for pipeline in (0, 1)]
    second = next(iter(member_order(rates, 8, seed=1, pipelines=2, pipeline=1).batch(300 * 4))).numpy()
    np.testing.assert_array_equal(second, halves[:, 1].ravel())


def test_counts_kept_at_each_backup_are_the_counts_from_step_0():
    """What a run keeps in its backups (MemberCounts advanced from backup to backup, or restored from one) is what
    counting every step from 0 gives, for each virtual pipeline."""
    import json

    from mlm_tpu.shards.mixture import MemberCounts, taken_before

    rates = [0.5, 0.3, 0.2]
    kept = MemberCounts(rates, 8, seed=2, pipelines=2)
    for step in (0, 5, 5, 37, 300):
        assert kept.at(step) == taken_before(step, rates, 8, seed=2, pipelines=2)
    backup = json.loads(json.dumps(taken_before(37, rates, 8, seed=2, pipelines=2)))
    resumed = MemberCounts(rates, 8, 2, 2, step=37, taken=backup)
    assert resumed.at(37) == backup and resumed.at(300) == kept.at(300)
    assert sum(map(sum, kept.at(300))) == 300 * 8
    with pytest.raises(ValueError):
        kept.at(299)


def test_mixing_takes_each_member_in_its_own_order():
    import tensorflow as tf

    from mlm_tpu.shards.mixture import member_order, mixed

    rates = [0.7, 0.3]
    streams = [tf.data.Dataset.range(1000, 2000), tf.data.Dataset.range(5000, 6000)]
    values = next(iter(mixed(streams, rates, 4, seed=3).batch(400))).numpy()
    members = next(iter(member_order(rates, 4, seed=3).batch(400))).numpy()
    assert np.array_equal(values[members == 0], np.arange(1000, 1000 + np.sum(members == 0)))
    assert np.array_equal(values[members == 1], np.arange(5000, 5000 + np.sum(members == 1)))


def test_rates_proportional_to_size_with_a_temperature():
    from mlm_tpu.shards.mixture import mixture_rates

    assert mixture_rates([5, 3, 2], [1, 1, 1]) == pytest.approx([0.5, 0.3, 0.2])
    assert mixture_rates("examples", [600, 300, 100]) == pytest.approx([0.6, 0.3, 0.1])
    hot = mixture_rates("examples", [900, 100], temperature=2.0)
    assert hot == pytest.approx([30 / 40, 10 / 40])


def test_examples_proportional_mixing_with_a_limit():
    """--mixture-maximum K: a member counts as min(size, K) examples, before the temperature (SeqIO's
    rate_num_examples(maximum=K)), through the flags as the trainer mixes its folders."""
    from mlm_tpu.cli.train import build_config, build_parser
    from mlm_tpu.shards.mixture import find_training_mixture, mixture_rates
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.t5.shard_kinds import TEXT2TEXT_ROWS
    from mlm_tpu.tasks import shard_kinds

    assert mixture_rates("examples", [600, 300, 100], maximum=200) == pytest.approx([0.4, 0.4, 0.2])
    assert mixture_rates("examples", [900, 100], temperature=2.0, maximum=400) == pytest.approx([2 / 3, 1 / 3])
    assert mixture_rates("examples", [600, 300], maximum=1000) == pytest.approx([2 / 3, 1 / 3])
    folders = [str(T5_SHARDS / split) for split in ("train", "validation")]  # 60 and 20 examples
    found = [find_shards(folder, shard_kinds(), TEXT2TEXT_ROWS.name,
                         TEXT2TEXT_ROWS.features(None, None)) for folder in folders]

    def flags(*more):
        return build_config(build_parser().parse_args(["--output-dir", "out", *more]))

    mixture = find_training_mixture(flags("--train-dataset", *folders, "--mixture-maximum", "30"), found)
    assert list(mixture.rates) == pytest.approx([0.6, 0.4])  # min(60, 30) : min(20, 30)
    for wrong, phrase in ((flags("--train-dataset", *folders, "--mixture-rates", "1", "1", "--mixture-maximum", "30"),
                           "--mixture-maximum applies to --mixture-rates examples"),
                          (flags("--train-dataset", folders[0], "--mixture-maximum", "30"),
                           "--mixture-rates, --mixture-maximum and --mixture-temperature mix several")):
        with pytest.raises(UserError, match=phrase):
            find_training_mixture(wrong, found[:len(wrong.train_datasets)])


@pytest.mark.parametrize("rates, sizes, temperature, phrase", [
    ([0.5, 0.5], [1, 1, 1], 1.0, "--mixture-rates has 2 rates for 3 --train-dataset folders"),
    ([0.5, -0.1], [1, 1], 1.0, "--mixture-rates -0.1: a rate is a share of the examples, 0 or more"),
    ([0.0, 0.0], [1, 1], 1.0, "--mixture-rates are all 0"),
    ("sizes", [1, 1], 1.0, "--mixture-rates takes one number per --train-dataset, or 'examples'"),
    ("examples", [1, 1], 0.0, "--mixture-temperature must be above 0"),
    ([0.5, 0.5], [1, 1], 2.0, "--mixture-temperature applies to --mixture-rates examples"),
])
def test_bad_rates_are_one_line(rates, sizes, temperature, phrase):
    from mlm_tpu.shards.mixture import mixture_rates

    with pytest.raises(UserError) as refused:
        mixture_rates(rates, sizes, temperature)
    assert phrase in str(refused.value) and "\n" not in str(refused.value)


T5_SHARDS = Path(__file__).parent / "fixtures" / "made-by-0.2" / "t5-shards"


def test_a_mixtures_batches_take_each_row_from_the_drawn_member_and_resume_at_any_step():
    """Two splits mixed 0.7/0.3: every row of every batch is an example of the member the sampler drew for it, each
    member's examples come in its own order, and a pipeline started at step 9 gives what the first gave from 9."""
    from mlm_tpu.shards.layout import BatchLayout
    from mlm_tpu.shards.mixture import MemberCounts, host_mixture_batches, member_order, mix
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.t5.shard_kinds import TEXT2TEXT_ROWS
    from mlm_tpu.tasks import shard_kinds

    members = [find_shards(str(T5_SHARDS / split), shard_kinds(), TEXT2TEXT_ROWS.name,
                           TEXT2TEXT_ROWS.features(None, None))
               for split in ("train", "validation")]
    mixture = mix(members, ["train", "validation"], [0.7, 0.3])
    assert mixture.records == 80 and [m["rate"] for m in mixture.describe()] == [0.7, 0.3]

    def rows(start_step, steps, taken=None):  # one virtual pipeline, two replicas of 4 rows
        dataset = host_mixture_batches(mixture, BatchLayout(1, 8, 1, 2), 0, lambda seed: None, seed=5, window=8,
                                       start_step=start_step, taken=taken)
        return [tuple(row) for batch in dataset.take(2 * steps) for row in batch["input_ids"].numpy()]

    run = rows(0, 30)
    inputs = [{row for row in rows_of(member)} for member in members]
    drawn = next(iter(member_order([0.7, 0.3], 8, seed=5).batch(240))).numpy()
    assert all(row in inputs[member] for row, member in zip(run, drawn))
    alone = [(row, member) for row, member in zip(run, drawn) if (row in inputs[0]) != (row in inputs[1])]
    assert len(alone) > 200  # (4 examples are in both splits)
    assert len(set(r for r, m in zip(run, drawn) if m == 1)) == 20  # 72 rows of 20 examples: every one, epoch on epoch
    assert rows(9, 21) == run[9 * 8:]
    kept = MemberCounts([0.7, 0.3], 8, seed=5)  # as a run keeps them: backups at steps 3 and 9
    kept.at(3)
    assert rows(9, 21, taken=kept.at(9)) == run[9 * 8:]  # resumed from the counts a backup holds


def write_members(folder: Path, sizes) -> list:
    """Text-to-text shards (no manifest) of len(sizes) members, member m's example k starting with id
    1000 m + k + 1, so each row says which example of which member it is; sizes[m] lists its shards' counts."""
    import tensorflow as tf

    def feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    folders = []
    for member, counts in enumerate(sizes):
        folders.append(folder / f"member{member}")
        folders[-1].mkdir()
        example = 0
        for index, count in enumerate(counts):
            with tf.io.TFRecordWriter(str(folders[-1] / f"dataset-{index:05d}-{count}.tfrecord")) as writer:
                for _ in range(count):
                    example += 1
                    writer.write(tf.train.Example(features=tf.train.Features(feature={
                        "input_ids": feature([1000 * member + example, 1] + [0] * 6),
                        "attention_mask": feature([1, 1] + [0] * 6),
                        "labels": feature([5, 1] + [-100] * 2)})).SerializeToString())
    return folders


def test_a_mixtures_global_batches_are_the_same_on_any_number_of_hosts_and_replicas(tmp_path):
    """Two virtual pipelines, each mixing its share of both members: 1 host x 2 replicas, 2 hosts x 1 replica and
    1 x 1 train the same examples every step, past the members' epochs, transformed alike; a run resumed on another
    topology continues them."""
    import tensorflow as tf

    from conftest import assert_same_batches, global_batches
    from mlm_tpu.shards.layout import BatchLayout
    from mlm_tpu.shards.mixture import host_mixture_batches, member_order, mix
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.t5.shard_kinds import TEXT2TEXT_ROWS
    from mlm_tpu.tasks import shard_kinds

    folders = write_members(tmp_path, [[6, 5, 7], [4, 3]])
    members = [find_shards(str(folder), shard_kinds(), TEXT2TEXT_ROWS.name,
                           TEXT2TEXT_ROWS.features(None, None)) for folder in folders]
    mixture = mix(members, ["a", "b"], [0.6, 0.4])

    def marked(seed):  # a transform keyed like masks: (seed + virtual pipeline, step)
        return lambda step, batch: {**batch, "labels": batch["labels"] + tf.cast(10 * seed + 100 * step, tf.int32)}

    def batches(hosts, replicas, start, count):  # replicas: all hosts' together
        layout = BatchLayout(2, 8, hosts, replicas)
        layout.check(2, flag_given=True)
        return global_batches(layout, lambda host: host_mixture_batches(
            mixture, layout, host, marked, seed=4, window=4, start_step=start), count)

    alone = batches(1, 1, 0, 12)  # 96 examples of 25: every member's shares read several times
    assert_same_batches(batches(1, 2, 0, 12), alone)  # 1 host x 2 replicas
    assert_same_batches(batches(2, 2, 0, 12), alone)  # 2 hosts x 1 replica
    assert_same_batches(batches(2, 4, 5, 7), alone[5:])  # 2 hosts x 2 replicas, resumed at step 5
    drawn = next(iter(member_order([0.6, 0.4], 8, seed=4).batch(96))).numpy()
    ids = np.concatenate([batch["input_ids"][:, 0] for batch in alone])
    np.testing.assert_array_equal(ids // 1000, drawn)  # every row from the member drawn for its place
    steps, pipelines = np.repeat(np.arange(12), 8), np.tile(np.repeat([0, 1], 4), 12)
    shares = {(0, 0): set(range(1, 10)), (0, 1): set(range(10, 19)),  # (member, pipeline): the examples of its half
              (1, 0): set(range(1, 4)), (1, 1): set(range(4, 8))}  # of the member (18 and 7 in shards of 6 5 7, 4 3)
    for (member, pipeline), share in shares.items():
        taken = (ids // 1000 == member) & (pipelines == pipeline)
        assert set(ids[taken] % 1000) == share, (member, pipeline)  # its own share's examples, every one
    labels = np.concatenate([batch["labels"][:, 0] for batch in alone])
    np.testing.assert_array_equal(labels, 5 + 10 * (4 + pipelines) + 100 * steps)


def rows_of(shards):
    import tensorflow as tf

    schema = {"input_ids": tf.io.FixedLenFeature([shards.features["input_ids"]], tf.int64)}
    records = tf.data.TFRecordDataset(shards.files).batch(1000).get_single_element()
    return [tuple(row) for row in tf.io.parse_example(records, schema)["input_ids"].numpy().astype(np.int32)]


@pytest.mark.parametrize("more, phrase", [
    (["--mixture-rates", "0.5", "0.3", "0.2"], "--mixture-rates has 3 rates for 2 --train-dataset folders"),
    (["--mixture-rates", "0.5", "-0.5"], "--mixture-rates -0.5: a rate is a share of the examples, 0 or more"),
])
def test_bad_mixture_rates_are_one_line(more, phrase, tmp_path, in_process):
    from conftest import assert_user_error

    result = in_process("train", "--task", "generation", "--train-dataset", T5_SHARDS / "train",
                        T5_SHARDS / "validation", "--tokenizer", T5_SHARDS.parent / "t5-tokenizer", "--model-config",
                        "t5-tiny", *more, "--output-dir", tmp_path / "out")
    assert_user_error(result, phrase)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_mixture_trains_says_each_members_share_and_resumes_from_the_counts_its_backup_keeps(tmp_path):
    """A mixture killed after a backup: the backup holds each member's count at its step, and the run resumed from
    it starts each member there without counting the steps before again."""
    import json

    from conftest import backup_reached, run_train, train_until_killed
    from mlm_tpu.shards.mixture import taken_before
    from test_resume import step_losses

    output_dir = tmp_path / "out"
    flags = ["--task", "generation", "--train-dataset", T5_SHARDS / "train", T5_SHARDS / "validation",
             "--mixture-rates", "examples", "--tokenizer", T5_SHARDS.parent / "t5-tokenizer", "--model-config",
             "t5-tiny", "--per-replica-batch-size", 4, "--max-steps", 8, "--backup-steps", 2, "--logging-steps", 1,
             "--output-dir", output_dir]
    train_until_killed(flags, lambda: backup_reached(output_dir, 2))
    record = json.loads(next((output_dir / "backup").glob("step-*.json")).read_text())
    loop, step = record["loop"], record["step"]
    assert loop["mixture_taken"] == taken_before(step, [0.75, 0.25], 4, seed=42, pipelines=loop["input_pipelines"])

    result = run_train(*flags)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Resuming from the backup at step {step} of 8" in result.stderr and "counting them" not in result.stderr
    assert f"Mixture: {T5_SHARDS / 'train'} 75.0% (60 examples), {T5_SHARDS / 'validation'} 25.0% (20 examples)" \
        in result.stderr
    assert sorted(step_losses(output_dir)) == list(range(1, 9))
    run_info = json.loads((output_dir / "training_args.json").read_text())
    assert [member["rate"] for member in run_info["run"]["mixture"]] == [0.75, 0.25]
    assert run_info["train_dataset"] == [str(T5_SHARDS / "train"), str(T5_SHARDS / "validation")]
