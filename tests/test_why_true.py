"""The why true to what the lanes show (issue 67), for a win, a tie and a loss, each built from hand-built
records: every clause of the why (the account's `why`, `why_brief`, the loss sentence) is checked against the
records' own figures, τ and the median round, worked out here from the records, not read from the account.
"Extra tokens" only where SAGE accepted more a round; "fewer" or "as many" where it did not; a tie says
neither was faster and why. A live race's pace is compared with the page's recording only on the same input."""

from __future__ import annotations

import html
import statistics
from dataclasses import replace

import pytest

from app import render
from app.race import Lane, RaceData
from app.view import RaceView, race_view
from tests.app_records import header, record

#: Each side's round times jitter by these factors (a quiet machine): the headline's interval stays narrow.
JITTER = (1.0, 0.98, 1.02, 0.99, 1.01, 1.0, 0.97, 1.03)


def lane(method: str, accepted: list[int], round_ms: float, depth: int = 4) -> Lane:
    """A prefill (100 ms), then one decode round per entry of `accepted`: a chain `depth` deep of which the
    first `accepted[i]` nodes are accepted, then the bonus; each round `round_ms` (jittered)."""
    prefill = replace(record(method, 0, 0, 0, 0.0, 0.0), round_seconds=0.1, total_seconds=0.1)
    rounds, total = [], 0.1
    for index, taken in enumerate(accepted):
        seconds = round_ms * JITTER[index % len(JITTER)] / 1000
        total += seconds
        rounds.append(
            replace(
                record(method, index + 1, 0, 0, seconds, total),
                tree_tokens=tuple(range(20, 20 + depth)),
                tree_parents=tuple(range(-1, depth - 1)),
                tree_draft_probs=(0.9,) * depth,
                accepted_nodes=tuple(range(taken)),
                accepted_tokens=tuple(range(20, 20 + taken)),
                bonus_token=11,
                new_tokens=(*range(20, 20 + taken), 11),
                new_token_texts=("w",) * (taken + 1),
                finish_reason="eos" if index == len(accepted) - 1 else None,
            )
        )
    return Lane(method, header(method), [prefill, *rounds])


def race(sage: Lane, rival: Lane) -> RaceView:
    return race_view(RaceData(lanes=[sage, rival]))


def figures(view: RaceView, key: str) -> tuple[float, float]:
    """τ and the median round (ms) of a lane, from its records alone."""
    rounds = [r for r in view.records[key] if r.phase == "decode"]
    return statistics.fmean(len(r.accepted_tokens) for r in rounds), 1000 * statistics.median(
        r.round_seconds for r in rounds
    )


def said(view: RaceView) -> tuple[str, float, float, float, float]:
    """The why, and SAGE's and SD-Tree's τ and median round from the records, each checked in the why."""
    (tau, ms), (their_tau, their_ms) = figures(view, "sage"), figures(view, "static")
    why = view.account.why()
    assert f"τ {tau:.2f} against {their_tau:.2f}" in why
    assert f"a round {ms:.1f} ms for {tau + 1:.2f} tokens against {their_ms:.1f} ms for {their_tau + 1:.2f}" in why
    assert f"{ms / (tau + 1):.1f} ms a token against {their_ms / (their_tau + 1):.1f}" in why
    assert why in html.unescape(render.why_html(view))  # the page's why is the account's
    assert "did not pay" not in why
    assert ("extra tokens" in why) == (round(tau, 2) > round(their_tau, 2)), why
    return why, tau, ms, their_tau, their_ms


def test_a_win_with_more_tokens_in_longer_rounds():
    view = race(lane("sage", [3] * 12, 20.0), lane("static", [1] * 24, 15.0))  # 48 tokens a side
    assert view.headlines[0].verdict == "faster"
    why, tau, ms, their_tau, their_ms = said(view)
    assert tau > their_tau and ms > their_ms and ms / (tau + 1) < their_ms / (their_tau + 1)
    assert "so SAGE's rounds were cheaper per token than SD-Tree's" in why
    assert f"its extra tokens (τ {tau:.2f} against {their_tau:.2f}) paid for its longer rounds" in why
    assert render.loss_sentence(view) == ""
    assert "SAGE's rounds cheaper per token" in view.account.why_brief()


