"""HTML of the race: token-marked columns, the losslessness badge, the figures table.

Each column shows its text token by token: a token the draft proposed and
the target accepted is green, the target's own token of a round (the bonus,
and every token of plain decoding) is orange and bold, and a thin bar marks
each round's boundary. Every number comes from the records of the run shown.
"""

from __future__ import annotations

import html
import statistics
from collections.abc import Mapping, Sequence

from sage_core import RoundRecord, RunHeader
from sage_core.cost_curve import CostCurve
from sage_core.methods import ByMethod, drafts, method_label
from sage_core.timing import Headline

from .headline import clock_words as clock_words  # (the headline's: re-exported for its readers)
from .headline import headline_details as headline_details
from .headline import headline_html as headline_html
from .headline import headline_words as headline_words
from .view import SPEEDUP_DEFINITION, LaneView, PremiseFigures, RaceView

CSS = """
.sage-wrap { font-family: Inter, system-ui, sans-serif; }
.sage-cols { display: grid; gap: 12px; grid-template-columns: repeat(auto-fit, minmax(min(100%, 220px), 1fr)); }
/* (lanes of at least 220 px, in rows when many methods race: words are never broken to fit) */
.sage-col { border: 1px solid #e2e8f0; border-radius: 10px; padding: 10px 12px; background: #fff; min-width: 0; }
.sage-col h3 { margin: 0; font-size: 16px; display: flex; align-items: center; gap: 8px; flex-wrap: wrap; }
.sage-sub { font-size: 11px; color: #64748b; margin: 0 0 6px 18px; }
.sage-dot { width: 10px; height: 10px; border-radius: 50%; display: inline-block; }
.sage-tag { font-size: 11px; font-weight: 600; padding: 1px 7px; border-radius: 9px; white-space: nowrap;
  background: #f1f5f9; color: #334155; }
.sage-tag.run { background: #dbeafe; color: #1d4ed8; }
.sage-tag.done { background: #dcfce7; color: #166534; }
.sage-tag.replay { background: #fef3c7; color: #92400e; }
.sage-tag.stop { background: #fee2e2; color: #991b1b; }
.sage-stats { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; color: #475569; margin-bottom: 8px; }
.sage-stats b { color: #0f172a; font-size: 14px; }
.sage-text { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 14px; line-height: 1.9;
  white-space: pre-wrap; word-break: break-word; max-height: 260px; overflow-y: auto; color: #0f172a; }
.sage-step { border-left: 2px solid #94a3b8; padding-left: 1px; margin-left: 2px; }
.sage-tok { border-radius: 3px; padding: 1px 0; }
.sage-tok.d { background: #d5f0e6; color: #00573f; }
.sage-tok.b { background: #fdecc0; color: #6b4500; font-weight: 700; }
.sage-legend { font-size: 12px; color: #475569; margin: 2px 0 8px 0; }
.sage-bar { display: inline-block; height: 10px; background: #7c3aed; border-radius: 2px; vertical-align: bottom; }
.sage-legend .sage-tok { padding: 1px 4px; }
.sage-badge { border-radius: 10px; padding: 10px 14px; font-size: 15px; font-weight: 600; }
.sage-badge.ok { background: #dcfce7; color: #14532d; border: 2px solid #16a34a; }
.sage-badge.bad { background: #fee2e2; color: #7f1d1d; border: 2px solid #dc2626; }
.sage-badge.wait { background: #f1f5f9; color: #334155; border: 2px dashed #94a3b8; }
.sage-badge small { font-weight: 400; display: block; margin-top: 2px; font-size: 12px; }
.sage-table { border-collapse: collapse; width: 100%; font-size: 13px; }
.sage-table th, .sage-table td { padding: 4px 8px; border-bottom: 1px solid #e2e8f0; text-align: right; }
.sage-table th:first-child, .sage-table td:first-child { text-align: left; }
.sage-table th { color: #475569; font-weight: 600; background: #f8fafc; }
.sage-table caption { caption-side: bottom; text-align: left; font-size: 11px; color: #64748b; padding-top: 4px; }
.sage-status { border-radius: 8px; padding: 8px 12px; font-size: 14px; }
.sage-why-brief { display: none; }  /* the talk view's (page.py) */
.sage-status.info { background: #eff6ff; color: #1e3a8a; }
.sage-status.error { background: #fee2e2; color: #7f1d1d; border: 1px solid #fca5a5; font-weight: 600; }
.sage-status.replay { background: #fef3c7; color: #78350f; border: 1px solid #fcd34d; }
.sage-why summary { cursor: pointer; font-size: 13px; color: #1e3a8a; }
.sage-why { font-size: 13px; margin-top: 4px; }
.sage-table td.sage-noise { color: #94a3b8; text-decoration: line-through dotted; }
.sage-headline-note { font-size: 14px; font-weight: 600; }
.sage-headline { font-size: 20px; font-weight: 700; color: #4c1d95; margin: 8px 0 2px 0; }
.sage-rivals { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 250px), 1fr)); gap: 0 16px;
  font-weight: 500; margin-top: 2px; }  /* the other rivals, one short line each (app/headline.py) */
.sage-rivals .sage-rivals-why { grid-column: 1 / -1; font-weight: 400; }
.sage-more { display: inline; font-weight: 400; }
.sage-more summary { display: inline; cursor: pointer; color: #6d28d9; }
.sage-one-pass { font-size: 13px; margin: 4px 0; } .sage-one-pass ul { margin: 2px 0 0 18px; padding: 0; }
"""

