"""The app's pure parts on hand-built records: panels, HTML, race traces, replay pacing."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import fields, replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from app_records import EOS, TEXTS, TOKENS, ar_records, header, sage_records, synthetic_race, with_changed_token

from app import handlers, models, panels, render
from app.api import race_result
from app.handlers import Handlers, Settings
from app.inputs import Limits
from app.models import CustomModels
from app.page import Page
from app.panel_table import Focus, panel_figures, panel_table
from app.race import REPLAY_MAX_WAIT, Lane, RaceData, replay_steps
from app.race_trace import load_race, parse_race, race_trace_lines
from app.ui import last
from app.view import LaneFigures, race_view
from sage_core import save_trace
from sage_core.errors import ModelLoadError, TraceError
from sage_core.timing import point_speedups, side_times
from sage_core.trace_check import MAX_TREE_DEPTH, MAX_TREE_NODES


def traces(fig) -> list:
    return list(fig.data)


# -- panels ---------------------------------------------------------------------------


def test_race_figure_plots_each_sides_own_clock_and_the_speedup():
    data = synthetic_race()
    race = race_view(data)
    fig = panels.race_figure(race_view(data).records, speedups=panels.speedups(race))
    assert (
        fig.to_json()
        == panels.race_figure(race_view(data).records, figures=race.figures, speedups=panels.speedups(race)).to_json()
    )
    by_name = {t.name.split(":")[0]: t for t in traces(fig)}
    for lane in data.lanes:
        trace = by_name[panels.short_label(lane.method)]
        assert list(trace.x) == [0.0, *(r.total_seconds for r in lane.records)]
        assert list(trace.y) == [0, *(r.total_tokens for r in lane.records)]
    # 8 tokens in 0.9 s against 8 tokens in 1.4 s on the clock; the speedup shown is the headline's (the
    # prefill charged once, the rounds at their median cost), the same figure the table and /race show.
    assert panels.wall_clock_speedups(race) == pytest.approx({"sage_over_static": 1.4 / 0.9})
    lead, rival = (side_times(lane.method, lane.records) for lane in data.lanes)
    point = point_speedups(lead, rival)
    assert point is not None and panels.speedups(race) == pytest.approx({"sage_over_static": point[0]})
    assert fig.layout.annotations[0].text.startswith("the headline's speedup, SAGE<br>")
    assert f"÷ SD-Tree: <b>{point[0]:.2f}×</b>" in fig.layout.annotations[0].text
    assert f"<b>{point[0]:.2f}×</b>" in render.table_html(race_view(data))


def test_accepted_figure_shows_tau_per_step_and_leaves_out_plain_decoding():
    data = synthetic_race(with_ar=True)
    fig = panels.accepted_figure(race_view(data).records)
    assert len(fig.data) == 2  # plain decoding drafts nothing
    sage = next(t for t in fig.data if t.name.startswith("SAGE"))
    assert list(sage.x) == [1, 2] and list(sage.y) == [3, 2]
    assert "mean τ 2.50" in sage.name
    static = next(t for t in fig.data if t.name.startswith("SD-Tree"))
    assert list(static.y) == [1, 1, 2]


def test_shape_figure_reads_depth_width_and_nodes_off_each_tree():
    data = synthetic_race()
    fig = panels.shape_figure(race_view(data).records)
    assert len(fig.data) == 6  # 3 rows x 2 methods
    sage = [t for t in fig.data if t.legendgroup == "sage"]
    depth, width, nodes = (list(t.y) for t in sage)
    assert depth == [3, 2] and width == [3, 2] and nodes == [5, 3]
    static_nodes = list([t for t in fig.data if t.legendgroup == "static"][2].y)
    assert static_nodes == [4, 4, 4]


def test_confidence_figure_shows_entropy_alpha_and_the_planned_shape():
    lanes = race_view(synthetic_race()).records
    fig = panels.confidence_figure(lanes)
    named = {t.name: t for t in fig.data}
    assert list(named["entropy H (nats)"].y) == [0.4, 1.5]
    assert list(named["confidence α"].y) == [0.8, 0.3]
    assert list(named["D(α)"].y) == [7, 5]
    assert list(named["W(α)"].y) == [4, 7]
    sage = [r for r in lanes["sage"] if r.phase == "decode" and r.planned_depth is not None]
    assert list(named["root width"].y) == [r.root_width for r in sage]
    without = panels.confidence_figure({"static": lanes["static"], "ar": ar_records()})
    assert "not in this race" in without.layout.annotations[0].text


def test_tree_layout_centres_parents_over_their_children():
    # root -> a (0), b (1); a -> c (2), d (3)
    ys = panels.tree_layout((-1, -1, 0, 0))
    node_a, node_b, node_c, node_d, root = ys
    assert (node_c, node_d, node_b) == (0.0, 1.0, 2.0)
    assert node_a == 0.5 and root == pytest.approx((0.5 + 2.0) / 2)


def test_no_label_sits_on_the_accepted_paths_line():
    """Each accepted node's label goes right of it on the side its next step (the next accepted node or the
    bonus) does not leave by: above when the path goes down (the y axis runs downwards), below when it goes
    up or straight on, as on a chain."""
    data = synthetic_race()
    for record in data.lane("sage").records[1:]:
        fig = panels.tree_figure(data.lane("sage").records, record.round, data.token_texts, "sage")
        nodes = next(t for t in fig.data if t.name == "draft nodes")
        bonus = next(t for t in fig.data if t.name == "bonus")
        path = list(record.accepted_nodes)
        steps = [nodes.y[n] for n in path[1:]] + [bonus.y[0]]
        assert len(path) >= 2 and nodes.y[path[0]] == nodes.y[path[1]]  # a chain: the line runs straight on
        for node, next_y in zip(path, steps, strict=True):
            expected = "top right" if next_y > nodes.y[node] else "bottom right"
            assert nodes.textposition[node] == expected, (record.round, node)
        assert all(nodes.textposition[n] == "middle right" for n in range(len(nodes.x)) if n not in path)


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
    assert "round 1" in fig.layout.title.text and "accepted 3" in fig.layout.title.text
    # The output ended inside an accepted path: no bonus drawn.
    ended = replace(records[2], new_tokens=records[2].new_tokens[:2], new_token_texts=records[2].new_token_texts[:2])
    ended_fig = panels.tree_figure([*records[:2], ended], 2, data.token_texts, "sage")
    assert all(t.name != "bonus" for t in ended_fig.data) and "no bonus" in ended_fig.layout.title.text
    # None follows the latest round; round 0 is the prefill.
    assert "round 2" in panels.tree_figure(records, None, data.token_texts).layout.title.text
    assert "prefill" in panels.tree_figure(records, 0, data.token_texts).layout.annotations[0].text


def test_figures_are_marked_as_replay():
    data = synthetic_race()
    data.replay = True
    figures = panel_figures(race_view(data), Focus("sage"))
    assert set(figures) == {"confidence", "shapes", "tree", "accepted", "race"}
    assert all("(replay)" in fig.layout.title.text for fig in figures.values())


def test_every_panel_downloads_as_a_slide_sized_png():
    """Gradio hands the figure's JSON to Plotly: its config sets the camera button's scale and file name."""
    data = synthetic_race()
    for name, fig in panel_figures(race_view(data), Focus("sage")).items():
        config = json.loads(fig.to_json())["config"]
        assert config["toImageButtonOptions"] == {
            "format": "png",
            "scale": panels.SLIDE_SCALE,
            "filename": f"sage-{name}",
        }
        assert panels.SLIDE_SCALE >= 2


def test_the_tree_panel_draws_the_cut_candidates_and_panel_one_the_window():
    records = [r for r in sage_records()]
    step = next(r for r in records if r.phase == "decode")
    cut = replace(
        step,
        cut_parents=(-1, 0),
        cut_tokens=(901, 902),
        cut_probs=(0.05, 0.01),
        cut_rules=("threshold", "width"),
        window_mean=2.5,
        next_depth_max=step.depth_max,
    )
    fig = panels.tree_figure([r if r is not step else cut for r in records], step.round, {901: "zebra"}, "sage")
    drawn = next(t for t in fig.data if t.name == "cut")
    assert len(drawn.x) == 2 and "zebra" in drawn.text[0] and "threshold" in drawn.hovertext[0]
    confidence = panels.confidence_figure({"sage": [r if r is not step else cut for r in records]})
    window = next(t for t in confidence.data if t.name == "window mean τ")
    assert list(window.y) == [2.5] and "D_max holds" in window.text[0]


def _font_sizes(node, inside_font: bool = False):
    """Every font size in a figure's JSON (titles, ticks, legends, annotations, trace texts)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "size" and inside_font:
                yield from (value if isinstance(value, list) else [value])
            else:
                yield from _font_sizes(value, key.endswith("font"))
    elif isinstance(node, list):
        for item in node:
            yield from _font_sizes(item, inside_font)


