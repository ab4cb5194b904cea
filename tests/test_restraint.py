"""What the page says a visitor can check with their own eyes: a one-pass twin told apart from its method by more
than a marker (its own paler colour and its own dash, its name saying so), the Draw tab asking about the
drawing rather than keeping the landing's question, and counts read with their plural."""

from __future__ import annotations

from app_records import synthetic_race

from app import figure_style, panels
from app.sketch import SKETCH_PROMPT
from app.ui import draw_tab_opened


def test_a_one_pass_twin_differs_from_its_method_in_colour_and_dash_and_says_so():
    for method in ("sage", "static", "smart"):
        twin = f"{method}/one-pass"
        mine, theirs = figure_style.method_line(method), figure_style.method_line(twin)
        assert mine["color"] != theirs["color"] and mine["dash"] != theirs["dash"], (mine, theirs)
        assert "one-pass" in panels.short_label(twin)
    assert figure_style.paler("#000000") == "#737373" and figure_style.paler("#ffffff") == "#ffffff"


def test_panel_five_draws_the_twin_dotted_and_paler_under_its_own_name():
    data = synthetic_race()
    lane = data.lanes[0].records
    records = {"sage": lane, "sage/one-pass": lane}
    fig = panels.race_figure(records)
    first, second = fig.data
    assert first.line.dash != second.line.dash and first.line.color != second.line.color
    assert second.name.startswith("SAGE · one-pass draft")


def test_the_draw_tab_replaces_a_prompt_the_page_gave_and_keeps_the_visitors_own():
    opened = draw_tab_opened(["describe the chart."])
    pad = {"composite": None, "layers": []}
    assert opened(pad, "describe the chart.")[1] == SKETCH_PROMPT
    assert opened(pad, "")[1] == SKETCH_PROMPT
    assert opened(pad, "is the red shape large?")[1] != SKETCH_PROMPT  # (gr.skip(): left as it is)
