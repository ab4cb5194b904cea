"""The one-pass race's question and its answer: for each method raced on both drafts, one line saying what
drafting in one forward did here (draft forwards a round, τ, and the clock's ratio of the two lanes; with a lane
with the target's features off, the one-pass lane's τ and speed over it, on the same line), under one
sentence saying what "one-pass" means, and a word when SAGE's α did not move on the one-pass draft (so its
trees kept their full depth: entropy had nothing to react to).

Every figure is the lanes' own (`LaneView.figures`, `RoundRecord.alpha`), read off the records shown.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

from sage_core.methods import ONE_PASS, ONE_PASS_OFF, ByMethod, LaneKey

from .view import LaneFigures, LaneView, RaceView

SHORT: Mapping[str, str] = ByMethod("short")
#: What "one-pass" means, said once above the lines.
MEANING = (
    "One-pass draft: every depth of the tree comes from one draft forward a round (PARD), where the pair's own "
    "draft runs one forward per tree level; the target checks both the same way, so both answers are the target's."
)
#: SAGE's α counts as not moving on a draft when every round's α is within this of the first.
STILL_ALPHA = 0.01


def both_decoded(lane: LaneView, other: LaneView) -> tuple[LaneFigures, LaneFigures] | None:
    """Both lanes' figures, once each has a decode round and the other's clock ran (None before)."""
    mine, theirs = lane.figures, other.figures
    if mine is None or theirs is None or not mine.rounds or not theirs.rounds or theirs.tokens_per_second <= 0:
        return None
    return mine, theirs


def twin_line(sequential: LaneView, one_pass: LaneView, features_off: LaneView | None = None) -> str:
    """One method on both drafts: draft forwards a round, τ, and the one-pass lane's tokens/s over the
    sequential lane's ("" while either has no decode round); with its lane on the one-pass draft with the target's
    features off (`ONE_PASS_OFF`), the one-pass lane's τ against it and its tokens/s over it, on the same line."""
    figures = both_decoded(one_pass, sequential)
    if figures is None:
        return ""
    mine, theirs = figures
    name = SHORT.get(sequential.method, sequential.method)
    ratio = mine.tokens_per_second / theirs.tokens_per_second
    line = (
        f"{name} in one forward: {mine.draft_forwards_per_round:.1f} draft forward a round instead of "
        f"{theirs.draft_forwards_per_round:.1f}; τ {mine.tau:.2f} against {theirs.tau:.2f}; "
        f"{ratio:.2f}× the sequential draft's tokens/s here"
    )
    off = both_decoded(one_pass, features_off) if features_off is not None else None
    if off is not None:
        line += (
            f"; the target's features on over off: τ {off[0].tau:.2f} against {off[1].tau:.2f}, "
            f"{off[0].tokens_per_second / off[1].tokens_per_second:.2f}× the tokens/s"
        )
    return line


def still_alpha(lane: LaneView) -> float | None:
    """SAGE's α when it did not move over the lane's rounds (every one within `STILL_ALPHA`), else None."""
    alphas = [r.alpha for r in lane.records if r.phase == "decode" and r.alpha is not None]
    if len(alphas) < 2 or max(alphas) - min(alphas) > STILL_ALPHA:
        return None
    return alphas[0]


def one_pass_html(race: RaceView | None) -> str:
    """The block under the headline when the race has one-pass lanes; "" otherwise."""
    if race is None:
        return ""
    lines = []
    for lane in (lane for lane in race.lanes if not lane.draft and lane.drafts):
        twin = race.lane(LaneKey(lane.method, ONE_PASS))
        if twin is not None:
            lines.append(twin_line(lane, twin, race.lane(LaneKey(lane.method, ONE_PASS_OFF))))
    lines = [line for line in lines if line]
    if not lines:
        return ""
    sage = race.lane(LaneKey("sage", ONE_PASS))
    alpha = still_alpha(sage) if sage is not None else None
    still = (
        f" SAGE's α stayed at {alpha:.2f} on the one-pass draft: its depth-1 guess is nearly always sure, so SAGE "
        "kept every tree at full depth and its entropy rule had nothing to react to."
        if alpha is not None
        else ""
    )
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return (
        f"<div class='sage-one-pass'><b>Did drafting in one forward win?</b> {html.escape(MEANING)}{html.escape(still)}"
        f"<ul>{items}</ul></div>"
    )
