"""The app's view model (app/view.py): a race's records read once per step, and every reader (the page, the
panels, the explainer, the export, the API) reading the same view."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from app_records import header, synthetic_race

from app import export, view
from app.api import race_result
from app.explain_view import explained_html
from app.race import Lane
from app.view import race_view
from sage_core import SageConfig
from sage_core.method_settings import BestFirstConfig
from tests.test_app_panels import handlers_on_a_stand_in_page


def test_the_view_is_made_once_per_step_and_anew_when_a_round_lands_or_the_race_stops():
    data = synthetic_race()
    first = race_view(data)
    assert race_view(data) is first
    last = data.lane("sage").records.pop()
    shorter = race_view(data)
    assert shorter is not first and shorter.lane("sage").records == first.lane("sage").records[:-1]
    data.lane("sage").records.append(last)
    again = race_view(data)
    assert again is not shorter and again.lane("sage").token_ids == first.lane("sage").token_ids
    data.stopped = True
    assert race_view(data) is not again and race_view(data).stopped
    # a record replaced in place (same count) is a new round as far as the view is concerned
    records = data.lane("static").records
    records[1] = replace(records[1], new_tokens=(99, *records[1].new_tokens[1:]))
    assert race_view(data).verdict is not None and not race_view(data).verdict.identical


class Counted:
    """A function that counts its calls with each first argument's identity."""

    def __init__(self, function):
        self.function, self.calls = function, []

    def __call__(self, *args, **kwargs):
        self.calls.append(args)
        return self.function(*args, **kwargs)


def test_one_page_update_and_one_api_answer_read_each_lanes_figures_settings_and_the_account_once(monkeypatch):
    account = Counted(view.race_account)
    figures = Counted(view.LaneFigures.of.__func__)
    settings = Counted(view.recorded)
    monkeypatch.setattr(view, "race_account", account)
    monkeypatch.setattr(view.LaneFigures, "of", classmethod(lambda cls, records: figures(cls, records)))
    monkeypatch.setattr(view, "recorded", settings)
    data = synthetic_race(with_ar=True)
    update = handlers_on_a_stand_in_page().view(data, "status", None)
    assert {"verdict", "lanes", "table", "fig_race", "explain"} <= set(update)
    lanes = len(data.lanes)
    assert len(account.calls) == 1
    assert len(figures.calls) == lanes  # each side's summary once, though the columns, table and panel ⑤ show it
    assert len(settings.calls) == 2 * lanes  # each side's own settings and SAGE's, from its own header, once
    answer = race_result(data, with_trace=False)
    assert len(account.calls) == 1 and len(figures.calls) == lanes  # the API reads the same view
    assert answer["account"] == race_view(data).account.as_dict()
    assert answer["figures"]["sage"]["tau"] == race_view(data).lane("sage").figures.tau


def test_each_lane_reads_its_settings_from_its_own_header(monkeypatch):
    data = synthetic_race()
    sage = data.lane("sage")
    sage.header = replace(sage.header, settings={"sage": {"candidates": 12}})
    best = Lane("best-first", replace(header("best-first"), settings={"best-first": {"nodes": 13}}), [])
    best.records = [replace(r, method="best-first") for r in data.lane("static").records]
    data.lanes.append(best)
    race = race_view(data)
    assert race.lane("sage").sage == SageConfig(candidates=12) and race.lane("sage").settings == SageConfig(
        candidates=12
    )
    assert race.lane("best-first").settings == BestFirstConfig(nodes=13)
    assert race.lane("best-first").sage == SageConfig()  # its header records no SAGE settings: the defaults
    assert race.sage_for("best-first") == SageConfig(candidates=12)  # the confidence panel draws SAGE's
    seen = []
    monkeypatch.setattr("app.explain_view.explain_html", lambda *args, **_: seen.append(args) or "")
    explained_html(race, "best-first")
    explained_html(race)
    (_, _, _, method, sage_settings, _, own), (_, _, _, default, *_) = seen
    assert (method, sage_settings, own) == ("best-first", SageConfig(), BestFirstConfig(nodes=13))
    assert default == "sage"


@pytest.mark.parametrize("methods", [("sage", "static"), ("static", "ar")])
def test_the_export_and_the_api_show_the_tree_of_the_lane_the_page_shows(methods):
    data = synthetic_race(with_ar=True)
    data.lanes = [lane for lane in data.lanes if lane.method in methods]
    expected = "sage" if "sage" in methods else "static"
    race = race_view(data)
    assert race.tree_method == expected
    _, _, method = handlers_on_a_stand_in_page().tree_controls(race, None)
    assert method == expected
    frame = export.frame(data, len(data.lane(expected).records) - 1)
    assert SimpleNamespace(**frame).explain.count(f"{race.lane(expected).spec.short}") >= 1
    tree = race_result(data, with_trace=False)["panels"]["tree"]
    assert race.lane(expected).spec.short in tree["layout"]["title"]["text"]


def test_a_lane_of_a_method_no_longer_registered_is_drawn_by_its_name():
    """A race kept in a visitor's state outlives a method registered for a while (a seam's toy): its lane has
    no registry entry, and the page, the panels and the answer still draw it, by its name."""
    data = synthetic_race()
    static = data.lane("static")
    toy = Lane(
        "retired-toy",
        replace(static.header, method="retired-toy"),
        [replace(r, method="retired-toy") for r in static.records],
    )
    data.lanes.append(toy)
    race = race_view(data)
    assert race.lane("retired-toy").spec is None and race.lane("retired-toy").settings is None
    page = handlers_on_a_stand_in_page().view(data, "status", None)
    assert "retired-toy" in page["lanes"] and "retired-toy" in page["table"]
    assert race_result(data, with_trace=False)["texts"]["retired-toy"] == race.lane("static").text