def test_every_panel_text_is_at_least_the_talk_views_size():
    data = synthetic_race()
    figures = panel_figures(race_view(data), Focus("sage"))
    figures["empty"] = panels.confidence_figure({})
    for name, fig in figures.items():
        layout = json.loads(fig.to_json())
        sizes = list(_font_sizes(layout))
        assert sizes, f"{name}: no font sizes found"
        assert min(sizes) >= panels.TEXT_PX >= 14, (name, sorted(set(sizes)))
        assert layout["layout"]["font"]["size"] >= 14


def test_panel_one_says_why_the_root_is_narrower_than_planned():
    records = list(sage_records())
    step = next(r for r in records if r.phase == "decode" and r.planned_width is not None)
    planned = step.root_width + 2
    cut = replace(
        step,
        planned_width=planned,
        cut_parents=(-1, -1, 0),
        cut_tokens=(901, 902, 903),
        cut_probs=(0.05, 0.01, 0.2),
        cut_rules=("threshold", "budget", "width"),
    )
    note = panels.width_note(cut)
    assert f"W(α) planned {planned}, root width drawn {step.root_width}" in note
    assert "2 of the root's" in note and "1 by threshold" in note and "1 by budget" in note
    assert "cut" not in panels.width_note(replace(step, planned_width=step.root_width))


