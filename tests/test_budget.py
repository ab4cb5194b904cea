"""The budget model of sage-cost (sage_core/methods/budget.py) on fake cost curves, numbers checked by hand."""

from __future__ import annotations

import itertools

import pytest

from sage_core.cost_curve import CostCurve
from sage_core.methods.budget import (
    Calibration,
    RankCalibration,
    RoundCosts,
    choose_budget,
    drafted_outcomes,
    path_probs,
    tried_outcomes,
)
from sage_core.trees import Tree


def curve(verify: tuple[float, ...], draft: tuple[float, ...], sizes: tuple[int, ...] = (1, 2, 4)) -> CostCurve:
    return CostCurve("cpu", "float32", "fast", sizes, verify[0], verify, draft)


# Node 0 and node 1 hang off the root (draft probabilities 0.8 and 0.1), node 2 off node 0 (0.5).
SMALL = Tree((5, 6, 7), (-1, -1, 0), (0.8, 0.1, 0.5))


def test_without_verdicts_the_calibration_is_the_draft_itself() -> None:
    assert path_probs(SMALL, Calibration()) == pytest.approx((0.8, 0.1, 0.4))


def test_a_steep_curve_keeps_one_node() -> None:
    # n=1: (1 + 0.8) / (1 draft + 10 verify) = 163.6 tok/s; n=2 (node 2, depth 2): 2.2 / (1 + 1 + 12) = 157.1;
    # n=3: 2.3 / (1 + draft_at(2) = 1 + verify_at(3) = 14) = 143.8.
    choice = choose_budget(SMALL, curve((10, 12, 16), (1, 1, 1)), Calibration(), node_cap=64)
    assert choice.order == (0, 2, 1)
    rates = [round(o.tokens_per_s, 1) for o in choice.options]
    assert rates == [163.6, 157.1, 143.8]
    assert (choice.chosen.nodes, choice.chosen.depth) == (1, 1)
    assert choice.kept == {0}


def test_a_flatter_curve_keeps_all_three() -> None:
    # n=1: 1.8 / 11 = 163.6; n=2: 2.2 / 12.5 = 176.0; n=3: 2.3 / (2 + 10.75) = 180.4.
    choice = choose_budget(SMALL, curve((10, 10.5, 11), (1, 1, 1)), Calibration(), node_cap=64)
    assert [round(o.tokens_per_s, 1) for o in choice.options] == [163.6, 176.0, 180.4]
    assert (choice.chosen.nodes, choice.chosen.depth) == (3, 2)


def test_a_round_overhead_spreads_over_a_bigger_tree() -> None:
    # The steep curve kept one node; 20 ms of work per round besides the forwards make node 2 pay:
    # n=1: 1.8 / (1 + 10 + 20) = 58.1 tok/s, n=2: 2.2 / (2 + 12 + 20) = 64.7, n=3: 2.3 / (2 + 14 + 20) = 63.9.
    steep = curve((10, 12, 16), (1, 1, 1))
    table = RoundCosts.of(steep, 3, overhead=20.0)
    choice = choose_budget(SMALL, table, Calibration(), node_cap=64)
    assert [round(o.tokens_per_s, 1) for o in choice.options] == [58.1, 64.7, 63.9]
    assert choice.chosen.nodes == 2 and choose_budget(SMALL, steep, Calibration(), node_cap=64).chosen.nodes == 1


def test_the_cap_bounds_the_budget() -> None:
    choice = choose_budget(SMALL, curve((10, 10.5, 11), (1, 1, 1)), Calibration(), node_cap=2)
    assert len(choice.options) == 2 and choice.chosen.nodes == 2


def binary_tree(depth: int) -> Tree:
    """Every node has two children, drafted with 0.9 and 0.05: 2 + 4 + ... + 2^depth nodes."""
    parents, probs = [], []
    level = [-1]
    for _ in range(depth):
        below = []
        for parent in level:
            for prob in (0.9, 0.05):
                parents.append(parent)
                probs.append(prob)
                below.append(len(parents) - 1)
        level = below
    return Tree(tuple(range(len(parents))), tuple(parents), tuple(probs))


SIZES = (1, 2, 4, 8, 16, 32, 64)


