"""The five Plotly panels, as pure functions of round records.

1. `confidence_figure`: each SAGE round's draft entropy and confidence alpha,
   the depth D(alpha) and root width W(alpha) planned from them (and the root
   width drawn), and the acceptance window's mean wherever it closed.
2. `tree_figure`: one round's draft tree, tokens on the nodes, the accepted
   path and the bonus token highlighted, the candidates the policy cut greyed.
3. `shape_figure`: the tree shape per round (depth, root width, node count),
   SAGE against the static baseline.
4. `accepted_figure`: accepted length tau per round (bonus excluded).
5. `race_figure`: tokens against each side's own wall time: the race.

Every number drawn comes from the records handed in; nothing is computed
here that the records do not hold. The page's table of panels (`app/panel_table.py`) draws each from the
race's view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go
from PIL import Image
from plotly.io.json import to_json_plotly
from plotly.subplots import make_subplots

from sage_core import Media, RoundRecord, RunHeader
from sage_core.media import thumbnail
from sage_core.method_settings import SageConfig
from sage_core.methods import drafts, look, specs
from sage_core.models import VisualBox

from .palette import ACCEPTED, BONUS, CUT, GREY, REJECTED, SERIES, Series
from .render import DOTS as COLOURS
from .render import SHORT as SHORT_LABELS
from .render import display_token
from .view import LaneFigures, RaceView

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


def colour(method: str) -> str:
    return COLOURS.get(method, "#334155")


def method_line(method: str, width: float = 2.5, shape: str = "linear") -> dict[str, Any]:
    """A method's line: its colour and its own dash (the second cue beside colour)."""
    return dict(color=colour(method), dash=look(method).dash, width=width, shape=shape)


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
LEGEND_ROW_PX = 22


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


def _layout(fig: go.Figure, title: str, height: int = HEIGHT, replay: bool = False) -> go.Figure:
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


def _round_ticks(fig: go.Figure, steps: Sequence[RoundRecord]) -> None:
    """Whole-number round ticks (plotly would show 1.5 on a short run)."""
    last = max((r.round for r in steps), default=1)
    fig.update_xaxes(dtick=1 if last <= 20 else None, tick0=0)


def _empty(title: str, message: str, height: int = HEIGHT, replay: bool = False) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font=dict(size=TEXT_PX))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, title, height, replay)


def _decode_steps(records: Sequence[RoundRecord]) -> list[RoundRecord]:
    return [r for r in records if r.phase == "decode"]


def _drafting(lanes: Lanes) -> dict[str, list[RoundRecord]]:
    """The lanes that draft trees (plain decoding has none), with their rounds."""
    return {m: _decode_steps(rs) for m, rs in lanes.items() if drafts(m)}


# -- 1. entropy and confidence -------------------------------------------------------


def confidence_figure(lanes: Lanes, replay: bool = False, sage: SageConfig | None = None) -> go.Figure:
    title = "① SAGE: entropy H, confidence α<br>→ tree depth D(α), root width W(α)"
    steps = [r for r in _decode_steps(lanes.get("sage", ())) if r.alpha is not None]
    if not steps:
        message = "waiting for SAGE's first round" if "sage" in lanes else "SAGE is not in this race"
        return _empty(title, message, replay=replay)
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.4, 0.35, 0.25])
    _shape_rows(fig, steps)
    _window_row(fig, steps, sage or SageConfig())
    fig.update_yaxes(title_text="H, α", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="D, W", row=2, col=1, rangemode="tozero")
    fig.update_xaxes(title_text="round", row=3, col=1)
    _round_ticks(fig, steps)
    return _layout(fig, title, height=HEIGHT + 120, replay=replay)


