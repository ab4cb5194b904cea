"""The teaching mode's explainer: one round, its formulas filled in with the numbers it used.

Renders a round the view explained (`view.explained_round`: sage_core.studies.explain's `RoundExplained`) as
HTML (the page's `#explain`). Every figure comes from the round's record or the run's SAGE settings; nothing
here computes a policy value of its own, and no study is imported here.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sage_core import RoundRecord
from sage_core.method_settings import SageConfig
from sage_core.methods import method_spec
from sage_core.policy import round_half_up

from .palette import CUT
from .panels import LABEL_CHARS, pick_round, short_label
from .render import display_token, forwards_text
from .view import LaneView, RaceView, RoundExplained, explained_round

TokenText = Callable[[int | None], str]

STYLE = """
<style>
#explain .ex { font: 14px/1.5 Inter, system-ui, sans-serif; color: #1e293b; overflow-x: auto; }
#explain .ex h4 { margin: 10px 0 4px; font-size: 15px; color: #334155; }
#explain .ex .f { font-family: ui-monospace, Menlo, monospace; font-size: 14px; }
#explain .ex .acc { color: #00573f; background: #d5f0e6; border-radius: 3px; padding: 0 2px; }
#explain .ex .bon { color: #6b4500; background: #fdecc0; border-radius: 3px; padding: 0 2px; font-weight: 700; }
#explain .ex table { border-collapse: collapse; margin: 2px 0 6px; }
#explain .ex td, #explain .ex th { padding: 1px 8px 1px 0; text-align: left; vertical-align: top; }
#explain .ex th { font-weight: 600; color: #475569; }
#explain .ex .bar { display: inline-block; height: 10px; background: #0072B2; border-radius: 2px; }
#explain .ex .muted { color: #64748b; }
</style>
"""


def explain_html(
    records: Sequence[RoundRecord],
    step: int | None,
    token_texts: Mapping[int, str],
    method: str,
    sage: SageConfig | None = None,
    replay: bool = False,
    settings: Any = None,
    note: str = "",
) -> str:
    """The explainer for the round `step` of one lane (the latest round when None); `settings`: the lane's
    own method's settings (its registry entry's sentence may name them); `note`: a line (HTML) under the
    round's heading (`forwards_note`)."""
    label = html.escape(short_label(method))
    if step == 0:
        return _box(f"<b>Step 0, {label}</b>: the prefill. The target reads the prompt and picks the first token.")
    record = pick_round(records, step)
    if record is None:
        return _box(f"<b>{label}</b>: no round yet. Start a race (or a replay) and pick a round.")
    explained = explained_round(record, sage or SageConfig(), settings)

    def text(token: int | None) -> str:
        if token is None:
            return "?"
        return html.escape(display_token(token_texts.get(token, f"#{token}")[:LABEL_CHARS], 14))

    source = " <span class='muted'>(from the trace)</span>" if replay else ""
    parts = [f"<b>Round {explained.round}, {label}</b>{source}", note]
    parts += _policy(explained, text)
    parts += _verification(explained, text)
    return _box("".join(parts))


def explained_html(race: RaceView, method: str | None = None, step: int | None = None) -> str:
    """The explainer for one lane of the race's view (default: its `tree_method`) at round `step` (None: the
    latest), with the settings that lane's header records."""
    method = method or race.tree_method
    lane = race.lane(method)
    if lane is None:
        return explain_html((), step, race.token_texts, method, SageConfig(), race.replay)
    note = forwards_note(race, lane)
    return explain_html(lane.records, step, race.token_texts, method, lane.sage, race.replay, lane.settings, note=note)


def forwards_note(race: RaceView, lane: LaneView) -> str:
    """Beside the same method on the other draft: both lanes' draft forwards a round over the race so far, the
    sequential draft's against the one-pass draft's ("16 against 1"); "" for a lane raced on one draft."""
    twin = race.twin(lane)
    if (
        twin is None
        or lane.figures is None
        or twin.figures is None
        or not (lane.figures.rounds and twin.figures.rounds)
    ):
        return ""
    one_pass, sequential = (lane, twin) if lane.draft else (twin, lane)
    assert one_pass.figures is not None and sequential.figures is not None
    many = forwards_text(sequential.figures.draft_forwards_per_round)
    one = forwards_text(one_pass.figures.draft_forwards_per_round)
    return (
        f"<p class='muted'>Draft forwards a round over this race, {html.escape(short_label(lane.method))}: <b>{many}"
        f"</b> with the sequential draft against <b>{one}</b> with the one-pass draft.</p>"
    )


def _box(body: str) -> str:
    return f"{STYLE}<div class='ex'>{body}</div>"