def test_a_flat_curve_gives_a_deep_wide_tree_up_to_the_cap() -> None:
    flat = curve((2.0,) * 7, (0.01,) * 7, SIZES)
    choice = choose_budget(binary_tree(7), flat, Calibration(), node_cap=64)
    tree = binary_tree(7)
    kept = choice.kept
    assert choice.chosen.nodes == 64
    assert choice.chosen.depth == 7  # the deepest the candidates go
    assert sum(1 for n in kept if tree.parents[n] == -1) == 2  # both root children: wide too


def test_a_steep_curve_gives_few_nodes() -> None:
    # Each verified node costs as much as a one-token step (2 ms): one node gives (1 + 0.9) / (0.01 + 4)
    # = 473.8 tok/s, the 0.9 chain's second node (0.81) brings it down to (1 + 0.9 + 0.81) / (0.02 + 6) = 450.2.
    steep = curve(tuple(2.0 * (1 + n) for n in SIZES), (0.01,) * 7, SIZES)
    choice = choose_budget(binary_tree(7), steep, Calibration(), node_cap=64)
    assert round(choice.options[0].tokens_per_s, 1) == 473.8
    assert round(choice.options[1].tokens_per_s, 1) == 450.2
    assert choice.chosen.nodes == 1


def test_a_curve_that_changes_mid_run_changes_the_choice() -> None:
    tree, calibration = binary_tree(7), Calibration()
    before = choose_budget(tree, curve((2.0,) * 7, (0.01,) * 7, SIZES), calibration, node_cap=64)
    # The machine gets busy: verification now grows with the nodes (2 ms + 0.25 ms a node).
    busier = curve(tuple(2.0 + 0.25 * n for n in SIZES), (0.01,) * 7, SIZES)
    after = choose_budget(tree, busier, calibration, node_cap=64)
    assert before.chosen.nodes == 64
    # Now only the 0.9 chain pays: 7 nodes, (1 + 0.9 + ... + 0.9^7 = 4.70) / (7 * 0.01 + 2 + 7 * 0.25) ms.
    assert after.chosen.nodes == 7
    assert round(after.chosen.tokens_per_s, 1) == round(1000 * 5.6953279 / 3.82, 1)
    assert sum(1 for n in after.kept if tree.parents[n] == -1) == 1  # narrow: a chain


def test_expensive_draft_levels_make_the_tree_shallower() -> None:
    tree = binary_tree(7)
    verify = tuple(2.0 + 0.05 * n for n in SIZES)
    cheap = choose_budget(tree, curve(verify, (0.01,) * 7, SIZES), Calibration(), node_cap=64)
    dear = choose_budget(tree, curve(verify, (1.5,) * 7, SIZES), Calibration(), node_cap=64)
    assert dear.chosen.depth < cheap.chosen.depth


def test_verdicts_calibrate_the_draft() -> None:
    # Four nodes drafted at about 0.8, one accepted: bin 8's rate (1 + 4 * 0.8125) / (4 + 4) = 0.531 is below
    # bins 6 and 7 (0.65 and 0.75, no verdicts, weight 4 each), so the three pool:
    # (0.65 * 4 + 0.75 * 4 + 0.53125 * 8) / 16 = 0.6156. The 0.1 bin is untouched.
    calibration = Calibration().after((0.8, 0.8, 0.85, 0.8), (True, False, False, False))
    assert calibration.rate(0.8) == pytest.approx(0.615625)
    assert calibration.rate(0.65) == pytest.approx(0.615625)
    assert calibration.rate(0.1) == pytest.approx(0.1)
    assert calibration.rate(0.95) == pytest.approx(0.95)
    mean, share, tried, rate = calibration.rows()[0]
    assert (round(mean, 4), share, tried) == (0.8125, 0.25, 4)
    assert rate == pytest.approx(0.615625)


def test_the_calibration_never_ranks_a_less_likely_sibling_higher() -> None:
    # Bin 3 accepts everything, bin 6 nothing: pooled, a 0.65 node still rates at least a 0.35 one.
    calibration = Calibration().after((0.35,) * 30 + (0.65,) * 30, (True,) * 30 + (False,) * 30)
    rates = [calibration.rate(p / 100) for p in range(101)]
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(rates))