def _shape_rows(fig: go.Figure, steps: Sequence[RoundRecord]) -> None:
    """Rows 1 and 2: H and α per round; the planned D(α) and W(α), the root's drawn width, and D_max."""
    x = [r.round for r in steps]
    planned = [r for r in steps if r.planned_depth is not None]
    px = [r.round for r in planned]
    lines = (  # (x, y, name, style, row), in the legend's order
        (x, [r.entropy for r in steps], "entropy H (nats)", series_style(SERIES["entropy"]), 1),
        (x, [r.alpha for r in steps], "confidence α", series_style(SERIES["alpha"]), 1),
        (px, [r.planned_depth for r in planned], "D(α)", series_style(SERIES["depth"], "hv"), 2),
        (px, [r.planned_width for r in planned], "W(α)", series_style(SERIES["width"], "hv"), 2),
    )
    for xs, ys, name, style, row in lines:
        fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="lines+markers", **style), row=row, col=1)
    fig.add_trace(
        go.Scatter(
            x=px,
            y=[r.root_width for r in planned],
            name="root width",
            mode="markers",
            marker=dict(color=SERIES["width"].colour, symbol="square-open", size=12, line=dict(width=2)),
            hovertext=[width_note(r) for r in planned],
            hoverinfo="text",
        ),
        row=2,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[r.depth_max for r in steps],
            name="D_max",
            mode="lines",
            line=dict(color=SERIES["depth_max"].colour, dash="dot", shape="hv", width=1.5),
        ),
        row=2,
        col=1,
    )


def width_note(record: RoundRecord) -> str:
    """Why the root's drawn width differs from the planned W(α): its candidates cut by threshold or budget."""
    planned, drawn = record.planned_width, record.root_width
    head = f"round {record.round}: W(α) planned {planned}, root width drawn {drawn}"
    if planned is None or drawn >= planned:
        return head
    rules = [rule for parent, rule in zip(record.cut_parents, record.cut_rules, strict=True) if parent == -1]
    because = ", ".join(f"{rules.count(rule)} by {rule}" for rule in ("threshold", "budget") if rule in rules)
    return f"{head}<br>{planned - drawn} of the root's top-{planned} cut: {because or 'see the explainer'}"


def _window_row(fig: go.Figure, steps: Sequence[RoundRecord], sage: SageConfig) -> None:
    """Row 3: the acceptance window's mean when it closed, against the paper's thresholds, and each D_max move."""
    closed = [r for r in steps if r.window_mean is not None]
    x = [r.round for r in steps]
    _window_thresholds(fig, x, sage)
    if not closed:
        fig.add_annotation(  # left, under the thresholds' labels (both on the right): no overlap on short races
            x=min(x),
            y=0.05,
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            text=f"each {sage.window} rounds: their mean τ appears here",
            font=dict(size=TEXT_PX, color="#475569"),
            row=3,
            col=1,
        )
    window = SERIES["window"]
    fig.add_trace(
        go.Scatter(
            x=[r.round for r in closed],
            y=[r.window_mean for r in closed],
            mode="markers+text",
            cliponaxis=False,  # a label at the edge is drawn whole (the HTML export cut "apes", "<|in")
            name="window mean τ",
            showlegend=False,
            marker=dict(size=11, color=window.colour, symbol=window.marker),
            text=[_move_text(r) for r in closed],
            textposition="top center",
            textfont=dict(size=TEXT_PX),
            hovertext=[
                f"round {r.round}: mean τ of the last {sage.window} rounds = {r.window_mean:.2f}<br>"
                f"(< {sage.lower_below:g} lowers D_max, > {sage.raise_above:g} raises it) → "
                f"D_max {r.depth_max} → {r.next_depth_max}"
                for r in closed
            ],
            hoverinfo="text",
        ),
        row=3,
        col=1,
    )
    top = max([sage.raise_above + 1, *(r.window_mean or 0.0 for r in closed)])
    # (a title as short as the row: a talk view's box gives this row about 40 px, and "mean τ" ran into "D, W")
    fig.update_yaxes(title_text="τ", row=3, col=1, range=[0, top + 0.8])


def _window_thresholds(fig: go.Figure, x: Sequence[int], sage: SageConfig) -> None:
    """Row 3's two thresholds: below the lower one D_max falls, above the upper one it rises (one label above
    the upper line, so that a short race's row has room for it and the window note under the lines)."""
    for level, name, dash in (
        (sage.lower_below, "below: D_max falls", "dash"),
        (sage.raise_above, "above: D_max rises", "dot"),
    ):
        fig.add_trace(
            go.Scatter(
                x=[min(x), max(x)],
                y=[level, level],
                mode="lines",
                name=f"{level:g}: {name}",
                line=dict(color=GREY, dash=dash, width=1.5),
                hoverinfo="name",
                showlegend=False,
            ),
            row=3,
            col=1,
        )
    fig.add_annotation(
        x=max(x),
        y=sage.raise_above,
        text=f"- - {sage.lower_below:g} (below: D_max falls) · ··· {sage.raise_above:g} (above: D_max rises)",
        showarrow=False,
        xanchor="right",
        yanchor="bottom",
        font=dict(size=TEXT_PX, color="#475569"),
        row=3,
        col=1,
    )


