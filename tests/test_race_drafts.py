"""The race on both drafts: each chosen method drafted by the pair's own (sequential) draft and again by its
one-pass sibling (`second_draft: "one-pass"`), side by side on the same target.

The built-in pair races SAGE (and sage-frozen, which holds the α of SAGE's lane on its own draft) on both
drafts beside plain decoding: every lane equals the target's own greedy output, the one-pass lanes run one
draft forward a round and the sequential ones more, every place keyed by method takes the lanes' keys
("sage/one-pass"), the labels say the draft, the explainer and the lanes show the draft forwards of both
("16 against 1"), a trace reads back with its keys, and a pair without a one-pass sibling is one sentence.
"""

from __future__ import annotations

import html
import json
import os
import re
from dataclasses import fields, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from app_records import synthetic_race

from app import models
from app.boundary import user_message
from app.handlers import Handlers, Settings, race_api_function
from app.inputs import InputProblem, Limits, RaceForm, race_fields
from app.race_trace import parse_race, race_trace_lines
from sage_core import load_media
from sage_core.errors import ModelLoadError, SageError, TraceError
from sage_core.methods import LaneKey, method_label, method_spec, short_name
from sage_testkit.pairs import greedy

ROOT = Path(__file__).resolve().parent.parent
IMAGE = ROOT / "assets" / "examples" / "chart.png"
PROMPT = "describe the image in detail."
TOKENS = 12
METHODS = ["sage", "sage-frozen", "ar"]
LANES = ["sage", "sage/one-pass", "sage-frozen", "sage-frozen/one-pass", "ar"]

needs_builtin = pytest.mark.skipif(
    not (models.builtin_available() and (models.ONE_PASS_DRAFT_DIR / "config.json").is_file()),
    reason="the built-in pair or its one-pass draft is not trained",
)


def handlers(page: Any = None) -> Handlers:
    settings = Settings(
        Limits(), models.presets(), "builtin", models.CustomModels(), [], text_interval=0.0, figure_interval=0.0
    )
    return Handlers(page, settings)


def stand_in_page() -> Any:
    """Each page component stood in by its name (the panels' plots too)."""
    from app.page import Page
    from app.panel_table import panel_table

    return SimpleNamespace(
        **{f.name: f.name for f in fields(Page)}, **{p.attribute: p.attribute for p in panel_table()}
    )


@pytest.fixture(scope="module")
def answer() -> dict:
    """One /race answer of the built-in pair on both drafts (the pair warmed up as the app warms it: the pair
    cache is the process's, and a pair loaded here without its cost curve would stay so for the next test)."""
    return handlers().race_api(
        image=str(IMAGE), prompt=PROMPT, pair="builtin", methods=METHODS, max_new_tokens=TOKENS, second_draft="one-pass"
    )


@needs_builtin
def test_both_drafts_race_as_lanes_of_their_own_and_stay_lossless(answer):
    assert answer["methods"] == LANES  # each method on the pair's draft, then on the one-pass draft
    assert answer["drafts"] == {
        "sage": "builtin",
        "sage/one-pass": "builtin-one-pass",
        "sage-frozen": "builtin",
        "sage-frozen/one-pass": "builtin-one-pass",
        "ar": "",
    }
    target = models.PAIRS.get("builtin", "builtin").pair
    expected = greedy(target, load_media(IMAGE), PROMPT, TOKENS)  # the target's own greedy decoding
    assert all(answer["token_ids"][key] == expected for key in LANES)
    assert answer["lossless"]["identical"] and answer["lossless"]["compared"] == TOKENS
    # the same target object serves both drafts; the one-pass draft is loaded once, with the pair
    loaded = models.PAIRS.get("builtin", "builtin")
    (second,) = loaded.siblings.values()
    assert second.target is loaded.pair.target and second.draft is not loaded.pair.draft


@needs_builtin
def test_the_one_pass_lanes_draft_in_one_forward_a_round(answer):
    race = parse_race(answer["trace"].splitlines())
    assert [lane.key for lane in race.lanes] == LANES  # the trace keeps the lanes' keys
    for lane in race.lanes:
        rounds = [r for r in lane.records if r.phase == "decode"]
        assert rounds, lane.key
        if lane.draft:
            assert lane.header is not None and lane.header.draft_block > 0
            assert all(r.draft_forwards == 1 for r in rounds), lane.key
        elif lane.method != "ar":
            assert lane.header is not None and lane.header.draft_block == 0
            assert all(r.draft_forwards > 1 for r in rounds if r.tree_tokens), lane.key
            assert answer["figures"][lane.key]["draft_forwards_per_round"] > 1
    assert answer["figures"]["sage/one-pass"]["draft_forwards_per_round"] == 1