def test_a_dearer_calibration_shrinks_the_budget() -> None:
    flat_ish = curve((10, 10.5, 11), (1, 1, 1))
    # Twenty nodes drafted at 0.5, none accepted: bins 2-5 pool to (0.25*4 + 0.35*4 + 0.45*4 + 2/24*24) / 36
    # = 0.1722, so node 2's path is 0.8 * 0.1722 = 0.138: n=1 gives 163.6 tok/s, n=2 1.938 / 12.5 = 155.0,
    # n=3 (node 1 at 0.1) 2.038 / 12.75 = 159.8. One node is kept, where three were.
    sceptical = Calibration().after((0.5,) * 20, (False,) * 20)
    assert sceptical.rate(0.5) == pytest.approx(6.2 / 36)
    assert choose_budget(SMALL, flat_ish, Calibration(), 64).chosen.nodes == 3
    choice = choose_budget(SMALL, flat_ish, sceptical, 64)
    assert [round(o.tokens_per_s, 1) for o in choice.options] == [163.6, 155.0, 159.8]
    assert choice.kept == {0}


def test_tried_nodes_are_the_children_of_the_accepted_path() -> None:
    # Accepted: node 0. Tried: 0 and 1 (the root's children) and 2 (node 0's child); 2 was rejected.
    assert tried_outcomes(SMALL, (0,)) == ((0.8, 0.1, 0.5), (True, False, False))
    assert tried_outcomes(SMALL, ()) == ((0.8, 0.1), (False, False))


def test_drafted_nodes_the_budget_cut_get_verdicts_too() -> None:
    # The target chose 5 after the root (node 0: accepted), then 9 after node 0 (node 2 rejected: bonus 9).
    assert drafted_outcomes(SMALL, (0,), (5, 9)) == ((0.8, 0.1, 0.5), (0, 1, 0), (True, False, False))
    # Nothing accepted, the bonus is 6: node 1 (the root's second child) would have been accepted.
    assert drafted_outcomes(SMALL, (), (6,)) == ((0.8, 0.1), (0, 1), (False, True))
    # Under greedy verification the verified nodes' verdicts are the same as the verifier's.
    probs, _, outcomes = drafted_outcomes(SMALL, (0,), (5, 9))
    assert (probs, outcomes) == tried_outcomes(SMALL, (0,))


def test_a_first_choice_and_a_runner_up_are_calibrated_apart() -> None:
    # Twenty first choices drafted at 0.35 all accepted, twenty runners-up at 0.35 none: one table gives
    # both the same rate; apart, the first choice rates far above it and the runner-up far below.
    calibration = RankCalibration().after((0.35,) * 40, (0,) * 20 + (1,) * 20, (True,) * 20 + (False,) * 20)
    pooled = Calibration().after((0.35,) * 40, (True,) * 20 + (False,) * 20).rate(0.35)
    assert calibration.rate(0.35, 0) > pooled + 0.2 > calibration.rate(0.35, 1) + 0.4


def test_shown_budgets_hold_the_chosen_one() -> None:
    choice = choose_budget(binary_tree(7), curve((2.0,) * 7, (0.01,) * 7, SIZES), Calibration(), node_cap=40)
    assert [o.nodes for o in choice.shown()] == [4, 8, 12, 16, 24, 32, 40]


def test_the_run_curve_is_a_line_through_the_fastest_passes() -> None:
    from sage_core.methods.run_costs import line_fit

    # (1, 2), (2, 3), (4, 5): exactly 1 + n.
    assert line_fit((1, 2, 4), (2.0, 3.0, 5.0)) == pytest.approx((2.0, 3.0, 5.0))
    # One point timed at a busy moment (2 nodes at 9 ms) no longer makes 2 nodes dearer than 4:
    # mean size 7/3, mean cost 16/3, slope (40/9 - 11/9 - 5/9) / (16/9 + 1/9 + 25/9) = 4/7.
    fitted = line_fit((1, 2, 4), (2.0, 9.0, 5.0))
    assert fitted[0] < fitted[1] < fitted[2]
    assert fitted[1] - fitted[0] == pytest.approx(4 / 7)
    # Costs falling with the node count (noise) give a flat line, never a negative slope.
    assert line_fit((1, 2, 4), (5.0, 4.0, 3.0)) == pytest.approx((4.0, 4.0, 4.0))