# Read off the method registry (sage_core.methods): one label, subtitle and colour per method.
# Every registered method's subtitle, column heading and colour (one colour per method), read live.
SUBTITLES: Mapping[str, str] = ByMethod("subtitle")
SHORT: Mapping[str, str] = ByMethod("short")
DOTS: Mapping[str, str] = ByMethod("colour")
VISIBLE_WHITESPACE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥"})


def display_token(text: str, limit: int = 16) -> str:
    """A token's text for a label: whitespace made visible, long ones cut."""
    shown = text[: limit + 1].translate(VISIBLE_WHITESPACE) if text else "∅"  # (one character for one: cut first)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def wrap(body: str) -> str:
    return f"<div class='sage-wrap'>{body}</div>"


# -- the columns ----------------------------------------------------------------------


def marked_text(records: Sequence[RoundRecord]) -> str:
    """The text with every token marked by how it came, one span per round."""
    parts = []
    for record in records:
        drafted = record.draft_token_count
        tokens = []
        for index, text in enumerate(record.new_token_texts):
            kind, how = ("d", "accepted draft token") if index < drafted else ("b", "target token (bonus)")
            if record.phase == "prefill":
                how = "target token (prefill)"
            title = f"round {record.round}: {how}"
            tokens.append(f"<span class='sage-tok {kind}' title='{_esc(title)}'>{_esc(text)}</span>")
        parts.append(f"<span class='sage-step' title='round {record.round}'>{''.join(tokens)}</span>")
    return "".join(parts)


def _state_tag(lane: LaneView, race: RaceView) -> str:
    if lane.finished:
        reason = lane.records[-1].finish_reason
        return f"<span class='sage-tag done'>done ({_esc(str(reason))})</span>"
    if race.stopped:
        return "<span class='sage-tag stop'>stopped</span>"
    if not lane.records:
        return "<span class='sage-tag'>waiting</span>"
    return "<span class='sage-tag run'>running…</span>"


