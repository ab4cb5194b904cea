"""The app's pure parts on hand-built records: panels, HTML, race traces, replay pacing."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from app_records import EOS, TOKENS, ar_records, header, sage_records, synthetic_race, with_changed_token

from app import panels, render
from app.api import race_result
from app.race import REPLAY_MAX_WAIT, Lane, RaceData, parse_race, race_trace_lines, replay_steps
from app.ui import last
from sage_core import save_trace, summarize
from sage_core.records import TraceError


def traces(fig) -> list:
    return list(fig.data)


# -- panels ---------------------------------------------------------------------------


def test_race_figure_plots_each_sides_own_clock_and_the_speedup():
    data = synthetic_race()
    fig = panels.race_figure(data.records_by_method())
    by_name = {t.name.split(":")[0]: t for t in traces(fig)}
    for lane in data.lanes:
        trace = by_name[panels.short_label(lane.method)]
        assert list(trace.x) == [0.0, *(r.total_seconds for r in lane.records)]
        assert list(trace.y) == [0, *(r.total_tokens for r in lane.records)]
    # 8 tokens in 0.9 s against 8 tokens in 1.4 s.
    assert panels.speedups(data.records_by_method()) == pytest.approx({"sage_over_static": 1.4 / 0.9})
    assert f"{1.4 / 0.9:.2f}×" in fig.layout.annotations[0].text


def test_accepted_figure_shows_tau_per_step_and_leaves_out_plain_decoding():
    data = synthetic_race(with_ar=True)
    fig = panels.accepted_figure(data.records_by_method())
    assert len(fig.data) == 2  # plain decoding drafts nothing
    sage = next(t for t in fig.data if t.name.startswith("SAGE"))
    assert list(sage.x) == [1, 2] and list(sage.y) == [3, 2]
    assert "mean τ 2.50" in sage.name
    static = next(t for t in fig.data if t.name.startswith("SD-Tree"))
    assert list(static.y) == [1, 1, 2]


def test_shape_figure_reads_depth_width_and_nodes_off_each_tree():
    data = synthetic_race()
    fig = panels.shape_figure(data.records_by_method())
    assert len(fig.data) == 6  # 3 rows x 2 methods
    sage = [t for t in fig.data if t.legendgroup == "sage"]
    depth, width, nodes = (list(t.y) for t in sage)
    assert depth == [3, 2] and width == [3, 2] and nodes == [5, 3]
    static_nodes = list([t for t in fig.data if t.legendgroup == "static"][2].y)
    assert static_nodes == [4, 4, 4]


def test_confidence_figure_shows_entropy_alpha_and_the_planned_shape():
    lanes = synthetic_race().records_by_method()
    fig = panels.confidence_figure(lanes)
    named = {t.name: t for t in fig.data}
    assert list(named["entropy H (nats)"].y) == [0.4, 1.5]
    assert list(named["confidence α"].y) == [0.8, 0.3]
    assert list(named["D(α)"].y) == [7, 5]
    assert list(named["W(α)"].y) == [4, 7]
    without = panels.confidence_figure({"static": lanes["static"], "ar": ar_records()})
    assert "not in this race" in without.layout.annotations[0].text


def test_tree_layout_centres_parents_over_their_children():
    # root -> a (0), b (1); a -> c (2), d (3)
    ys = panels.tree_layout((-1, -1, 0, 0))
    node_a, node_b, node_c, node_d, root = ys
    assert (node_c, node_d, node_b) == (0.0, 1.0, 2.0)
    assert node_a == 0.5 and root == pytest.approx((0.5 + 2.0) / 2)


def test_tree_figure_draws_the_chosen_step_with_accepted_path_and_bonus():
    data = synthetic_race()
    records = data.lane("sage").records
    fig = panels.tree_figure(records, 1, data.token_texts, "sage")
    nodes = next(t for t in fig.data if t.name == "draft nodes")
    assert list(nodes.x) == [1, 2, 3, 1, 1]  # depths
    assert list(nodes.text) == [render.display_token(data.token_texts[t], 10) for t in records[1].tree_tokens]
    colours = list(nodes.marker.color)
    assert colours[:3] == [panels.ACCEPTED] * 3 and colours[3:] == [panels.REJECTED] * 2
    bonus = next(t for t in fig.data if t.name == "bonus")
    assert list(bonus.text) == [render.display_token(data.token_texts[records[1].bonus_token], 10)]
    assert "step 1" in fig.layout.title.text and "accepted 3" in fig.layout.title.text
    # The output ended inside an accepted path: no bonus drawn.
    ended = replace(records[2], new_tokens=records[2].new_tokens[:2], new_token_texts=records[2].new_token_texts[:2])
    ended_fig = panels.tree_figure([*records[:2], ended], 2, data.token_texts, "sage")
    assert all(t.name != "bonus" for t in ended_fig.data) and "no bonus" in ended_fig.layout.title.text
    # None follows the latest step; step 0 is the prefill.
    assert "step 2" in panels.tree_figure(records, None, data.token_texts).layout.title.text
    assert "prefill" in panels.tree_figure(records, 0, data.token_texts).layout.annotations[0].text


def test_figures_are_marked_as_replay():
    data = synthetic_race()
    figures = panels.all_figures(data.records_by_method(), data.token_texts, "sage", replay=True)
    assert set(figures) == {"confidence", "shapes", "tree", "accepted", "race"}
    assert all("(replay)" in fig.layout.title.text for fig in figures.values())


# -- HTML -----------------------------------------------------------------------------


def test_marked_text_marks_draft_and_bonus_tokens_and_step_boundaries():
    records = sage_records()
    html = render.marked_text(records)
    assert html.count("class='sage-step'") == len(records)
    assert html.count("sage-tok d") == sum(r.draft_token_count for r in records) == 5
    assert html.count("sage-tok b") == len(records)  # prefill token + one bonus per step
    assert "&lt;circle&gt;" in html and "<circle>" not in html


def test_badge_says_identical_when_all_sides_agree():
    html = render.badge_html(synthetic_race(with_ar=True))
    assert "sage-badge ok" in html and "identical to plain decoding" in html


def test_badge_shows_the_first_differing_token():
    data = synthetic_race()
    data.lane("static").records[:] = with_changed_token(data.lane("static").records, 2, 1, 99, "blue")
    result = render.verdict(data)
    assert not result.identical and result.first_difference["position"] == 4
    html = render.badge_html(data)
    assert "sage-badge bad" in html and "token 4" in html and "blue" in html and "id 99" in html


def test_badge_while_racing_compares_the_common_prefix():
    data = synthetic_race()
    data.lane("static").records[:] = data.lane("static").records[:2]
    assert "identical so far" in render.badge_html(data)


def test_table_lists_figures_from_the_records():
    data = synthetic_race()
    html = render.table_html(data)
    sage = summarize(data.lane("sage").records)
    assert f"<td>{sage.tokens_per_second:.1f}</td>" in html
    assert f"{1.4 / 0.9:.2f}×" in html
    assert "measured in this run" in html
    data.replay = True
    assert "recorded (replay)" in render.table_html(data)


def test_lane_html_escapes_and_tags_replays():
    data = synthetic_race()
    data.replay = True
    html = render.race_html(data)
    assert html.count("class='sage-col'") == 2 and "replay" in html
    assert "done (eos)" in html


# -- race traces and replay ---------------------------------------------------------------


def test_race_trace_round_trip():
    data = synthetic_race(with_ar=True)
    back = parse_race(list(race_trace_lines(data)))
    assert back.replay and back.methods == data.methods
    for lane, again in zip(data.lanes, back.lanes, strict=True):
        assert again.records == lane.records and again.header == lane.header
    assert back.token_texts[40] == "w40"


def test_a_single_run_trace_of_the_library_loads(tmp_path):
    path = tmp_path / "run.jsonl"
    save_trace(path, header("sage"), sage_records())
    back = parse_race(path.read_text().splitlines())
    assert back.methods == ["sage"] and back.lane("sage").records == sage_records()
    assert back.token_texts[TOKENS[1]] == " red"  # learned from the emitted texts


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "empty"),
        (["not json"], "not JSON"),
        (['{"race": {"format": "other/9"}}'], "unsupported race format"),
        (['{"step": 1}'], "must start with a header"),
    ],
)
def test_bad_traces_are_refused(lines, message):
    with pytest.raises(TraceError, match=message):
        parse_race(lines)


def test_a_trace_mixing_two_prompts_is_refused():
    data = synthetic_race()
    lines = list(race_trace_lines(data))
    index = next(i for i, line in enumerate(lines) if '"header"' in line and '"method": "static"' in line)
    other = json.loads(lines[index])
    other["header"]["prompt"] = "something else"
    lines[index] = json.dumps(other)
    with pytest.raises(TraceError, match="different inputs"):
        parse_race(lines)


def test_replay_follows_each_sides_recorded_clock():
    data = synthetic_race()
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    seen = []
    counts = dict.fromkeys(data.methods, 0)
    for snapshot in replay_steps(data, 2.0, sleep, lambda: now[0]):
        grown = [lane for lane in snapshot.lanes if len(lane.records) > counts[lane.method]]
        assert len(grown) == 1  # one step at a time
        lane = grown[0]
        counts[lane.method] = len(lane.records)
        record = lane.records[-1]
        assert now[0] == pytest.approx(record.total_seconds / 2.0)  # at its recorded time, twice as fast
        seen.append((record.total_seconds, lane.method))
    assert len(seen) == sum(len(lane.records) for lane in data.lanes)
    assert seen == sorted(seen, key=lambda event: (event[0], data.methods.index(event[1])))


def test_replay_without_waiting_ends_with_the_recorded_race():
    data = synthetic_race(with_ar=True)
    final = last(replay_steps(data, speed=0, sleep=lambda s: pytest.fail("no waiting at speed 0")))
    assert final.replay and final.finished
    assert [lane.records for lane in final.lanes] == [lane.records for lane in data.lanes]


def test_api_result_figures_agree_with_its_trace():
    data = synthetic_race(with_ar=True)
    result = race_result(data)
    back = parse_race(result["trace"].splitlines())
    for lane in back.lanes:
        summary = summarize(lane.records)
        figures = result["figures"][lane.method]
        assert figures["steps"] == summary.steps and figures["tokens"] == len(summary.token_ids)
        assert figures["tokens_per_second"] == pytest.approx(summary.tokens_per_second)
        assert result["texts"][lane.method] == summary.text
    assert result["lossless"]["identical"] and result["lossless"]["reference"] == "ar"
    assert result["texts"]["sage"].endswith(".")
    assert set(result["panels"]) == {"confidence", "shapes", "tree", "accepted", "race"}
    race_panel = result["panels"]["race"]["data"]
    assert [t["y"][-1] for t in race_panel] == [8, 8, 8]
    assert EOS in result["token_ids"]["sage"]


def test_display_token_makes_whitespace_visible():
    assert render.display_token(" a\n") == "␣a↵"
    assert render.display_token("") == "∅"
    assert len(render.display_token("x" * 40, 10)) == 10


def test_race_data_helpers():
    data = RaceData(lanes=[Lane("sage"), Lane("static")])
    assert not data.finished and data.header is None
    assert render.badge_html(data).count("waiting") == 1
    assert re.search("Pick an example", render.race_html(None))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("step_seconds", float("nan"), "finite, non-negative"),
        ("total_seconds", -1.0, "finite, non-negative"),
        ("verify_seconds", "fast", "finite, non-negative"),
        ("tree_parents", [5], "parent must come before it"),
        ("tree_draft_probs", [2.0], "probabilities"),
        ("accepted_nodes", [7], "not in the tree"),
        ("bonus_token", "x", "integers"),
        ("new_token_texts", [], "needs its text"),
    ],
)
def test_a_trace_with_a_malformed_step_is_refused_before_anything_is_shown(field, value, message):
    lines = list(race_trace_lines(synthetic_race()))
    index = next(i for i, line in enumerate(lines) if '"step": 1,' in line)
    row = json.loads(lines[index])
    if field in ("tree_parents", "tree_draft_probs", "accepted_nodes"):
        row.update(
            tree_tokens=[11], tree_parents=[-1], tree_draft_probs=[0.5], accepted_nodes=[0], accepted_tokens=[11]
        )
    row[field] = value
    lines[index] = json.dumps(row)
    with pytest.raises(TraceError, match=message):
        parse_race(lines)


def test_a_trace_of_an_unknown_method_is_refused():
    lines = [line.replace('"method": "static"', '"method": "magic"') for line in race_trace_lines(synthetic_race())]
    with pytest.raises(TraceError, match="unknown method 'magic'"):
        parse_race(lines)


def test_a_replay_never_waits_long_whatever_times_the_trace_records():
    data = synthetic_race()
    for lane in data.lanes:
        lane.records = [replace(r, total_seconds=r.total_seconds * 1e6) for r in lane.records]
    now, waits = [0.0], []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    final = last(replay_steps(data, 1.0, sleep, lambda: now[0]))
    assert final.finished
    assert max(waits) <= REPLAY_MAX_WAIT
    assert now[0] <= REPLAY_MAX_WAIT * sum(len(lane.records) for lane in data.lanes)