def test_panel_one_labels_its_window_row_before_the_window_closes():
    records = [replace(r, window_mean=None) for r in sage_records()]
    fig = panels.confidence_figure({"sage": records})
    texts = [a.text for a in fig.layout.annotations]
    assert any("their mean τ every" in t for t in texts), texts
    named = [trace.name for trace in fig.data if trace.showlegend is not False]
    assert any("D_max falls" in n for n in named) and any("D_max rises" in n for n in named), named


# -- HTML -----------------------------------------------------------------------------


def test_marked_text_marks_draft_and_bonus_tokens_and_step_boundaries():
    records = sage_records()
    html = render.marked_text(records)
    assert html.count("class='sage-step'") == len(records)
    assert html.count("sage-tok d") == sum(r.draft_token_count for r in records) == 5
    assert html.count("sage-tok b") == len(records)  # prefill token + one bonus per step
    assert "&lt;circle&gt;" in html and "<circle>" not in html


def test_badge_says_identical_when_all_sides_agree():
    html = render.badge_html(race_view(synthetic_race(with_ar=True)))
    assert "sage-badge ok" in html and "identical to plain decoding" in html


def test_badge_shows_the_first_differing_token():
    data = synthetic_race()
    data.lane("static").records[:] = with_changed_token(data.lane("static").records, 2, 1, 99, "blue")
    result = race_view(data).verdict
    assert not result.identical and result.first_difference["position"] == 4
    html = render.badge_html(race_view(data))
    assert "sage-badge bad" in html and "token 4" in html and "blue" in html and "id 99" in html


def test_the_headline_says_so_far_until_the_race_ends():
    data = synthetic_race()
    assert data.finished
    assert "so far" not in render.headline_html(race_view(data)) and "SAGE speedup:" in render.headline_html(
        race_view(data)
    )
    running = RaceData(
        lanes=[Lane(lane.method, lane.header, lane.records[:2]) for lane in data.lanes], token_texts=data.token_texts
    )
    assert not running.finished
    assert "SAGE speedup so far:" in render.headline_html(race_view(running))
    running.stopped = True
    assert "SAGE speedup when stopped:" in render.headline_html(race_view(running))
    data.replay = True
    assert "(replay, recorded on cpu)</span>:" in render.headline_html(race_view(data))  # the machine it ran on


