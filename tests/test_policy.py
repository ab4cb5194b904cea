"""SAGE's policy against values computed by hand from the paper's formulas."""

import math

import pytest

from sage_core.method_settings import SageConfig
from sage_core.policy import (
    DepthWindow,
    Expansion,
    choose_level,
    confidence,
    judge_level,
    level_threshold,
    level_width,
    plan_template,
    planned_depth,
    planned_width,
    topk_entropy,
)

PAPER = SageConfig()


def test_uniform_top10_has_zero_confidence():
    entropy, alpha = confidence([0.05] * 10)  # renormalised: uniform over 10
    assert entropy == pytest.approx(math.log(10))
    assert alpha == pytest.approx(0.0)


def test_one_hot_top10_has_full_confidence():
    entropy, alpha = confidence([0.9] + [0.0] * 9)
    assert entropy == pytest.approx(0.0)
    assert alpha == pytest.approx(1.0)


def test_entropy_renormalises_the_top_k():
    # Two equal masses of 0.2 each renormalise to 0.5 / 0.5: H = log 2.
    assert topk_entropy([0.2, 0.2]) == pytest.approx(math.log(2))
    _, alpha = confidence([0.2, 0.2])
    assert alpha == pytest.approx(0.0)
    # Four tokens at 0.25 out of k = 16 slots (the rest zero): H = log 4, alpha = 1 - log4/log16 = 0.5.
    _, alpha = confidence([0.25] * 4 + [0.0] * 12)
    assert alpha == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("alpha", "depth", "width"),
    [
        (0.0, 3, 10),  # D = 3 + 0 * 5, W = 2 + 1 * 8
        (0.5, 6, 6),  # D = 5.5 -> 6 (half up), W = 2 + 0.5 * 8 = 6
        (1.0, 8, 2),  # D = 3 + 5, W = 2
    ],
)
def test_depth_and_width_from_alpha(alpha, depth, width):
    assert planned_depth(alpha, PAPER.depth_min, PAPER.depth_max) == depth
    assert planned_width(alpha, PAPER.width_min, PAPER.width_max) == width


def test_level_widths_follow_one_over_l_and_parent_probability():
    assert level_width(6, 1, 0.3) == 6  # level 1 is the root width itself
    assert level_width(6, 2, 0.5) == 3  # 6 * (1/2) * (0.5 + 0.5)
    assert level_width(10, 3, 0.9) == 5  # 10 * (1/3) * 1.4 = 4.67 -> 5
    assert level_width(2, 4, 0.0) == 1  # 2 * (1/4) * 0.5 = 0.25 -> at least 1


def test_level_threshold():
    assert level_threshold(1, 5, 0.1) == pytest.approx(0.02)
    assert level_threshold(5, 5, 0.1) == pytest.approx(0.1)


def test_choose_level_applies_threshold_budget_and_best_first():
    # Two parents at level 2; threshold 0.1 * 2 / 4 = 0.05.
    a = Expansion(node=0, prob=0.6, cumulative=0.6, top_tokens=(10, 11, 12), top_probs=(0.5, 0.3, 0.1))
    b = Expansion(node=1, prob=0.3, cumulative=0.3, top_tokens=(20, 21, 22), top_probs=(0.9, 0.05, 0.05))
    # Width for a: round(4 * 1.1 / 2) = 2; for b: round(4 * 0.8 / 2) = 2.
    chosen = choose_level([a, b], level=2, root_width=4, depth=4, budget=10, threshold_base=0.1)
    # offered: a->10 (0.30), a->11 (0.18), b->20 (0.27), b->21 (0.015: below 0.05)
    assert [(c.parent, c.token) for c in chosen] == [(0, 10), (1, 20), (0, 11)]
    assert [round(c.cumulative, 3) for c in chosen] == [0.3, 0.27, 0.18]
    budgeted = choose_level([a, b], level=2, root_width=4, depth=4, budget=2, threshold_base=0.1)
    assert [(c.parent, c.token) for c in budgeted] == [(0, 10), (1, 20)]