def forwards_text(value: float) -> str:
    """Draft forwards a round as a lane shows them: whole when they are ("16", "1"), else to one place ("8.3")."""
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def draft_forwards_html(lane: LaneView, race: RaceView) -> str:
    """A drafting lane's draft forwards a round; beside the same method on the other draft, both ("16 against
    1": the sequential draft's levels against the one-pass draft's one forward), each lane its own first."""
    f = lane.figures
    if f is None or not f.rounds or not lane.drafts:
        return ""
    twin = race.twin(lane)
    mine = forwards_text(f.draft_forwards_per_round)
    if twin is None or twin.figures is None or not twin.figures.rounds:
        return f"<span title='draft forwards per round'>draft fwd <b>{mine}</b></span>"
    theirs = forwards_text(twin.figures.draft_forwards_per_round)
    title = f"draft forwards per round: {mine} here against {theirs} in {SHORT.get(twin.key, twin.key)}"
    return f"<span title='{_esc(title)}'>draft fwd <b>{mine}</b> against {theirs}</span>"


def lane_html(lane: LaneView, race: RaceView, tail: int | None = None) -> str:
    method = lane.key
    tags = _state_tag(lane, race) + (" <span class='sage-tag replay'>replay</span>" if race.replay else "")
    pruned = lane.header.prune_ratio if lane.header is not None else 0.0
    name = method_label(method, pruned) if pruned > 0 else SHORT.get(method, method)
    head = (
        f"<h3 title='{_esc(method_label(method, pruned))}'>"
        f"<span class='sage-dot' style='background:{DOTS.get(method, '#334155')}'></span>"
        f"{_esc(name)} {tags}</h3><div class='sage-sub'>{_esc(SUBTITLES.get(method, ''))}</div>"
    )
    if lane.figures is not None:
        f = lane.figures
        tau = f"<span>τ <b>{f.tau:.2f}</b></span>" if drafts(method) else "<span>τ <b>–</b></span>"
        tau += draft_forwards_html(lane, race)  # a sequential draft's levels, a one-pass draft's 1
        stats = (
            f"<div class='sage-stats'><span>rounds <b>{f.rounds}</b></span>{tau}"
            f"<span>tokens/forward <b>{f.tokens_per_forward:.2f}</b></span>"
            f"<span>tokens/s <b>{f.tokens_per_second:.1f}</b></span>"
            f"<span>time <b>{f.seconds:.2f} s</b></span></div>"
        )
    else:
        stats = "<div class='sage-stats'><span>—</span></div>"
    shown = lane.records if tail is None or len(lane.records) <= tail else lane.records[-tail:]
    earlier = len(lane.records) - len(shown)
    lead = f"<span class='sage-sub'>… {earlier} earlier rounds (shown when it ends) … </span>" if earlier else ""
    return f"<div class='sage-col'>{head}{stats}<div class='sage-text'>{lead}{marked_text(shown)}</div></div>"


LEGEND = (
    "<div class='sage-legend'><span class='sage-tok d'>accepted draft token</span> "
    "<span class='sage-tok b'>target's own token (bonus)</span> "
    "<span class='sage-step'>&nbsp;</span> step boundary</div>"
)


def race_html(race: RaceView | None, tail: int | None = None) -> str:
    """The columns; while streaming, `tail` keeps each side's text to its latest steps (the whole text is
    sent once, at the end)."""
    if race is None or not race.lanes:
        return wrap(
            LEGEND + "<div class='sage-col' style='color:#64748b'>Pick an example (or upload an image or a "
            "video), then press <b>Start race</b>.</div>"
        )
    body = "".join(lane_html(lane, race, tail) for lane in race.lanes)
    return wrap(f"{LEGEND}<div class='sage-cols'>{body}</div>")


# -- the badge ------------------------------------------------------------------------


