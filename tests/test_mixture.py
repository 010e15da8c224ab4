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
    assert taken_before(300, rates, 8, seed=1, chunk=64) == np.bincount(members, minlength=2).tolist()
    assert taken_before(0, rates, 8, seed=1) == [0, 0]


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
    from mlm_tpu.shards.format import TEXT2TEXT, features_of
    from mlm_tpu.shards.mixture import member_order, mix, mixture_batches
    from mlm_tpu.shards.reading import find_shards

    members = [find_shards(str(T5_SHARDS / split), TEXT2TEXT, features_of(TEXT2TEXT, None, None))
               for split in ("train", "validation")]
    mixture = mix(members, ["train", "validation"], [0.7, 0.3])
    assert mixture.records == 80 and [m["rate"] for m in mixture.describe()] == [0.7, 0.3]

    def rows(start_step, steps):
        dataset = mixture_batches(mixture, 4, 2, None, seed=5, pipeline=0, window=8, start_step=start_step)
        return [tuple(row) for batch in dataset.take(2 * steps) for row in batch["input_ids"].numpy()]

    run = rows(0, 30)
    inputs = [{row for row in rows_of(member)} for member in members]
    drawn = next(iter(member_order([0.7, 0.3], 8, seed=5).batch(240))).numpy()
    assert all(row in inputs[member] for row, member in zip(run, drawn))
    alone = [(row, member) for row, member in zip(run, drawn) if (row in inputs[0]) != (row in inputs[1])]
    assert len(alone) > 200  # (4 examples are in both splits)
    assert len(set(r for r, m in zip(run, drawn) if m == 1)) == 20  # 72 rows of 20 examples: every one, epoch on epoch
    assert rows(9, 21) == run[9 * 8:]


def rows_of(shards):
    import tensorflow as tf

    schema = {"input_ids": tf.io.FixedLenFeature([shards.features["input_ids"]], tf.int64)}
    records = tf.data.TFRecordDataset(shards.files).batch(1000).get_single_element()
    return [tuple(row) for row in tf.io.parse_example(records, schema)["input_ids"].numpy().astype(np.int32)]


@pytest.mark.parametrize("more, phrase", [
    (["--mixture-rates", "0.5", "0.3", "0.2"], "--mixture-rates has 3 rates for 2 --train-dataset folders"),
    (["--mixture-rates", "0.5", "-0.5"], "--mixture-rates -0.5: a rate is a share of the examples, 0 or more"),
])
def test_bad_mixture_rates_are_one_line(more, phrase, tmp_path):
    from conftest import assert_user_error, run_train

    result = run_train("--task", "generation", "--train-dataset", T5_SHARDS / "train", T5_SHARDS / "validation",
                       "--tokenizer", T5_SHARDS.parent / "t5-tokenizer", "--model-config", "t5-tiny", *more,
                       "--output-dir", tmp_path / "out")
    assert_user_error(result, phrase)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_mixture_trains_and_says_each_members_share(tmp_path):
    import json

    from conftest import run_train

    output_dir = tmp_path / "out"
    result = run_train("--task", "generation", "--train-dataset", T5_SHARDS / "train", T5_SHARDS / "validation",
                       "--mixture-rates", "examples", "--tokenizer", T5_SHARDS.parent / "t5-tokenizer",
                       "--model-config", "t5-tiny", "--per-replica-batch-size", 4, "--max-steps", 6,
                       "--output-dir", output_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Mixture: {T5_SHARDS / 'train'} 75.0% (60 examples), {T5_SHARDS / 'validation'} 25.0% (20 examples)" \
        in result.stderr
    run_info = json.loads((output_dir / "training_args.json").read_text())
    assert [member["rate"] for member in run_info["run"]["mixture"]] == [0.75, 0.25]
    assert run_info["train_dataset"] == [str(T5_SHARDS / "train"), str(T5_SHARDS / "validation")]