def _policy(e: RoundExplained, text: TokenText) -> list[str]:
    if e.kind == "plain":
        return ["<p>Plain decoding: one target forward, one new token. No draft, no tree.</p>"]
    out: list[str] = []
    if e.description:  # the method's own sentence (its registry entry's)
        out.append(f"<p>{html.escape(e.description)}</p>")
    if e.drafting:  # its draft forwards: one a level, or one for the block
        out.append(f"<p class='muted'>{html.escape(e.drafting)}</p>")
    out += _top_table(e, text)
    if e.explainer == "rerank":
        return out + _dynamic(e, text)
    if e.explainer == "tree":
        return out
    if e.explainer == "fixed":
        spec = method_spec(e.method)
        name = f"{spec.short}: {spec.subtitle}"
        out.append(
            f"<p>Fixed tree ({name}, {e.fixed_tree_nodes} nodes): the same shape every round, "
            "whatever the draft's confidence.</p>"
        )
        return out
    out += _confidence(e)
    if e.kind == "sage-first":
        out.append(
            f"<p>SAGE's first round uses the static tree ({e.fixed_tree_nodes} nodes), as in the paper; "
            "from the next round α shapes the tree.</p>"
        )
        return out
    out += _shape(e)
    if e.levels:
        out += _levels(e)
    elif e.kind == "sage-template":
        out.append("<p class='muted'>Template shape: the tree was planned from the previous round's draft.</p>")
    if e.cut:
        shown = ", ".join(
            f"<span style='color:{CUT}'>{text(c.token)}</span> (l{c.level}, p {c.prob:.2f}, {c.rule})"
            for c in e.cut[:8]
        )
        out.append(f"<div class='muted'>Best candidates cut: {shown}</div>")
    return out


def _top_table(e: RoundExplained, text: TokenText) -> list[str]:
    """The draft's top-k after the root, as bars."""
    if not e.top_probs:
        return []
    out = [f"<h4>The draft's top-{len(e.top_probs)} after the root</h4><table>"]
    top = max(e.top_probs)
    places = e.places  # enough digits to recompute H from the printed numbers
    for token, prob in zip(e.top_tokens, e.top_probs, strict=True):
        width = int(160 * prob / top) if top > 0 else 0
        out.append(
            f"<tr><td class='f'>{text(token)}</td><td><span class='bar' style='width:{width}px'></span></td>"
            f"<td class='f'>{prob:.{places}f}</td></tr>"
        )
    out.append("</table>")
    return out


def _confidence(e: RoundExplained) -> list[str]:
    """SAGE's α from the root's entropy (and the α the shape used, when held fixed)."""
    if e.entropy is None or e.alpha is None:
        return []
    return [
        "<h4>Confidence</h4><div class='f'>"
        f"H = −Σ p̂·log p̂ over the top-{len(e.top_probs)} renormalised (p̂ = p / Σp, "
        f"Σp = {sum(e.top_probs):.{e.places}f}; "
        f"not the full distribution) = {e.entropy:.3f} nats<br>"
        f"α = 1 − H / log {len(e.top_probs)} = 1 − {e.entropy:.3f} / {e.log_k:.3f} = <b>{e.measured_alpha:.3f}</b>"
        + (f"; the shape used α = <b>{e.alpha:.3f}</b>, held fixed" if abs(e.measured_alpha - e.alpha) > 5e-4 else "")
        + "</div>"
    ]


def exact(raw: float, rounded: int) -> str:
    """`raw` printed with as many decimals (2 to 6) as it takes for a student rounding the printed number
    half up to reach `rounded` (1.499995 is "1.499995", not "1.50"; at least 1 where a width is clamped)."""
    for places in range(2, 7):
        shown = f"{raw:.{places}f}"
        if max(1, round_half_up(float(shown))) == rounded or round_half_up(float(shown)) == rounded:
            return shown
    return f"{raw:.6f}"


def _shape(e: RoundExplained) -> list[str]:
    """D(α) and W(α) with their numbers (D(α) alone for a method that plans no width: sage-cost)."""
    if e.depth is None or e.depth_raw is None or e.alpha is None:
        return []
    depth = (
        f"D(α) = D_min + α·(D_max − D_min) = {e.depth_min} + {e.alpha:.3f}·({e.depth_max} − {e.depth_min}) "
        f"= {exact(e.depth_raw, e.depth)} → <b>{e.depth}</b>"
    )
    if e.width_raw is None or e.width is None:
        return [f"<h4>Shape</h4><div class='f'>{depth}</div>"]
    return [
        f"<h4>Shape</h4><div class='f'>{depth}<br>"
        f"W(α) = W_min + (1 − α)·(W_max − W_min) = {e.width_min} + {1 - e.alpha:.3f}·({e.width_max} − "
        f"{e.width_min}) = {exact(e.width_raw, e.width)} → <b>{e.width}</b></div>"
    ]