def badge_html(race: RaceView | None) -> str:
    sampled = race.header.sampling if race is not None and race.header is not None else None
    if sampled and sampled.get("temperature"):  # two samples differ: the claim is about distributions
        return wrap(
            "<div class='sage-badge ok'>Sampling: exact in distribution"
            f"<small>temperature {sampled['temperature']:g}, top-p {sampled.get('top_p', 1):g}, "
            f"top-k {sampled.get('top_k', 0)}, seed {sampled.get('seed')}: each side is one sample, so the "
            "texts differ; every method's output is distributed exactly as the target's own sampling "
            "(tests/test_sampling.py checks it with chi-square tests and negative controls)</small></div>"
        )
    if race is None:
        return wrap("<div class='sage-badge wait'>Losslessness: waiting for a race</div>")
    result = race.verdict
    if result is None:
        if len(race.lanes) == 1:
            return wrap("<div class='sage-badge wait'>Losslessness: one method only, nothing to compare</div>")
        return wrap("<div class='sage-badge wait'>Losslessness: waiting for a race</div>")
    speculative = [SHORT.get(lane.key, lane.key) for lane in race.lanes if lane.drafts]
    names = ", ".join(speculative[:-1]) + " and " + speculative[-1] if len(speculative) > 1 else speculative[0]
    with_ar = any(not lane.drafts for lane in race.lanes)
    if result.identical:
        scope = "identical token for token" + (" (and identical to plain decoding)" if with_ar else "")
        if race.finished:
            return wrap(
                f"<div class='sage-badge ok'>✔ Lossless: {names} outputs are {scope}"
                f"<small>{result.compared} tokens compared; greedy speculative decoding must equal the "
                "target's own greedy output, so the answer is the target's own, right or wrong: SAGE makes it "
                "faster, never different</small></div>"
            )
        lead = "■ Stopped:" if race.stopped else "…"
        return wrap(
            f"<div class='sage-badge wait'>{lead} {names}: identical so far"
            f"<small>{result.compared} tokens compared</small></div>"
        )
    diff = result.first_difference or {}
    ref, other = diff.get("reference", {}), diff.get("other", {})

    def side(entry: dict) -> str:
        if entry.get("token") is None:
            return f"{SHORT.get(entry.get('method', ''), '')}: (ended)"
        return (
            f"{SHORT.get(entry['method'], entry['method'])}: '{_esc(display_token(entry.get('text') or ''))}' "
            f"(id {entry['token']})"
        )

    return wrap(
        f"<div class='sage-badge bad'>✘ Outputs differ at token {diff.get('position', '?')}"
        f"<small>{side(ref)} · {side(other)}</small></div>"
    )


# -- the figures table -----------------------------------------------------------------


#: The race table's caption after where its figures come from.
TABLE_CAPTION = (
    "τ = accepted draft tokens per round (paper's metric, bonus excluded); tokens / target forward counts the "
    "bonus (= τ + 1 per round, prefill included). Time is each side's own device-synchronised time, prefill "
    f"included; decode-only leaves the prefill out. {SPEEDUP_DEFINITION[0].upper()}{SPEEDUP_DEFINITION[1:]}."
)


