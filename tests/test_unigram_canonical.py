"""The tokenizer trainer's run-to-run randomness is removed before saving (see unigram.py)."""

import itertools

from mlm_tpu.tokenizer.unigram import _reassign_penalty_scores

LOWEST = -13.530991


def test_penalty_scores_go_to_characters_in_a_fixed_order_whatever_order_the_trainer_used():
    trained = [("▁the", -3.2), ("e", -5.1), ("▁x", LOWEST), ("Y", LOWEST)]
    penalties = [round(LOWEST + k * 1e-4, 6) for k in (1, 2, 3)]
    outcomes = set()
    for order in itertools.permutations(["Q", "Z", "q"]):
        pieces = trained + list(zip(order, penalties))
        outcomes.add(tuple(sorted(_reassign_penalty_scores(pieces), key=lambda p: (-p[1], p[0]))))
    assert len(outcomes) == 1
    (canonical,) = outcomes
    assert canonical[:2] == (("▁the", -3.2), ("e", -5.1))  # trained pieces keep their scores
    assert [piece for piece, _ in canonical[2:5]] == ["Q", "Y", "Z"]  # Y sits on the grid at k=0 too
    assert sorted(score for _, score in canonical) == sorted(score for _, score in trained + list(zip("QZq", penalties)))
