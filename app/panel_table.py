"""The page's Plotly panels in one table: each row a name, a figure drawn from the race's view, the help
folded under it and where the page lays it out (its element id is `panel-<name>`).

The page (`app/page.py`) lays out a plot per row, the handlers fill each from `panel_figures`, `/race` and
MCP send them by name, and the export draws and films every one: a new panel is one row (`register_panel`)
and one figure function. The built-in rows are the story's five panels, ① to ⑤, registered below in that
order (`app/panels.py` draws them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Literal, overload

import plotly.graph_objects as go

from sage_core.registry import Registry

from .panels import (
    accepted_figure,
    confidence_figure,
    for_slides,
    race_figure,
    shape_figure,
    speedups,
    tree_figure,
)
from .view import RaceView

#: Where a panel goes on the page: beside the texts ("stage", and in the talk view), in the tree's place with its
#: lane and round controls and the explainer beside it ("tree"), or in the row of panels under them ("row").
Place = Literal["stage", "tree", "row"]


@dataclass(frozen=True)
class Focus:
    """The lane and round the tree panel and the explainer show: a lane's method (None: the view's
    `tree_method`) and a round (None: its latest)."""

    method: str | None = None
    round: int | None = None


@dataclass(frozen=True)
class Panel:
    """One panel as the page, the handlers, the API and the export see it."""

    name: str
    figure: Callable[[RaceView, Focus], go.Figure]  # drawn from the race's view (its focus's method is set)
    help: str  # what to look for in it: folded under it on the page
    place: Place = "row"

    @property
    def element_id(self) -> str:
        """Its plot's element id on the page and in the export's HTML."""
        return f"panel-{self.name}"

    @property
    def attribute(self) -> str:
        """Its plot on the page: `Page.plots[name]`, also the page's attribute `fig_<name>`."""
        return f"fig_{self.name}"


_PANELS: Registry[Panel] = Registry("panel", lambda panel: panel.name)


def register_panel(panel: Panel, *, built_in: bool = False) -> Panel:
    """Add a row to the table (after the others): the page, the handlers, the API and the export show it."""
    return _PANELS.add(panel, built_in=built_in)


def unregister_panel(name: str) -> None:
    """Remove a row `register_panel` added (the built-in ones stay)."""
    _PANELS.remove(name)


@contextmanager
def registered_panel(panel: Panel) -> Iterator[Panel]:
    """The panel in the table for the block's duration (tests)."""
    register_panel(panel)
    try:
        yield panel
    finally:
        unregister_panel(panel.name)


def panel_table() -> tuple[Panel, ...]:
    """Every panel, in the table's order (the built-in ones ① to ⑤ first)."""
    return tuple(_PANELS.values())


def placed(place: Place) -> list[Panel]:
    """The panels the page lays out at `place`, in the table's order."""
    return [panel for panel in panel_table() if panel.place == place]


class PanelNames(Sequence[str]):
    """Every panel's name in the table's order, read from the table as it is now (a row added later is in it)."""

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return tuple(_PANELS)[index]

    def __len__(self) -> int:
        return len(_PANELS)


PANEL_NAMES: Sequence[str] = PanelNames()


def panel_figures(race: RaceView, focus: Focus = Focus()) -> dict[str, go.Figure]:
    """Every panel by name, in the table's order, drawn from one view of the race (each downloads as a
    slide-sized PNG); the tree panel shows `focus` (default: the view's `tree_method`, its latest round)."""
    focused = replace(focus, method=focus.method or race.tree_method)
    return {panel.name: for_slides(panel.figure(race, focused), panel.name) for panel in panel_table()}


# -- the built-in rows: the story's five panels -------------------------------------------------


def _confidence(race: RaceView, focus: Focus) -> go.Figure:
    return confidence_figure(race.records, race.replay, race.sage_for(focus.method))


def _tree(race: RaceView, focus: Focus) -> go.Figure:
    method = focus.method or race.tree_method
    return tree_figure(race.records.get(method, ()), focus.round, race.token_texts, method, race.replay)


def _shapes(race: RaceView, focus: Focus) -> go.Figure:
    return shape_figure(race.records, race.replay)


def _accepted(race: RaceView, focus: Focus) -> go.Figure:
    return accepted_figure(race.records, race.replay)


def _race(race: RaceView, focus: Focus) -> go.Figure:
    return race_figure(race.records, race.replay, race.figures, speedups(race))


BUILTIN_PANELS = (
    Panel(
        "confidence",
        _confidence,
        "H is the entropy of the draft's top-10 after the root, α = 1 − H / log 10 its confidence. A sure draft "
        "(α high) gets a deep, narrow tree: D(α) up, W(α) down; an unsure one a shallow, wide tree. Bottom row: "
        "when SAGE's window of recent rounds closes, its mean τ is compared with 2 and 3 to lower or raise D_max.",
        "stage",
    ),
    Panel(
        "tree",
        _tree,
        "One round's tree: green is the path the target accepted, orange its bonus token, grey the rejected "
        "nodes, and the greyed ✕ the candidates SAGE's rules cut (hover for the rule). Move the round slider, or "
        "press → to step a race one round at a time.",
        "tree",
    ),
    Panel(
        "shapes",
        _shapes,
        "Per round the tree's depth, root width and node count. The static tree is the same 25 nodes, at most 5 "
        "deep, every round; SAGE's tree follows α: deeper than 5 when the draft is sure, wider when it is not. Why "
        "one side won is in the race's account under the table: each side's depth and how often it accepted all "
        "of it, what reacting to the entropy bought against sage-frozen at SAGE's own mean α, the nodes and their "
        "cost.",
    ),
    Panel(
        "accepted",
        _accepted,
        "τ per round: how many draft tokens the target accepted. Watch SAGE's τ stay high on the template words "
        "the draft is sure of and dip on colours, counts and values, where it is not.",
    ),
    Panel(
        "race",
        _race,
        "Each line is one side's tokens against its own device-synchronised clock, prefill included: the steeper, "
        "the faster. A flat stretch is one round's time; a jump is what the round produced (the accepted draft "
        "tokens plus the target's bonus token).",
    ),
)
for _panel in BUILTIN_PANELS:
    register_panel(_panel, built_in=True)


__all__ = [
    "PANEL_NAMES",
    "Focus",
    "Panel",
    "panel_figures",
    "panel_table",
    "placed",
    "register_panel",
    "registered_panel",
    "unregister_panel",
]
