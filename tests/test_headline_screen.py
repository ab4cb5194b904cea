"""A headline of one screen however many lanes race (issue 67): SAGE against its main rival in one sentence, the
lanes' clock beside it for that rival alone, then every other rival in one short line, the reason an unclear
verdict gives said once (never "too noisy on this machine now for a verdict" once a rival), and a recording's
noise said to be the recording's."""

from __future__ import annotations

import html
import re
from dataclasses import replace

from app import render
from app.race import Lane, RaceData
from app.view import race_view
from sage_core.methods.registry import method_names
from tests.app_records import chain_tree, header, record

NOISY = "too noisy on this machine now for a verdict"


def lane(method: str, round_ms: list[float], tokens: int, draft: str = "") -> Lane:
    """A lane of a prefill (100 ms) and one decode round a time in `round_ms`, each bringing `tokens` tokens
    (a chain of `tokens - 1` accepted, then the bonus)."""
    tree = chain_tree((11,) * (tokens - 1), (40,))
    base = replace(record(method, 1, 0, 1, 0.0, 0.0, **tree), new_tokens=(11,) * tokens)
    prefill = replace(record(method, 0, 0, 0, 0.0, 0.0), round_seconds=0.1, total_seconds=0.1)
    ends = [0.1 + sum(round_ms[: i + 1]) / 1000 for i in range(len(round_ms))]
    rounds = [
        replace(base, round=i + 1, round_seconds=ms / 1000, draft_seconds=ms / 3000, total_seconds=end)
        for i, (ms, end) in enumerate(zip(round_ms, ends, strict=True))
    ]
    rounds[-1] = replace(rounds[-1], finish_reason="eos")
    return Lane(method, header(method), [prefill, *rounds], draft)


STEADY = [24.0, 23.1, 24.8, 23.5, 24.2, 25.0, 23.9, 24.4, 23.3, 24.6, 24.1, 23.8]
#: Round times a process now and then doubled: a rival timed on these gets an interval spanning 1×.
JUMPY = [12.0, 40.0, 13.0, 38.0, 12.5, 41.0, 12.2, 39.0, 13.1, 40.5, 12.8, 39.5]


def nine_lanes(draft: str = "") -> list[Lane]:
    """SAGE and the eight other methods: SD-Tree slower (the main rival), some rivals clearly slower than SAGE,
    the rest on jumpy clocks (unclear)."""
    lanes = [lane("sage", STEADY, 8)]
    for index, method in enumerate(m for m in method_names() if m != "sage"):
        jumpy = index % 2 == 1 and method != "static"
        lanes.append(lane(method, JUMPY if jumpy else [ms * 1.1 for ms in STEADY], 6, draft))
    return lanes