def _move_text(record: RoundRecord) -> str:
    if record.next_depth_max is None or record.depth_max is None or record.next_depth_max == record.depth_max:
        return "D_max holds"
    return f"D_max {record.depth_max}→{record.next_depth_max}"


# -- 3. tree shape per round ------------------------------------------------------------


SHAPE_ROWS = (("depth", "depth"), ("root_width", "root width"), ("node_count", "nodes"))


def shape_figure(lanes: Lanes, replay: bool = False) -> go.Figure:
    title = "③ Tree shape per round"
    drafting = {m: rs for m, rs in _drafting(lanes).items() if rs}
    if not drafting:
        return _empty(title, "no draft trees yet", replay=replay)
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    for method, steps in drafting.items():
        x = [r.round for r in steps]
        for row, (attribute, _) in enumerate(SHAPE_ROWS, 1):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=[getattr(r, attribute) for r in steps],
                    mode="lines+markers",
                    name=short_label(method),
                    legendgroup=method,
                    showlegend=row == 1,
                    line=method_line(method, 2.5, "hv"),
                    marker=method_marker(method, 6),
                ),
                row=row,
                col=1,
            )
    for row, (_, label) in enumerate(SHAPE_ROWS, 1):
        fig.update_yaxes(title_text=label, row=row, col=1, rangemode="tozero")
    fig.update_xaxes(title_text="round", row=3, col=1)
    _round_ticks(fig, [r for rs in drafting.values() for r in rs])
    return _layout(fig, title, height=HEIGHT + 40, replay=replay)


# -- 2. one round's draft tree -------------------------------------------------------------


def tree_layout(parents: Sequence[int]) -> list[float]:
    """A y position per node: leaves one apart in rank order, parents centred on their children."""
    children: dict[int, list[int]] = {}
    for node, parent in enumerate(parents):
        children.setdefault(parent, []).append(node)
    y: dict[int, float] = {}
    next_leaf = 0.0

    def place(node: int) -> float:
        nonlocal next_leaf
        kids = children.get(node, [])
        if not kids:
            y[node] = next_leaf
            next_leaf += 1.0
        else:
            placed = [place(kid) for kid in kids]
            y[node] = (placed[0] + placed[-1]) / 2
        return y[node]

    place(-1)
    return [y[node] for node in range(len(parents))] + [y[-1]]


def pick_round(records: Sequence[RoundRecord], number: int | None) -> RoundRecord | None:
    """The round numbered `number` (the latest one when None or out of range)."""
    steps = _decode_steps(records)
    if not steps:
        return None
    if number is not None:
        for record in steps:
            if record.round == number:
                return record
    return steps[-1]


@dataclass(frozen=True)
class _TreePlot:
    """One round's tree laid out for the panel: every node's, cut candidate's and the bonus token's place."""

    record: RoundRecord
    token_texts: Mapping[int, str]
    cut: list[tuple[int, int, float, str]]  # (parent, token, draft p, rule) of each candidate the policy cut
    ys: list[float]  # nodes, cut candidates, the bonus when emitted, the root last
    last: int  # the last accepted node (-1: the root), where the bonus hangs
    bonus_emitted: bool

    @classmethod
    def of(cls, record: RoundRecord, token_texts: Mapping[int, str]) -> _TreePlot:
        # The bonus token (the target's own next token) is drawn as one more child of the last accepted node;
        # it is emitted unless the output ended inside the accepted path (end-of-sequence, token limit).
        last = record.accepted_nodes[-1] if record.accepted_nodes else -1
        bonus_emitted = len(record.new_tokens) > record.draft_token_count
        # Candidates the policy cut are drawn greyed beside the kept nodes (leaves after them).
        cut = list(zip(record.cut_parents, record.cut_tokens, record.cut_probs, record.cut_rules, strict=True))
        ys = tree_layout((*record.tree.parents, *(c[0] for c in cut), *((last,) if bonus_emitted else ())))
        return cls(record, token_texts, cut, ys, last, bonus_emitted)

    def pos(self, node: int) -> tuple[float, float]:
        return (0.0, self.ys[-1]) if node == -1 else (float(self.record.tree.depths[node]), self.ys[node])

    def text_of(self, token: int | None) -> str:
        """A token's text as far as a label shows it (`LABEL_CHARS`: a forged trace's token may be a megabyte)."""
        if token is None:
            return "?"
        return self.token_texts.get(token, f"#{token}")[:LABEL_CHARS]

    def cut_x(self) -> list[float]:
        depths = self.record.tree.depths
        return [0.0 if parent == -1 else float(depths[parent]) for parent, *_ in self.cut]