def test_when_sage_loses_one_sentence_gives_the_measured_reason_and_the_rest_is_folded():
    data = synthetic_race()
    assert render.loss_sentence(race_view(data)) == ""  # SAGE won this one
    slow = [
        replace(
            r, total_seconds=3 * r.total_seconds, round_seconds=3 * r.round_seconds, draft_seconds=3 * r.draft_seconds
        )
        for r in data.lane("sage").records
    ]
    short = RaceData(lanes=[Lane("sage", header("sage"), slow), data.lanes[1]], token_texts=data.token_texts)
    assert render.loss_sentence(race_view(short)) == ""  # two rounds: the headline is unclear, and names no loser
    # six rounds a side (each side's first decode round again): the headline says slower, the sentence why
    sage_rounds = [replace(slow[1], round=i, round_seconds=1.0, draft_seconds=0.4) for i in range(1, 7)]
    tree_rounds = [replace(data.lane("static").records[1], round=i) for i in range(1, 7)]
    lost = RaceData(
        lanes=[
            Lane("sage", header("sage"), [slow[0], *sage_rounds]),
            Lane("static", header("static"), [data.lane("static").records[0], *tree_rounds]),
        ],
        token_texts=data.token_texts,
    )
    main = race_view(lost).headlines[0]
    assert main.verdict == "slower"
    sentence = render.loss_sentence(race_view(lost))
    ms, drafting = 1000 * sage_rounds[0].round_seconds, 1000 * sage_rounds[0].draft_seconds
    assert sentence.startswith(f"SAGE was slower than SD-Tree here ({main.speedup:.2f}×)")
    assert f"its rounds took {ms:.1f} ms ({drafting:.1f} drafting)" in sentence
    assert "charged once to both" in sentence  # the prefill is the same work: the rounds decide
    assert len(sentence.split()) <= 50
    folded = render.loss_html(race_view(lost), "cpu")
    assert "<details" in folded and folded.index(sentence.split(":")[0]) < folded.index("<details")
    assert "<details" not in render.loss_html(race_view(lost), "cuda")


def test_a_live_race_on_a_slower_machine_is_told_so_in_one_line():
    recorded = synthetic_race()
    slow = [
        replace(r, total_seconds=10 * r.total_seconds, round_seconds=10 * r.round_seconds)
        for r in recorded.lane("sage").records
    ]
    live = RaceData(lanes=[Lane("sage", header("sage"), slow), recorded.lanes[1]], token_texts=recorded.token_texts)
    note = render.pace_note(race_view(live), race_view(recorded))
    here = LaneFigures.of(slow).tokens_per_second
    there = LaneFigures.of(recorded.lane("sage").records).tokens_per_second
    assert f"ran SAGE at {here:.1f} tokens/s" in note and f"ran at {there:.1f}" in note
    assert f"{there / here:.1f}× slower" in note and "(cpu, float32)" in note
    assert render.pace_note(race_view(recorded), race_view(recorded)) == ""  # as fast: nothing to say
    assert render.pace_note(race_view(live), None) == ""
    other = RaceData(lanes=[Lane("sage", replace(header("sage"), target="another"), slow)])
    assert render.pace_note(race_view(other), race_view(recorded)) == ""  # another pair: not comparable


def test_badge_while_racing_compares_the_common_prefix():
    data = synthetic_race()
    data.lane("static").records[:] = data.lane("static").records[:2]
    assert "identical so far" in render.badge_html(race_view(data))


def test_table_lists_figures_from_the_records():
    data = synthetic_race()
    html = render.table_html(race_view(data))
    assert f"<td>{8 / 0.9:.1f}</td>" in html  # SAGE: 8 tokens in 0.9 s (the hand-built records)
    assert f"{1.4 / 0.9:.2f}×" in html
    assert "measured in this run" in html
    data.replay = True
    assert "recorded (replay)" in render.table_html(race_view(data))


def test_lane_html_escapes_and_tags_replays():
    data = synthetic_race()
    data.replay = True
    html = render.race_html(race_view(data))
    assert html.count("class='sage-col'") == 2 and "replay" in html
    assert "done (eos)" in html


# -- race traces and replay ---------------------------------------------------------------


def test_race_trace_round_trip():
    data = synthetic_race(with_ar=True)
    back = parse_race(list(race_trace_lines(data)))
    assert back.replay and race_view(back).methods == race_view(data).methods
    for lane, again in zip(data.lanes, back.lanes, strict=True):
        assert again.records == lane.records and again.header == lane.header
    assert back.token_texts[40] == "w40"


def test_a_single_run_trace_of_the_library_loads(tmp_path):
    path = tmp_path / "run.jsonl"
    save_trace(path, header("sage"), sage_records())
    back = parse_race(path.read_text().splitlines())
    assert race_view(back).methods == ["sage"] and back.lane("sage").records == sage_records()
    assert back.token_texts[TOKENS[1]] == " red"  # learned from the emitted texts


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "empty"),
        (["not json"], "not JSON"),
        (['{"race": {"format": "other/9"}}'], "unsupported race format"),
        (['{"race": {"format": "sage-race/1", "token_texts": {"abc": "x"}}}'], "must map token ids to texts"),
        (['{"race": {"format": "sage-race/1", "token_texts": {"12": 7}}}'], "must map token ids to texts"),
        (["[" * 100_000 + "]" * 100_000], "nested too deeply"),
        (['{"round": 1}'], "must start with a header"),
    ],
)
def test_bad_race_traces_are_refused(lines, message):
    with pytest.raises(TraceError, match=message):
        parse_race(lines)


