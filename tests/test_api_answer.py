"""The /race and MCP answers on hand-built races (no model): a sampled race's verdict says it was sampled, and
the MCP answer of the largest race the app can run (every method on both drafts, 512 new tokens) keeps the
size the tools' descriptions promise (`app.api.MCP_MAX_BYTES`)."""

from __future__ import annotations

import json
from dataclasses import replace

from app_records import large_race, synthetic_race, with_changed_token

from app.api import MCP_MAX_BYTES, json_answer, race_result
from app.mcp_tool import RETURNS
from app.render import badge_html
from app.slides_gif import plain
from app.view import race_view

SAMPLING = {"temperature": 0.8, "top_p": 0.9, "top_k": 50, "seed": 4}


def sampled(data):
    """`data` with every lane's header recording a sampled run."""
    for lane in data.lanes:
        lane.header = replace(lane.header, sampling=SAMPLING)
    return data


def differing_race():
    """The small race with its static lane's fourth token changed: the lanes differ."""
    data = synthetic_race()
    lane = data.lane("static")
    lane.records = with_changed_token(lane.records, 2, 0, 99, " blue")
    return data


def test_a_sampled_race_whose_lanes_differ_says_it_was_sampled_wherever_identity_is_read() -> None:
    data = sampled(differing_race())
    lossless = race_result(data)["lossless"]
    assert lossless["identical"] is False and lossless["first_difference"]["position"] == 3
    assert lossless["sampled"] is True
    assert "sampled" in lossless["note"] and "exact in distribution" in lossless["note"]
    assert "not token-identical" in lossless["note"] and "temperature 0.8" in lossless["note"]
    mcp = json.loads(json_answer(race_result(data, with_trace=False)))["lossless"]
    assert mcp["sampled"] is True and mcp["note"] == lossless["note"]
    badge = badge_html(race_view(data))  # the page's badge, the HTML export's and the GIF's
    assert "exact in distribution" in badge and "Outputs differ" not in badge and "Lossless" not in badge
    assert "exact in distribution" in plain(badge)
    assert "exact in distribution, not token-identical" in RETURNS.replace("\n    ", " ")


def test_a_greedy_races_verdict_is_unchanged() -> None:
    differing = race_result(differing_race())["lossless"]
    assert set(differing) == {"identical", "compared", "reference", "first_difference"}
    assert differing["identical"] is False and "Outputs differ" in badge_html(race_view(differing_race()))
    same = race_result(synthetic_race())["lossless"]
    assert same == {"identical": True, "compared": 8, "reference": "sage", "first_difference": None}


def test_the_largest_race_the_app_runs_keeps_the_mcp_size_and_says_what_it_left_out() -> None:
    for is_sampled in (False, True):
        data = large_race(512, sampled=is_sampled)
        assert len(data.lanes) == 17 and all(len(lane.token_ids) == 512 for lane in data.lanes)
        result = race_result(data)
        text = json_answer(result)
        answer = json.loads(text)
        assert len(text.encode()) <= MCP_MAX_BYTES, len(text.encode())
        assert answer["left_out"] == ["panels", "trace", "token_ids", "acceptance"]
        assert "token_ids" not in answer and "kept within 64 kB" in answer["bounded"]
        assert answer["texts"] == result["texts"]  # the texts whole, the figures and headline kept
        assert answer["headline"]["speedup"] == result["headline"]["speedup"] and answer["account"]
        whole = json.loads(json_answer(result, trace=True))  # asked for the trace: everything, no bound
        assert whole["token_ids"] == result["token_ids"] and "bounded" not in whole


def test_a_race_of_long_token_texts_is_cut_to_the_size_and_says_where() -> None:
    data = large_race(512, sampled=True)
    for lane in data.lanes:
        lane.records = [replace(r, new_token_texts=("é" * 256,) * len(r.new_tokens)) for r in lane.records]
    result = race_result(data)
    text = json_answer(result)
    answer = json.loads(text)
    assert len(text.encode()) <= MCP_MAX_BYTES
    cut = answer["texts_cut_at"]
    assert answer["left_out"][:5] == ["panels", "trace", "token_ids", "acceptance", "texts' ends"]
    assert all(len(t) == cut and t.endswith("…") for t in answer["texts"].values())
    assert all(result["texts"][key].startswith(t[:-1]) for key, t in answer["texts"].items())
    assert f"past its first {cut:,} characters" in answer["bounded"]


def test_a_small_answer_is_sent_whole() -> None:
    answer = json.loads(json_answer(race_result(synthetic_race(with_ar=True))))
    assert answer["left_out"] == ["panels", "trace"] and "bounded" not in answer and "token_ids" in answer
