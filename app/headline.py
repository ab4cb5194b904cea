"""The race's headline, one screen however many lanes race: SAGE against its main rival in one sentence a
speaker can read aloud (the estimate, its 90 % interval and its verdict), the lanes' own clock and the details
beside it, then every other rival in one short line (its name, the speedup and interval, the verdict word),
the reason an unclear verdict gives said once below them, never once a rival.

Every figure is the view's (`RaceView.headlines`, read off the records of the run shown).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from sage_core.methods import ByMethod
from sage_core.timing import MIN_ROUNDS, Headline

from .view import RaceView

SHORT: Mapping[str, str] = ByMethod("short")


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _name(key: str) -> str:
    return SHORT.get(key, key)


def unclear_reason(h: Headline) -> str:
    """Why an unclear verdict gives none: too few rounds, or an interval spanning 1× (the noise of this
    machine now, or of the recording for a replay's headline)."""
    if min(h.rounds) < MIN_ROUNDS:
        return "too few rounds for a verdict"
    return "too noisy in this recording for a verdict" if h.recorded else "too noisy on this machine now for a verdict"


def headline_words(h: Headline, clock: float | None = None) -> str:
    """The headline in words: the verdict first, then the estimate and its interval (`clock`: the lanes'
    tokens/s ratio, which only "same work" quotes, as the clock's)."""
    rival, low, high = _name(h.rival), *h.interval
    between = f"(90% interval {low:.2f}–{high:.2f}×)"
    if h.verdict == "same work":
        gap = f"{clock:.2f}× on the clock" if clock is not None else f"{h.speedup:.2f}× {between}"
        noise = "the recording's noise" if h.recorded else "this machine's noise"
        return (
            f"the same work as {rival}: the same trees and accepted tokens every round, so neither is faster "
            f"({gap} is {noise})"
        )
    if h.verdict == "faster":
        return f"{h.speedup:.2f}× faster than {rival} {between}"
    if h.verdict == "slower":
        return f"{h.speedup:.2f}×, slower than {rival} {between}"
    return f"unclear against {rival}: {h.speedup:.2f}× {between}, {unclear_reason(h)}"


def rival_words(h: Headline, clock: float | None = None) -> str:
    """One other rival in a short line: its name, the speedup, the verdict word and the 90 % interval
    ("SD-Chain: 1.24× faster (1.10–1.38)"); the same work quotes the clock, as the headline does."""
    low, high = h.interval
    if h.verdict == "same work":
        gap = f"{clock:.2f}×" if clock is not None else f"{h.speedup:.2f}×"
        return f"{_name(h.rival)}: the same work ({gap} on the clock: noise)"
    word = {"faster": " faster", "slower": ", slower"}.get(h.verdict, ", unclear")
    return f"{_name(h.rival)}: {h.speedup:.2f}×{word} ({low:.2f}–{high:.2f})"


def rivals_html(main: Headline, rest: Sequence[Headline], wall: Mapping[str, float]) -> str:
    """The other rivals, one short line each in a grid (a small table that flows in columns), and below them,
    once, why an unclear one gives no verdict (unless the main sentence has just said the same)."""
    if not rest:
        return ""
    cells = " ".join(f"<span>vs {_esc(rival_words(h, wall.get(h.rival)))}</span>" for h in rest)
    said = unclear_reason(main) if main.verdict == "unclear" else ""
    reasons = dict.fromkeys(unclear_reason(h) for h in rest if h.verdict == "unclear" and unclear_reason(h) != said)
    once = f" <span class='sage-rivals-why'>unclear: {_esc('; '.join(reasons))}</span>" if reasons else ""
    return f"<div class='sage-headline-note sage-rivals'>{cells}{once}</div>"


def headline_details(h: Headline) -> str:
    """What stands beside the headline: decode-only, the prefill as charged, tokens per target forward."""
    lead, rival = _name(h.lead), _name(h.rival)
    low, high = h.decode_interval
    same = h.prefill_seconds == h.rival_prefill_seconds
    prefill = (
        f"prefill {1000 * h.prefill_seconds:.0f} ms, the same work, charged once to both"
        if same
        else f"prefill {1000 * h.prefill_seconds:.0f} ms against {1000 * h.rival_prefill_seconds:.0f} ms"
    )
    mine, theirs = h.tokens_per_forward
    return (
        f"decode-only {h.decode_speedup:.2f}× ({low:.2f}–{high:.2f}); {prefill}; rounds at their median cost; "
        f"tokens per target forward {mine:.2f} ({lead}) against {theirs:.2f} ({rival}), which no load changes"
    )


def clock_words(race: RaceView, h: Headline) -> str:
    """The lanes' own clock beside the headline, so its figure can be checked against what the lanes show:
    both sides' tokens/s and their ratio, and, when that ratio falls outside the headline's interval, why the
    two differ ("" when a side has no rate yet)."""
    lead, rival = race.lane(h.lead), race.lane(h.rival)
    if lead is None or rival is None or lead.figures is None or rival.figures is None:
        return ""
    mine, theirs = lead.figures.tokens_per_second, rival.figures.tokens_per_second
    if not (mine > 0 and theirs > 0):
        return ""
    clock = mine / theirs
    said = f"on the clock {_name(h.lead)} {mine:.1f} against {_name(h.rival)} {theirs:.1f} tokens/s ({clock:.2f}×)"
    low, high = h.interval
    if low <= round(clock, 2) <= high:
        return said
    recorded = "its recording's machine" if race.replay else "the machine"
    return f"{said}: outside the interval, as rounds {recorded} slowed move the clock but not the headline"


def headline_html(race: RaceView | None) -> str:
    """The speedup as an estimate with its interval and verdict, read off the records of the run shown: the
    main comparison in one sentence, its clock and details, then the other rivals one short line each."""
    if race is None:
        return ""
    found = race.headlines
    if not found and not race.finished and len(race.lanes) > 1 and race.lane("sage") is not None:
        # a side has no round yet: the headline's place says so, the same on the page and in the talk view
        return "<div class='sage-headline'>SAGE speedup so far: unclear, too few rounds yet for a verdict</div>"
    if not found or found[0].lead != "sage":
        return ""
    main, *rest = found
    # a rival on the one-pass draft is answered in its own block (app/one_pass_view.py), beside its twin
    rest = [h for h in rest if (lane := race.lane(h.rival)) is None or not lane.draft]
    label = "SAGE speedup"
    if race.replay:
        header = race.header
        where = f"replay, recorded on {_esc(header.device)}" if header is not None else "replay"
        label += f" <span class='sage-headline-note'>({where})</span>"
    when = "" if race.finished else (" when stopped" if race.stopped else " so far")
    clock = clock_words(race, main)
    more = (
        f"<details class='sage-more'><summary>how it is counted</summary>{_esc(headline_details(main))}; the clock "
        "counts every round as it came</details>"
    )
    return (
        f"<div class='sage-headline'>{label}{when}: {_esc(headline_words(main, race.wall_speedups.get(main.rival)))}"
        f"<div class='sage-headline-note'>{_esc(clock + ' · ' if clock else '')}{more}</div>"
        f"{rivals_html(main, rest, race.wall_speedups)}</div>"
    )