def table_html(race: RaceView | None) -> str:
    if race is None or not any(lane.records for lane in race.lanes):
        return ""
    figures, lead = race.figures, race.lead or ""
    agreed = race.headline_lead == race.lead  # (until the lead's first decode round, no headline speedups)
    overall = race.speedups if agreed else {}
    decode_only, wall = race.decode_speedups if agreed else {}, race.wall_speedups
    # (the curve's predictions only when none of its points is noise: a noisy point would be read as a cost)
    trusted = race.costs is not None and race.costs.trusted
    predicted = race.predicted
    rows = []
    for method, f in figures.items():
        if method == lead:
            speed, decode_speed, clock = "—", "—", "—"
        else:
            speed = f"{overall[method]:.2f}×" if method in overall else "–"
            decode_speed = f"{decode_only[method]:.2f}×" if method in decode_only else "–"
            clock = f"{wall[method]:.2f}×" if method in wall else "–"
        if trusted:
            decode_speed += (
                f" <span title='predicted by the measured costs'>({predicted[method]:.2f}×)</span>"
                if (method in predicted)
                else ""
            )
        tau = f"{f.tau:.2f}" if drafts(method) else "–"
        forwards = f"{f.draft_forwards_per_round:.1f}" if drafts(method) and f.rounds else "–"
        rows.append(
            f"<tr><td><span class='sage-dot' style='background:{DOTS.get(method, '#334155')}'></span> "
            f"{_esc(SHORT.get(method, method))}</td><td>{f.rounds}</td><td>{tau}</td>"
            f"<td>{f.tokens_per_forward:.2f}</td><td>{forwards}</td>"
            f"<td>{f.tokens}</td><td>{f.tokens_per_second:.1f}</td><td>{f.seconds:.2f}</td>"
            f"<td><b>{speed}</b></td><td>{decode_speed}</td><td>{clock}</td></tr>"
        )
    lead_name = SHORT.get(lead, lead)
    source = "recorded (replay)" if race.replay else "measured in this run"
    caption = f"Figures {source}. {TABLE_CAPTION}" + (
        " In brackets: the decode-only speedup the measured cost curve predicts from each side's rounds "
        "(tree sizes and tokens per round)."
        if trusted
        else ""
    )
    if race.costs is not None and not trusted:
        caption += " No predicted speedups: the cost curve below has points that are noise."
    head = (
        "<tr><th>method</th><th>rounds</th><th>τ</th><th>tokens / target forward</th>"
        "<th title='a sequential draft runs one a level; a one-pass draft one for the whole tree'>"
        "draft forwards / round</th><th>tokens</th>"
        f"<th>tokens/s</th><th>time (s)</th><th>{lead_name} speedup</th><th>decode-only</th>"
        "<th>wall clock</th></tr>"
    )
    table = f"<table class='sage-table'><caption>{caption}</caption>{head}{''.join(rows)}</table>"
    return wrap(table + account_html(race) + costs_html(race.costs, race.replay) + premise_html(race))


def account_html(race: RaceView) -> str:
    """Why this race went as it did, from its own records: depth, entropy, budget, prefill and rounds."""
    account = race.account
    lines = account.lines()
    if not lines:
        return ""
    items = "".join(f"<li>{_esc(line)}</li>" for line in lines)
    why = f"<p>{_esc(account.why())}</p>" if account.why() else ""
    return f"<div class='sage-legend'><b>Why, from this race's records</b>{why}<ul>{items}</ul></div>"


def why_html(race: RaceView | None) -> str:
    """The account's one-sentence why (`RaceAccount.why`) for the finished status and the explainer, and its
    brief form for the talk view (`RaceAccount.why_brief`; the page shows one or the other); "" before SAGE and a rival
    have a round."""
    why = race.account.why() if race is not None else ""
    if not why or race is None:
        return ""
    replay = " (recorded: a replay)" if race.replay else ""
    return (
        f" <span class='sage-why-line'>{_esc(why)}{replay}</span>"
        f"<span class='sage-why-brief'>{_esc(race.account.why_brief())}{replay}</span>"
    )