def tree_figure(
    records: Sequence[RoundRecord],
    step: int | None,
    token_texts: Mapping[int, str],
    method: str = "sage",
    replay: bool = False,
) -> go.Figure:
    label = short_label(method)
    if step == 0:
        return _empty(f"② Draft tree ({label})", "round 0 is the prefill: no draft tree", replay=replay)
    record = pick_round(records, step)
    if record is None or not record.tree_tokens:
        return _empty(f"② Draft tree ({label})", "no draft tree yet", replay=replay)
    tree = record.tree
    before = {r.round: r for r in records}.get(record.round - 1)
    root_token = before.new_tokens[-1] if before is not None and before.new_tokens else None
    plot = _TreePlot.of(record, token_texts)
    fig = go.Figure()
    _edge_traces(fig, plot)
    _cut_traces(fig, plot)
    _node_trace(fig, plot)
    bonus_x = _root_and_bonus_traces(fig, plot, root_token)
    leaves = max(plot.ys) + 1 if plot.ys else 1
    height = int(min(900, max(HEIGHT + 60, 120 + 24 * leaves)))
    deepest = max([tree.depth, bonus_x, *(x + 1 for x in plot.cut_x())])
    fig.update_xaxes(
        title_text="depth", tickvals=list(range(int(deepest) + 1)), range=[-1.6, deepest + 1.4], zeroline=False
    )
    fig.update_yaxes(visible=False, autorange="reversed")
    ending = (
        " + <span style='color:#8a5a00'>bonus</span>"
        if plot.bonus_emitted
        else f"<br>ended ({record.finish_reason}): no bonus"
    )
    title = (
        f"② {label} draft tree, round {record.round}:<br>{len(tree)} nodes, depth {tree.depth}, "
        f"<span style='color:#00573f'>accepted {record.accepted_length}</span>{ending}"
    )
    return _layout(fig, title, height=height, replay=replay)


def _edge_traces(fig: go.Figure, plot: _TreePlot) -> None:
    """The tree's edges: the rejected ones thin, the accepted path thick."""
    accepted = set(plot.record.accepted_nodes)
    for group, edge_colour, width in ((False, REJECTED, 1.2), (True, ACCEPTED, 3.5)):
        xs: list[float | None] = []
        ys_line: list[float | None] = []
        for node, parent in enumerate(plot.record.tree.parents):
            if (node in accepted) == group:
                (x0, y0), (x1, y1) = plot.pos(parent), plot.pos(node)
                xs += [x0, x1, None]
                ys_line += [y0, y1, None]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys_line,
                mode="lines",
                line=dict(color=edge_colour, width=width),
                hoverinfo="skip",
                showlegend=False,
            )
        )