def _levels(e: RoundExplained) -> list[str]:
    """The tree level by level: thresholds, widths per parent, what each rule cut."""
    out = [
        "<h4>Level by level</h4><div class='muted'>The root offers W_1 = W(α) children; a node at level "
        "l − 1 offers W_l = W(α)·(1/l)·(0.5 + P_parent) for l ≥ 2 (rounded, at least 1). A kept child's "
        f"cumulative probability must exceed θ_l = {e.threshold_base:g}·l/D; at most {e.node_budget} nodes "
        "(the budget). So a level can keep fewer than its widths offer: the cut columns say why.</div><table>"
        "<tr><th>l</th><th>θ_l</th><th>W_l per parent (P_parent)</th><th>kept</th>"
        "<th>kept nodes: p ← parent's p</th><th>cut: width · threshold · budget</th></tr>"
    ]
    by_node = {n.node: n for n in e.nodes}
    for level in e.levels:
        widths = ", ".join(
            f"{'root' if w.node == -1 else f'#{w.node} ({w.parent_prob:.3f})'}: {exact(w.raw, w.width)}→{w.width}"
            for w in level.widths[:6]
        )
        kept = [n for n in e.nodes if n.depth == level.level]
        nodes = ", ".join(f"#{n.node} {n.draft_prob:.3f} ← {_parent(n, by_node)}" for n in kept[:6])
        if len(kept) > 6:
            nodes += f", … ({len(kept)} nodes)"
        if len(level.widths) > 6:
            widths += f", … ({len(level.widths)} parents)"
        out.append(
            f"<tr><td>{level.level}</td><td class='f'>{e.threshold_base:g}·{level.level}/{e.depth} = "
            f"{level.threshold:.4f}</td><td class='f'>{widths}</td><td>{level.kept}</td><td class='f'>{nodes}</td>"
            f"<td>{level.cut_by_width} · {level.cut_by_threshold} · {level.cut_by_budget}</td></tr>"
        )
    out.append("</table>")
    return out + _stopped_short(e)


def _parent(node: Any, by_node: dict[int, Any]) -> str:
    """A node's parent as the level table prints it: the root, or its index and draft probability."""
    parent = by_node.get(node.parent)
    return "root" if parent is None else f"#{parent.node} {parent.draft_prob:.3f}"


def _stopped_short(e: RoundExplained) -> list[str]:
    """Why the tree is shallower than D(α), when it is: the level where nothing was kept, and what cut it."""
    kept = [level for level in e.levels if level.kept]
    reached = max((level.level for level in kept), default=0)
    if e.depth is None or reached >= e.depth:
        return []
    empty = next((level for level in e.levels if level.level == reached + 1), None)
    threshold = e.threshold_base * (reached + 1) / e.depth
    best = e.best_cumulative[reached - 1] if 0 < reached <= len(e.best_cumulative) else None
    if empty is not None:
        rules = [(empty.cut_by_threshold, f"under θ_{empty.level} = {empty.threshold:.4f}")]
        rules += [(empty.cut_by_width, "past their parents' widths"), (empty.cut_by_budget, "past the budget")]
        why = f"level {empty.level}'s candidates were all cut: " + "; ".join(
            f"{count} {rule}" for count, rule in rules if count
        )
    elif best is not None and best <= threshold:
        why = (
            f"the best node at depth {reached} has cumulative probability {best:.4f}, not above θ_{reached + 1} = "
            f"{e.threshold_base:g}·{reached + 1}/{e.depth} = {threshold:.4f}, so no child of it could pass and "
            f"level {reached + 1} was not drafted"
        )
    elif e.finish_reason == "eos" and len(e.accepted_tokens) == reached:
        why = f"the draft's token at depth {reached} ends the answer, and an end is never expanded"
    else:
        why = "the drafting stopped there (a token that ends the answer is never expanded; or the node budget)"
    return [f"<p class='muted'>The tree stops at depth {reached}, short of D(α) = {e.depth}: {why}.</p>"]


#: Kept nodes the dynamic tree's explainer lists, best first.
RERANK_LISTED = 12