def test_a_trace_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "race.jsonl"
    path.write_text("\n".join(race_trace_lines(synthetic_race())) + "\n")
    size = path.stat().st_size
    assert race_view(load_race(path, max_bytes=size)).methods == ["sage", "static"]
    monkeypatch.setattr(Path, "read_text", lambda *a, **k: pytest.fail("an oversized trace must not be read"))
    with pytest.raises(TraceError, match="the limit is"):
        load_race(path, max_bytes=size - 1)


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
    counts = dict.fromkeys(race_view(data).methods, 0)
    for snapshot in replay_steps(data, 2.0, sleep, lambda: now[0]):
        grown = [lane for lane in snapshot.lanes if len(lane.records) > counts[lane.method]]
        assert len(grown) == 1  # one step at a time
        lane = grown[0]
        counts[lane.method] = len(lane.records)
        record = lane.records[-1]
        assert now[0] == pytest.approx(record.total_seconds / 2.0)  # at its recorded time, twice as fast
        seen.append((record.total_seconds, lane.method))
    assert len(seen) == sum(len(lane.records) for lane in data.lanes)
    assert seen == sorted(seen, key=lambda event: (event[0], race_view(data).methods.index(event[1])))


def test_replay_without_waiting_ends_with_the_recorded_race():
    data = synthetic_race(with_ar=True)
    final = last(replay_steps(data, speed=0, sleep=lambda s: pytest.fail("no waiting at speed 0")))
    assert final.replay and final.finished
    assert [lane.records for lane in final.lanes] == [lane.records for lane in data.lanes]


def test_api_result_figures_agree_with_its_trace():
    data = synthetic_race(with_ar=True)
    result = race_result(data)
    back = parse_race(result["trace"].splitlines())
    seconds = {"sage": 0.9, "static": 1.4, "ar": 0.5 + 0.15 * 7}  # each side's total time in the hand-built records
    for lane in back.lanes:
        figures = result["figures"][lane.method]
        assert figures["rounds"] == len(lane.records) - 1 and figures["tokens"] == len(TOKENS)
        assert figures["tokens_per_second"] == pytest.approx(len(TOKENS) / seconds[lane.method])
        assert result["texts"][lane.method] == "".join(TEXTS)
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
    assert render.badge_html(race_view(data)).count("waiting") == 1
    assert re.search("Pick an example", render.race_html(None))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("round_seconds", float("nan"), "finite, non-negative"),
        ("total_seconds", -1.0, "finite, non-negative"),
        ("verify_seconds", "fast", "finite, non-negative"),
        ("tree_parents", [5], "parent must come before it"),
        ("tree_draft_probs", [2.0], "probabilities"),
        ("accepted_nodes", [7], "not in the tree"),
        ("bonus_token", "x", "integers"),
        ("new_token_texts", [], "needs its text"),
        ("new_tokens", "abc", "must be lists"),
        ("phase", "middle", "phase 'prefill' or 'decode'"),
        ("finish_reason", "bored", "finish reason"),
        ("alpha", 1.5, "alpha must lie in \\[0, 1\\]"),
        ("entropy", float("inf"), "entropy must be a finite"),
        ("planned_depth", 2.5, "planned depths and widths"),
        ("round", 7, "numbered 7, not 1"),
        ("total_tokens", 99, "running total is 99 tokens"),
        ("method", "static", "a round of 'static', not of 'sage'"),
        ("accepted_tokens", [11, 12], "nodes and tokens differ in length"),
    ],
)
def test_a_trace_with_a_malformed_step_is_refused_before_anything_is_shown(field, value, message):
    lines = list(race_trace_lines(synthetic_race()))
    index = next(i for i, line in enumerate(lines) if '"round": 1,' in line)
    row = json.loads(lines[index])
    if field in ("tree_parents", "tree_draft_probs", "accepted_nodes"):
        row.update(
            tree_tokens=[11], tree_parents=[-1], tree_draft_probs=[0.5], accepted_nodes=[0], accepted_tokens=[11]
        )
    row[field] = value
    lines[index] = json.dumps(row)
    with pytest.raises(TraceError, match=message):
        parse_race(lines)


