"""The predicted-speedup arithmetic (sage_core/studies/predict.py) on made-up cost curves, against values worked
out by hand."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sage_core.studies.predict import (
    CHAIN_WIDTHS,
    PAPER_TAUS,
    STATIC_WIDTHS,
    CostPoints,
    RoundShape,
    level_widths,
    predict,
    shapes_of,
)
from sage_core.trees import Tree

VERIFY = CostPoints((1, 8, 32), (11.0, 12.0, 20.0))  # ms for the root + N nodes
DRAFT = CostPoints((1, 4, 16), (2.0, 2.3, 3.5))  # ms for a draft forward over N tokens
ONE_TOKEN_MS = 10.0


def test_cost_points_interpolate_and_extrapolate():
    assert VERIFY.at(0) == 11.0 and VERIFY.at(1) == 11.0  # flat below the first size
    assert VERIFY.at(5) == pytest.approx(11 + 4 / 7)
    assert VERIFY.at(25) == pytest.approx(12 + 8 * 17 / 24)
    assert VERIFY.at(40) == pytest.approx(20 + 8 * 8 / 24)  # the last segment extended
    assert CostPoints((1, 2), (5.0, 4.0)).at(10) == 4.0  # a falling last segment (noise) is not extended
    with pytest.raises(ValueError):
        CostPoints((4, 1), (1.0, 2.0))


def test_the_paper_trees_widths():
    assert CHAIN_WIDTHS == (1, 1, 1, 1, 1)
    assert STATIC_WIDTHS == (4, 8, 8, 3, 2) and sum(STATIC_WIDTHS) == 25
    assert level_widths([(0,), (1,), (0, 0)]) == (2, 1)


def test_a_chain_round_by_hand():
    """τ 3 on the 5-token chain: the feed of 4 tokens (2.3), four one-node levels (4 × 2.0), a 5-node verify."""
    got = predict("chain", "made up", [RoundShape(3.0, CHAIN_WIDTHS)], ONE_TOKEN_MS, VERIFY, DRAFT)
    drafting, verifying = 2.3 + 4 * 2.0, 11 + 4 / 7
    assert got.draft_ms_per_round == pytest.approx(drafting)
    assert got.verify_ms_per_round == pytest.approx(verifying)
    assert got.draft_ms_per_token == pytest.approx(drafting / 4)
    assert got.speedup == pytest.approx(4 * 10 / (drafting + verifying))
    assert got.speedup == pytest.approx(1.828870, abs=1e-6)
    assert (got.tau, got.nodes) == (3.0, 5.0)


def test_a_static_tree_round_by_hand():
    """τ 4.21 on the 25-node tree: feed of 5.21 tokens, levels of 4, 8, 8 and 3 nodes, a 25-node verify."""
    got = predict("static", "made up", [RoundShape(4.21, STATIC_WIDTHS)], ONE_TOKEN_MS, VERIFY, DRAFT)
    feed = 2.3 + 1.2 * 1.21 / 12
    levels = 2.3 + (2.3 + 1.2 * 4 / 12) * 2 + (2.0 + 0.3 * 2 / 3)
    verifying = 12 + 8 * 17 / 24
    assert got.speedup == pytest.approx(5.21 * 10 / (feed + levels + verifying))
    assert got.speedup == pytest.approx(1.737381, abs=1e-6)


def test_rounds_that_differ_are_summed_not_averaged():
    """Round 1: nothing accepted on a one-node tree (feed 2.0 + verify 11.0); round 2: τ 2 on a 2-node chain
    (feed of 3 tokens 2.2, one level 2.0, verify 11 + 1/7). 4 tokens in 28.343 ms against 4 × 10 ms."""
    rounds = [RoundShape(0.0, (1.0,)), RoundShape(2.0, (1.0, 1.0))]
    got = predict("chain", "made up", rounds, ONE_TOKEN_MS, VERIFY, DRAFT)
    total = 2.0 + 11.0 + 2.2 + 2.0 + 11 + 1 / 7
    assert got.speedup == pytest.approx(40 / total)
    assert got.speedup == pytest.approx(1.411290, abs=1e-6)
    assert got.draft_ms_per_token == pytest.approx((2.0 + 2.2 + 2.0) / 4)
    assert got.tau == 1.0 and got.nodes == 1.5


def test_a_slower_draft_lowers_the_prediction():
    shape = [RoundShape(3.0, CHAIN_WIDTHS)]
    slow = CostPoints(DRAFT.sizes, tuple(3 * ms for ms in DRAFT.ms))
    fast = predict("chain", "x", shape, ONE_TOKEN_MS, VERIFY, DRAFT).speedup
    assert predict("chain", "x", shape, ONE_TOKEN_MS, VERIFY, slow).speedup < fast


def test_no_rounds_is_refused():
    with pytest.raises(ValueError):
        predict("chain", "x", [], ONE_TOKEN_MS, VERIFY, DRAFT)


@dataclass(frozen=True)
class _Record:
    phase: str
    tree: Tree
    accepted_length: int


def test_a_runs_rounds_become_shapes():
    tree = Tree((5, 6, 7, 8), (-1, -1, 0, 2), (0.5, 0.4, 0.9, 0.8))  # depths 1, 1, 2, 3
    records = [_Record("prefill", tree, 0), _Record("decode", tree, 2), _Record("decode", Tree((), (), ()), 0)]
    assert shapes_of(records) == [RoundShape(2.0, (2.0, 1.0, 1.0))]


def test_the_paper_rows_name_their_source():
    assert all(source.startswith("paper") and 4 < tau < 6 for _, source, tau, _ in PAPER_TAUS)
