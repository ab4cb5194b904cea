"""Panel ②: one round's draft tree, tokens on the nodes, the accepted path and the bonus token highlighted,
the candidates the policy cut greyed (a pure function of the round's record, like every panel)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from sage_core import RoundRecord

from .figure_style import HEIGHT, LABEL_CHARS, TEXT_PX, cut_reason, decode_steps, empty_figure, layout, short_label
from .palette import ACCEPTED, BONUS, CUT, REJECTED
from .render import display_token


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
    steps = decode_steps(records)
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
        return empty_figure(f"② Draft tree ({label})", "round 0 is the prefill: no draft tree", replay=replay)
    record = pick_round(records, step)
    if record is None or not record.tree_tokens:
        return empty_figure(f"② Draft tree ({label})", "no draft tree yet", replay=replay)
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
    unsure = least_sure_level(record)
    if unsure is not None:  # (the level to look at when stepping: shaded, and named in a line of the title)
        depth, p = unsure
        fig.add_vrect(x0=depth - 0.45, x1=depth + 0.45, fillcolor=UNSURE, opacity=0.35, layer="below", line_width=0)
        said = f"least sure at depth {depth} (shaded): its best guess p {p:.2f}"
        title += f"<br><span style='color:#8a5a00'>{said}</span>"
    return layout(fig, title, height=height, replay=replay)


#: The shade behind the level where the draft was least sure.
UNSURE = "#fcd34d"
#: A level whose best guess has at least this probability is sure (a tree sure at every level has no level shaded).
SURE = 0.95


def least_sure_level(record: RoundRecord) -> tuple[int, float] | None:
    """The depth whose best guess the draft gave the lowest probability (its conditional draft p, the largest
    among that level's nodes), and that probability; None for a tree of one level (nothing to compare) or one sure
    at every level (each best guess at `SURE` or more)."""
    tree = record.tree
    best: dict[int, float] = {}
    for node in range(len(tree)):
        depth = int(tree.depths[node])
        best[depth] = max(best.get(depth, 0.0), float(tree.draft_probs[node]))
    depth = min(best, key=lambda d: (best[d], d))
    return (depth, best[depth]) if len(best) > 1 and best[depth] < SURE else None


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