def test_a_win_with_fewer_tokens_in_shorter_rounds():
    view = race(lane("sage", [1] * 24, 8.0), lane("static", [2] * 16, 20.0))
    assert view.headlines[0].verdict == "faster"
    why, tau, ms, their_tau, their_ms = said(view)
    assert tau < their_tau and ms < their_ms
    assert f"its shorter rounds made up for fewer tokens per round (τ {tau:.2f} against {their_tau:.2f})" in why


def test_a_tie_says_neither_was_faster_and_why():
    view = race(lane("sage", [3] * 12, 20.0), lane("static", [1] * 24, 10.0))
    h = view.headlines[0]
    assert h.verdict == "unclear" and h.interval[0] < 1 < h.interval[1]
    why, tau, ms, their_tau, their_ms = said(view)
    assert ms / (tau + 1) == pytest.approx(their_ms / (their_tau + 1), rel=0.03)
    assert "about the same per token, so neither was faster after the prefill" in why
    assert f"its extra tokens (τ {tau:.2f} against {their_tau:.2f}) just paid for its longer rounds" in why
    assert "cheaper" not in why and "dearer" not in why
    assert "neither faster" in view.account.why_brief() and render.loss_sentence(view) == ""
    # a tie of as many tokens in rounds as long
    even = race(lane("sage", [2] * 16, 20.0), lane("static", [2] * 16, 20.0, depth=6))
    why = said(even)[0]
    assert "neither was faster" in why and "as many tokens per round (τ 2.00 against 2.00) in rounds as long" in why


@pytest.mark.parametrize(
    "sage, rival, reason",
    [
        # the photo of issue 67: SAGE accepted fewer tokens a round (τ 1.25 against 2.00)
        ([1, 1, 1, 2] * 4, [2] * 12, "it accepted fewer tokens per round: τ 1.25 against 2.00, in longer rounds"),
        ([2] * 12, [2] * 12, "it accepted as many tokens per round (τ 2.00 against 2.00) in longer rounds"),
        ([3] * 9, [1] * 18, "its rounds cost more than the extra tokens bought"),
    ],
    ids=["fewer", "as-many", "more"],
)
def test_a_loss_says_what_the_rounds_show(sage, rival, reason):
    assert sum(sage) + len(sage) == sum(rival) + len(rival) == 36  # the same answer, 36 tokens a side
    slow = 50.0 if sum(sage) > sum(rival) else 26.0  # SAGE's rounds: dearer per token in every case
    view = race(lane("sage", sage, slow), lane("static", rival, 20.0, depth=6))
    assert view.headlines[0].verdict == "slower"
    why, tau, ms, their_tau, their_ms = said(view)
    assert ms / (tau + 1) > their_ms / (their_tau + 1)
    assert f"so SAGE's rounds were dearer per token than SD-Tree's: {reason}" in why
    assert "SAGE's rounds dearer per token" in view.account.why_brief()
    sentence = render.loss_sentence(view)
    assert sentence.startswith("SAGE was slower than SD-Tree here") and f", and {reason};" in sentence
    assert f"for {tau + 1:.2f} tokens each" in sentence and f"for {their_tau + 1:.2f} (medians)" in sentence
    assert len(sentence.split()) <= 50


def test_the_why_is_told_against_the_headlines_rival():
    """SD-Chain before the dynamic tree in the columns: the headline's main rival is the dynamic tree, and the
    why is told against it too, not against the first column."""
    lanes = [lane("sage", [3] * 12, 20.0), lane("chain", [1] * 24, 15.0), lane("dynamic", [2] * 16, 18.0)]
    view = race_view(RaceData(lanes=lanes))
    assert view.headlines[0].rival == "dynamic"
    assert view.account.rival() == view.account.side("dynamic") and "against Dynamic's" in view.account.why()


def test_a_live_race_is_compared_with_the_recording_only_on_the_same_input():
    recorded = RaceData(lanes=[lane("sage", [3] * 8, 20.0), lane("static", [1] * 8, 15.0)])
    slow = RaceData(lanes=[lane("sage", [3] * 8, 200.0), lane("static", [1] * 8, 150.0)])
    assert "× slower, the race's shape is the same" in render.pace_note(race_view(slow), race_view(recorded))
    for field, value in (("prompt", "describe the video."), ("media", "video clip.mp4 (8 of 8 frames)")):
        other = RaceData(lanes=[Lane(x.method, replace(x.header, **{field: value}), x.records) for x in slow.lanes])
        assert render.pace_note(race_view(other), race_view(recorded)) == "", field
