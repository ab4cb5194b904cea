"""The paper's premise on a run's rounds: corr(α, accepted length) and the entropy's lag-1 autocorrelation."""

from __future__ import annotations

import math

import pytest

from sage_core.premise import pearson, premise_of
from sage_core.records import RoundRecord


def record(step: int, alpha: float | None, entropy: float | None, accepted: int) -> RoundRecord:
    tokens = tuple(range(10, 10 + accepted))
    return RoundRecord(
        method="sage", round=step, phase="decode" if step else "prefill",
        tree_tokens=tokens, tree_parents=tuple(range(-1, accepted - 1)), tree_draft_probs=(0.5,) * accepted,
        entropy=entropy, alpha=alpha, depth_max=8, planned_depth=5, planned_width=3,
        accepted_nodes=tuple(range(accepted)), accepted_tokens=tokens, bonus_token=1,
        new_tokens=(*tokens, 1), new_token_texts=("x",) * (accepted + 1),
        draft_seconds=0.0, verify_seconds=0.0, round_seconds=0.0, total_tokens=0, total_seconds=0.0,
    )  # fmt: skip


def test_pearson_by_hand():
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert pearson([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    # x = 1..4, y = 1, 3, 2, 4: sxy = 4, sxx = syy = 5 -> r = 0.8
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert pearson([1, 2, 3], [1, 2, 3]) is None  # too few points
    assert pearson([1, 1, 1, 1], [1, 2, 3, 4]) is None  # no spread


def test_the_premise_on_recorded_rounds():
    alphas = [0.9, 0.2, 0.8, 0.1, 0.7, 0.3]
    accepted = [5, 1, 4, 0, 4, 1]
    entropies = [0.3, 0.5, 0.7, 0.9, 1.1, 1.3]  # a steady rise: lag-1 autocorrelation 1
    rounds = [record(0, None, None, 0)]
    rounds += [record(i + 1, a, h, n) for i, (a, h, n) in enumerate(zip(alphas, entropies, accepted, strict=True))]
    premise = premise_of(rounds)
    assert premise.rounds == 6
    assert premise.alpha_accept == pytest.approx(pearson(alphas, [float(n) for n in accepted]))
    assert premise.alpha_accept > 0.9
    assert premise.entropy_lag1 == pytest.approx(1.0)
    assert "6 rounds" in premise.meaning() and "premise holds" in premise.meaning()
    flat = premise_of([record(i + 1, 0.5, 0.5, 2) for i in range(6)])
    assert flat.alpha_accept is None and "too few (or too uniform)" in flat.meaning()
    assert not math.isnan(premise.entropy_lag1)
