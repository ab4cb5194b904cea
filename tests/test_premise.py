"""The paper's premise on a run's rounds: corr(α, accepted length) and the entropy's lag-1 autocorrelation."""

from __future__ import annotations

import math

import pytest

from sage_core.records import RoundRecord
from sage_core.studies.premise import pearson
from sage_testkit.references import chain_record


def test_pearson_by_hand():
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert pearson([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    # x = 1..4, y = 1, 3, 2, 4: sxy = 4, sxx = syy = 5 -> r = 0.8
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert pearson([1, 2, 3], [1, 2, 3]) is None  # too few points
    assert pearson([1, 1, 1, 1], [1, 2, 3, 4]) is None  # no spread


# -- the calibration picture, what adaptation bought, the acceptance histogram --------------------------


def lane_record(
    method: str, step: int, top: tuple[float, ...], accepted: int, path: tuple[float, ...] = (), seconds: float = 0.0
) -> RoundRecord:
    from dataclasses import replace

    return replace(
        chain_record(step, None, None, accepted),
        method=method,
        root_top_probs=top,
        root_top_tokens=tuple(range(len(top))),
        path_entropies=path,
        total_seconds=seconds,
    )


def test_alpha_is_measured_from_the_roots_top_k_and_binned_on_a_lane_alpha_does_not_shape():
    from sage_core.studies.premise import alpha_bins, calibration_of, round_alpha

    sure, unsure = (0.97, 0.01, 0.01, 0.01), (0.25, 0.25, 0.25, 0.25)
    assert round_alpha(lane_record("chain", 1, unsure, 0)) == pytest.approx(0.0)
    sure_alpha = 1 + sum(p * math.log(p) for p in sure) / math.log(4)
    assert round_alpha(lane_record("chain", 1, sure, 0)) == pytest.approx(sure_alpha)
    chain = [lane_record("chain", i + 1, sure if i % 2 else unsure, 5 if i % 2 else 1) for i in range(8)]
    sage = [lane_record("sage", i + 1, sure if i % 3 else unsure, 2) for i in range(8)]
    static = [lane_record("static", i + 1, unsure, 3) for i in range(8)]
    picture = calibration_of({"sage": sage, "static": static, "chain": chain})
    assert picture.lane == "chain"  # the chain before the static tree; never SAGE, whose α shapes its trees
    assert picture.rounds == 8 and picture.alpha_accept == pytest.approx(1.0)
    assert picture.sage_rounds == 8 and picture.sage_alpha_accept is None  # SAGE accepted 2 on every round
    counted = {(b.low, b.rounds, b.mean_accepted) for b in picture.bins if b.rounds}
    assert 0.8 < sure_alpha < 0.9 and counted == {(0.0, 4, 1.0), (0.8, 4, 5.0)}
    assert alpha_bins([(1.0, 7)])[-1].rounds == 1  # the last bin is closed
    assert calibration_of({"sage": sage}).lane is None


def test_entropy_is_autocorrelated_token_by_token_and_a_gap_breaks_the_run():
    from sage_core.studies.premise import calibration_of, lag1, token_entropies

    rising = [
        lane_record("chain", 1, (0.5, 0.5), 2, (0.1, 0.2, 0.3)),
        lane_record("chain", 2, (0.5, 0.5), 2, (0.4, 0.5)),  # the last accepted node was not expanded
        lane_record("chain", 3, (0.5, 0.5), 1, (0.6, 0.7)),
    ]
    assert token_entropies(rising) == [[0.1, 0.2, 0.3, 0.4, 0.5], [0.6, 0.7]]
    assert lag1([[1, 2, 3, 4, 5], [9, 8]]) == (pearson([1, 2, 3, 4, 9], [2, 3, 4, 5, 8]), 5)
    picture = calibration_of({"chain": rising})
    assert picture.tokens == 5 and picture.token_lag1 == pytest.approx(1.0)


def test_what_adaptation_bought_says_nothing_when_it_is_nothing():
    from sage_core.studies.premise import adaptation_bought

    sage = [lane_record("sage", 1, (0.5, 0.5), 4, seconds=1.0), lane_record("sage", 2, (0.5, 0.5), 6, seconds=2.0)]
    same = [
        lane_record("sage-frozen", 1, (0.5, 0.5), 5, seconds=1.0),
        lane_record("sage-frozen", 2, (0.5, 0.5), 5, seconds=2.01),
    ]
    nothing = adaptation_bought(sage, same, 0.85)
    assert nothing is not None and nothing.delta_tau == 0 and nothing.delta_seconds == pytest.approx(-0.01)
    assert "nothing measurable" in nothing.sentence() and "α held at 0.85" in nothing.sentence()
    worse = [
        lane_record("sage-frozen", 1, (0.5, 0.5), 3, seconds=1.5),
        lane_record("sage-frozen", 2, (0.5, 0.5), 3, seconds=3.0),
    ]
    bought = adaptation_bought(sage, worse)
    assert bought is not None and bought.delta_tau == pytest.approx(2.0)
    assert "accepted more draft tokens per round and finished sooner than" in bought.sentence()
    assert "Δτ +2.00" in bought.sentence()
    # the same τ, but a wall time measurably shorter (or longer): the clock alone is never credited to adaptation
    # (with τ the same, a gap in wall time is the machine's, as the race with α 1.00 every round showed)
    slower = [
        lane_record("sage-frozen", 1, (0.5, 0.5), 5, seconds=1.5),
        lane_record("sage-frozen", 2, (0.5, 0.5), 5, seconds=2.2),
    ]
    sooner = adaptation_bought(sage, slower)
    assert sooner is not None and sooner.delta_tau == 0
    assert "nothing measurable" in sooner.sentence() and "sooner" not in sooner.sentence()
    assert "wall time alone is not credited to adaptation" in sooner.sentence()
    later = adaptation_bought(slower, sage)
    assert later is not None and "later" not in later.sentence() and "more draft" not in later.sentence()
    assert adaptation_bought(sage, []) is None


def test_the_acceptance_histogram_counts_rounds_by_accepted_length():
    from sage_core.studies.premise import acceptance_histogram

    rounds = [chain_record(0, None, None, 0)] + [chain_record(i + 1, 0.5, 0.5, n) for i, n in enumerate([0, 2, 2, 5])]
    assert acceptance_histogram(rounds) == (1, 0, 2, 0, 0, 1)
    assert acceptance_histogram([]) == ()


def test_a_figure_across_answers_is_given_per_answer_centred_and_pooled():
    """Two answers, each with α and acceptance moving against each other, one easy throughout and one hard
    throughout: per answer and centred the correlation is negative; pooled, the gap between the answers
    makes it positive. The three ways tell the two apart."""
    from sage_core.studies.premise import across_answers, lag_pairs

    easy = ([0.9, 0.95, 0.85, 0.92, 0.88], [6.0, 5.0, 7.0, 5.5, 6.5])
    hard = ([0.2, 0.25, 0.15, 0.22, 0.18], [1.0, 0.0, 2.0, 0.5, 1.5])
    figure = across_answers([easy, hard])
    assert figure.per_answer is not None and figure.per_answer < -0.9 and figure.answers == 2
    assert figure.centred is not None and figure.centred < -0.9
    assert figure.pooled is not None and figure.pooled > 0.9 and figure.points == 10
    assert figure.half_width is not None and figure.half_width >= 0
    words = figure.words()
    assert words.startswith(f"per answer {figure.per_answer:+.2f} ± ") and f"pooled {figure.pooled:+.2f}" in words
    # an answer too short for a figure is left out of the per-answer mean, not counted as zero
    assert across_answers([easy, ([0.5, 0.6], [1.0, 2.0])]).answers == 1
    assert across_answers([easy, ([0.5, 0.6], [1.0, 2.0])]).half_width is None
    # lag pairs never span two answers
    assert lag_pairs([[1.0, 2.0, 3.0], [7.0, 8.0]]) == [([1.0, 2.0], [2.0, 3.0]), ([7.0], [8.0])]