def _cut_traces(fig: go.Figure, plot: _TreePlot) -> None:
    """The candidates the policy cut, greyed and dotted beside the kept nodes."""
    if not plot.cut:
        return
    cut, cut_x = plot.cut, plot.cut_x()
    tree_size = len(plot.record.tree)
    cut_ys = plot.ys[tree_size : tree_size + len(cut)]
    xs: list[float | None] = []
    ys_line: list[float | None] = []
    for (parent, *_), x, y in zip(cut, cut_x, cut_ys, strict=True):
        (x0, y0) = plot.pos(parent)
        xs += [x0, x + 1, None]
        ys_line += [y0, y, None]
    fig.add_trace(
        go.Scatter(
            x=xs, y=ys_line, mode="lines", line=dict(color=CUT, width=1, dash="dot"), hoverinfo="skip", showlegend=False
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[x + 1 for x in cut_x],
            y=cut_ys,
            mode="markers+text",
            cliponaxis=False,  # a label at the edge is drawn whole (the HTML export cut "apes", "<|in")
            name="cut",
            text=[display_token(plot.text_of(token), 10) for _, token, _, _ in cut],
            textposition="middle right",
            textfont=dict(size=TEXT_PX, color=CUT),
            marker=dict(size=7, color="white", symbol="x-thin-open", line=dict(width=1.5, color=CUT)),
            hovertext=[
                f"not in the tree: token {display_token(plot.text_of(token))!s} (id {token})<br>"
                f"draft p = {prob:.3f}<br>{cut_reason(rule)}"
                for _, token, prob, rule in cut
            ],
            hoverinfo="text",
            showlegend=False,
        )
    )


def _node_trace(fig: go.Figure, plot: _TreePlot) -> None:
    """The drafted nodes: accepted ones large and green, with each node's numbers on hover."""
    record, tree = plot.record, plot.record.tree
    depths, cumulative, accepted = tree.depths, tree.cumulative_probs(), set(record.accepted_nodes)
    nodes = range(len(tree))
    tried = dict(zip(record.tried_nodes, record.accept_probs, strict=True))  # sampling only

    def outcome(n: int) -> str:
        verdict = "accepted by the target" if n in accepted else "rejected"
        if not tried:
            return verdict
        return f"{verdict} (acceptance probability {tried[n]:.3f})" if n in tried else "not tried"

    hover = [
        f"node {n} · depth {depths[n]}<br>token {display_token(plot.text_of(tree.tokens[n]))!s} (id {tree.tokens[n]})"
        f"<br>draft p = {tree.draft_probs[n]:.3f} · cumulative {cumulative[n]:.3f}"
        f"<br>{outcome(n)}"
        for n in nodes
    ]
    fig.add_trace(
        go.Scatter(
            x=[depths[n] for n in nodes],
            y=[plot.ys[n] for n in nodes],
            mode="markers+text",
            cliponaxis=False,  # a label at the edge is drawn whole (the HTML export cut "apes", "<|in")
            text=[display_token(plot.text_of(tree.tokens[n]), 10) for n in nodes],
            textposition=[_label_side(plot, n) for n in nodes],
            textfont=dict(
                size=[TEXT_PX + 2 if n in accepted else TEXT_PX for n in nodes],
                color=["#00573f" if n in accepted else "#334155" for n in nodes],
            ),
            marker=dict(
                size=[15 if n in accepted else 9 for n in nodes],
                color=[ACCEPTED if n in accepted else REJECTED for n in nodes],
                symbol=["circle" if n in accepted else "circle-open-dot" for n in nodes],
                line=dict(width=1.5, color=[ACCEPTED if n in accepted else "#64748b" for n in nodes]),
            ),
            hovertext=hover,
            hoverinfo="text",
            name="draft nodes",
            showlegend=False,
        )
    )


def _label_side(plot: _TreePlot, node: int) -> str:
    """Where a node's label goes: right of it, and on the accepted path on the side its next step (the
    next accepted node, or the bonus) does not leave by, so the path's line never runs through a label."""
    path = list(plot.record.accepted_nodes)
    if node not in path:
        return "middle right"
    at = path.index(node)
    if at + 1 < len(path):
        next_y = plot.ys[path[at + 1]]
    elif plot.bonus_emitted:
        next_y = plot.ys[-2]
    else:
        return "middle right"
    return "top right" if next_y > plot.ys[node] else "bottom right"  # (the y axis runs downwards)


