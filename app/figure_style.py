"""What every Plotly panel shares: its type size and font, its title and legend's room (`layout`), the
methods' colours, dashes and markers, the empty panel, the camera button's slide PNG, and the cut rules in words.

The panels themselves are in `app/panels.py` (①, ③, ④, ⑤) and `app/tree_panel.py` (②).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.io.json import to_json_plotly

from sage_core import RoundRecord
from sage_core.methods import ONE_PASS_OFF, LaneKey, drafts, look, specs

from .palette import Series
from .render import DOTS as COLOURS
from .render import SHORT as SHORT_LABELS

Lanes = Mapping[str, Sequence[RoundRecord]]

HEIGHT = 280  # a panel's plot area and axes; its title and legend get their own room on top
#: Every text in a panel is at least this large (legible from the back of a room; the talk view's promise).
TEXT_PX = 14
FONT = dict(family="Inter, system-ui, sans-serif", size=TEXT_PX, color="#1e293b")
SLIDE_SCALE = 3  # the camera button's PNG: 3x the on-screen size, readable on a slide
#: The most of a token's text a label reads (`display_token` shows at most 16 characters: the same label, found
#: in time linear in the label, not the text).
LABEL_CHARS = 64
#: The words of the cut rules every method shares (records.CUT_RULES); a method's own rules are its own
#: record's (`OwnRecord.cut_rules`: SMART's "cost"), read by `cut_reason`.
CUT_REASONS = {
    "width": "cut by width: its parent offered only its top W_l children",
    "threshold": "cut by threshold: cumulative probability ≤ θ_l",
    "budget": "cut by the node budget",
}


def cut_reason(rule: str) -> str:
    """A cut rule in words: a shared one's (`CUT_REASONS`), else the own record's of the method that adds it."""
    if rule in CUT_REASONS:
        return CUT_REASONS[rule]
    owned = (spec.record.cut_rules for spec in specs() if spec.record is not None)
    return next((words[rule] for words in owned if rule in words), rule)


class SlideFigure(go.Figure):
    """A figure whose camera button downloads a large PNG (Gradio passes the JSON's config to Plotly)."""

    slide_name = "sage-panel"

    def to_json(self, *args: Any, **kwargs: Any) -> str:
        data = self.to_plotly_json()
        data["config"] = {
            "displaylogo": False,
            "toImageButtonOptions": {"format": "png", "scale": SLIDE_SCALE, "filename": self.slide_name},
        }
        return to_json_plotly(data)


def for_slides(fig: go.Figure, name: str) -> SlideFigure:
    slide = SlideFigure(fig)
    slide.slide_name = f"sage-{name}"
    return slide


def short_label(method: str) -> str:
    return SHORT_LABELS.get(method, method)


#: How far a lane on another draft (the one-pass twin) is paled towards white: its method's hue, lighter.
TWIN_PALER = 0.45


def on_other_draft(method: str) -> bool:
    """Whether a lane ran on a draft other than the pair's own ("sage/one-pass": SAGE's one-pass twin)."""
    return bool(LaneKey.parse(str(method)).draft)


def paler(hex_colour: str, share: float = TWIN_PALER) -> str:
    """A "#rrggbb" colour moved `share` of the way to white."""
    rgb = [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * share):02x}" for c in rgb)


def colour(method: str) -> str:
    """A lane's colour: its method's, paler on another draft (a twin is told apart by more than its marker)."""
    base = COLOURS.get(method, "#334155")
    return paler(base) if on_other_draft(method) and base.startswith("#") and len(base) == 7 else base


