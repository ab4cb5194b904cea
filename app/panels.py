"""The five Plotly panels, as pure functions of round records.

1. `confidence_figure`: each SAGE round's draft entropy and confidence alpha,
   the depth D(alpha) and root width W(alpha) planned from them (and the root
   width drawn), and the acceptance window's mean wherever it closed.
2. `tree_figure` (`app/tree_panel.py`): one round's draft tree, tokens on the
   nodes, the accepted path and the bonus token highlighted, the candidates the policy cut greyed.
3. `shape_figure`: the tree shape per round (depth, root width, node count),
   SAGE against the static baseline.
4. `accepted_figure`: accepted length tau per round (bonus excluded).
5. `race_figure`: tokens against each side's own wall time: the race.

Every number drawn comes from the records handed in; nothing is computed
here that the records do not hold. The page's table of panels (`app/panel_table.py`) draws each from the
race's view. What the panels share (type, layout, colours) is `app/figure_style.py`; the picture of what
a pruned draft sees is `app/draft_view.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sage_core import RoundRecord
from sage_core.method_settings import SageConfig

from .draft_view import DIMMED, FRAME_HEIGHT, draft_view_caption, draft_view_image
from .figure_style import (
    BOTTOM_PX,
    CUT_REASONS,
    FONT,
    HEIGHT,
    LABEL_CHARS,
    LEGEND_WIDTH,
    MARGIN_BOTTOM,
    SLIDE_SCALE,
    SPEEDUP_LINE_PX,
    TEXT_PX,
    Lanes,
    SlideFigure,
    colour,
    cut_reason,
    decode_steps,
    drafting_lanes,
    empty_figure,
    for_slides,
    layout,
    legend_rows,
    method_line,
    method_marker,
    round_ticks,
    series_style,
    short_label,
)
from .palette import ACCEPTED, GREY, REJECTED, SERIES
from .tree_panel import pick_round, tree_figure, tree_layout
from .view import LaneFigures, RaceView

# -- 1. entropy and confidence -------------------------------------------------------


def confidence_figure(lanes: Lanes, replay: bool = False, sage: SageConfig | None = None) -> go.Figure:
    title = "① SAGE: entropy H, confidence α<br>→ tree depth D(α), root width W(α)"
    steps = [r for r in decode_steps(lanes.get("sage", ())) if r.alpha is not None]
    if not steps:
        message = "waiting for SAGE's first round" if "sage" in lanes else "SAGE is not in this race"
        return empty_figure(title, message, replay=replay)
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.4, 0.35, 0.25])
    _shape_rows(fig, steps)
    _window_row(fig, steps, sage or SageConfig())
    fig.update_yaxes(title_text="H, α", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="D, W", row=2, col=1, rangemode="tozero")
    fig.update_xaxes(title_text="round", row=3, col=1)
    round_ticks(fig, steps)
    return layout(fig, title, height=HEIGHT + 120, replay=replay)


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
        fig.add_annotation(  # (short: a third of a laptop's page holds it whole)
            x=0.0,  # (the row's left edge: a one-round race's x axis centres its round)
            xref="x domain",
            y=0.05,
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            text=f"their mean τ every {sage.window} rounds",
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
    fig.update_yaxes(title_text="τ", row=3, col=1, range=[0, top + 0.8], nticks=3)  # (0, 2, 4: a short row)


def _window_thresholds(fig: go.Figure, x: Sequence[int], sage: SageConfig) -> None:
    """Row 3's two thresholds: below the lower one D_max falls, above the upper one it rises, each named in the
    legend (a label on the row ran out of the figure on a laptop and over the ticks in the talk view)."""
    for name, level, dash in (
        (f"τ < {sage.lower_below:g}: D_max falls", sage.lower_below, "dash"),
        (f"τ > {sage.raise_above:g}: D_max rises", sage.raise_above, "dot"),
    ):
        fig.add_trace(
            go.Scatter(
                x=[min(x), max(x)],
                y=[level, level],
                mode="lines",
                name=name,
                line=dict(color=GREY, dash=dash, width=1.5),
                hoverinfo="name",
            ),
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
    drafting = {m: rs for m, rs in drafting_lanes(lanes).items() if rs}
    if not drafting:
        return empty_figure(title, "no draft trees yet", replay=replay)
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
    round_ticks(fig, [r for rs in drafting.values() for r in rs])
    return layout(fig, title, height=HEIGHT + 40, replay=replay)


# -- 4. accepted length per round -------------------------------------------------------------


def accepted_figure(lanes: Lanes, replay: bool = False) -> go.Figure:
    title = "④ Accepted draft tokens τ per round"
    drafting = {m: rs for m, rs in drafting_lanes(lanes).items() if rs}
    if not drafting:
        return empty_figure(title, "no verified rounds yet", replay=replay)
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
    round_ticks(fig, [r for rs in drafting.values() for r in rs])
    return layout(fig, title, replay=replay)


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
        return empty_figure(title, "the race has not started", replay=replay)
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
    fig.update_xaxes(title_text="seconds (prefill included)", rangemode="tozero")
    fig.update_yaxes(title_text="tokens", rangemode="tozero")
    layout(fig, title, replay=replay)
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
    """Under ⑤: the headline's speedups, one short line each ("÷ SD-Tree: 1.26×") under a line naming the
    lead (a line of 46 characters ran past a third of a 1440 px page: "(the headli")."""
    leads = {key.split("_over_")[0] for key in speedups}
    if len(leads) != 1:  # (one lead in every race; else each line names its own)
        return [
            f"{short_label(k.split('_over_')[0])} ÷ {short_label(k.split('_over_')[1])}: <b>{v:.2f}×</b>"
            for k, v in speedups.items()
        ]
    lines = [f"÷ {short_label(key.split('_over_')[1])}: <b>{value:.2f}×</b>" for key, value in speedups.items()]
    return [f"the headline's speedup, {short_label(leads.pop())}", *lines]


#: What importers read from here (the panels' shared style, the tree panel, the draft's view live in their own modules).
__all__ = [
    "ACCEPTED",
    "CUT_REASONS",
    "DIMMED",
    "FONT",
    "FRAME_HEIGHT",
    "LABEL_CHARS",
    "LEGEND_WIDTH",
    "REJECTED",
    "SLIDE_SCALE",
    "TEXT_PX",
    "SlideFigure",
    "accepted_figure",
    "colour",
    "confidence_figure",
    "cut_reason",
    "draft_view_caption",
    "draft_view_image",
    "for_slides",
    "lane_figures",
    "legend_rows",
    "pick_round",
    "race_figure",
    "shape_figure",
    "short_label",
    "speedup_lines",
    "speedups",
    "tree_figure",
    "tree_layout",
    "wall_clock_speedups",
    "width_note",
]