def _root_and_bonus_traces(fig: go.Figure, plot: _TreePlot, root_token: int | None) -> float:
    """The root (the last committed token) and, when emitted, the bonus token; the bonus's depth."""
    root_text = display_token(plot.text_of(root_token), 10) if root_token is not None else "root"
    fig.add_trace(
        go.Scatter(
            x=[0],
            y=[plot.ys[-1]],
            mode="markers+text",
            cliponaxis=False,  # a label at the edge is drawn whole (the HTML export cut "apes", "<|in")
            text=[root_text],
            textposition="middle left",
            marker=dict(size=14, color="#1e293b", symbol="square"),
            hovertext=["root: the last committed token"],
            hoverinfo="text",
            showlegend=False,
        )
    )
    (lx, ly) = plot.pos(plot.last)
    bonus_x, bonus_y, bonus = lx + 1.0, plot.ys[-2], plot.record.bonus_token
    if plot.bonus_emitted:
        fig.add_trace(
            go.Scatter(
                x=[lx, bonus_x],
                y=[ly, bonus_y],
                mode="lines",
                line=dict(color=BONUS, width=2.5, dash="dot"),
                hoverinfo="skip",
                showlegend=False,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[bonus_x],
                y=[bonus_y],
                mode="markers+text",
                cliponaxis=False,  # a label at the edge is drawn whole (the HTML export cut "apes", "<|in")
                text=[display_token(plot.text_of(bonus), 10)],
                textposition="middle right",
                textfont=dict(size=TEXT_PX + 2, color="#8a5a00"),
                marker=dict(size=16, color=BONUS, symbol="diamond"),
                name="bonus",
                hoverinfo="text",
                showlegend=False,
                hovertext=[f"bonus: the target's own token after the accepted path, id {bonus}"],
            )
        )
    return bonus_x


# -- 4. accepted length per round -------------------------------------------------------------


def accepted_figure(lanes: Lanes, replay: bool = False) -> go.Figure:
    title = "④ Accepted draft tokens τ per round"
    drafting = {m: rs for m, rs in _drafting(lanes).items() if rs}
    if not drafting:
        return _empty(title, "no verified rounds yet", replay=replay)
    fig = go.Figure()
    for method, steps in drafting.items():
        mean = sum(r.accepted_length for r in steps) / len(steps)
        fig.add_trace(
            go.Scatter(
                x=[r.round for r in steps],
                y=[r.accepted_length for r in steps],
                mode="lines+markers",
                name=f"{short_label(method)} (mean τ {mean:.2f})",
                line=method_line(method),
                marker=method_marker(method),
            )
        )
    fig.update_xaxes(title_text="round")
    fig.update_yaxes(title_text="accepted tokens τ", rangemode="tozero", dtick=1)
    _round_ticks(fig, [r for rs in drafting.values() for r in rs])
    return _layout(fig, title, replay=replay)


# -- 5. the race: tokens against time ------------------------------------------------------------


def race_figure(
    lanes: Lanes,
    replay: bool = False,
    figures: Mapping[str, LaneFigures] | None = None,
    speedups: Mapping[str, float] | None = None,
) -> go.Figure:
    """Tokens against time, each side's rate in its legend and the lead's speedups below (`speedups`, keyed
    "lead_over_other": the headline's, from the race's view); `figures`: the sides' figures when the race's
    view has them (else read off `lanes`)."""
    title = "⑤ The race: tokens against time"
    present = {m: rs for m, rs in lanes.items() if rs}
    if not present:
        return _empty(title, "the race has not started", replay=replay)
    figures = figures if figures is not None else lane_figures(present)
    fig = go.Figure()
    for method, records in present.items():
        fig.add_trace(
            go.Scatter(
                x=[0.0, *(r.total_seconds for r in records)],
                y=[0, *(r.total_tokens for r in records)],
                mode="lines+markers",
                line=method_line(method, 2.5, "hv"),
                marker=method_marker(method, 5),
                name=f"{short_label(method)}: {figures[method].tokens_per_second:.1f} tok/s",
            )
        )
    fig.update_xaxes(title_text="seconds (synchronised, prefill included)", rangemode="tozero")
    fig.update_yaxes(title_text="tokens", rangemode="tozero")
    _layout(fig, title, replay=replay)
    lines = speedup_lines(speedups or {})
    if lines:  # below the axis's title, off the lines (one line each: with every method they would cover them)
        under = BOTTOM_PX + SPEEDUP_LINE_PX * len(lines)
        fig.add_annotation(
            text="<br>".join(lines),
            xref="paper",
            yref="paper",
            x=0.0,
            y=-BOTTOM_PX / (HEIGHT - MARGIN_BOTTOM),  # (paper: the plot area's height)
            xanchor="left",
            yanchor="top",
            showarrow=False,
            align="left",
            font=dict(size=TEXT_PX + 1, color="#1e293b"),
        )
        fig.update_layout(height=fig.layout.height + under - MARGIN_BOTTOM, margin=dict(b=under))
    return fig


