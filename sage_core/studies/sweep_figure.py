"""The budget sweep as a figure (sage_core/studies/sweep.py): τ, tokens per target forward and decode-only speedup
against the node budget, one line per method, each cost-shaped method's mean chosen budget as one big marker
(sage-cost a star, SMART a hexagram); and the cost curve beside it. Pure functions of a `SweepResult` and a
`CostCurve`: nothing is computed here that they do not hold.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sage_core.cost_curve import CostCurve
from sage_core.methods import colour, is_method, method_spec, short_name
from sage_core.studies.sweep import SweepPoint, SweepResult

PANELS = (
    ("tau", "τ (accepted draft tokens per round)"),
    ("tokens_per_forward", "tokens per target forward"),
    ("speedup", "decode-only speedup × plain decoding"),
)


def sweep_figure(result: SweepResult, curve: CostCurve | None = None, title: str = "") -> go.Figure:
    """Three panels against the node budget (and a fourth, the cost curve, when one is given)."""
    panels = len(PANELS) + (curve is not None)
    titles = [name for _, name in PANELS] + (["verification cost (one-token steps)"] if curve else [])
    fig = make_subplots(rows=1, cols=panels, subplot_titles=titles, horizontal_spacing=0.06)
    methods = list(dict.fromkeys(p.method for p in result.points))
    for column, (field, _) in enumerate(PANELS, 1):
        for method in methods:
            points = [p for p in result.points if p.method == method]
            fig.add_trace(
                go.Scatter(
                    x=[p.budget for p in points],
                    y=[getattr(p, field) for p in points],
                    mode="lines+markers",
                    name=short_name(method),
                    legendgroup=method,
                    showlegend=column == 1,
                    line=dict(color=colour(method)),
                ),
                row=1,
                col=column,
            )
        for chosen in result.chosen:
            fig.add_trace(chosen_mark(chosen, field, column == 1), row=1, col=column)
        fig.update_xaxes(title_text="node budget", type="log", row=1, col=column)
    if curve is not None:
        steps = [v / curve.one_token_ms for v in curve.verify_ms]
        fig.add_trace(
            go.Scatter(
                x=list(curve.sizes),
                y=steps,
                mode="lines+markers",
                name="verify / one-token step",
                line=dict(color="#334155"),
            ),
            row=1,
            col=panels,
        )
        fig.update_xaxes(title_text="nodes verified", type="log", row=1, col=panels)
    heading = title or f"The budget sweep ({result.examples} examples, {result.repeats} timed repeat(s) each)"
    fig.update_layout(
        title=heading, height=380, width=360 * panels, template="plotly_white", legend=dict(orientation="h", y=-0.25)
    )
    return fig


def chosen_mark(chosen: SweepPoint, field: str, in_legend: bool) -> go.Scatter:
    """A choosing method's mean choice as one big marker in its colour, of its registry entry's symbol
    (`MethodSpec.chosen_marker`)."""
    return go.Scatter(
        x=[chosen.budget],
        y=[getattr(chosen, field)],
        mode="markers",
        name=f"{short_name(chosen.method)} (its mean choice)",
        legendgroup=chosen.method,
        showlegend=in_legend,
        marker=dict(
            symbol=method_spec(chosen.method).chosen_marker if is_method(chosen.method) else "star",
            size=16,
            color=colour(chosen.method),
            line=dict(color="black", width=1),
        ),
    )
