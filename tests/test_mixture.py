"""Task mixtures: each example's member drawn from (seed, step), at the asked rates; bad rates one line each."""

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