@pytest.mark.parametrize(
    ("parents", "message"),
    [
        (tuple(range(-1, MAX_TREE_DEPTH)), f"{MAX_TREE_DEPTH + 1} levels deep"),
        ((-1,) * (MAX_TREE_NODES + 1), f"{MAX_TREE_NODES + 1} nodes"),
    ],
)
def test_a_trace_with_a_tree_beyond_any_plan_is_refused(parents, message):
    """Trees are drawn recursively and walked per node: a trace cannot bring one that no policy plans."""
    lines = list(race_trace_lines(synthetic_race()))
    index = next(i for i, line in enumerate(lines) if '"round": 1,' in line)
    row = json.loads(lines[index])
    count = len(parents)
    row.update(tree_tokens=[11] * count, tree_parents=list(parents), tree_draft_probs=[0.5] * count)
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


# -- Stop, the handlers' view -----------------------------------------------------------------


def handlers_on_a_stand_in_page() -> Handlers:
    """The handlers with each component stood in by its name (they answer with updates keyed by component)."""
    names = [f.name for f in fields(Page)] + [panel.attribute for panel in panel_table()]  # (each panel's plot)
    page = SimpleNamespace(**{name: name for name in names})
    settings = Settings(Limits(), [], "builtin", CustomModels(), [], text_interval=0.0, figure_interval=0.0)
    return Handlers(page, settings)


def unfinished_race() -> RaceData:
    data = synthetic_race()
    for lane in data.lanes:
        del lane.records[2:]
    return data


def test_stop_leaves_every_status_line_saying_the_race_was_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(handlers, "TRACE_DIR", tmp_path)
    data = unfinished_race()
    update = handlers_on_a_stand_in_page().stop(data)
    assert data.stopped
    assert "race was stopped" in update["status"]
    assert "Stopped" in update["verdict"] and "identical so far" in update["verdict"]
    assert update["lanes"].count("sage-tag stop") == 2 and "running" not in update["lanes"]


def test_a_stopped_race_streams_no_further_and_ends_saying_so(tmp_path, monkeypatch):
    """The race's own stream may still be mid-step when Stop comes: its next update says stopped, not racing."""
    monkeypatch.setattr(handlers, "TRACE_DIR", tmp_path)
    data = unfinished_race()
    handler = handlers_on_a_stand_in_page()
    served = []

    def source():
        for step in range(100):
            served.append(step)
            if step == 3:
                handler.stop(data)  # the visitor presses Stop here
            yield data

    updates = list(handler.stream(source(), "Racing on cpu, step by step:", None))
    assert served == [0, 1, 2, 3]
    assert "race was stopped" in updates[-1]["status"] and "Racing" not in updates[-1]["status"]
    assert "Stopped" in updates[-1]["verdict"]


def test_a_view_drawn_while_stop_comes_is_not_sent_after_it(tmp_path, monkeypatch):
    """Stop pressed while the stream draws a running view: that view is dropped (it would reach the
    page after Stop's own and show the race running again); the stream ends saying stopped."""
    monkeypatch.setattr(handlers, "TRACE_DIR", tmp_path)
    data = unfinished_race()
    handler = handlers_on_a_stand_in_page()
    real_view = handler.view

    def view_while_stop_comes(*args, **kwargs):
        update = real_view(*args, **kwargs)
        handler.stop(data)  # the visitor presses Stop while this view is drawn
        return update

    monkeypatch.setattr(handler, "view", view_while_stop_comes)
    updates = list(handler.stream(iter([data, data]), "Racing on cpu, step by step:", None))
    assert len(updates) == 1
    assert "race was stopped" in updates[0]["status"] and "Racing" not in updates[0]["status"]


def test_after_stop_draws_the_stopped_race_again(tmp_path, monkeypatch):
    monkeypatch.setattr(handlers, "TRACE_DIR", tmp_path)
    handler = handlers_on_a_stand_in_page()
    data = unfinished_race()
    nothing = handler.unchanged()  # not stopped: nothing to redraw (an update, never `{}`: Gradio's bare "Error")
    assert handler.after_stop(data) == nothing and handler.after_stop(None) == nothing and nothing
    handler.stop(data)
    update = handler.after_stop(data)
    assert "race was stopped" in update["status"] and "Stopped" in update["verdict"]
    assert update["lanes"].count("sage-tag stop") == 2


