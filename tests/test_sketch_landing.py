"""The Draw tab's drawing and the landing replay, without a browser."""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path

import gradio as gr
import numpy as np
from PIL import Image, ImageDraw

from app import landing, sketch
from app.race_trace import load_race
from sage_world.scenes import COLOURS

OLD_LANDING = Path(__file__).resolve().parent / "data" / "race-old-names.jsonl"


def strokes() -> Image.Image:
    """A red ring on a transparent canvas, as the sketch pad hands it over."""
    canvas = Image.new("RGBA", sketch.CANVAS, (0, 0, 0, 0))
    ImageDraw.Draw(canvas).ellipse((150, 100, 280, 230), outline=(*COLOURS["red"], 255), width=14)
    return canvas


def test_a_drawing_is_composited_on_white_and_saved_for_the_race(tmp_path):
    path = sketch.sketch_file({"background": None, "layers": [], "composite": strokes()}, tmp_path)
    assert path is not None
    picture = Image.open(path).convert("RGB")  # a palette PNG of the pad's size
    assert picture.size == sketch.CANVAS
    assert picture.getpixel((5, 5)) == (255, 255, 255)  # transparent became white, not black
    assert picture.getpixel((215, 100 + 7)) == COLOURS["red"]


def test_nothing_drawn_is_no_picture_and_a_prompt_is_asked_for_only_when_empty(tmp_path):
    empty = Image.new("RGBA", sketch.CANVAS, (0, 0, 0, 0))
    assert sketch.sketch_file({"composite": empty, "layers": []}, tmp_path) is None
    assert sketch.sketch_file(None, tmp_path) is None
    as_array = {"composite": np.asarray(strokes()), "layers": []}
    image, video, prompt, _, saved = sketch.use_sketch(as_array, "")
    assert saved == image
    assert image is not None and video is None and prompt == sketch.SKETCH_PROMPT
    assert sketch.use_sketch(as_array, "how many shapes are there?")[2] == "how many shapes are there?"
    cleared = sketch.use_sketch({"composite": empty}, "")
    assert cleared[:2] == (None, None) and "The pad is empty" in cleared[3]


def test_opening_the_draw_tab_with_an_empty_pad_says_what_start_would_race():
    """Start on an empty pad raced the Image tab's picture without saying so."""
    empty = Image.new("RGBA", sketch.CANVAS, (0, 0, 0, 0))
    for value in (None, {"composite": empty, "layers": []}):
        said = sketch.empty_pad_note(value)
        assert "The pad is empty" in said and "Start races the picture in the Image tab" in said
    drawn = sketch.empty_pad_note({"composite": np.asarray(strokes()), "layers": []})
    assert not isinstance(drawn, str)  # a drawing: the status is left as it is


def test_a_visitor_holds_one_saved_drawing_and_it_goes_with_their_state():
    """Each stroke's drawing replaces the visitor's previous file; the state's delete callback removes the
    last one; nothing outside the drawings' folder is ever removed."""
    as_array = {"composite": np.asarray(strokes()), "layers": []}
    first = sketch.use_sketch(as_array, "")[4]
    second = sketch.use_sketch(as_array, "", first)[4]
    assert first != second and not Path(first).exists() and Path(second).exists()
    sketch.forget_sketch(second)  # what the visitor's gr.State calls when it is deleted
    assert not Path(second).exists()
    elsewhere = Path(tempfile.mkdtemp()) / "keep.png"
    elsewhere.write_bytes(b"x")
    sketch.forget_sketch(str(elsewhere))
    assert elsewhere.exists()


def test_the_brush_offers_the_world_colours():
    pad = sketch.sketch_pad()
    colours = {c.lower() for c in pad.brush.colors}
    assert colours == {sketch.hex_colour(rgb) for rgb in COLOURS.values()}
    assert pad.brush.default_color == sketch.hex_colour(COLOURS["red"])


def test_the_landing_trace_is_a_small_long_race_of_the_built_in_pair():
    race = load_race(landing.LANDING_TRACE)
    assert landing.LANDING_TRACE.stat().st_size < 200_000
    assert {"sage", "static"} <= {lane.method for lane in race.lanes}
    sage = race.lane("sage")
    assert sage is not None and sage.header is not None and sage.header.target == "builtin"
    assert len(sage.records) >= 6 and len(sage.token_ids) >= 40  # a long answer, many rounds
    texts = {lane.text for lane in race.lanes}
    assert len(texts) == 1  # lossless, as recorded


