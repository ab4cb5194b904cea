"""The race's headline on synthetic timings (sage_core.timing.headline): the prefill charged once, round
costs robust to another process taking the machine, and the verdict its interval allows; then the same
headline in the page's words, the loss sentence and `/race`'s answer."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from typing import Any, cast

import pytest

from app import render
from app.api import race_result
from app.race import Lane, RaceData
from app.view import race_view
from sage_core.timing import MIN_ROUNDS, SideTimes, charged_prefill, headline, side_times
from tests.app_records import header, record, sage_records, synthetic_race


def side(method: str, round_ms: list[float], tokens: int, prefill_ms: float = 100.0, drafts: bool = True) -> SideTimes:
    return SideTimes(
        method, prefill_ms / 1000, 1, tuple(ms / 1000 for ms in round_ms), (tokens,) * len(round_ms), drafts
    )


# 12 rounds of SAGE at about 24 ms for 8 tokens, 16 of SD-Tree at about 25 ms for 6 (the same 97 tokens).
SAGE_MS = [24.0, 23.1, 24.8, 23.5, 24.2, 25.0, 23.9, 24.4, 23.3, 24.6, 24.1, 23.8]
TREE_MS = [25.0, 24.3, 25.8, 24.7, 25.2, 26.0, 24.9, 25.4, 24.5, 25.6, 25.1, 24.8, 25.3, 24.6, 25.5, 24.9]


def quiet() -> tuple[SideTimes, SideTimes]:
    return side("sage", SAGE_MS, 8), side("static", TREE_MS, 6)


def expected(lead: SideTimes, rival: SideTimes, prefill: float) -> float:
    """The end-to-end speedup worked out by hand: the rounds at their median cost, the prefill as charged."""

    def per_token(s: SideTimes) -> float:
        return (prefill + s.rounds * statistics.median(s.round_seconds)) / s.tokens

    return per_token(rival) / per_token(lead)


def test_the_prefill_is_the_same_work_and_is_charged_once_at_its_fastest():
    lead, rival = quiet()
    slow_prefill = replace(lead, prefill_seconds=0.445)  # SAGE's prefill preempted: 445 ms against 118
    fast_prefill = replace(rival, prefill_seconds=0.118)
    assert charged_prefill((slow_prefill, fast_prefill)) == {"sage": 0.118, "static": 0.118}
    h = headline(slow_prefill, fast_prefill)
    assert h is not None and h.prefill_seconds == h.rival_prefill_seconds == 0.118
    assert h.speedup == pytest.approx(expected(slow_prefill, fast_prefill, 0.118))
    assert h.verdict == "faster"  # the rounds decide, not the preempted prefill
    # plain decoding has no draft to prefill: a different piece of work, charged as measured
    plain = replace(rival, method="ar", drafts=False, prefill_seconds=0.08)
    assert charged_prefill((slow_prefill, plain)) == {"sage": 0.445, "ar": 0.08}


def test_a_few_preempted_rounds_move_neither_the_estimate_much_nor_the_verdict():
    lead, rival = quiet()
    calm = headline(lead, rival)
    spiked = replace(lead, round_seconds=(0.997, 0.438, *lead.round_seconds[2:]))  # two rounds preempted
    busy = headline(spiked, rival)
    assert calm is not None and busy is not None
    assert calm.verdict == busy.verdict == "faster"
    assert busy.speedup == pytest.approx(calm.speedup, rel=0.03)
    naive = (sum(rival.round_seconds) / rival.tokens) / (sum(spiked.round_seconds) / spiked.tokens)
    assert naive < 1 < busy.speedup  # a sum of round times would have called it slower


def test_the_verdict_follows_the_interval():
    lead, rival = quiet()
    faster = headline(lead, rival)
    assert faster is not None and faster.verdict == "faster" and 1 < faster.interval[0] <= faster.speedup
    slower = headline(replace(lead, round_tokens=(4,) * lead.rounds), rival)
    assert slower is not None and slower.verdict == "slower" and slower.interval[1] < 1
    # a machine so busy that half of every side's rounds took 5-20 times longer: no verdict
    noisy_lead = replace(lead, round_seconds=tuple(t * (1 + 19 * (i % 2)) for i, t in enumerate(lead.round_seconds)))
    noisy_rival = replace(
        rival, round_seconds=tuple(t * (1 + 4 * (i % 3 == 0)) for i, t in enumerate(rival.round_seconds))
    )
    unclear = headline(noisy_lead, noisy_rival)
    assert unclear is not None and unclear.verdict == "unclear" and unclear.interval[0] < 1 < unclear.interval[1]
    short = headline(side("sage", SAGE_MS[: MIN_ROUNDS - 1], 8), side("static", TREE_MS[:MIN_ROUNDS], 6))
    assert short is not None and short.interval[0] > 1 and short.verdict == "unclear"  # too few rounds


def test_the_interval_is_reproducible_and_decode_only_stands_beside_it():
    lead, rival = quiet()
    first, again = headline(lead, rival), headline(lead, rival)
    assert first == again and first is not None
    decode = (statistics.median(rival.round_seconds) / 6) / (statistics.median(lead.round_seconds) / 8)
    assert first.decode_speedup == pytest.approx(decode)
    assert first.tokens_per_forward == (pytest.approx(97 / 13), pytest.approx(97 / 17))
    answer = first.as_dict()
    assert answer["verdict"] == "faster" and answer["interval"][0] <= answer["speedup"] <= answer["interval"][1]
    assert headline(replace(lead, round_seconds=(), round_tokens=()), rival) is None


def test_a_greedy_races_interval_is_over_its_round_times_and_a_sampled_ones_over_its_rounds():
    """Greedy, a re-run gives the same tokens in the same rounds, so only the round times are resampled; with
    sampling a re-run draws other answers, so each picked round brings its tokens. Uneven rounds (SAGE accepts
    2 to 12 tokens) widen the sampled interval, not the greedy one; equal rounds give the same interval."""
    lead, rival = quiet()
    uneven = replace(lead, round_tokens=tuple(2 + 10 * (i % 2) for i in range(lead.rounds)))  # 84 tokens
    greedy, sampled = headline(uneven, rival), headline(uneven, rival, fixed_answers=False)
    assert greedy is not None and sampled is not None
    assert greedy.speedup == sampled.speedup  # the estimate is the same; only what a re-run may change differs
    width = [h.interval[1] - h.interval[0] for h in (greedy, sampled)]
    assert width[0] < width[1] / 2
    # steady round times: a greedy re-run would be faster again; a sampled one might draw the short rounds
    assert (greedy.verdict, sampled.verdict) == ("faster", "unclear")
    even_greedy, even_sampled = headline(lead, rival), headline(lead, rival, fixed_answers=False)
    assert even_greedy == even_sampled  # every round the same tokens: nothing for a re-run to redraw


def lanes_of(lead: SideTimes, rival: SideTimes) -> RaceData:
    """A race whose records carry these timings (the texts do not matter to the headline)."""
    lanes = []
    for s in (lead, rival):
        base = record(s.method, 1, 0, 1, 0.0, 0.0)
        prefill = replace(record(s.method, 0, 0, 0, 0.0, 0.0), round_seconds=s.prefill_seconds)
        rounds = [
            replace(base, round=i + 1, round_seconds=t, new_tokens=(11,) * n, draft_seconds=t / 3)
            for i, (t, n) in enumerate(zip(s.round_seconds, s.round_tokens, strict=True))
        ]
        rounds[-1] = replace(rounds[-1], finish_reason="eos")
        lanes.append(Lane(s.method, header(s.method), [prefill, *rounds]))
    return RaceData(lanes=lanes)


def test_the_page_the_loss_sentence_and_the_answer_say_the_same_thing():
    lead, rival = quiet()
    won = lanes_of(lead, rival)
    read = side_times("sage", won.lane("sage").records)
    assert read == lead
    h = headline(lead, rival)
    assert h is not None
    shown = render.headline_html(race_view(won))
    assert render.headline_words(h) in shown and "faster than SD-Tree" in shown and "90% interval" in shown
    assert "charged once to both" in shown and "tokens per target forward" in shown
    assert render.loss_sentence(race_view(won)) == ""
    answer = race_result(won, with_trace=False)["headline"]
    assert answer["verdict"] == "faster" and answer["speedup"] == pytest.approx(h.speedup, abs=1e-4)
    lost = lanes_of(replace(lead, round_tokens=(4,) * lead.rounds), rival)
    sentence = render.loss_sentence(race_view(lost))
    assert "slower than SD-Tree" in render.headline_html(race_view(lost))
    assert sentence.startswith("SAGE was slower than SD-Tree here") and "charged once to both" in sentence
    assert race_result(lost, with_trace=False)["headline"]["verdict"] == "slower"
    noisy = lanes_of(side("sage", SAGE_MS[:3], 8), rival)
    assert (
        "unclear against SD-Tree" in render.headline_html(race_view(noisy))
        and render.loss_sentence(race_view(noisy)) == ""
    )


@pytest.mark.parametrize("lead_scale, rival_scale", [(0.0, 1.0), (5e-324, 1.0), (1e-300, 1e290)])
def test_a_trace_whose_side_took_no_time_gets_no_headline_and_never_inf_or_nan(tmp_path, lead_scale, rival_scale):
    """A doctored replay whose SAGE rounds took 0 s (or 5e-324 s; or 1e-300 s against 1e290 s) once answered
    "internal error" on /replay, the page, MCP and both exports, or printed "inf× (interval nan–nan×)": the
    race has no headline, and nothing says inf or nan."""
    from app import export
    from app.api import json_answer
    from app.race_trace import load_race, race_trace_lines

    race = synthetic_race()
    assert race_result(race, with_trace=False)["headline"] is not None  # a headline before the doctoring
    for lane, scale in ((race.lane("sage"), lead_scale), (race.lane("static"), rival_scale)):
        total = 0.0
        for index, r in enumerate(lane.records):
            seconds = r.round_seconds * scale
            total += seconds
            lane.records[index] = replace(
                r, round_seconds=seconds, draft_seconds=0.0, verify_seconds=seconds, total_seconds=total
            )
    path = tmp_path / "doctored.jsonl"
    path.write_text("\n".join(race_trace_lines(race)) + "\n")
    replayed = load_race(str(path))
    replayed.replay = True
    answer = race_result(replayed, with_trace=False)
    assert answer["headline"] is None and answer["headlines"] == {}
    shown = (
        render.headline_html(race_view(replayed))
        + render.table_html(race_view(replayed))
        + render.race_html(race_view(replayed))
    )
    sent = json_answer(answer)
    frames = json.dumps(export.frames(replayed, 3))
    for text in (shown, sent, frames, render.loss_sentence(race_view(replayed))):
        assert "inf×" not in text and "nan" not in text.lower().replace("nano", ""), text[:400]


def test_identical_work_is_the_same_work_never_faster_and_adaptation_is_not_credited_with_the_clock():
    """sage and sage-frozen on identical trees (τ the same, α 1.00 every round) once read "vs SAGE-frozen:
    2.43× faster (1.12–3.23×)" and, in bold, "What adaptation bought on this input: … finished sooner": the
    same work is said to be the same work, and adaptation bought nothing."""
    from sage_core.studies.premise import adaptation_bought
    from sage_core.timing import same_work

    lead, rival = quiet()
    race = lanes_of(lead, rival)
    sage = race.lane("sage")
    slow = [replace(r, method="sage-frozen", round_seconds=2 * r.round_seconds) for r in sage.records]
    race.lanes[1] = Lane("sage-frozen", header("sage-frozen"), slow)  # the same trees, twice the time
    assert same_work(sage.records, slow) and not same_work(
        sage.records, race_view(lanes_of(lead, rival)).lanes[1].records
    )
    found = race_view(race).headlines
    assert found and found[0].rival == "sage-frozen" and found[0].verdict == "same work"
    assert found[0].speedup > 1.5  # the clock says "faster" ...
    shown = render.headline_html(race_view(race))
    assert "the same work as" in shown and "faster than" not in shown and "slower than" not in shown
    assert race_result(race, with_trace=False)["headline"]["verdict"] == "same work"
    bought = adaptation_bought(sage.records, slow, 1.0)
    assert (
        bought is not None
        and bought.same_work
        and bought.sentence().startswith("What adaptation bought on this input: nothing.")
    )
    assert "sooner" not in bought.sentence() and "later" not in bought.sentence()
    # τ the same but other trees: still no credit for the clock alone
    other = replace(bought, same_work=False)
    assert "nothing measurable" in other.sentence() and "sooner" not in other.sentence()


def test_a_method_whose_rule_refused_every_node_says_so_in_the_cli_the_race_and_the_api(capsys):
    """1 of 5 `sage generate --method smart` runs made 65 target forwards at τ 0.00 with no note: a method
    that drafts but made no tree in any round says so (the CLI's report and JSON, the race's account, /race)."""
    import argparse

    from sage_core import cli
    from sage_core.records import summarize
    from sage_core.studies.account import no_tree_note

    refused = [record("smart", step, step, 0, 0.1, 0.1 * (step + 1)) for step in range(4)]
    note = no_tree_note("smart", refused)
    assert note.startswith("SMART made no tree in any of its 3 rounds: its rule refused every candidate"), note
    assert no_tree_note("ar", refused) == "" and no_tree_note("sage", sage_records()) == ""
    race = RaceData(lanes=[Lane("sage", header("sage"), sage_records()), Lane("smart", header("smart"), refused)])
    account = race_view(race).account
    said = next(line for line in account.lines() if line.startswith("smart:"))
    assert "refused every candidate in all 3 rounds" in said and "0 deep" not in said
    assert "refused every candidate" in " ".join(race_result(race, with_trace=False)["account"]["lines"])
    run = argparse.Namespace(header=header("smart"), records=refused, seed=0)
    config = argparse.Namespace(method="smart", sampling=argparse.Namespace(greedy=True))
    cli._report(argparse.Namespace(json=False), cast(Any, run), summarize(refused), cast(Any, config))
    assert note in capsys.readouterr().err