def test_a_finished_race_is_not_marked_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(handlers, "TRACE_DIR", tmp_path)
    data = synthetic_race()
    handler = handlers_on_a_stand_in_page()
    assert handler.stop(data) == handler.unchanged() and not data.stopped


def test_written_traces_are_removed_after_an_hour(tmp_path):
    old = Path(handlers.save_trace_file(synthetic_race(), tmp_path))
    hours_ago = time.time() - 2 * handlers.TRACE_MAX_AGE
    os.utime(old, (hours_ago, hours_ago))
    new = Path(handlers.save_trace_file(synthetic_race(), tmp_path))
    assert not old.exists() and new.exists()


# -- custom models: the operator's choice ----------------------------------------------------------


@pytest.fixture
def model_folder(tmp_path) -> Path:
    folder = tmp_path / "models"
    (folder / "mine").mkdir(parents=True)
    (folder / "mine" / "config.json").write_text("{}")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "config.json").write_text("{}")
    (folder / "link").symlink_to(tmp_path / "outside")
    return folder


def test_custom_models_are_off_unless_the_operator_turns_them_on(monkeypatch):
    monkeypatch.delenv("SAGE_APP_CUSTOM_MODELS_DIR", raising=False)
    monkeypatch.delenv("SAGE_APP_CUSTOM_HUB", raising=False)
    off = CustomModels.from_env()
    assert not off.enabled
    assert [key for _, key in models.preset_choices([models.BUILTIN], off.enabled)] == ["builtin"]
    with pytest.raises(ModelLoadError, match="custom models are turned off"):
        models.resolve_pair("custom", [models.BUILTIN], "/etc", "/etc", off)
    monkeypatch.setenv("SAGE_APP_CUSTOM_MODELS_DIR", "/srv/models")
    monkeypatch.setenv("SAGE_APP_CUSTOM_HUB", "1")
    assert CustomModels.from_env() == CustomModels(Path("/srv/models"), hub=True)


def test_custom_models_only_inside_the_allowed_folder_with_one_message_for_the_rest(model_folder, tmp_path):
    custom = CustomModels(folder=model_folder)
    assert custom.resolve("mine", "target") == str((model_folder / "mine").resolve())
    assert custom.resolve(str(model_folder / "mine"), "target") == str((model_folder / "mine").resolve())
    refused = {}
    for name in (
        "/etc",
        "/etc/passwd",
        "/no/such/model",
        "../outside",
        str(tmp_path / "outside"),
        "link",
        "",
        ".",
        "Qwen/Qwen2.5-VL-3B-Instruct",
    ):
        with pytest.raises(ModelLoadError) as error:
            custom.resolve(name, "target")
        refused[name] = str(error.value).replace(repr(name), "NAME")
    assert len(set(refused.values())) == 1, refused  # nothing tells what exists on the server
    assert str(model_folder) not in next(iter(refused.values()))


def test_hub_ids_only_when_allowed():
    assert CustomModels(hub=True).resolve("Qwen/Qwen2.5-VL-3B-Instruct", "draft") == "Qwen/Qwen2.5-VL-3B-Instruct"
    for name in ("/etc", "../x/y", "a/b/c", "owner/..", "not an id"):
        with pytest.raises(ModelLoadError, match="is not a model this server offers: give a hub id"):
            CustomModels(hub=True).resolve(name, "draft")


def test_a_failed_custom_load_names_no_server_path(model_folder, monkeypatch):
    def fails(target, draft, **kwargs):
        raise ModelLoadError(f"cannot load the target model {target!r}: no weights in {target}/model.safetensors")

    monkeypatch.setattr(models, "load_pair", fails)
    path = CustomModels(folder=model_folder).resolve("mine", "target")
    with pytest.raises(ModelLoadError) as error:
        models.PairCache(1).get(path, path, names=("mine", "mine"))
    assert "'mine'" in str(error.value) and str(model_folder) not in str(error.value)
    # Any pair's load error is told without paths (the operator's log has them).
    with pytest.raises(ModelLoadError) as error:
        models.PairCache(1).get("/srv/private/target", "/srv/private/draft")
    assert "/srv/private" not in str(error.value) and "<path>" in str(error.value)


# -- loading: its own slot, with stages ------------------------------------------------------------


