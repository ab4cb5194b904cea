"""sage-cost on real tiny models: the cost curve sizes its trees, its records say why, and they replay.

(Losslessness and exact sampling: the shared suites, tests/test_lossless.py and tests/test_sampling.py,
run every registry method. The budget model itself: tests/test_budget.py.)
"""

from __future__ import annotations

import functools
import statistics
import time
from pathlib import Path

import pytest

from sage_core import DecodeConfig, decode, load_pair
from sage_core.cost_curve import COST_SIZES, CostCurve
from sage_core.methods.budget import SageCostRecord
from sage_core.methods.run_costs import remember_curve
from sage_core.models import ModelPair
from sage_core.records import trace_lines
from sage_core.trace_check import parse_trace
from sage_testkit.pairs import tiny_folder

PROMPT = "Describe the picture."


@functools.cache
def _pair(root: str, draft_kind: str) -> ModelPair:
    return load_pair(
        tiny_folder(Path(root), "qwen2_vl", "target"), tiny_folder(Path(root), "qwen2_vl", draft_kind), "cpu", "float32"
    )


def fake_curve(per_node_ms: float, overhead: float | None = 0.0) -> CostCurve:
    """A one-token step of 2 ms, verification 2 ms + `per_node_ms` a node, a draft level 0.05 ms, and
    `overhead` ms a round besides the forwards (None: learned from the run's rounds)."""
    verify = tuple(2.0 + per_node_ms * n for n in COST_SIZES)
    draft = (0.05,) * len(COST_SIZES)
    return CostCurve("cpu", "float32", "fast", COST_SIZES, 2.0, verify, draft, round_overhead_ms=overhead)


def nodes_with(pair: ModelPair, image, curve: CostCurve) -> tuple[float, list]:
    remember_curve(pair, "fast", curve)
    run = decode(pair, image, PROMPT, DecodeConfig("sage-cost", 40))
    run.run_to_end()
    rounds = [r for r in run.records if r.phase == "decode"]
    return statistics.fmean(r.node_count for r in rounds), run


def test_the_cost_curve_sizes_the_trees(tiny_root, image):
    pair = _pair(str(tiny_root), "noised")
    flat, flat_run = nodes_with(pair, image, fake_curve(0.0))
    steep, steep_run = nodes_with(pair, image, fake_curve(2.0))
    assert flat > 3 * steep, (flat, steep)
    assert steep <= 2.0
    # Same output whatever the curve (both are the target's greedy tokens).
    assert [r.new_tokens for r in flat_run.records] != [] and flat_run.run_to_end().token_ids == (
        steep_run.run_to_end().token_ids
    )


def test_the_round_overhead_is_learned_from_the_runs_rounds():
    from sage_core.method_settings import SageConfig
    from sage_core.methods.sage_cost import OVERHEAD_ROUNDS, SageCostProposer

    proposer = SageCostProposer(SageConfig(), fake_curve(2.0, None))
    assert proposer.round_overhead() == 0.0  # nothing measured yet
    proposer.residuals.extend((0.5, 1.5, 0.9))
    assert proposer.round_overhead() == 0.9  # the median of the rounds' time beyond the model
    proposer.residuals.extend((5.0,) * OVERHEAD_ROUNDS)
    assert proposer.round_overhead() == 2.0  # at most a one-token step
    proposer.residuals.extend((-1.0,) * OVERHEAD_ROUNDS)
    assert proposer.round_overhead() == 0.0  # never below nothing
    fixed = SageCostProposer(SageConfig(), fake_curve(2.0, 0.7))
    fixed.residuals.extend((5.0,) * 3)
    assert fixed.round_overhead() == 0.7  # the curve's own, when it gives one