def test_judge_level_says_which_rule_cut_each_candidate():
    a = Expansion(node=0, prob=0.6, cumulative=0.6, top_tokens=(10, 11, 12), top_probs=(0.5, 0.3, 0.1))
    b = Expansion(node=1, prob=0.3, cumulative=0.3, top_tokens=(20, 21, 22), top_probs=(0.9, 0.05, 0.05))
    decision = judge_level([a, b], level=2, root_width=4, depth=4, budget=2, threshold_base=0.1)
    assert decision.threshold == pytest.approx(0.05)
    assert decision.widths == ((0, 0.6, 2), (1, 0.3, 2))
    assert [(c.parent, c.token) for c in decision.kept] == [(0, 10), (1, 20)]
    # best first: a->11 cleared the threshold but not the budget; a->12, b->22 were beyond W_l = 2
    cuts = [(c.candidate.parent, c.candidate.token, c.rule) for c in decision.cut]
    assert cuts == [(0, 11, "budget"), (0, 12, "width"), (1, 21, "threshold"), (1, 22, "width")]
    assert (decision.cut_count("width"), decision.cut_count("threshold"), decision.cut_count("budget")) == (2, 1, 1)


def test_choose_level_keeps_the_best_root_child_even_below_threshold():
    flat = Expansion(node=-1, prob=1.0, cumulative=1.0, top_tokens=(1, 2), top_probs=(0.01, 0.009))
    chosen = choose_level([flat], level=1, root_width=2, depth=3, budget=64, threshold_base=0.1)
    assert [c.token for c in chosen] == [1]


def test_window_lowers_depth_max_after_ten_short_rounds():
    window = DepthWindow(depth_max=8)
    for _ in range(9):
        window = window.after(1, PAPER)
        assert window.depth_max == 8
    window = window.after(1, PAPER)  # mean 1 < 2
    assert window.depth_max == 7
    assert window.recent == ()


def test_window_raises_depth_max_and_clamps_at_limit():
    window = DepthWindow(depth_max=9)
    for _ in range(10):
        window = window.after(5, PAPER)  # mean 5 > 3
    assert window.depth_max == 10
    for _ in range(10):
        window = window.after(5, PAPER)
    assert window.depth_max == 10  # clamped at depth_max_limit


def test_window_holds_between_thresholds_and_clamps_at_depth_min():
    window = DepthWindow(depth_max=5)
    for _ in range(10):
        window = window.after(2 if _ % 2 else 3, PAPER)  # mean 2.5: hold
    assert window.depth_max == 5
    window = DepthWindow(depth_max=3)
    for _ in range(10):
        window = window.after(0, PAPER)
    assert window.depth_max == 3  # clamped at depth_min


def test_node_budget_caps_a_planned_tree():
    flat = [(0.1,) * 10] * 3  # everything uncertain: wide trees
    unbounded = plan_template(0.0, 8, flat, PAPER)
    assert len(unbounded) == 10  # W(0) = 10 root children; the threshold stops level 2
    paths = plan_template(0.0, 8, flat, SageConfig(node_budget=7))
    assert len(paths) == 7 and set(paths) < set(unbounded)


def test_confident_plans_deep_narrow_and_unsure_shallow_wide():
    peaked = [(0.9, 0.05, 0.03, 0.02) + (0.0,) * 6]  # the 0.9 chain passes the threshold at every level
    deep = plan_template(1.0, 8, peaked, PAPER)
    assert max(len(p) for p in deep) == 8  # D(1) = 8
    assert sum(1 for p in deep if len(p) == 1) == 2  # W(1) = 2
    shallow = plan_template(0.0, 8, peaked, PAPER)
    assert max(len(p) for p in shallow) == 3  # D(0) = 3 cuts the same chain
    assert max(len(p) for p in plan_template(0.5, 8, peaked, PAPER)) == 6  # D(0.5) = 5.5 -> 6
    flat = [(0.1,) * 10]
    wide = plan_template(0.0, 8, flat, PAPER)
    assert sum(1 for p in wide if len(p) == 1) == 10  # W(0) = 10


def test_invalid_config_is_refused():
    with pytest.raises(ValueError, match="depth_min"):
        SageConfig(depth_min=9, depth_max=8)
    with pytest.raises(ValueError, match="width_max <= candidates"):
        SageConfig(width_max=12, candidates=10)