def test_loading_reports_its_stages_and_never_holds_the_race_slot(monkeypatch):
    cache = models.PairCache(2)
    started, release, stages = threading.Event(), threading.Event(), []

    def slow_load(target, draft, report=None, **kwargs):
        report(f"loading the target {target}")
        if target == "new":
            started.set()
            assert release.wait(10)
        report(f"loading the draft {draft}")
        return SimpleNamespace(name=target)

    monkeypatch.setattr(models, "load_pair", slow_load)
    monkeypatch.setattr(models, "warm_up", lambda pair: None)
    cache.get("ready", "ready")  # loaded before
    loader = threading.Thread(target=cache.get, args=("new", "new"), kwargs={"report": lambda *s: stages.append(s)})
    loader.start()
    assert started.wait(10)
    # While "new" loads: the race slot is free, and a loaded pair is handed out at once.
    assert models.RACE_SLOT.acquire(blocking=False)
    models.RACE_SLOT.release()
    began = time.monotonic()
    assert cache.get("ready", "ready").pair.name == "ready"
    assert time.monotonic() - began < 1.0
    release.set()
    loader.join(10)
    assert [text.split(" ")[0:2] for text, _ in stages] == [
        ["loading", "the"],
        ["loading", "the"],
        ["choosing", "the"],  # the CPU threads (sage_core.threads; SAGE_THREADS in the tests: nothing timed)
        ["warming", "up"],
        ["ready"],
    ]
    assert [done for _, done in stages] == sorted(done for _, done in stages)
    assert cache.loaded("new", "new")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sampling": "hot"}, "sampling settings must be an object"),
        ({"sampling": {"temperature": "hot", "seed": 1}}, "must hold a temperature"),
        ({"sampling": {"temperature": 0.7, "seed": -3}}, "must hold a temperature"),
        ({"prune_ratio": float("nan")}, "pruning ratio must lie in"),
        ({"visual_tokens": 2.5}, "visual token count"),
    ],
)
def test_a_trace_header_with_bad_sampling_or_pruning_fields_is_refused(fields, message):
    """The badge and the draft picture read these fields: a replay refuses them before showing anything."""
    lines = list(race_trace_lines(synthetic_race()))
    row = json.loads(lines[1])
    row["header"].update(fields)
    lines[1] = json.dumps(row)
    with pytest.raises(TraceError, match=message):
        parse_race(lines)
    assert parse_race(list(race_trace_lines(synthetic_race()))).lanes  # the untouched trace loads


def test_the_table_shows_the_measured_cost_curve_and_the_speedup_it_predicts():
    from sage_core.cost_curve import CostCurve
    from sage_core.studies.costs import predicted_speedups

    data = synthetic_race()
    assert "Verification cost" not in render.table_html(race_view(data))  # nothing measured: nothing shown
    data.costs = CostCurve("cpu", "float32", "fast", (1, 2, 4), 1.0, (1.2, 1.4, 2.2), (0.5, 0.6, 1.0))
    html = render.table_html(race_view(data))
    assert "Verification cost (in use: measured on this machine (cpu, float32)" in html
    assert "<td>2.20 (2.20×)</td>" in html and "<td>0.60</td>" in html
    predicted = predicted_speedups(data.costs, race_view(data).records, "sage")
    assert f"({predicted['static']:.2f}×)" in html
    # The curve travels with the race trace and comes back with a replay; a race without one still loads.
    replayed = parse_race(list(race_trace_lines(data)))
    assert replayed.costs == data.costs
    assert "recorded with the race" in render.table_html(race_view(replayed))
    data.costs = None
    assert parse_race(list(race_trace_lines(data))).costs is None
    broken = [
        json.dumps({"race": {"format": "sage-race/1", "costs": {"sizes": [0]}}}),
        *list(race_trace_lines(data))[1:],
    ]
    with pytest.raises(TraceError, match="cost curve"):
        parse_race(broken)


def test_the_table_states_the_premise_on_sages_rounds():
    data = synthetic_race()
    html = render.table_html(race_view(data))
    assert "The paper's premise on this input" in html
    assert "too few (or too uniform)" in html  # two hand-built rounds are too few to test it


def test_no_text_label_of_any_panel_is_clipped_at_its_axes():
    """The HTML export cut the tree's labels at the plot's edge ("apes", "<|in"): every trace that draws text
    draws it whole, past the axes if it must."""
    race = race_view(synthetic_race(with_ar=True))
    for name, fig in panel_figures(race).items():
        for trace in fig.data:
            if "text" in (getattr(trace, "mode", None) or ""):
                assert trace.cliponaxis is False, (name, trace.name)