@needs_builtin
def test_every_reader_keyed_by_method_takes_the_lanes_keys(answer):
    assert set(answer["texts"]) == set(answer["token_ids"]) == set(answer["figures"]) == set(LANES)
    assert set(answer["draft_prompt_tokens"]) == set(LANES)
    assert {"sage_over_sage/one-pass", "sage_over_sage-frozen/one-pass", "sage_over_ar"} <= set(answer["speedups"])
    assert "sage/one-pass" in answer["headlines"] and set(answer["account"]["sides"]) == set(LANES)
    assert any(line.startswith("sage/one-pass: τ") for line in answer["account"]["lines"])
    # sage-frozen on each draft held the mean α of SAGE's lane on the same draft
    race = parse_race(answer["trace"].splitlines())
    frozen = method_spec("sage-frozen")
    for draft in ("", "one-pass"):
        sage, held = race.lane(LaneKey("sage", draft)), race.lane(LaneKey("sage-frozen", draft))
        assert sage is not None and held is not None and held.header is not None
        assert held.header.settings_of("sage-frozen")["alpha"] == frozen.held_settings(None, sage.records).alpha
    # the answer is strict JSON (the MCP tool's), the lanes' keys and all
    assert json.loads(json.dumps(answer, allow_nan=False))["methods"] == LANES


@needs_builtin
def test_the_page_labels_each_draft_and_shows_both_lanes_draft_forwards(tmp_path, monkeypatch):
    from app import handlers as handlers_module

    monkeypatch.setattr(handlers_module, "TRACE_DIR", tmp_path)
    monkeypatch.setenv("SAGE_APP_COST_CURVE", os.environ.get("SAGE_APP_COST_CURVE", "off"))
    page = stand_in_page()
    h = handlers(page)
    form = RaceForm(image=str(IMAGE), prompt=PROMPT, pair="builtin", methods=["sage", "static"], max_new_tokens=8)
    *_, final = h.race_live(form.replace(second_draft="one-pass"), "sage/one-pass")
    lanes, table = final["lanes"], final["table"]
    assert "SAGE · one-pass draft" in lanes and "SD-Tree · one-pass draft" in lanes and "SAGE · one-pass draft" in table
    # each lane its draft forwards a round against its twin's: the sequential lane's many against 1, and back
    forwards = re.findall(r"draft fwd <b>([\d.]+)</b> against ([\d.]+)<", lanes)
    assert len(forwards) == 4 and forwards[1] == ("1", forwards[0][0]) and float(forwards[0][0]) > 1
    assert "against 1 in SAGE · one-pass draft" in lanes  # its title names the twin
    # the explainer of the one-pass lane: its one forward, why siblings help less, and both lanes' forwards
    explained = final["explain"]
    assert "Round" in explained and "SAGE · one-pass draft" in explained
    assert "one forward for this whole" in explained and "siblings help less" in explained
    assert "with the sequential draft against <b>1</b> with the one-pass draft" in explained
    radio = final["tree_lane"]
    assert ("SAGE (adaptive tree) · one-pass draft", "sage/one-pass") in radio["choices"]
    # the stepped race runs the same lanes
    update = h.step_live(form.replace(second_draft="one-pass"), None, None)
    assert [lane.key for lane in update["stepper"].data.lanes] == ["sage", "sage/one-pass", "static", "static/one-pass"]


def test_a_pair_without_a_one_pass_sibling_is_refused_in_one_sentence_before_any_load():
    form = RaceForm(image=str(IMAGE), prompt=PROMPT, pair="builtin-one-pass", methods=["sage", "ar"])
    with pytest.raises(SageError) as refused:
        handlers().race_api(**form.replace(second_draft="one-pass").values)
    message = user_message(refused.value)  # what the page, the API and MCP say
    assert message == (
        "the pair 'builtin-one-pass' has no one-pass sibling draft, so it cannot also race with the one-pass "
        "draft: choose the built-in pair (or its hesitant draft), or race without it"
    )
    with pytest.raises(ModelLoadError, match=r"^a custom pair has no one-pass sibling draft, so [^.\n]*$"):
        models.sibling_preset("custom", "one-pass", models.presets())


def test_only_a_pair_with_a_sibling_offered_names_one():
    offered = models.presets()
    builtin = next(p for p in offered if p.key == "builtin")
    assert builtin.siblings == (("one-pass", "builtin-one-pass"),) and builtin.drafts == ("one-pass",)
    with pytest.raises(ModelLoadError, match="the pair 'builtin-one-pass' has no one-pass sibling draft"):
        models.sibling_preset("builtin-one-pass", "one-pass", offered)
    with pytest.raises(ModelLoadError, match="no one-pass sibling draft"):
        models.sibling_preset("builtin", "one-pass", [builtin])  # its sibling not offered on this machine
    with pytest.raises(ModelLoadError, match="no two-pass sibling draft"):
        models.sibling_preset("builtin", "two-pass", offered)  # a draft the pair does not offer