def costs_html(curve: CostCurve | None, replay: bool = False) -> str:
    """The measured verification cost curve: a tree of N nodes against the one-token step, and a draft level;
    each time's spread when it was measured, and a point that is noise (`CostCurve.noise`) flagged as such."""
    if curve is None:
        return ""
    source = ("recorded with the race: " if replay else "in use: ") + _esc(curve.label())
    noise, step_noise = curve.noise(), curve.step_noise()
    spread = curve.verify_spread_ms or (0.0,) * len(curve.sizes)
    draft_spread = curve.draft_spread_ms or (0.0,) * len(curve.sizes)
    cells = "".join(f"<th>{n}</th>" for n in curve.sizes)
    verify = "".join(
        _cost_cell(f"{v:.2f}{_spread(s)} ({v / curve.one_token_ms:.2f}×)", why)
        for v, s, why in zip(curve.verify_ms, spread, noise, strict=True)
    )
    draft = "".join(f"<td>{v:.2f}{_spread(s)}</td>" for v, s in zip(curve.draft_level_ms, draft_spread, strict=True))
    how = (
        f"medians of {curve.repeats} interleaved runs, ± half their interquartile range"
        if curve.repeats
        else "medians of synchronised runs"
    )
    step = f"{curve.one_token_ms:.2f}{_spread(curve.one_token_spread_ms)} ms" + (" ⚠ noise" if step_noise else "")
    flagged = [why for why in (step_noise, *noise) if why]
    warning = (
        f" <b>⚠ Noise, not a cost</b> (greyed; a bigger tree never costs less, and a busy machine only adds "
        f"time): {_esc('; '.join(flagged))}. No method decides from this curve: sage-cost measures its own."
        if flagged
        else ""
    )
    return (
        f"<table class='sage-table'><caption>Verification cost ({source}; {how}): a target forward over a "
        "tree of N nodes in ms "
        f"(× the one-token step of {step}), and a draft level of N nodes.{warning}</caption>"
        f"<tr><th>nodes</th>{cells}</tr><tr><td>verify</td>{verify}</tr><tr><td>draft level</td>{draft}</tr>"
        "</table>"
    )


def _spread(ms: float) -> str:
    return f" ±{ms / 2:.2f}" if ms > 0 else ""


def _cost_cell(text: str, why: str) -> str:
    if not why:
        return f"<td>{text}</td>"
    return f"<td class='sage-noise' title='{_esc(why)}: noise, not a cost'>⚠ {text}</td>"


def premise_html(race: RaceView) -> str:
    """The paper's premise on this input, measured where α does not choose the tree (the view's `premise`), what
    adaptation bought (SAGE against sage-frozen, when both ran), α against the accepted length, and each
    method's acceptance histogram."""
    premise = race.premise
    if premise is None:
        return ""
    picture = premise.calibration
    rounds = f"{picture.rounds} round{'s' * (picture.rounds != 1)}"
    where = (
        f"on {_esc(SHORT.get(picture.lane, picture.lane))}'s {rounds}, where α does not choose the tree"
        if picture.lane
        else "(no lane whose tree α does not choose ran: add SD-Chain or SD-Tree)"
    )
    sage = (
        ""
        if picture.sage_rounds == 0
        else f" ({_signed(picture.sage_alpha_accept)} on SAGE's "
        f"{picture.sage_rounds} round{'s' * (picture.sage_rounds != 1)}, where α also set the depth)"
    )
    parts = [
        "<div class='sage-legend'><b>The paper's premise on this input</b> (one answer: a per-answer figure; "
        "per kind over 60 answers in docs/ablations.md): corr(α, accepted length) "
        f"<b>{_signed(picture.alpha_accept)}</b> {where}{sage}; lag-1 autocorrelation of the draft's entropy "
        f"<b>{_signed(picture.token_lag1)}</b> token by token ({picture.tokens} pairs), "
        f"{_signed(picture.round_lag1)} round by round. {_esc(picture.meaning())}</div>"
    ]
    bought = adaptation_sentence(race)
    if bought:
        parts.append(f"<div class='sage-legend'><b>{_esc(bought)}</b></div>")
    return "".join([*parts, calibration_bars(premise), histogram_html(premise.histograms)])


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.2f}"


def adaptation_sentence(race: RaceView) -> str:
    """What adaptation bought on this race (SAGE against the lane holding its α: sage-frozen), or "" when they did
    not both run."""
    bought = race.premise.adaptation if race.premise is not None else None
    if bought is None:
        return ""
    return bought.sentence() + (" (recorded: a replay)" if race.replay else "")


BAR_PX = 120  # the longest bar of the small bar charts