def test_the_landing_recording_is_one_where_alpha_moves_and_the_page_says_so():
    """A visitor's first race shows what SAGE is for: its α moves from round to round, and the lead says by how
    much and how deep its trees went (read off the recording; the sentence says so when α stays put too)."""
    race = landing.final_state(load_race(landing.LANDING_TRACE))
    sage = race.lane("sage")
    assert sage is not None
    alphas = [r.alpha for r in sage.records if r.phase == "decode" and r.alpha is not None]
    assert max(alphas) - min(alphas) >= 0.2, alphas
    said = landing.alpha_sentence(race)
    assert f"between {min(alphas):.2f} and {max(alphas):.2f}" in said
    assert said in landing.landing_lead(race)
    still = replace(sage, records=[replace(r, alpha=0.99) if r.alpha is not None else r for r in sage.records])
    assert "α stayed at 0.99 every round" in landing.alpha_sentence(replace(race, lanes=[still]))


def drafted_below_an_end(race) -> int:
    """How many draft nodes of a race hang below an end token (none should: drafting stops there)."""
    ends = {token for token, text in race.token_texts.items() if text == "<|im_end|>"}
    assert ends
    return sum(
        1
        for lane in race.lanes
        for record in lane.records
        for parent in record.tree_parents
        if parent >= 0 and record.tree_tokens[parent] in ends
    )


def test_the_landing_race_drafts_nothing_below_an_end_token():
    assert drafted_below_an_end(load_race(landing.LANDING_TRACE)) == 0
    # the trace first shipped did (round 11: "background . <|im_end|> background ."): the check sees it
    assert drafted_below_an_end(load_race(OLD_LANDING)) > 0


def test_the_page_opens_on_the_landing_race_with_its_picture_and_prompt_and_runs_nothing_for_it():
    from app.ui import build_demo

    demo = build_demo()
    props = {c["props"].get("elem_id"): c["props"] for c in demo.config["components"]}
    status = props["status"]["value"]
    assert "recorded race" in status and "REPLAY" in status and "finished" in status
    assert "landing-pace" in status  # the browser's animation reads each side's recorded rounds
    # the picture and prompt go into the inputs in the browser: the API's defaults stay empty, so a raw /race
    # call without an image or a prompt is still refused, not raced on the landing's picture
    assert props["image-input"].get("value") is None
    recorded = load_race(landing.LANDING_TRACE)
    parameters = {p["parameter_name"]: p for p in demo.get_api_info()["named_endpoints"]["/race"]["parameters"]}
    assert parameters["image"]["parameter_default"] is None and not parameters["prompt"]["parameter_default"]
    load = next(fn for fn in demo.fns.values() if any(name == "load" for _, name in fn.targets))
    picture = json.loads(load.js[load.js.rindex("return [") + len("return ") : load.js.rindex(";")])
    assert picture[1] == recorded.header.prompt and [o.elem_id for o in load.outputs] == ["image-input", None]
    assert Image.open(picture[0]["path"]).size == Image.open(landing.LANDING_PICTURE).size
    state = next(b for b in demo.blocks.values() if isinstance(b, gr.State) and b.value is not None)
    assert state.value.replay and [lane.text for lane in state.value.lanes] == [lane.text for lane in recorded.lanes]
    lane = next(b for b in demo.blocks.values() if isinstance(b, gr.Radio) and b.label == "Draft tree of")
    # a session's update rebuilds a component from its constructor's arguments: they hold the landing's choices
    assert [v for _, v in lane.constructor_args["choices"]] == ["sage", "static"] == [v for _, v in lane.choices]
    loads = [fn for fn in demo.fns.values() if any(name == "load" for _, name in fn.targets)]
    assert loads and all(fn.fn is None for fn in loads)  # the page load runs no server function
    start = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "start-race")
    starting = [fn for fn in demo.fns.values() if (start._id, "click") in fn.targets and fn.js]
    # in the browser at the click, and only over the recording's lines: a refusal drawn first stays
    assert len(starting) == 1 and starting[0].fn is None and not starting[0].outputs
    assert "Starting a live race" in starting[0].js and ".sage-status.replay" in starting[0].js