def text_of(fragment: str) -> str:
    """What a reader sees of an HTML fragment: its text, tags dropped, whitespace folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def rival_lines(shown: str) -> list[str]:
    grid = shown.split("sage-rivals'>", 1)[1]
    return [text_of(cell) for cell in re.findall(r"<span>(.*?)</span>", grid)]


def test_nine_methods_one_sentence_for_the_main_rival_and_one_short_line_for_each_other():
    race = race_view(RaceData(lanes=nine_lanes()))
    main, *rest = race.headlines
    assert main.rival == "static" and main.verdict == "faster" and len(rest) == 7
    assert {h.verdict for h in rest} >= {"faster", "unclear"}, [h.verdict for h in rest]
    shown = render.headline_html(race)
    words = text_of(shown)
    # the main comparison: one sentence with its interval, the clock beside it for SD-Tree alone
    said = render.headline_words(main, race.wall_speedups.get("static"))
    assert f"SAGE speedup: {said}" in words and "90% interval" in said
    assert words.count("on the clock") == 1 and "against SD-Tree" in render.clock_words(race, main)
    # the others: one short line each, naming the rival, its speedup and the verdict word
    lines = rival_lines(shown)
    assert len(lines) == len(rest)
    for h, line in zip(rest, lines, strict=True):
        assert line.startswith(f"vs {render.SHORT[h.rival]}: {h.speedup:.2f}×"), line
        assert ("faster" in line) == (h.verdict == "faster") and ("unclear" in line) == (h.verdict == "unclear")
        assert len(line) < 120, line
    # the reason an unclear verdict gives, once; the whole headline short enough to read beside the race
    assert words.count(NOISY) == 1 and words.count("90% interval") == 1
    assert len(words) < 1200, (len(words), words)


def test_seventeen_lanes_with_the_one_pass_draft_stay_one_screen_of_text():
    from app.one_pass_view import one_pass_html

    lanes = nine_lanes()
    lanes += [replace(each, draft="one-pass") for each in nine_lanes("one-pass")[:-1] if each.method != "ar"]
    race = race_view(RaceData(lanes=lanes))
    assert len(race.lanes) == 17 and len(race.headlines) == 16
    shown = render.headline_html(race)
    lines = rival_lines(shown)  # the sequential rivals; each one-pass lane is answered beside its twin instead
    assert len(lines) == 7 and all(len(line) < 120 for line in lines)
    assert not any("one-pass draft" in line for line in lines)
    twins = one_pass_html(race)
    assert twins.count("<li>") == 8 and "SD-Tree in one forward: " in twins
    words = text_of(shown)
    assert words.count(NOISY) <= 1 and len(words) < 1600, (len(words), words)


def test_a_replays_unclear_verdict_is_the_recordings_noise():
    live = RaceData(lanes=[lane("sage", STEADY, 8), lane("static", JUMPY, 6)])
    h = race_view(live).headlines[0]
    assert h.verdict == "unclear" and NOISY in render.headline_words(h)
    replayed = RaceData(lanes=live.lanes, replay=True)
    words = text_of(render.headline_html(race_view(replayed)))
    assert "too noisy in this recording for a verdict" in words and "this machine now" not in words
    # a rival's line says the recording's noise once too
    three = RaceData(lanes=[*live.lanes, lane("chain", JUMPY, 5)], replay=True)
    words = text_of(render.headline_html(race_view(three)))
    assert words.count("too noisy in this recording") == 1 and "this machine now" not in words


def test_the_lossless_badge_says_the_answer_is_the_targets_own():
    """A wrong answer is the tiny target's own: the badge says SAGE never changes it."""
    from app_records import synthetic_race

    from app.render import badge_html
    from app.view import race_view

    badge = badge_html(race_view(synthetic_race()))
    assert "Lossless" in badge and "the answer is the target's own, right or wrong" in badge.replace("&#x27;", "'")


def test_the_one_pass_race_answers_its_question_per_method():
    """Each method raced on both drafts gets one line naming its one-pass twin with its figures (draft forwards a
    round, τ, the clock's ratio), read off the lanes; SAGE's α that never moved on the one-pass draft is said."""
    from dataclasses import replace as changed

    from app_records import header, sage_records, static_records

    from app.one_pass_view import one_pass_html
    from app.race import Lane, RaceData
    from app.view import race_view

    def one_pass(records):  # the same rounds drafted in one forward, α held at 1
        return [changed(r, draft_forwards=1, alpha=1.0 if r.alpha is not None else None) for r in records]

    lanes = [
        Lane("sage", header("sage"), [changed(r, draft_forwards=4) for r in sage_records()]),
        Lane("sage", header("sage"), one_pass(sage_records()), draft="one-pass"),
        Lane("static", header("static"), [changed(r, draft_forwards=3) for r in static_records()]),
        Lane("static", header("static"), one_pass(static_records()), draft="one-pass"),
    ]
    race = race_view(RaceData(lanes=lanes))
    shown = one_pass_html(race).replace("&#x27;", "'")
    for method in ("sage", "static"):
        sequential, twin = race.lane(method), race.lane(f"{method}/one-pass")
        assert sequential is not None and twin is not None and twin.figures and sequential.figures
        ratio = twin.figures.tokens_per_second / sequential.figures.tokens_per_second
        line = (
            f"in one forward: 1.0 draft forward a round instead of {sequential.figures.draft_forwards_per_round:.1f}; "
            f"τ {twin.figures.tau:.2f} against {sequential.figures.tau:.2f}; {ratio:.2f}×"
        )
        assert line in shown, (line, shown)
    assert shown.count("<li>") == 2 and "one draft forward a round (PARD)" in shown
    assert "SAGE's α stayed at 1.00 on the one-pass draft" in shown
    assert one_pass_html(race_view(RaceData(lanes=lanes[::2]))) == ""  # no one-pass lane: no block