def _dynamic(e: RoundExplained, text: TokenText) -> list[str]:
    """EAGLE-2's dynamic tree: which nodes the rerank kept, with their cumulative probabilities."""
    cutoff = f"{e.rerank_cutoff:.4f}" if e.rerank_cutoff is not None else "–"
    out = [
        f"<h4>{html.escape(method_spec(e.method).label)}</h4><p>Each level expands the frontier nodes with the "
        "highest cumulative probability (the product of the draft's probabilities along the path), each with "
        "its top children. "
        f"Then all <b>{e.drafted_nodes}</b> drafted nodes are reranked by cumulative probability and the best "
        f"<b>{len(e.nodes)}</b> are verified (the last kept has <span class='f'>{cutoff}</span>); a node's "
        "ancestors always rank above it, so the kept nodes form a tree.</p>",
        "<table><tr><th>l</th><th>kept</th><th>left out by the rerank</th></tr>",
    ]
    for level in e.levels:
        out.append(f"<tr><td>{level.level}</td><td>{level.kept}</td><td>{level.cut_by_budget}</td></tr>")
    out.append(
        "</table><h4>Kept by the rerank, best first</h4><table>"
        "<tr><th>node</th><th>depth</th><th>token</th><th>cumulative p</th></tr>"
    )
    for node, cumulative in e.kept_cumulative[:RERANK_LISTED]:
        check = e.nodes[node]
        out.append(
            f"<tr><td>#{node}</td><td>{check.depth}</td><td class='f'>{text(check.token)}</td>"
            f"<td class='f'>{cumulative:.4f}</td></tr>"
        )
    out.append("</table>")
    if len(e.kept_cumulative) > RERANK_LISTED:
        out.append(f"<div class='muted'>… and {len(e.kept_cumulative) - RERANK_LISTED} more kept nodes.</div>")
    if e.cut:
        shown = ", ".join(
            f"<span style='color:{CUT}'>{text(c.token)}</span> (l{c.level}, p {c.prob:.2f})" for c in e.cut[:8]
        )
        out.append(f"<div class='muted'>Best nodes left out by the rerank: {shown}</div>")
    return out


def _outcome(e: RoundExplained, text: TokenText) -> str:
    """What the round added: the accepted path, then the bonus, or where the output ended instead."""
    path = " ".join(f"<span class='acc'>{text(t)}</span>" for t in e.accepted_emitted)
    head = f"<p>Accepted τ = {len(e.accepted_tokens)}: {path or '(none)'}"
    dropped = len(e.accepted_tokens) - len(e.accepted_emitted)
    if dropped:
        head += f" (then the output ended, {e.finish_reason}: {dropped} accepted tokens after it are dropped)"
    if e.bonus_emitted:
        return f"{head} + bonus <span class='bon'>{text(e.bonus_token)}</span> (the target's own next token).</p>"
    return f"{head}. The output ended here ({e.finish_reason}): no bonus token.</p>"


def _verification(e: RoundExplained, text: TokenText) -> list[str]:
    out: list[str] = []
    if e.nodes:
        reached = {-1, *e.accepted_nodes}
        checked = [n for n in e.nodes if n.parent in reached]
        out.append(
            "<h4>Verification: one target forward over the whole tree</h4><table>"
            "<tr><th>depth</th><th>draft</th><th>target chose</th><th></th></tr>"
        )
        for node in checked:
            if node.agreed is None:
                verdict = "accepted" if node.accepted else "rejected"
            else:
                verdict = "✓ agreed" if node.agreed else "✗"
            colour = "#00573f" if node.accepted else "#475569"
            out.append(
                f"<tr style='color:{colour}'><td>{node.depth}</td><td class='f'>{text(node.token)}</td>"
                f"<td class='f'>{text(node.target_choice)}</td><td>{verdict}</td></tr>"
            )
        out.append("</table>")
        below = len(e.nodes) - len(checked)
        if below:
            out.append(f"<div class='muted'>{below} more nodes hung below rejected ones.</div>")
    if e.tried:
        tokens = {n.node: n.token for n in e.nodes}
        tried = ", ".join(
            f"{text(tokens.get(node))} p<sub>accept</sub> = {prob:.2f}{' ✓' if node in e.accepted_nodes else ''}"
            for node, prob in e.tried
        )
        out.append(f"<div>Rejection sampling tried, in order: {tried}</div>")
    out.append(_outcome(e, text))
    if e.window_mean is not None:
        move = (
            "holds"
            if e.next_depth_max == e.depth_max
            else ("rises" if (e.next_depth_max or 0) > (e.depth_max or 0) else "falls")
        )
        out.append(
            f"<p>The acceptance window closed: mean τ = {e.window_mean:.2f} (&lt; {e.lower_below:g} lowers D_max, "
            f"&gt; {e.raise_above:g} raises it), so D_max {move}: {e.depth_max} → {e.next_depth_max}.</p>"
        )
    return out
