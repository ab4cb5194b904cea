"""The teaching mode's numbers are the ones the library used: recorded rounds of every method,
explained, against the policy functions (paper §3.2-3.3) recomputed from the record's inputs."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from sage_core import DecodeConfig, decode, load_media
from sage_core.method_settings import SageConfig
from sage_core.models import BUILTIN_TARGET
from sage_core.policy import (
    DepthWindow,
    confidence,
    level_threshold,
    level_width,
    planned_depth,
    planned_width,
)
from sage_core.records import RoundRecord, record_from_dict, record_to_dict, trace_lines
from sage_core.studies.explain import explain_round
from sage_core.trace_check import parse_trace, recorded_settings
from sage_testkit.pairs import builtin_pair

EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"
pytestmark = pytest.mark.skipif(not (BUILTIN_TARGET / "config.json").exists(), reason="built-in pair not trained")
# A short window so D_max moves within one answer.
SAGE = SageConfig(window=3)


@functools.cache
def recorded(method: str) -> tuple[RoundRecord, ...]:
    """A long answer (a detailed description of a shipped example), decoded by `method`."""
    example = next(e for e in json.loads((EXAMPLES / "examples.json").read_text()) if "detail" in e["prompt"])
    media = load_media(EXAMPLES / example["file"])
    run = decode(builtin_pair(), media, example["prompt"], DecodeConfig(method=method, max_new_tokens=96, sage=SAGE))
    run.run_to_end()
    return tuple(run.records)


def decode_rounds(method: str) -> list[RoundRecord]:
    return [r for r in recorded(method) if r.phase == "decode"]


def test_sage_rounds_explain_with_the_policy_numbers():
    rounds = [r for r in decode_rounds("sage") if r.level_thresholds]
    assert len(rounds) >= 3, "too few online SAGE rounds to check"
    cut_rules_seen = set()
    for record in rounds:
        explained = explain_round(record, SAGE)
        assert explained.kind == "sage-online"
        # confidence from the recorded top-10 at the root
        entropy, alpha = confidence(record.root_top_probs)
        assert len(explained.top_probs) == SAGE.candidates
        assert math.isclose(explained.entropy, entropy, abs_tol=1e-9)
        assert math.isclose(explained.alpha, alpha, abs_tol=1e-9)
        assert math.isclose(explained.alpha, 1 - explained.entropy / explained.log_k, abs_tol=1e-9)
        # D(alpha) and W(alpha): the formula's value, and its rounding is what was used
        assert explained.depth == planned_depth(alpha, SAGE.depth_min, record.depth_max)
        assert explained.width == planned_width(alpha, SAGE.width_min, SAGE.width_max)
        assert math.floor(explained.depth_raw + 0.5) == explained.depth
        assert max(1, math.floor(explained.width_raw + 0.5)) == explained.width
        # per level: theta_l and every parent's W_l
        assert explained.levels, "an online round explains its levels"
        for level in explained.levels:
            assert math.isclose(level.threshold, level_threshold(level.level, explained.depth, SAGE.threshold_base))
            assert level.widths, f"level {level.level} lists the nodes it expanded"
            for parent in level.widths:
                assert parent.width == level_width(explained.width, level.level, parent.parent_prob)
                assert max(1, math.floor(parent.raw + 0.5)) == parent.width
            # every candidate of the expanded nodes' top-k is either kept or cut by exactly one rule
            cut = level.cut_by_width + level.cut_by_threshold + level.cut_by_budget
            assert level.kept + cut == len(level.widths) * SAGE.candidates
            assert level.cut_by_width == sum(SAGE.candidates - min(p.width, SAGE.candidates) for p in level.widths)
        assert sum(level.kept for level in explained.levels) == record.node_count
        # the cut candidates shown obey the rule that cut them
        cumulative = record.tree.cumulative_probs()
        pairs = set(zip(record.tree_parents, record.tree_tokens, strict=True))
        for cut in explained.cut:
            assert (cut.parent, cut.token) not in pairs
            parent_cumulative = 1.0 if cut.parent == -1 else cumulative[cut.parent]
            level = explained.levels[cut.level - 1]
            if cut.rule == "threshold":
                assert parent_cumulative * cut.prob <= level.threshold + 1e-12
            if cut.rule == "budget":
                assert parent_cumulative * cut.prob > level.threshold
            cut_rules_seen.add(cut.rule)
    assert {"width", "threshold"} <= cut_rules_seen, cut_rules_seen


@pytest.mark.parametrize("method", ["chain", "static", "sage"])
def test_verification_is_explained_from_the_targets_choices(method):
    for record in decode_rounds(method):
        explained = explain_round(record, SAGE)
        assert len(record.target_choices) == record.node_count + 1
        # greedy acceptance: a node is accepted iff it and all its ancestors agree with the target
        agreed = {n.node for n in explained.nodes if n.agreed}
        expected = []
        node = -1
        while True:
            children = [n.node for n in explained.nodes if n.parent == node and n.node in agreed]
            if not children:
                break
            node = children[0]
            expected.append(node)
        assert tuple(expected) == explained.accepted_nodes
        assert {n.node for n in explained.nodes if n.accepted} == set(explained.accepted_nodes)
        last = explained.accepted_nodes[-1] if explained.accepted_nodes else -1
        assert record.target_choices[1 + last] == explained.bonus_token
        if method != "sage":
            assert explained.kind == method
            assert explained.alpha is None and not explained.levels


def test_static_first_round_and_the_window_are_explained():
    rounds = decode_rounds("sage")
    assert explain_round(rounds[0], SAGE).kind == "sage-first"
    assert explain_round(rounds[0], SAGE).fixed_tree_nodes == 25
    window = DepthWindow(SAGE.depth_max)
    closed = 0
    for record in rounds:
        assert record.depth_max == window.depth_max
        recent = (*window.recent, record.accepted_length)
        window = window.after(record.accepted_length, SAGE)
        assert record.next_depth_max == window.depth_max
        if len(recent) == SAGE.window:
            closed += 1
            assert math.isclose(record.window_mean, sum(recent) / len(recent))
        else:
            assert record.window_mean is None
    assert closed >= 2


def test_teaching_fields_survive_a_trace_and_old_traces_still_explain():
    records = recorded("sage")
    lines = list(trace_lines(_header(), records))
    header, loaded = parse_trace(lines)
    assert tuple(loaded) == records
    assert recorded_settings(header, "sage") == SAGE
    # a record from before the teaching mode: no new fields
    new_fields = (
        "root_top_tokens",
        "root_top_probs",
        "level_thresholds",
        "cut_by_width",
        "cut_by_threshold",
        "cut_by_budget",
        "offer_parents",
        "offer_widths",
        "cut_parents",
        "cut_tokens",
        "cut_probs",
        "cut_rules",
        "target_choices",
        "window_mean",
        "next_depth_max",
    )
    online = next(r for r in records if r.level_thresholds)
    old = {k: v for k, v in record_to_dict(online).items() if k not in new_fields}
    explained = explain_round(record_from_dict(old), SAGE)
    assert explained.alpha == online.alpha and explained.depth == online.planned_depth
    assert all(n.agreed is None for n in explained.nodes)
    assert {n.node for n in explained.nodes if n.accepted} == set(online.accepted_nodes)


def test_bad_teaching_fields_are_refused():
    online = next(r for r in recorded("sage") if r.level_thresholds)
    header_line = next(trace_lines(_header(), ()))
    bad = [
        replace(online, cut_rules=("because",) * len(online.cut_rules)),
        replace(online, target_choices=online.target_choices[:-1]),
        replace(online, cut_by_width=(*online.cut_by_width, 1)),
        replace(online, cut_probs=tuple(p + 2 for p in online.cut_probs)),
        replace(online, window_mean=float("nan")),
        replace(online, offer_parents=tuple(p + 1000 for p in online.offer_parents)),
    ]
    for record in bad:
        with pytest.raises(ValueError):
            parse_trace([header_line, json.dumps(record_to_dict(record))])


def _header():
    from sage_core.records import RunHeader

    return RunHeader("sage", "t", "d", "p", "m", 96, 10, "cpu", "float32", {"sage": asdict(SAGE)})


def test_nodes_below_the_next_threshold_get_no_draft_forward_and_the_trees_stay_the_same(monkeypatch):
    """A node whose cumulative probability is at most θ_{l+1} cannot have a child kept, so SAGE does not
    expand it (and skips a level's draft forward when no node is left): the trees are the same as when
    every node is expanded, with no more draft forwards."""
    import importlib

    decode_module = importlib.import_module("sage_core.methods.sage")  # SAGE's proposer reads the threshold there
    example = next(e for e in json.loads((EXAMPLES / "examples.json").read_text()) if "detail" in e["prompt"])
    media = load_media(EXAMPLES / example["file"])
    calls = []
    real_extend = builtin_pair().draft.extend
    monkeypatch.setattr(builtin_pair().draft, "extend", lambda *a, **k: calls.append(1) or real_extend(*a, **k))

    def trees() -> tuple[list, int]:
        calls.clear()
        run = decode(builtin_pair(), media, example["prompt"], DecodeConfig(max_new_tokens=96, sage=SAGE))
        run.run_to_end()
        return [(r.tree_tokens, r.tree_parents, r.accepted_nodes) for r in run.records], len(calls)

    skipping, skipping_calls = trees()
    monkeypatch.setattr(decode_module, "level_threshold", lambda level, depth, base: -1.0)
    expanding, expanding_calls = trees()
    assert skipping == expanding
    assert skipping_calls <= expanding_calls


def test_dynamic_rounds_explain_which_nodes_the_rerank_kept():
    from app.explain_view import explain_html

    rounds = decode_rounds("dynamic")
    assert rounds
    for record in rounds:
        explained = explain_round(record, SAGE)
        assert explained.kind == "dynamic"
        tree = record.tree
        cumulative = tree.cumulative_probs()
        # every kept node, best first, with its cumulative probability (the product along its path)
        assert sorted(n for n, _ in explained.kept_cumulative) == list(range(len(tree)))
        values = [c for _, c in explained.kept_cumulative]
        assert values == sorted(values, reverse=True)
        for node, value in explained.kept_cumulative:
            assert value == pytest.approx(math.prod(tree.draft_probs[n] for n in tree.path_to(node)))
        assert explained.rerank_cutoff == pytest.approx(min(cumulative))
        assert explained.drafted_nodes == len(tree) + sum(record.cut_by_budget) > len(tree)
        # the nodes the rerank left out never beat the last one kept
        assert all(
            c.prob * (1.0 if c.parent == -1 else cumulative[c.parent]) <= explained.rerank_cutoff + 1e-12
            for c in explained.cut
        )
    html = explain_html(list(recorded("dynamic")), rounds[0].round, {}, "dynamic")
    assert "Dynamic tree (EAGLE-2)" in html and "Kept by the rerank, best first" in html
    assert f"{explained.kept_cumulative[0][1]:.4f}" in explain_html(list(recorded("dynamic")), None, {}, "dynamic")
