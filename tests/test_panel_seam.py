"""A panel is one row of the panel table and one figure function: a toy panel defined here, and nowhere else,
is laid out on the page, filled by the handlers, sent by `/race` (and MCP) and drawn by the export.

The toy plots each side's tokens per round. Nothing outside this module names it: its figure function and
its row are below, and the page's plot, its help, its element id, the handlers' update, the API's panels and
the export's frames and HTML all come from them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from types import SimpleNamespace

import plotly.graph_objects as go
import pytest
from app_records import synthetic_race

from app import export, ui
from app.api import race_result
from app.handlers import Handlers, Settings
from app.inputs import Limits
from app.models import CustomModels
from app.page import Page
from app.panel_table import PANEL_NAMES, Focus, Panel, panel_table, registered_panel
from app.view import RaceView

TOY_HELP = "The toy panel: each side's tokens per round, one line a side."


def toy_figure(race: RaceView, focus: Focus) -> go.Figure:
    """Each side's new tokens per round, from the race's view; its title names the lane in focus."""
    fig = go.Figure()
    for lane in race.lanes:
        fig.add_trace(go.Scatter(x=[r.round for r in lane.records], y=[len(r.new_tokens) for r in lane.records]))
    fig.update_layout(title=f"toy tokens per round (focus: {focus.method})")
    return fig


TOY = Panel("toy", toy_figure, TOY_HELP)


@pytest.fixture
def toy() -> Iterator[Panel]:
    with registered_panel(TOY) as panel:
        yield panel
    assert "toy" not in PANEL_NAMES  # (gone with the block)


def test_the_toy_is_a_row_of_the_table_after_the_built_in_panels(toy):
    assert PANEL_NAMES[-1] == "toy" and list(PANEL_NAMES[:5]) == ["confidence", "tree", "shapes", "accepted", "race"]
    assert toy.element_id == "panel-toy" and toy.attribute == "fig_toy"


def test_the_page_lays_the_toy_out_with_its_help(toy):
    demo = ui.build_demo()
    props = {c["props"].get("elem_id"): c for c in demo.config["components"]}
    assert props["panel-toy"]["type"] == "plot"
    helps = [c["props"].get("value") for c in demo.config["components"] if c["type"] == "markdown"]
    assert TOY_HELP in helps


def test_the_handlers_the_api_and_the_export_draw_the_toy(toy, tmp_path):
    data = synthetic_race()
    names = [f.name for f in fields(Page)] + [panel.attribute for panel in panel_table()]
    page = SimpleNamespace(**{name: name for name in names})
    settings = Settings(Limits(), [], "builtin", CustomModels(), [], text_interval=0.0, figure_interval=0.0)
    update = Handlers(page, settings).view(data, "status", None)
    assert "toy tokens per round (focus: sage)" in update["fig_toy"].layout.title.text
    answer = race_result(data, "static", with_trace=False)
    assert "focus: static" in answer["panels"]["toy"]["layout"]["title"]["text"]
    frame = export.frame(data, 1)
    assert list(frame["figures"]) == list(PANEL_NAMES) and frame["figures"]["toy"]["data"]
    html = export.save_html(data, tmp_path / "race.html").read_text(encoding="utf-8")
    assert "<div id='panel-toy'></div>" in html


def test_without_the_toy_nothing_draws_it():
    data = synthetic_race()
    assert "toy" not in race_result(data, with_trace=False)["panels"]
    assert "toy" not in export.frame(data, 1)["figures"]
