"""The race's view as a pipeline: the page (its landing too), `/race` (and MCP) and the export each make one
`RaceView` a step (`race_view`) and hand it to every renderer; no renderer takes the raw race data or makes
a view of its own. And the lanes that hold another lane's average say so in the method registry, which the
race, the inputs, the view and the account ask, naming no method."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from app_records import synthetic_race

from app import api, export, handlers, render, view
from sage_core.method_settings import BestFirstConfig, FrozenSageConfig
from sage_core.methods import holder, holding, method_spec

ROOT = Path(__file__).resolve().parent.parent
#: The modules that make a step's view: the page's handlers (the landing's too, whose recording the status lines read
#: once: `status_lines.opening_recording`), the API and the export.
ENTRIES = {"app/handlers.py", "app/status_lines.py", "app/api.py", "app/export/frame_format.py", "app/export/slides.py"}
#: What renders a view: none of them makes one.
RENDERERS = ("app/render.py", "app/panels.py", "app/panel_table.py", "app/slides_gif.py", "app/explain_view.py")


def names_used(path: Path) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.Name)}


def test_only_the_entries_make_a_view():
    making = {
        path.relative_to(ROOT).as_posix() for path in (ROOT / "app").rglob("*.py") if "race_view" in names_used(path)
    }
    assert making == ENTRIES
    for renderer in RENDERERS:
        assert "RaceData" not in names_used(ROOT / renderer), renderer


@pytest.mark.parametrize("name", ["race_html", "badge_html", "table_html", "why_html", "headline_html"])
def test_a_renderer_takes_the_view_not_the_race(name):
    data = synthetic_race()
    assert getattr(render, name)(view.race_view(data))
    with pytest.raises(AttributeError):
        getattr(render, name)(data)


def test_each_entry_makes_one_view_a_step(monkeypatch):
    made = []
    real = view.race_view

    def counted(data):
        made.append(data)
        return real(data)

    for module in (handlers, api, export.frame_format, export.slides):
        monkeypatch.setattr(module, "race_view", counted)
    data = synthetic_race(with_ar=True)
    page = type("Page", (), {"__getattr__": lambda self, name: name})()
    settings = handlers.Settings(handlers.Limits(), [], "builtin", None, [], text_interval=0.0, figure_interval=0.0)
    handlers.Handlers(page, settings).view(data, "status", None)
    assert made == [data]
    api.race_result(data, with_trace=False)
    assert made == [data, data]
    export.frame(data, 2)
    assert len(made) == 3 and made[-1] is not data  # the race as it stood after round 2


def test_the_lanes_holding_sages_average_are_asked_of_the_registry():
    assert holder("sage", "alpha") == "sage-frozen" and holder("sage", "nodes") == "best-first"
    assert {spec.name for spec in holding("sage")} == {"sage-frozen", "best-first"}
    frozen, best = method_spec("sage-frozen"), method_spec("best-first")
    assert frozen.holds_in_race(FrozenSageConfig()) and not frozen.holds_in_race(FrozenSageConfig(0.5))
    assert best.holds_in_race(None) and not best.holds_in_race(BestFirstConfig(5))
    assert not method_spec("sage").holds_in_race(None)
    rounds = synthetic_race().lane("sage").records
    alphas = [r.alpha for r in rounds if r.phase == "decode" and r.alpha is not None]
    held = frozen.held_settings(FrozenSageConfig(), rounds)
    assert held == FrozenSageConfig(sum(alphas) / len(alphas))
    assert frozen.held_settings(FrozenSageConfig(), []) == FrozenSageConfig()  # nothing to average: the default
