"""The budget sweep (sage_core/studies/sweep.py) on tiny models, and its figure (sage_core/studies/sweep_figure.py)."""

from __future__ import annotations

import functools
from pathlib import Path

from sage_core import load_pair, prepare_inputs
from sage_core.cost_curve import COST_SIZES, CostCurve
from sage_core.methods import is_method
from sage_core.methods.run_costs import remember_curve
from sage_core.models import ModelPair
from sage_core.studies.sweep import sweep
from sage_testkit.pairs import tiny_folder


@functools.cache
def _pair(root: str) -> ModelPair:
    return load_pair(
        tiny_folder(Path(root), "qwen2_vl", "target"), tiny_folder(Path(root), "qwen2_vl", "noised"), "cpu", "float32"
    )


def test_the_sweep_runs_every_method_at_every_budget_and_marks_sage_costs_choice(tiny_root, image):
    pair = _pair(str(tiny_root))
    flat = CostCurve("cpu", "float32", "fast", COST_SIZES, 2.0, (2.0,) * len(COST_SIZES), (0.01,) * len(COST_SIZES))
    remember_curve(pair, "fast", flat)
    cases = [("image", prepare_inputs(pair, image, "Describe the picture."))]
    result = sweep(pair, cases, budgets=(4, 16), max_new_tokens=24)
    assert [(p.method, p.budget) for p in result.points] == [
        ("sage", 4),
        ("sage", 16),
        ("dynamic", 4),
        ("dynamic", 16),
        ("best-first", 4),
        ("best-first", 16),
    ]
    fixed = {p.budget: p for p in result.points if p.method == "best-first"}
    dynamic = {p.budget: p for p in result.points if p.method == "dynamic"}
    assert dynamic[4].nodes <= 4 and fixed[4].nodes <= 4 < fixed[16].nodes <= 16  # the budget is the tree's size
    assert all(p.speedup > 0 and p.tokens_per_forward >= 1 for p in result.points)
    assert [p.method for p in result.chosen] == ["sage-cost", "smart"] and all(p.budget >= 1 for p in result.chosen)
    smart = result.chosen_by("smart")
    assert smart is not None and smart.nodes == smart.budget  # SMART's choice is the tree its rule kept
    assert not is_method("best-first-n")  # (best-first runs at its own node setting: the sweep registers no lane)
    table = result.lines()
    assert table[0].startswith("| method | budget | τ") and any("chosen, mean" in line for line in table)


def test_the_sweep_figure_draws_three_panels_and_the_cost_curve(tiny_root, image):
    from sage_core.studies.sweep import SweepPoint, SweepResult
    from sage_core.studies.sweep_figure import sweep_figure

    points = tuple(SweepPoint(m, b, 1.0 + b / 10, 2.0, b, 1.5) for m in ("sage", "dynamic") for b in (4, 8))
    chosen = (SweepPoint("sage-cost", 6.5, 1.7, 2.5, 6.5, 1.8), SweepPoint("smart", 3.25, 1.2, 2.1, 3.25, 1.4))
    curve = CostCurve("cpu", "float32", "fast", (1, 2), 2.0, (2.2, 2.6), (0.1, 0.2))
    fig = sweep_figure(SweepResult(points, chosen, 1, 1), curve)
    names = [trace.name for trace in fig.data]
    assert names.count("SAGE") == 3 and names.count("SAGE-cost (its mean choice)") == 3
    stars = [trace for trace in fig.data if trace.name == "SAGE-cost (its mean choice)"]
    assert [tuple(s.y) for s in stars] == [(1.7,), (2.5,), (1.8,)] and all(tuple(s.x) == (6.5,) for s in stars)
    hexagrams = [trace for trace in fig.data if trace.name == "SMART (its mean choice)"]
    assert [tuple(h.y) for h in hexagrams] == [(1.2,), (2.1,), (1.4,)] and all(tuple(h.x) == (3.25,) for h in hexagrams)
    assert {h.marker.symbol for h in hexagrams} == {"hexagram"} and {s.marker.symbol for s in stars} == {"star"}
    assert tuple(fig.data[-1].y) == (1.1, 1.3)  # the cost curve in one-token steps


def test_the_app_measures_the_pairs_sweep_once_and_draws_it_beside_the_warm_up_curve(tiny_root, monkeypatch):
    from dataclasses import fields
    from types import SimpleNamespace

    import sage_core.methods.run_costs
    from app import models
    from app.handlers import Handlers, Settings
    from app.inputs import Limits
    from app.page import Page

    def no_second_measurement(*args, **kwargs):
        raise AssertionError("sage-cost measured its own curve: the warm-up's was not passed on")

    monkeypatch.setattr(models, "SWEEP_BUDGETS", (4, 16))
    monkeypatch.setattr(models, "SWEEP_TOKENS", 8)
    monkeypatch.setattr(models, "PAIRS", models.PairCache(1))
    monkeypatch.setattr(sage_core.methods.run_costs, "_fastest_pass_curve", no_second_measurement)
    # The warm-up's curve, settled (a busy machine's would be set aside and every run would measure its own:
    # tests/test_cost_noise.py covers that; here the point is that the settled one is passed on).
    verify = tuple(2.2 + 0.1 * n for n in COST_SIZES)
    settled = CostCurve("cpu", "float32", "fast", COST_SIZES, 2.0, verify, (0.5,) * len(COST_SIZES))
    monkeypatch.setattr(models, "measure_cost_spread", lambda *args, **kwargs: settled)
    target, draft = (
        Path(tiny_folder(tiny_root, "qwen2_vl", "target")),
        Path(tiny_folder(tiny_root, "qwen2_vl", "noised")),
    )
    settings = Settings(Limits(), [], models.CUSTOM_KEY, models.CustomModels(folder=target.parent), [])
    page = SimpleNamespace(**{f.name: f.name for f in fields(Page)})
    handlers = Handlers(page, settings)
    update = handlers.show_sweep(models.CUSTOM_KEY, target.name, draft.name)
    names = {trace.name for trace in update["fig_sweep"].data}
    # the cost curve beside the sweep, and both choosing methods' marks
    assert {"verify / one-token step", "SAGE-cost (its mean choice)", "SMART (its mean choice)"} <= names
    assert "Measured on this machine (cpu, float32) at " in update["sweep_note"]
    (loaded,) = models.PAIRS._pairs.values()
    assert loaded.sweep is not None and loaded.costs is not None
    assert sorted({p.budget for p in loaded.sweep.points}) == [4, 16]
    measured = loaded.sweep
    again = handlers.show_sweep(models.CUSTOM_KEY, target.name, draft.name)
    assert loaded.sweep is measured and again["sweep_note"] == update["sweep_note"]  # measured once per pair