def calibration_bars(premise: PremiseFigures) -> str:
    """α against the mean accepted length on the unconfounded lane: one bar per α bin, with its rounds."""
    picture = premise.calibration
    filled = [b for b in picture.bins if b.mean_accepted is not None]
    if not filled or picture.lane is None:
        return ""
    top = max(b.mean_accepted or 0.0 for b in filled) or 1.0
    rows = "".join(
        f"<tr><td>α in [{b.low:g}, {b.high:g}{']' if b.high == 1 else ')'}</td><td><span class='sage-bar' "
        f"style='width:{int(BAR_PX * (b.mean_accepted or 0) / top)}px'></span> {b.mean_accepted:.2f}</td>"
        f"<td>{b.rounds}</td></tr>"
        for b in filled
    )
    name = _esc(SHORT.get(picture.lane, picture.lane))
    return (
        f"<table class='sage-table sage-calibration'><caption>The draft's α after the root against the accepted "
        f"length, on {name}'s rounds (its tree is the same whatever α is, so the acceptance answers the "
        "confidence alone).</caption><tr><th>α</th><th>mean accepted length</th><th>rounds</th></tr>"
        f"{rows}</table>"
    )


def histogram_html(histograms: Mapping[str, Sequence[int]]) -> str:
    """Each method's acceptance histogram: the share of rounds that accepted 0, 1, 2, … draft tokens."""
    width = max((len(h) for h in histograms.values()), default=0)
    if width == 0:
        return ""
    rows = []
    for method, counts in histograms.items():
        total = sum(counts) or 1
        cells = "".join(
            f"<td title='{c} rounds'><span class='sage-bar' style='height:{int(30 * c / total)}px;width:8px;"
            f"background:{DOTS.get(method, '#334155')}'></span><br>{c}</td>"
            for c in (*counts, *([0] * (width - len(counts))))
        )
        rows.append(f"<tr><td>{_esc(SHORT.get(method, method))}</td>{cells}</tr>")
    head = "".join(f"<th>{n}</th>" for n in range(width))
    return (
        "<table class='sage-table sage-histogram'><caption>Acceptance histogram: how many rounds accepted 0, 1, 2, "
        "… draft tokens (bars: the share of each side's rounds).</caption>"
        f"<tr><th>accepted</th>{head}</tr>{''.join(rows)}</table>"
    )


# -- when SAGE loses -----------------------------------------------------------------

CPU_ECONOMICS = (
    "On a CPU with a tiny pair, a draft forward costs a sizeable share of a target forward and a tree "
    "verification costs more than a one-token step, so wall-time speedups stay well below the tokens per "
    "target forward (and below 1× on one-sentence answers, where the prefill dominates); τ and tokens per "
    "target forward are what carry over to a large target on a GPU."
)


def _round_costs(records: Sequence[RoundRecord]) -> tuple[float, float, float]:
    """A decode round's median ms, the median ms of its drafting, and the mean tokens per round: the costs
    the headline reads (a round slowed by another process moves neither median)."""
    rounds = [r for r in records if r.phase == "decode"]
    if not rounds:
        return 0.0, 0.0, 0.0
    return (
        1000 * statistics.median(r.round_seconds for r in rounds),
        1000 * statistics.median(r.draft_seconds for r in rounds),
        sum(len(r.new_tokens) for r in rounds) / len(rounds),
    )