def method_line(method: str, width: float = 2.5, shape: str = "linear") -> dict[str, Any]:
    """A method's line: its colour and its own dash (the second cue beside colour); a twin on another draft
    dotted (dash-dotted where its method's own line is dotted), in its method's paler colour; the one-pass twin with
    the target's features off long-dashed (long-dash-dotted), told apart from the one with them on."""
    dash = look(method).dash
    if on_other_draft(method):
        dash = "dashdot" if dash == "dot" else "dot"
    if LaneKey.parse(str(method)).draft == ONE_PASS_OFF:  # the twin with the target's features off: its own dash
        dash = "longdashdot" if dash == "dot" else "longdash"
    return dict(color=colour(method), dash=dash, width=width, shape=shape)


def method_marker(method: str, size: int = 7) -> dict[str, Any]:
    return dict(color=colour(method), symbol=look(method).marker, size=size)


def series_style(series: Series, shape: str = "linear") -> dict[str, Any]:
    """A panel ① series' line and marker: colour, dash and marker symbol."""
    return dict(
        line=dict(color=series.colour, dash=series.dash, width=2.5, shape=shape),
        marker=dict(color=series.colour, symbol=series.marker, size=8),
    )


#: The width a panel's legend is counted for: the narrowest plot area a panel gets (a third of a 1440 px page, or a
#: phone's width, less the margins); wider panels keep a little room to spare, none has its legend over its title.
LEGEND_WIDTH = 200
TITLE_LINE_PX = 22
#: Below a panel's plot: the margin for its axis's title (px), where panel ⑤'s speed-ups start, each line's height.
MARGIN_BOTTOM = 48
BOTTOM_PX = 52
SPEEDUP_LINE_PX = 20
LEGEND_ROW_PX = 30  # (Plotly draws a row of 14 px entries with their markers about 30 px tall)


def legend_rows(fig: go.Figure) -> int:
    """How many rows the horizontal legend takes at `LEGEND_WIDTH` (about 9 px a character, 50 per entry)."""
    names = [t.name for t in fig.data if t.name and t.showlegend is not False]
    if not names:
        return 0
    rows, used = 1, 0
    for name in names:
        width = 50 + 9 * len(name)
        if used and used + width > LEGEND_WIDTH:
            rows, used = rows + 1, 0
        used += width
    return rows


def layout(fig: go.Figure, title: str, height: int = HEIGHT, replay: bool = False) -> go.Figure:
    """Title lines on top, the legend's rows below them, then the plot: the top margin holds both, so
    neither overlaps the other (a replay's title says so on a line of its own)."""
    if replay:
        title += "<br><span style='color:#8a5a00;font-size:14px'>(replay) a recorded race, not run now</span>"
    rows = legend_rows(fig)
    top = 24 + TITLE_LINE_PX * (title.count("<br>") + 1) + LEGEND_ROW_PX * rows
    fig.update_layout(
        title=dict(
            text=title,
            x=0.01,
            xanchor="left",
            y=1.0,
            pad=dict(t=16),
            yref="container",
            yanchor="top",
            font=dict(size=TEXT_PX + 2),
        ),
        height=height + top,
        margin=dict(l=56, r=16, t=top, b=MARGIN_BOTTOM),
        template="plotly_white",
        font=FONT,
        showlegend=rows > 0,
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0.0, font=dict(size=TEXT_PX)),
        hovermode="closest",
    )
    return fig


def round_ticks(fig: go.Figure, steps: Sequence[RoundRecord]) -> None:
    """Whole-number round ticks (plotly would show 1.5 on a short run)."""
    last = max((r.round for r in steps), default=1)
    fig.update_xaxes(dtick=1 if last <= 20 else None, tick0=0)


def empty_figure(title: str, message: str, height: int = HEIGHT, replay: bool = False) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font=dict(size=TEXT_PX))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return layout(fig, title, height, replay)


def decode_steps(records: Sequence[RoundRecord]) -> list[RoundRecord]:
    return [r for r in records if r.phase == "decode"]


def drafting_lanes(lanes: Lanes) -> dict[str, list[RoundRecord]]:
    """The lanes that draft trees (plain decoding has none), with their rounds."""
    return {m: decode_steps(rs) for m, rs in lanes.items() if drafts(m)}