@pytest.mark.parametrize("value", ["two-pass", 3, ["one-pass"]])
def test_a_second_draft_that_is_not_one_is_one_sentence(value):
    with pytest.raises(InputProblem, match=r'^second_draft must be "one-pass" .* or "off", not '):
        handlers().choice(RaceForm(pair="builtin", second_draft=value))


@pytest.mark.parametrize("value", ["off", "", None, False])
def test_second_draft_off_races_the_pairs_own_draft_only(value):
    assert handlers().choice(RaceForm(pair="builtin", second_draft=value)).drafts == ()


@needs_builtin
def test_the_one_pass_draft_races_with_the_targets_features_off_too():
    """second_draft "one-pass-off": each drafting method on the pair's draft, on the one-pass draft and on it with
    the target's features off (the same sibling, not loaded again), every lane the target's greedy answer, the
    trace keeping the keys, and the one-pass block's line for the method saying features on over off."""
    from app.one_pass_view import one_pass_html
    from app.race import drafted_pairs
    from app.view import race_view
    from sage_core.models.one_pass import reads_features

    methods, lanes = ["sage", "ar"], ["sage", "sage/one-pass", "sage/one-pass-off", "ar"]
    form = RaceForm(
        image=str(IMAGE),
        prompt=PROMPT,
        pair="builtin",
        methods=methods,
        max_new_tokens=TOKENS,
        second_draft="one-pass-off",
    )
    answer = handlers().race_api(**form.values)
    assert answer["methods"] == lanes
    assert answer["drafts"]["sage/one-pass-off"] == answer["drafts"]["sage/one-pass"] == "builtin-one-pass"
    target = models.PAIRS.get("builtin", "builtin").pair
    expected = greedy(target, load_media(IMAGE), PROMPT, TOKENS)
    assert all(answer["token_ids"][key] == expected for key in lanes) and answer["lossless"]["identical"]
    assert answer["figures"]["sage/one-pass-off"]["draft_forwards_per_round"] == 1
    loaded = models.PAIRS.get("builtin", "builtin")
    (second,) = loaded.siblings.values()  # the features-off lane loads nothing more
    pairs = drafted_pairs(loaded.pair, handlers().request(form), second)
    assert reads_features(pairs["one-pass"].draft) and not reads_features(pairs["one-pass-off"].draft)
    assert pairs["one-pass-off"].draft.model is second.draft.model and pairs["one-pass-off"].target is second.target
    race = parse_race(answer["trace"].splitlines())
    assert [lane.key for lane in race.lanes] == lanes
    block = html.unescape(one_pass_html(race_view(race)))
    off = race.lane(LaneKey("sage", "one-pass-off"))
    assert off is not None and method_label(off.key) == "SAGE (adaptive tree) · one-pass draft, features off"
    assert block.count("<li>") == 1 and re.search(
        r"the target's features on over off: τ [\d.]+ against [\d.]+, ", block
    )


def test_features_off_is_offered_only_where_the_one_pass_draft_reads_them(tmp_path):
    """The page's choice is there when the shipped one-pass draft reads the target's features; a pair whose one-pass
    sibling reads none is refused "one-pass-off" in one sentence before any load (and still races "one-pass")."""
    from app.inputs import SECOND_DRAFT_CHOICES
    from sage_core.models.one_pass import declares_features
    from sage_testkit.pairs import declare_one_pass

    offered_choice = "one-pass-off" in [value for _, value in SECOND_DRAFT_CHOICES]
    assert offered_choice == declares_features(models.ONE_PASS_DRAFT_DIR)
    if declares_features(models.ONE_PASS_DRAFT_DIR):
        assert handlers().choice(RaceForm(pair="builtin", second_draft="one-pass-off")).drafts == (
            "one-pass",
            "one-pass-off",
        )
    plain = tmp_path / "plain-one-pass"
    plain.mkdir()
    (plain / "config.json").write_text("{}")
    declare_one_pass(plain, 0, 4)  # a one-pass draft that reads no features
    offered = [
        models.Preset("mine", "mine", "builtin", "builtin", siblings=(("one-pass", "mine-one-pass"),)),
        models.Preset("mine-one-pass", "mine, one-pass", "builtin", str(plain), shown_draft="plain-one-pass"),
    ]
    settings = Settings(Limits(), offered, "mine", models.CustomModels(), [], text_interval=0.0, figure_interval=0.0)
    with pytest.raises(InputProblem, match=r"^the one-pass draft 'plain-one-pass' reads none of the target's features"):
        Handlers(None, settings).choice(RaceForm(pair="mine", second_draft="one-pass-off"))
    assert Handlers(None, settings).choice(RaceForm(pair="mine", second_draft="one-pass")).drafts == ("one-pass",)


