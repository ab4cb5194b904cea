"""SMART (sage_core/methods/smart.py): the rule by hand on made-up cost curves, then on real pairs (a built-in
method, registered from methods/builtin.py; the fixed-curve variants through the method seam), where it must stay
lossless."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from sage_core import DecodeConfig, decode, load_media
from sage_core.cost_curve import COST_SIZES, CostCurve
from sage_core.decode import DecodeRun
from sage_core.methods import MethodSpec, registered
from sage_core.methods.smart import (
    SMART_SPEC,
    SmartCandidate,
    SmartConfig,
    SmartProposer,
    SmartRecord,
    SmartTree,
    round_cost,
    smart_expands,
    smart_tree,
    tree_speedup,
    with_node,
)
from sage_core.models import BUILTIN_TARGET
from sage_core.records import trace_lines
from sage_core.studies.explain import describe_round as explained
from sage_core.trace_check import parse_trace
from sage_core.trees import ROOT

PROMPT = "Describe the picture."
EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"
TOKENS = 24


def curve(per_node: float, draft_level: float, one_token: float = 2.0) -> CostCurve:
    """A one-token step of `one_token` ms, verification `one_token` + `per_node` ms a node, a draft level
    `draft_level` ms whatever its width."""
    verify = tuple(one_token + per_node * n for n in COST_SIZES)
    return CostCurve("cpu", "float32", "fast", COST_SIZES, one_token, verify, (draft_level,) * len(COST_SIZES))


FLAT = curve(0.0, 0.0)
STEEP = curve(0.5, 0.05)


def full_tree(width: int, depth: int, likeliest: float) -> list[SmartCandidate]:
    """Every node offers `width` children, the first with probability `likeliest`, each other one a tenth of
    the one before: candidates level by level, parents first."""
    probs = [likeliest * 0.1**r for r in range(width)]
    out: list[SmartCandidate] = []
    level = [(ROOT, 1.0)]
    for d in range(1, depth + 1):
        following = []
        for parent, above in level:
            for prob in probs:
                following.append((len(out), above * prob))
                out.append(SmartCandidate(parent, above * prob, d))
        level = following
    return out


def widths(candidates: list[SmartCandidate], kept: tuple[int, ...]) -> Counter[int]:
    return Counter(candidates[n].depth for n in kept)


def test_a_flat_curve_expands_to_the_cap_best_first():
    candidates = full_tree(width=4, depth=3, likeliest=0.6)  # 4 + 16 + 64 candidates
    grown = smart_tree(candidates, FLAT, node_cap=20)
    assert len(grown.kept) == 20  # every node is free: the cap stops the tree
    assert all(d.expanded for d in grown.decisions)
    best = sorted(range(len(candidates)), key=lambda i: (-candidates[i].p, candidates[i].depth, i))[:20]
    assert sorted(grown.kept) == sorted(best)  # the 20 likeliest, a tree (each parent before its child)
    assert all(candidates[n].parent == ROOT or candidates[n].parent in grown.kept[:i] for i, n in enumerate(grown.kept))
    assert len(smart_tree(candidates, FLAT, node_cap=84).kept) == 84  # a larger cap: every candidate


def test_a_steep_curve_keeps_a_chain_and_a_steeper_one_a_single_node():
    candidates = full_tree(width=4, depth=6, likeliest=0.95)
    chain = smart_tree(candidates, STEEP, node_cap=64)
    levels = widths(candidates, chain.kept)
    assert len(levels) >= 2 and set(levels.values()) == {1}  # several levels, one node each
    assert [candidates[n].p for n in chain.kept] == pytest.approx(
        [0.95**d for d in range(1, len(chain.kept) + 1)]
    )  # the likeliest path
    assert len(smart_tree(candidates, FLAT, node_cap=64).kept) == 64  # the same candidates, a flat curve: wide
    steeper = smart_tree(candidates, curve(1.5, 1.0), node_cap=64)
    assert len(steeper.kept) == 1 and candidates[steeper.kept[0]].depth == 1
    # The speedup of each tree the rule grew only rose.
    speedups = [1 / chain.base_cost] + [s.speedup for s in chain.steps]
    assert speedups == sorted(speedups) and len(set(speedups)) == len(speedups)


def test_a_ratio_just_under_the_speedup_is_refused_and_just_over_is_expanded():
    # One-token step 1 ms, verification 1 + 0.1 n ms, drafting free: the empty tree's C is 1 step, S = 1,
    # and a first node costs 0.1 step: it passes iff p / 0.1 > 1.
    linear = curve(0.1, 0.0, one_token=1.0)
    assert round_cost((), linear) == 1.0
    eps = 1e-6
    for p, expanded in ((0.1 - eps, False), (0.1 + eps, True)):
        grown = smart_tree([SmartCandidate(ROOT, p, 1)], linear, node_cap=4)
        (decision,) = grown.decisions
        assert decision.expanded is expanded and grown.kept == ((0,) if expanded else ())
        assert decision.speedup == pytest.approx(1.0) and decision.ratio == pytest.approx(p / 0.1)
        assert (decision.ratio > decision.speedup) is expanded
    # Inside a grown tree: after a node of p = 0.5 at depth 1, a sibling is weighed against S = 1.5 / 1.1.
    tree = SmartTree(linear, node_cap=4, depth_cap=4)
    tree.offer([SmartCandidate(ROOT, 0.5, 1)])
    tree.grow()
    speedup, added = tree.speedup, tree.added_cost(1)
    assert speedup == pytest.approx(1.5 / 1.1) and added == pytest.approx(0.1)
    under, over = speedup * added * (1 - eps), speedup * added * (1 + eps)
    tree.offer([SmartCandidate(ROOT, under, 1), SmartCandidate(ROOT, over, 1)])
    tree.grow()
    decided = {d.node: d.expanded for d in tree.result().decisions}
    assert decided == {0: True, 1: False, 2: True}
    # The rule is exactly "it raises (E + 1) / C", here and on a grid.
    for p in (0.05, 0.2, 0.6, 0.9):
        for added_cost in (0.01, 0.1, 0.5, 2.0):
            for expected, cost in ((0.0, 1.0), (1.3, 1.7), (4.0, 2.5)):
                raises = tree_speedup(expected + p, cost + added_cost) > tree_speedup(expected, cost)
                assert smart_expands(p, added_cost, expected, cost) is raises
    assert smart_expands(0.01, 0.0, 9.0, 1.0) and not smart_expands(0.0, 0.0, 0.0, 1.0)  # free: iff p > 0


def test_settings_out_of_range_are_refused():
    from sage_core.errors import ConfigError

    with pytest.raises(ConfigError, match="node_cap must be a whole number in"):
        SmartConfig(node_cap=0)
    with pytest.raises(ConfigError, match="probabilities must be"):
        SmartConfig(probabilities="guessed")  # type: ignore[arg-type]  # a value the type does not allow


def with_curve(cost: CostCurve, node_cap: int) -> MethodSpec:
    """SMART under another name, deciding from a given curve (the pair's measured one is left alone)."""
    settings = SmartConfig(node_cap=node_cap)
    return replace(
        SMART_SPEC, name="smart-fixed", settings=None, controls=(), proposer=lambda s, c: SmartProposer(settings, cost)
    )


def decoded(pair, media, method: str, prompt: str = PROMPT, tokens: int = TOKENS) -> tuple[list[int], DecodeRun]:
    run = decode(pair, media, prompt, DecodeConfig(method, tokens))
    return list(run.run_to_end().token_ids), run


@pytest.mark.skipif(not (BUILTIN_TARGET / "config.json").exists(), reason="built-in pair not trained")
def test_a_nodes_marginal_cost_is_worked_out_once_per_tree_and_anew_after_each_expansion():
    """ΔC depends on the tree's level counts alone: the tree keeps it per depth until a node joins."""
    verify, draft = tuple(2.0 + 0.3 * n**1.2 for n in COST_SIZES), tuple(0.4 + 0.05 * n for n in COST_SIZES)
    uneven = CostCurve("cpu", "float32", "fast", COST_SIZES, 2.0, verify, draft)
    tree = SmartTree(uneven, node_cap=16, depth_cap=4)
    tree.offer(full_tree(3, 3, 0.9))
    for _ in range(5):
        for depth in range(1, len(tree.level_counts) + 2):
            fresh = round_cost(with_node(tree.level_counts, depth), uneven) - round_cost(tree.level_counts, uneven)
            assert tree.added_cost(depth) == pytest.approx(fresh, rel=1e-12)
        best = next(
            i for i, c in enumerate(tree.candidates) if c.parent in (ROOT, *tree.in_tree) and i not in tree.in_tree
        )
        tree._add(best)  # (the step grow takes after a passing judgement)


def test_smart_is_lossless_on_the_builtin_pair(builtin_pair, greedy):
    """On the pair's measured curve (on a CPU a tree's verification may cost several one-token steps, and
    SMART then drafts little or nothing) and on a made-up accelerator's curve, where it drafts deep trees."""
    media, prompt, tokens = load_media(EXAMPLES / "describe_five.png"), "describe the image in detail.", 64
    expected = greedy(builtin_pair, media, prompt, tokens)
    assert decoded(builtin_pair, media, "smart", prompt, tokens)[0] == expected
    accelerator = curve(0.05, 1.0, one_token=10.0)
    with registered(with_curve(accelerator, node_cap=64)):
        answer, run = decoded(builtin_pair, media, "smart-fixed", prompt, tokens)
    assert answer == expected
    rounds = [r for r in run.records if r.phase == "decode"]
    assert max(r.depth for r in rounds) >= 3 and max(r.accepted_length for r in rounds) >= 3
    assert all(r.node_count <= 64 for r in rounds)


def test_smart_is_lossless_on_a_tiny_family_and_its_records_replay(tiny_pair, image, greedy):
    pair = tiny_pair("qwen2_vl", "noised")
    tokens, run = decoded(pair, image, "smart")
    assert tokens == greedy(pair, image, PROMPT, TOKENS)
    rounds = [r for r in run.records if r.phase == "decode"]
    for record in rounds:
        own = record.own  # SMART's own record of the round: its growth, then its weighing
        assert isinstance(own, SmartRecord) and own.budget_chosen == (record.node_count or None)  # ends at the tree
        assert own.budget_nodes == tuple(range(1, record.node_count + 1))
        if record.node_count:
            assert f"stopped at {record.node_count} nodes" in explained(record)
    header, replayed = parse_trace(list(trace_lines(run.header, run.records)))
    assert header.method == "smart" and replayed == run.records
    # the weighing in the record: every kept node beat the speedup it faced, every refusal did not
    weighed = [(r, r.own) for r in rounds if r.node_count and isinstance(r.own, SmartRecord)]
    assert weighed and all(len(o.node_ratios) == len(o.node_speedups) == r.node_count for r, o in weighed)
    assert all(
        ratio > speedup for _, o in weighed for ratio, speedup in zip(o.node_ratios, o.node_speedups, strict=True)
    )
    refusals = [(r, r.own, i) for r in rounds for i, rule in enumerate(r.cut_rules) if rule == "cost"]
    assert refusals and all(o.cut_ratios[i] <= o.cut_speedups[i] for _, o, i in refusals)
    assert all(-1 <= r.cut_parents[i] < r.node_count for r, _, i in refusals)
    record, own = weighed[0]
    said = explained(record)
    assert f"node 0 {own.node_ratios[0]:.2f} > {own.node_speedups[0]:.2f}" in said
    refused, refused_own = next((r, o) for r, o, _ in refusals if r.node_count)
    first = refused.cut_rules.index("cost")
    assert f"{refused_own.cut_ratios[first]:.2f} ≤ {refused_own.cut_speedups[first]:.2f}" in explained(refused)
    last = run.proposer.last_round
    assert last is not None and all((d.ratio > d.speedup) is d.expanded for d in last.decisions)
    calibrated = DecodeConfig("smart", TOKENS).with_settings({"smart": SmartConfig(probabilities="calibrated")})
    run = decode(pair, image, PROMPT, calibrated)
    assert list(run.run_to_end().token_ids) == tokens and run.proposer.calibration is not None
    assert sum(run.proposer.calibration.first.tried) > 0  # the verdicts calibrated the draft


def test_on_a_real_pair_a_flat_curve_fills_the_cap_and_a_steep_one_keeps_chains(tiny_pair, image, greedy):
    pair = tiny_pair("qwen2_vl", "noised")
    expected = greedy(pair, image, PROMPT, TOKENS)
    with registered(with_curve(FLAT, node_cap=12)):
        tokens, run = decoded(pair, image, "smart-fixed")
    assert tokens == expected
    assert {r.node_count for r in run.records if r.phase == "decode"} == {12}
    with registered(with_curve(curve(2.0, 1.0), node_cap=12)):
        tokens, run = decoded(pair, image, "smart-fixed")
    assert tokens == expected
    trees = [r.tree for r in run.records if r.phase == "decode"]
    assert all(max(Counter(t.depths).values(), default=0) <= 1 for t in trees)  # chains (or no tree)


def test_a_round_drafts_on_at_most_the_node_cap_and_the_caches_hold_that_much():
    """SMART grows its tree again at every level, so the nodes drafted on add up across levels: a round stops
    drafting at the node cap (the draft's scratch), and the caches keep room for that, not the cap a level."""
    from sage_core.methods.smart import _Growth

    tree = SmartTree(FLAT, node_cap=4, depth_cap=4)
    tree.offer([SmartCandidate(ROOT, 0.9, 1), SmartCandidate(ROOT, 0.8, 1)])
    tree.grow()
    growth = _Growth(tree, None)
    growth.drafted_on = 3  # three nodes drafted on at the levels before
    assert tree.worth_drafting(0) and tree.worth_drafting(1)
    assert growth.expand(0, 1, 0.9) and not growth.expand(1, 1, 0.8)
    assert SmartProposer(SmartConfig(node_cap=100)).max_nodes == 100
    assert SmartProposer(SmartConfig()).max_nodes == 65 and SmartConfig().depth_cap == 16