def test_a_run_learns_its_overhead_and_stays_lossless(tiny_root, image):
    pair = _pair(str(tiny_root), "noised")
    _, learned = nodes_with(pair, image, fake_curve(0.5, None))
    _, fixed = nodes_with(pair, image, fake_curve(0.5))
    assert learned.run_to_end().token_ids == fixed.run_to_end().token_ids
    from sage_core.methods.sage_cost import OVERHEAD_ROUNDS

    rounds = [r for r in learned.records if r.phase == "decode"]
    proposer = learned.proposer
    assert len(proposer.residuals) == min(len(rounds), OVERHEAD_ROUNDS)  # one measurement a round
    assert proposer.costs.overhead == proposer.round_overhead()  # the next round would weigh by it
    assert fixed.proposer.costs.overhead == 0.0


def test_each_round_records_the_budgets_it_weighed(tiny_root, image):
    pair = _pair(str(tiny_root), "noised")
    _, run = nodes_with(pair, image, fake_curve(0.3))
    for record in (r for r in run.records if r.phase == "decode"):
        own = record.own  # sage-cost's own record of the round
        assert isinstance(own, SageCostRecord) and own.budget_chosen == record.node_count  # the budget verified
        assert own.budget_chosen in own.budget_nodes
        assert len(own.budget_nodes) == len(own.budget_rates) == len(own.budget_expected)
        best = own.budget_nodes[own.budget_rates.index(max(own.budget_rates))]
        assert best == own.budget_chosen  # the chosen one has the highest expected tokens/s shown
        assert record.alpha is not None and record.planned_depth is not None  # SAGE's entropy shape
        assert record.depth <= record.planned_depth
    header, replayed = parse_trace(list(trace_lines(run.header, run.records)))
    assert header.method == "sage-cost" and replayed == run.records


def test_a_trace_with_a_budget_not_weighed_is_refused(tiny_root, image):
    from dataclasses import replace

    from sage_core.errors import TraceError

    pair = _pair(str(tiny_root), "noised")
    _, run = nodes_with(pair, image, fake_curve(0.3))
    records = list(run.records)
    records[1] = replace(records[1], own=replace(records[1].own, budget_chosen=999))
    with pytest.raises(TraceError, match="budget chosen"):
        parse_trace(list(trace_lines(run.header, records)))


def test_the_explainer_shows_the_budgets_weighed_and_their_rates(tiny_root, image):
    from sage_core.method_settings import SageConfig
    from sage_core.studies.explain import explain_round

    pair = _pair(str(tiny_root), "noised")
    _, run = nodes_with(pair, image, fake_curve(0.3))
    record = next(r for r in run.records if r.phase == "decode")
    text = explain_round(record, SageConfig()).description
    assert text.startswith("SAGE-cost: α = ")
    own = record.own
    assert isinstance(own, SageCostRecord)
    for nodes, rate in zip(own.budget_nodes, own.budget_rates, strict=True):
        assert f"{nodes} nodes (depth " in text and f"{rate:.0f} tokens/s" in text
    assert f"It verified the best: {own.budget_chosen} nodes." in text
    assert "(chosen)" in text


def test_the_floor_leaves_out_only_candidates_the_best_budget_could_not_keep():
    """A level's candidates under `_Growth.floor` (the verification's least cost per node times the best rate
    so far) never join the best prefix: on random trees and curves, the best budget weighed over every
    candidate equals the one weighed over those above the floor, and the floor does leave some out."""
    import random

    from sage_core.methods.budget import RankCalibration, RoundCosts, weigh_prefixes
    from sage_core.methods.sage_cost import _Growth
    from sage_core.policy import Expansion

    generator, left_out = random.Random(7), 0
    for _ in range(200):
        slope = generator.uniform(0.05, 1.0)  # ms a verified node
        costs = RoundCosts(
            tuple(0.3 + 0.05 * n for n in range(80)), tuple(5 + slope * n for n in range(80)), generator.uniform(0, 2)
        )
        growth = _Growth(costs, RankCalibration(), 64, 1)
        everything: list[float] = []
        depths: list[int] = []
        frontier = [Expansion(-1, 1.0, 1.0, (1, 2, 3, 4), _probs(generator, 4))]
        for level in range(1, 5):
            for node in frontier:
                above = 1.0 if node.node == -1 else everything[node.node]
                everything += [above * p for p in node.top_probs]
                depths += [level] * len(node.top_probs)
            offered = growth.choose(level, frontier, len(everything))
            assert {(c.parent, c.token) for c in offered} >= {(node.node, 1) for node in frontier}  # firsts always
            left_out += len(everything) - len(growth.paths)
            full = weigh_prefixes(everything, depths, costs, 64, 1)
            assert growth.choice is not None
            assert growth.choice.chosen.tokens_per_s == pytest.approx(full.chosen.tokens_per_s)
            # the next level: each kept node of this level offers four children (kept ones only, as the growth)
            kept = sorted(n for n in growth.choice.kept if growth.depths[n] == level)
            frontier = [Expansion(n, 0.5, 0.5, (1, 2, 3, 4), _probs(generator, 4)) for n in kept]
            # renumber `everything` as the growth numbers its candidates (those offered, in order)
            everything, depths = list(growth.paths), list(growth.depths)
            if not frontier:
                break
    assert left_out > 0