def test_the_features_off_twin_is_told_apart_from_the_one_with_them_on():
    from app import figure_style

    lines = [figure_style.method_line(key) for key in ("sage", "sage/one-pass", "sage/one-pass-off")]
    assert len({line["dash"] for line in lines}) == 3 and lines[1]["color"] == lines[2]["color"] != lines[0]["color"]
    assert short_name("sage/one-pass-off") == "SAGE · one-pass draft, features off"
    assert LaneKey.parse("sage/one-pass-off").known_draft and not LaneKey.parse("sage/two-pass-off").known_draft


def test_the_api_and_mcp_take_the_option():
    assert race_fields()[-1] == "second_draft"  # after every earlier input: their positions stay
    api = race_api_function(Handlers(None, None))  # type: ignore[arg-type]  # the signature reads no page
    assert "second_draft" in str(api.__signature__) and '"one-pass" also races' in (api.__doc__ or "")


def test_lane_keys_read_as_their_method_saying_the_draft():
    assert str(LaneKey("sage", "one-pass")) == "sage/one-pass" and str(LaneKey("sage")) == "sage"
    assert LaneKey.parse("sage/one-pass") == LaneKey("sage", "one-pass") and LaneKey.parse("ar") == LaneKey("ar")
    assert LaneKey.parse("sage/one-pass").known_draft and not LaneKey.parse("sage/two-pass").known_draft
    assert short_name("sage/one-pass") == "SAGE · one-pass draft" and short_name("sage/two-pass") == "sage/two-pass"
    assert method_label("static/one-pass").endswith(" · one-pass draft")


def test_a_trace_keeps_its_lanes_keys_and_refuses_keys_that_do_not_fit_its_runs():
    data = synthetic_race()
    one_pass = replace(data.lanes[0].header, draft="one-pass-draft", draft_block=8)
    data.lanes.append(replace(data.lanes[0], header=one_pass, draft="one-pass"))  # SAGE again, on the one-pass draft
    lines = list(race_trace_lines(data))
    assert json.loads(lines[0])["race"]["lanes"] == ["sage", "static", "sage/one-pass"]
    assert [lane.key for lane in parse_race(lines).lanes] == ["sage", "sage/one-pass", "static"]  # column order
    for keys, why in (
        (["sage", "static"], "one key per run"),
        (["sage", "static", "sage/two-pass"], "not its run's method 'sage' on a known draft"),
        (["sage", "sage/one-pass", "static"], "not its run's method"),
        (["sage", "static", "sage"], "one run per method"),
        (["sage/one-pass", "static", "sage"], r"lane 'sage/one-pass' names the one-pass draft, but its run's header"),
    ):
        meta = json.loads(lines[0])
        meta["race"]["lanes"] = keys
        with pytest.raises(TraceError, match=why):
            parse_race([json.dumps(meta), *lines[1:]])


def test_a_lane_key_that_does_not_fit_its_runs_header_is_refused_in_one_sentence():
    """`ar/one-pass` was read as a lane (plain decoding has no draft), and swapping the two drafts' keys moved the
    headline from 1.32x to 5.28x: a key names a draft only for a method that drafts, and the one-pass draft
    only for a run whose header records one (its block)."""
    lines = list(race_trace_lines(synthetic_race(with_ar=True)))
    meta = json.loads(lines[0])
    assert meta["race"]["lanes"] == ["sage", "static", "ar"]
    meta["race"]["lanes"] = ["sage", "static", "ar/one-pass"]
    with pytest.raises(TraceError) as refused:
        parse_race([json.dumps(meta), *lines[1:]])
    assert str(refused.value) == "the race line's lane 'ar/one-pass' names a draft, but 'ar' decodes with no draft"
    data = synthetic_race()
    one_pass = replace(data.lanes[0].header, draft="one-pass-draft", draft_block=8)
    data.lanes.append(replace(data.lanes[0], header=one_pass, draft="one-pass"))
    lines = list(race_trace_lines(data))
    meta = json.loads(lines[0])
    meta["race"]["lanes"] = ["sage/one-pass", "static", "sage"]  # the two SAGE lanes' keys swapped
    refusal = (
        r"^the race line's lane 'sage/one-pass' names the one-pass draft, but its run's header records a sequential "
        r"draft \('tiny-draft', block 0\): the lanes' keys are not their runs'$"
    )
    with pytest.raises(TraceError, match=refusal):
        parse_race([json.dumps(meta), *lines[1:]])