def loss_sentence(race: RaceView) -> str:
    """When the headline says SAGE was slower than a rival: one sentence with the measured reason, from the
    same figures as the headline (its rounds' median cost and yield against the rival's; the prefill as
    charged); "" when no headline says "slower" (an unclear one names no loser)."""
    lost = [h for h in race.headlines if h.lead == "sage" and h.verdict == "slower"]
    if not lost:
        return ""
    h = min(lost, key=lambda x: x.speedup)
    sage_lane, rival_lane = race.lane("sage"), race.lane(h.rival)
    assert sage_lane is not None and rival_lane is not None
    (s_ms, s_draft, s_tokens), (r_ms, r_draft, r_tokens) = (
        _round_costs(sage_lane.records),
        _round_costs(rival_lane.records),
    )
    name = SHORT.get(h.rival, h.rival)
    if not drafts(h.rival):
        rival_part = f"{name}'s {r_ms:.1f} ms for {r_tokens:.2f}"
    else:
        rival_part = f"{name}'s {r_ms:.1f} ms ({r_draft:.1f} drafting) for {r_tokens:.2f}"
    if h.prefill_seconds == h.rival_prefill_seconds:
        prefill = f"the prefill ({1000 * h.prefill_seconds:.0f} ms) charged once to both"
    else:
        prefill = f"prefill {1000 * h.prefill_seconds:.0f} ms against {name}'s {1000 * h.rival_prefill_seconds:.0f}"
    reason = loss_reason(race, h)
    return (
        f"SAGE was slower than {name} here ({h.speedup:.2f}×): its rounds took {s_ms:.1f} ms "
        f"({s_draft:.1f} drafting) for {s_tokens:.2f} tokens each, {rival_part} (medians)"
        f"{', and ' + reason if reason else ''}; {prefill}."
    )


def loss_reason(race: RaceView, h: Headline) -> str:
    """Why SAGE lost to `h`'s rival, as the race's account shows it: its rounds dearer per token, from their
    tokens and time (`RaceAccount.dearer_reason`: "extra tokens" only where it accepted more), else a longer
    prefill; "" when neither figure shows it."""
    dearer = race.account.dearer_reason("sage", h.rival)
    if dearer:
        return dearer
    return "its prefill took longer" if h.prefill_seconds > h.rival_prefill_seconds else ""


def loss_html(race: RaceView, device: str | None) -> str:
    """The loss sentence, and the long explanation folded behind a disclosure (on a CPU)."""
    sentence = loss_sentence(race)
    more = (
        f"<details class='sage-why'><summary>Why speedups are small on a CPU</summary>{_esc(CPU_ECONOMICS)}</details>"
        if device == "cpu"
        else ""
    )
    return (f" <b>{_esc(sentence)}</b>" if sentence else "") + more


def same_input(mine: RunHeader, theirs: RunHeader) -> bool:
    """Whether two runs raced the same pair on the same prompt and media (a rate is comparable only then: a
    6-token answer about a clip is not a slower run of a 160-token answer about a picture)."""
    fields = ("target", "draft", "prompt", "media")
    return all(getattr(mine, name) == getattr(theirs, name) for name in fields)


def pace_note(live: RaceView, recorded: RaceView | None) -> str:
    """One line when this machine ran SAGE markedly slower than the recording the page opened with, on the
    same pair, prompt and media (`same_input`; else nothing: another input's pace says nothing of this
    machine): both rates measured, so the visitor knows the slower race is the machine, not the method."""
    if recorded is None or live.replay:
        return ""
    mine, theirs = live.lane("sage"), recorded.lane("sage")
    if mine is None or theirs is None or mine.figures is None or theirs.figures is None:
        return ""
    if mine.header is None or theirs.header is None or not same_input(mine.header, theirs.header):
        return ""
    here, there = mine.figures.tokens_per_second, theirs.figures.tokens_per_second
    if here <= 0 or there < 2 * here:
        return ""
    where = f"{theirs.header.device}, {theirs.header.dtype}"
    return (
        f"This machine ran SAGE at {here:.1f} tokens/s; the recording this page opened with ran at {there:.1f} "
        f"tokens/s on its own machine ({where}): this one is {there / here:.1f}× slower, the race's shape is the same."
    )


# -- status ---------------------------------------------------------------------------


def status_html(message: str, kind: str = "info") -> str:
    return wrap(f"<div class='sage-status {kind}'>{message}</div>")


def error_html(message: str) -> str:
    return status_html("⚠ " + _esc(message), "error")