def _probs(generator, count: int) -> tuple[float, ...]:
    values = sorted((generator.random() ** 3 for _ in range(count)), reverse=True)
    total = sum(values) * generator.uniform(1.0, 2.0)
    return tuple(v / total for v in values)


def test_a_round_drafts_on_at_most_the_node_budget_and_the_caches_hold_that_much():
    """The draft's scratch in a round is at most N_max nodes (a kept node past it gets no draft forward), so
    the caches keep room for N_max rows (or the cost curve's 64 and the root), not N_max a level."""
    from sage_core.method_settings import SageConfig
    from sage_core.methods.budget import RankCalibration, RoundCosts
    from sage_core.methods.sage_cost import DEPTH_LIMIT, SageCostProposer, _Growth

    costs = RoundCosts(tuple(0.3 for _ in range(80)), tuple(5.0 + 0.1 * n for n in range(80)))
    growth = _Growth(costs, RankCalibration(), 2, 1)
    growth.kept = frozenset({0, 1, 2, 4})
    assert [growth.expand(n, 1, 0.9) for n in (0, 3, 1, 2, 4)] == [True, False, True, False, False]
    assert SageCostProposer(SageConfig(node_budget=100)).max_nodes == 100
    assert SageCostProposer(SageConfig(node_budget=8)).max_nodes == 65
    assert SageCostProposer(SageConfig()).max_depth == DEPTH_LIMIT == 16


@pytest.mark.parametrize("method", ["sage-cost", "smart"])
def test_the_first_runs_curve_measurement_is_not_counted_in_its_prefill(tiny_root, image, monkeypatch, method):
    """The first run of a pair measures its cost curve on its prefilled caches (`costs_for_run`); that 0.3 s
    (a sleep here) is the pair's, not the run's: its prefill record and its clock leave it out."""
    from sage_core.methods import run_costs

    curve = fake_curve(0.5)
    measured = []

    def slow_measurement(caches, devices, sizes=COST_SIZES, passes=7):
        measured.append(passes)
        time.sleep(0.3)
        return curve.one_token_ms, curve.verify_ms, curve.draft_level_ms

    monkeypatch.setattr(run_costs, "_fastest_pass_curve", slow_measurement)
    pair = load_pair(  # a pair of its own: no curve remembered for it yet
        tiny_folder(tiny_root, "qwen2_vl", "target"), tiny_folder(tiny_root, "qwen2_vl", "noised"), "cpu", "float32"
    )
    first = decode(pair, image, PROMPT, DecodeConfig(method, 4))
    first.run_to_end()
    assert measured, "the first run measured the curve"
    again = decode(pair, image, PROMPT, DecodeConfig(method, 4))
    again.run_to_end()
    assert len(measured) == 1  # remembered for the pair's later runs
    prefill, later = first.records[0], again.records[0]
    assert prefill.round_seconds < later.round_seconds + 0.2, (prefill.round_seconds, later.round_seconds)
    assert prefill.draft_seconds < 0.2 and first.records[-1].total_seconds < again.records[-1].total_seconds + 0.2