def lane_figures(lanes: Lanes) -> dict[str, LaneFigures]:
    """Each side's figures (the race's view has them already: `RaceView.figures`)."""
    return {m: LaneFigures.of(rs) for m, rs in lanes.items() if rs}


def keyed(lead: str | None, ratios: Mapping[str, float]) -> dict[str, float]:
    """Ratios of the lead over each other side, keyed "lead_over_other" (as `/race` sends them)."""
    return {f"{lead}_over_{m}": value for m, value in ratios.items()} if lead else {}


def speedups(race: RaceView) -> dict[str, float]:
    """The lead's speedup over each other side as the headline defines it (`RaceView.speedups`: the prefill
    charged once, the rounds at their median cost), keyed "lead_over_other"."""
    return keyed(race.headline_lead, race.speedups)


def wall_clock_speedups(race: RaceView) -> dict[str, float]:
    """The lead's tokens/s over each other side's as the clock measured them (load and all), keyed alike."""
    return keyed(race.lead, race.wall_speedups)


def speedup_lines(speedups: Mapping[str, float]) -> list[str]:
    lines = []
    for key, value in speedups.items():
        lead, other = key.split("_over_")
        lines.append(f"{short_label(lead)} ÷ {short_label(other)}: <b>{value:.2f}×</b> (the headline's speedup)")
    return lines


# -- what the draft sees (draft-side visual token pruning) --------------------------------------

DIMMED = 0.22  # brightness of a pruned patch
FRAME_HEIGHT = 150


def draft_view_image(media: Media, boxes: Sequence[VisualBox | None], kept: Sequence[int]) -> Image.Image:
    """The image, or each sampled frame side by side, with the visual tokens the draft did not read
    dimmed: each token's box (`VLM.visual_token_boxes`) is lit when the token is in `kept`."""
    media = thumbnail(media, FRAME_HEIGHT)  # shrunk first: an 8K frame is never turned to floats
    if media.kind == "image":
        assert media.image is not None
        frames = [np.asarray(media.image.convert("RGB"), dtype=np.float32)]
    else:
        assert media.frames is not None
        frames = [frame.astype(np.float32) for frame in media.frames]
    light: list[Any] = [np.ones(frame.shape[:2], dtype=np.float32) for frame in frames]
    covered = {f for box in boxes if box is not None for f in range(box[0], min(box[1], len(frames) - 1) + 1)}
    for f in covered:
        light[f][:] = DIMMED
    kept_set = set(kept)
    for index, box in enumerate(boxes):
        if box is None or index not in kept_set:
            continue
        first, last, x0, y0, x1, y1 = box
        for f in range(first, min(last, len(frames) - 1) + 1):
            height, width = light[f].shape[0], light[f].shape[1]
            light[f][round(y0 * height) : round(y1 * height), round(x0 * width) : round(x1 * width)] = 1.0
    tiles = []
    for frame, lit in zip(frames, light, strict=True):
        shown = Image.fromarray((frame * lit[..., None]).clip(0, 255).astype(np.uint8))
        width = max(1, round(shown.width * FRAME_HEIGHT / shown.height))
        tiles.append(shown.resize((width, FRAME_HEIGHT), Image.Resampling.NEAREST))
    sheet = Image.new("RGB", (sum(t.width for t in tiles) + 4 * (len(tiles) - 1), FRAME_HEIGHT), "white")
    x = 0
    for tile in tiles:
        sheet.paste(tile, (x, 0))
        x += tile.width + 4
    return sheet


def draft_view_caption(header: RunHeader | None) -> str:
    """The share of the visual tokens the draft read, from a run's header."""
    if header is None or header.kept_visual_indices is None or not header.visual_tokens:
        return "The draft reads every visual token (pruning off)."
    kept = len(header.kept_visual_indices)
    return (
        f"The draft reads {kept} of {header.visual_tokens} visual tokens ({kept / header.visual_tokens:.0%}; "
        f"pruning ratio {header.prune_ratio:g}); the target reads all of them. Dimmed: pruned patches."
    )
