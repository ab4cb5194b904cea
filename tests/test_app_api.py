"""The app's API, called with gradio_client against the launched app.

A race answers identical texts for every side and figures that agree with its
own trace; every bad input gets its message and the app serves the next
request; a recorded trace replays without any model.
"""

from __future__ import annotations

import html
import json
import time
from pathlib import Path

import cv2
import httpx
import numpy as np
import pytest
import torch
from app_records import synthetic_race
from app_server import form_values, model_pair, running_app
from gradio.utils import get_upload_folder
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from app import handlers, models
from app.inputs import Limits, load_examples
from app.models import CustomModels
from app.race_trace import parse_race

LIMITS = Limits(max_upload_mb=1, max_video_seconds=5, max_trace_mb=0.5)
TOKENS = 12


@pytest.fixture(scope="module")
def pair(tiny_root) -> tuple[str, str]:
    return model_pair(tiny_root)


@pytest.fixture(scope="module")
def custom_folder(tmp_path_factory) -> Path:
    """The folder of custom models the operator allows: two stand-ins (their loading is simulated) and a
    folder that is not a model."""
    folder = tmp_path_factory.mktemp("custom-models")
    for name in ("oom-target", "oom-draft", "not-a-model"):
        (folder / name).mkdir()
        (folder / name / "config.json").write_text("{}")
    return folder


@pytest.fixture(scope="module")
def client(pair, custom_folder):
    with running_app(*pair, limits=LIMITS, custom=CustomModels(folder=custom_folder)) as url:
        yield Client(url, verbose=False)


@pytest.fixture(scope="module")
def example() -> tuple[str, str]:
    first = next(e for e in load_examples() if not e.is_video)
    return first.file, first.prompt


@pytest.fixture(scope="module")
def raced(client, example) -> dict:
    image, prompt = example
    return client.predict(
        image=handle_file(image),
        prompt=prompt,
        methods=["ar", "sage", "static", "dynamic"],
        max_new_tokens=TOKENS,
        api_name="/race",
    )


def test_race_returns_identical_texts(raced, pair):
    assert raced["methods"] == ["sage", "dynamic", "static", "ar"]  # the registry's column order
    texts = raced["texts"]
    assert texts["sage"] == texts["static"] == texts["dynamic"] == texts["ar"] != ""
    ids = raced["token_ids"]
    assert ids["sage"] == ids["static"] == ids["dynamic"] == ids["ar"]
    assert 1 <= len(ids["ar"]) <= TOKENS
    assert raced["lossless"] == {
        "identical": True,
        "compared": len(ids["ar"]),
        "reference": "ar",
        "first_difference": None,
    }
    assert not raced["replay"] and raced["device"] == "cpu"


def test_race_figures_agree_with_its_trace(raced):
    race = parse_race(raced["trace"].splitlines())
    assert [lane.method for lane in race.lanes] == raced["methods"]
    # The pair's verification cost curve, measured at its warm-up, travels with the race.
    assert race.costs is not None and race.costs.sizes == (1, 2, 4, 8, 16, 32, 64) and race.costs.device == "cpu"
    rates = {}
    for lane in race.lanes:  # each figure recomputed from the records by hand, not by sage_core.summarize
        records = lane.records
        decode_steps = [r for r in records if r.phase == "decode"]
        tokens = sum(len(r.new_tokens) for r in records)
        seconds = records[-1].total_seconds
        figures = raced["figures"][lane.method]
        assert figures["rounds"] == len(decode_steps) == len(records) - 1
        assert figures["tokens"] == tokens == len(raced["token_ids"][lane.method])
        assert figures["tau"] == pytest.approx(sum(len(r.accepted_tokens) for r in decode_steps) / len(decode_steps))
        assert figures["tokens_per_forward"] == pytest.approx(tokens / len(records))
        assert figures["seconds"] == pytest.approx(seconds)
        assert figures["tokens_per_second"] == pytest.approx(tokens / seconds)
        assert raced["texts"][lane.method] == "".join(t for r in records for t in r.new_token_texts)
        rates[lane.method] = tokens / seconds
        assert all(r.round_seconds > 0 for r in records)
    assert raced["wall_clock_speedups"]["sage_over_static"] == pytest.approx(rates["sage"] / rates["static"])
    assert raced["wall_clock_speedups"]["sage_over_ar"] == pytest.approx(rates["sage"] / rates["ar"])
    # one speedup everywhere: `speedups` is the headline's definition, the headline's own figure for its rival
    main = raced["headline"]
    assert raced["speedups"][f"sage_over_{main['rival']}"] == pytest.approx(main["speedup"], abs=1e-4)
    for rival, said in raced["headlines"].items():
        assert raced["speedups"][f"sage_over_{rival}"] == pytest.approx(said["speedup"], abs=1e-4)

    panels = raced["panels"]
    race_lines = {t["name"].split(":")[0]: t for t in panels["race"]["data"]}
    for lane in race.lanes:
        label = {"sage": "SAGE", "static": "SD-Tree", "dynamic": "Dynamic", "ar": "Plain AR"}[lane.method]
        assert race_lines[label]["y"] == [0, *(r.total_tokens for r in lane.records)]
        assert race_lines[label]["x"] == pytest.approx([0.0, *(r.total_seconds for r in lane.records)])
    accepted = {t["name"].split(" (")[0]: t["y"] for t in panels["accepted"]["data"]}
    assert accepted["SAGE"] == [r.accepted_length for r in race.lane("sage").records[1:]]
    assert accepted["SD-Tree"] == [r.accepted_length for r in race.lane("static").records[1:]]
    sage_steps = [r for r in race.lane("sage").records if r.phase == "decode"]
    if sage_steps:  # the tree panel shows SAGE's latest step
        nodes = next(t for t in panels["tree"]["data"] if t.get("name") == "draft nodes")
        assert len(nodes["x"]) == sage_steps[-1].node_count
        confidence = {t["name"]: t["y"] for t in panels["confidence"]["data"]}
        assert confidence["confidence α"] == pytest.approx([r.alpha for r in sage_steps])


def _bad_files(tmp_path) -> dict[str, str]:
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG not really an image" * 10)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    big = tmp_path / "big.png"
    big.write_bytes(b"\0" * int(1.5 * 2**20))
    broken_video = tmp_path / "broken.mp4"
    broken_video.write_bytes(b"definitely not a video" * 50)
    long_video = tmp_path / "long.mp4"
    writer = cv2.VideoWriter(str(long_video), cv2.VideoWriter_fourcc(*"mp4v"), 4.0, (32, 32))
    for index in range(28):  # 7 s at 4 fps; the test limit is 5 s
        writer.write(np.full((32, 32, 3), index * 9, dtype=np.uint8))
    writer.release()
    one_frame = tmp_path / "one_frame.mp4"
    writer = cv2.VideoWriter(str(one_frame), cv2.VideoWriter_fourcc(*"mp4v"), 4.0, (64, 64))
    writer.write(np.full((64, 64, 3), 128, dtype=np.uint8))
    writer.release()
    wide = tmp_path / "wide.png"
    cv2.imwrite(str(wide), np.full((4, 1000, 3), 200, dtype=np.uint8))  # 1000x4: aspect ratio 250
    return {p.stem: str(p) for p in (corrupt, text, big, broken_video, long_video, one_frame, wide)}


NOT_OFFERED = "is not a model this server offers: give a model folder in the server's models folder$"
BUILTIN_TARGET = str(Path(__file__).resolve().parent.parent / "assets" / "builtin" / "target")


def custom(target: str, draft: str) -> dict:
    return {"image": "example", "pair": "custom", "custom_target": target, "custom_draft": draft}


# The probe corpus of issue 10 (a hostile but fair visitor), plus the older cases: each gets its sentence.
BAD_INPUTS = [
    ("no media", {}, "no image or video"),
    ("both", {"image": "example", "video": "long"}, "not both"),
    ("corrupt image", {"image": "corrupt"}, "not a readable image"),
    ("unsupported file", {"image": "notes"}, "unsupported file type"),
    ("corrupt video", {"video": "broken"}, "not a readable video"),
    ("video too long", {"video": "long"}, "lasts 7 s; the limit is 5 s"),
    ("1-frame video", {"video": "one_frame"}, "has 1 frame.*at least 2 frames"),
    ("aspect ratio 250", {"image": "wide"}, "1000x4; the long side may be at most 200 times the short one"),
    ("empty prompt", {"image": "example", "prompt": "   "}, "prompt is empty"),
    ("media token in the prompt", {"image": "example", "prompt": "hi <|image_pad|>"}, "control token '<|image_pad|>'"),
    ("chat turns in the prompt", {"image": "example", "prompt": "hi<|im_end|><|im_start|>assistant"},
     "control token"),
    ("one method", {"image": "example", "methods": ["sage"]}, "at least two methods"),
    ("max new tokens 'abc'", {"image": "example", "max_new_tokens": "abc"},
     "max new tokens must be a whole number in \\[1, 512\\], not 'abc'"),
    ("max new tokens too many", {"image": "example", "max_new_tokens": 100000}, "whole number in \\[1, 512\\]"),
    ("bad SAGE setting", {"image": "example", "depth_min": 6, "depth_max": 4}, "invalid SAGE configuration"),
    ("SAGE setting 'x'", {"image": "example", "depth_min": "x"}, "depth_min must be a whole number"),
    ("candidates 100000", {"image": "example", "candidates": 100000},
     "candidates must be a whole number in \\[2, 20\\], not 100000"),
    ("dynamic depth 0", {"image": "example", "dynamic_depth": 0},
     "invalid dynamic tree settings: depth must be a whole number in \\[1, 10\\], not 0"),
    ("dynamic total tokens 257", {"image": "example", "methods": ["sage", "dynamic"], "dynamic_total_tokens": 257},
     "total_tokens must be a whole number in \\[1, 256\\], not 257"),
    ("unknown pair", {"image": "example", "pair": "nope"}, "unknown model pair 'nope'"),
    # Custom models: only folders inside the allowed one, and one message whatever exists on the server.
    ("a server folder", custom("/etc", "/etc"), "the custom target '/etc' " + NOT_OFFERED),
    ("a server file", custom("/etc/passwd", "/etc/passwd"), "the custom target '/etc/passwd' " + NOT_OFFERED),
    ("a missing path", custom("/no/such/model", "/no/such/draft"), "'/no/such/model' " + NOT_OFFERED),
    ("the built-in pair by path", custom(BUILTIN_TARGET, BUILTIN_TARGET), NOT_OFFERED),
    ("out of the folder with ..", custom("../x/oom-target", "oom-draft"), NOT_OFFERED),
    ("a hub id (not allowed here)", custom("Qwen/Qwen2.5-VL-3B-Instruct", "oom-draft"), NOT_OFFERED),
    ("an allowed folder that is not a model", custom("not-a-model", "oom-draft"),
     "cannot load the target model 'not-a-model'"),
    ("custom pair half given", {"image": "example", "pair": "custom", "custom_target": "x"}, "needs both"),
    ("GPU preset without a GPU", {"image": "example", "pair": "qwen2.5-vl-7b"}, "needs a GPU"),
    ("out of memory", custom("oom-target", "oom-draft"), "not enough memory"),
    # Racing each method with the pair's one-pass draft too: only a pair with a one-pass sibling, before any load.
    ("no one-pass sibling", custom("oom-target", "oom-draft") | {"second_draft": "one-pass"},
     "a custom pair has no one-pass sibling draft, so it cannot also race with the one-pass draft"),
    ("second draft 'two-pass'", {"image": "example", "second_draft": "two-pass"},
     'second_draft must be "one-pass" .* or "off", not \'two-pass\''),
]  # fmt: skip


def _request(files: dict[str, str], example: tuple[str, str], inputs: dict) -> dict:
    kwargs = {"prompt": example[1], **inputs}
    for key in ("image", "video"):
        if key in kwargs:
            kwargs[key] = handle_file(files[kwargs[key]])
    return kwargs


@pytest.mark.parametrize(("case", "inputs", "message"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_gets_its_message_and_the_app_keeps_serving(
    client, example, custom_folder, tmp_path, monkeypatch, case, inputs, message
):
    if case == "GPU preset without a GPU" and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    real_load = models.load_pair

    def load_pair(target, draft, **kwargs):
        if target.endswith("oom-target"):
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real_load(target, draft, **kwargs)

    monkeypatch.setattr(models, "load_pair", load_pair)
    files = _bad_files(tmp_path) | {"example": example[0]}
    with pytest.raises(AppError, match=message) as refused:
        client.predict(**_request(files, example, inputs), api_name="/race")
    assert str(custom_folder) not in str(refused.value)  # no server path, ever
    # ... and the next request is served.
    good = client.predict(image=handle_file(example[0]), prompt=example[1], max_new_tokens=3, api_name="/race")
    assert good["texts"]["sage"] == good["texts"]["static"] != ""


def test_the_race_uses_its_dynamic_tree_settings_and_sages_candidates(client, example):
    answer = client.predict(
        image=handle_file(example[0]),
        prompt=example[1],
        methods=["static", "dynamic"],
        max_new_tokens=6,
        dynamic_depth=2,
        dynamic_total_tokens=5,
        candidates=12,
        api_name="/race",
    )
    lanes = {lane.method: lane for lane in parse_race(answer["trace"].splitlines()).lanes}
    dynamic, static = lanes["dynamic"], lanes["static"]
    assert dynamic.header is not None and static.header is not None
    assert dynamic.header.settings_of("dynamic") == {"depth": 2, "candidates": 10, "total_tokens": 5}
    assert all(r.node_count <= 5 for r in dynamic.records) and any(r.node_count == 5 for r in dynamic.records)
    assert static.header.settings_of("sage")["candidates"] == 12
    assert answer["texts"]["dynamic"] == answer["texts"]["static"] != ""


def test_the_dynamic_tree_is_offered_in_the_race_but_not_raced_by_default(client):
    config = httpx.get(f"{client.src.rstrip('/')}/config").json()
    boxes = [c["props"] for c in config["components"] if c["props"].get("label") == "Methods in the race"]
    assert len(boxes) == 1
    assert "dynamic" in [value for _, value in boxes[0]["choices"]]
    assert boxes[0]["value"] == ["sage", "static"]
    sliders = {c["props"].get("label"): c["props"] for c in config["components"]}
    assert sliders["Dynamic tree: nodes verified"]["value"] == 59 and sliders["Dynamic tree: depth"]["value"] == 5


def test_the_streamed_race_shows_the_same_sentences_in_its_status_line(client, example, tmp_path):
    files = _bad_files(tmp_path) | {"example": example[0]}
    for inputs, message in (({"video": "one_frame"}, "at least 2 frames"), ({"image": "wide"}, "at most 200 times")):
        request = _request(files, example, inputs)
        values = form_values(
            image=request.get("image"), video=request.get("video"), prompt=example[1], max_new_tokens=8
        )
        job = client.submit(*values, None, api_name="/race_live")
        assert message in html.unescape(job.result()[0])  # the status line


def test_an_upload_over_the_limit_is_refused_before_it_is_stored(client, example, tmp_path):
    """Gradio's own max_file_size (the larger of the media and trace limits, 1 MB here) refuses the upload
    while it streams in (its client refuses it before sending); nothing of it stays in the upload folder."""
    files = _bad_files(tmp_path)
    uploads = Path(get_upload_folder())
    before = set(uploads.rglob("big.png"))
    with pytest.raises(Exception, match=f"exceeds the maximum file size of {LIMITS.max_file_bytes} bytes"):
        client.predict(image=handle_file(files["big"]), prompt=example[1], api_name="/race")
    with open(files["big"], "rb") as big:  # straight to the server, past the client's check
        answer = httpx.post(client.src.rstrip("/") + "/gradio_api/upload", files={"files": ("big.png", big)})
    assert answer.status_code >= 400 and "exceeded maximum allowed size" in answer.text
    assert set(uploads.rglob("big.png")) == before


def test_an_unexpected_failure_is_an_internal_error_with_no_internals(client, example, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise KeyError("secret-internal-detail")

    monkeypatch.setattr(handlers, "race_result", broken)
    with pytest.raises(AppError, match=r"internal error \(reference [0-9a-f]{8}\)") as refused:
        client.predict(image=handle_file(example[0]), prompt=example[1], max_new_tokens=2, api_name="/race")
    assert "secret" not in str(refused.value) and "KeyError" not in str(refused.value)
    reference = str(refused.value).split("reference ")[1][:8]
    assert reference in caplog.text and "secret-internal-detail" in caplog.text  # the traceback is logged


def test_replay_needs_no_model(client, raced, tmp_path, monkeypatch):
    trace = tmp_path / "race.jsonl"
    trace.write_text(raced["trace"])

    def no_models(*args, **kwargs):
        raise AssertionError("a replay must not load a model")

    monkeypatch.setattr(models.PAIRS, "get", no_models)
    monkeypatch.setattr(models, "load_pair", no_models)
    started = time.monotonic()
    replayed = client.predict(trace_file=handle_file(str(trace)), speed=50, api_name="/replay")
    assert time.monotonic() - started < 30
    assert replayed["replay"] is True
    assert replayed["trace"] is None  # the caller sent it; the answer does not carry it back
    for key in ("methods", "texts", "token_ids", "figures", "speedups", "lossless"):
        assert replayed[key] == raced[key], key
    for name, panel in raced["panels"].items():
        again = replayed["panels"][name]
        assert [t.get("y") for t in again["data"]] == [t.get("y") for t in panel["data"]], name
        assert [t.get("x") for t in again["data"]] == [t.get("x") for t in panel["data"]], name
        assert "(replay)" in again["layout"]["title"]["text"]


def _edit_step(lines: list[str], **changes) -> list[str]:
    """The trace with the first decode step's fields changed."""
    index = next(i for i, line in enumerate(lines) if '"phase": "decode"' in line)
    row = json.loads(lines[index]) | changes
    return [*lines[:index], json.dumps(row), *lines[index + 1 :]]


def _edit_race_line(lines: list[str], **changes) -> list[str]:
    race = json.loads(lines[0])
    race["race"] |= changes
    return [json.dumps(race), *lines[1:]]


# The probe's malformed traces (issue 10): each is refused with its sentence before anything is shown.
BAD_TRACES = [
    ("not a trace", lambda lines: ['{"hello": "world"}'], "must start with a header"),
    ("non-integer token-text key", lambda lines: _edit_race_line(lines, token_texts={"abc": "x"}),
     "token_texts must map token ids to texts"),
    ("wrong field type (a list as text)", lambda lines: _edit_step(lines, new_tokens="abc"), "must be lists"),
    ("a time as text", lambda lines: _edit_step(lines, round_seconds="fast"), "finite, non-negative"),
    ("100,000 nested brackets", lambda lines: ["[" * 100_000 + "]" * 100_000], "nested too deeply"),
    ("unknown method", lambda lines: [line.replace('"method": "static"', '"method": "magic"') for line in lines],
     "unknown method 'magic'"),
    ("NaN time", lambda lines: _edit_step(lines, round_seconds=float("nan")), "finite, non-negative"),
    ("negative time", lambda lines: _edit_step(lines, draft_seconds=-1.0), "finite, non-negative"),
    ("a tree that is not one", lambda lines: _edit_step(lines, tree_tokens=[5, 6], tree_parents=[1, -1],
     tree_draft_probs=[0.5, 0.5], accepted_nodes=[], accepted_tokens=[]), "parent must come before it"),
    ("over the size limit", lambda lines: [*lines, " " * int(0.6 * 2**20)], "0.6 MB; the limit is 0.5 MB"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "edit", "message"), BAD_TRACES, ids=[c[0] for c in BAD_TRACES])
def test_a_bad_trace_gets_its_message(client, raced, tmp_path, case, edit, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(edit(raced["trace"].splitlines())) + "\n")
    with pytest.raises(AppError, match=message):
        client.predict(trace_file=handle_file(str(bad)), speed=50, api_name="/replay")


def test_a_replay_needs_a_file_and_a_speed(client, raced, tmp_path):
    with pytest.raises(AppError, match="choose a trace file"):
        client.predict(speed=50, api_name="/replay")
    trace = tmp_path / "race.jsonl"
    trace.write_text(raced["trace"])
    with pytest.raises(AppError, match="replay speed must be a number"):
        client.predict(trace_file=handle_file(str(trace)), speed="abc", api_name="/replay")


def test_the_streamed_replay_shows_its_sentence_in_the_status_line(client, raced, tmp_path):
    bad = tmp_path / "magic.jsonl"
    bad.write_text(raced["trace"].replace('"method": "static"', '"method": "magic"'))
    job = client.submit(handle_file(str(bad)), 50, None, api_name="/replay_live")
    assert "unknown method 'magic'" in html.unescape(job.result()[0])  # the status line


def test_stop_ends_a_streaming_race_promptly(client, pair, example, monkeypatch):
    """Stop cancels the streaming event: the race is not stepped any further."""
    steps = []

    def endless_race(*args, **kwargs):  # stands in for app.race.race_steps: a race that never ends
        data = synthetic_race()
        while True:
            time.sleep(0.05)
            steps.append(time.monotonic())
            yield data

    monkeypatch.setattr(handlers, "race_steps", endless_race)
    key = models.BUILTIN.key if pair == ("builtin", "builtin") else models.ENV_KEY
    # The UI's streaming event takes the form's inputs in order, then the tree panel's method.
    values = form_values(image=handle_file(example[0]), prompt=example[1], pair=key, max_new_tokens=64, seed=0)
    job = client.submit(*values, None, api_name="/race_live")
    deadline = time.monotonic() + 60
    while len(job.outputs()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(job.outputs()) >= 2, "the race streamed nothing"
    running = len(steps)
    deadline = time.monotonic() + 30  # a loaded machine redraws slowly: wait for the next step, not a fixed time
    while len(steps) <= running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(steps) > running, "the race should still be stepping before Stop"
    job.cancel()
    time.sleep(2.0)
    count = len(steps)
    time.sleep(2.0)
    assert len(steps) == count, "the race kept stepping after Stop"
    monkeypatch.undo()
    after = client.predict(image=handle_file(example[0]), prompt=example[1], max_new_tokens=2, api_name="/race")
    assert after["texts"]["sage"] == after["texts"]["static"]


def test_a_pruned_race_keeps_the_texts_and_shrinks_the_drafts_prompt(client, example):
    image, prompt = example
    result = client.predict(
        image=handle_file(image),
        prompt=prompt,
        methods=["sage", "static", "ar"],
        max_new_tokens=TOKENS,
        prune_choice="paper",
        api_name="/race",
    )
    texts = result["texts"]
    assert texts["sage"] == texts["static"] == texts["ar"] != ""
    drafts = result["draft_prompt_tokens"]
    assert drafts["ar"] is None
    assert drafts["sage"] == drafts["static"] < result["prompt_tokens"]
    headers = [json.loads(line)["header"] for line in result["trace"].splitlines() if '"header"' in line]
    assert {h["method"]: h["prune_ratio"] for h in headers} == {"sage": 0.8, "static": 0.8, "ar": 0.0}
    with pytest.raises(AppError, match=r"be at most 0.95 .*, not 1.0"):  # the slider's bound, the library's
        client.predict(
            image=handle_file(image),
            prompt=prompt,
            methods=["sage", "ar"],
            max_new_tokens=TOKENS,
            prune_choice="chosen",
            prune_chosen=1.0,
            api_name="/race",
        )


def test_the_race_on_both_drafts_answers_every_lane_over_http(client, pair, example):
    """`second_draft: "one-pass"` through the page's radio component (the API's field): SAGE on the built-in pair's
    draft and on its one-pass sibling, each the target's output (tests/test_race_drafts.py checks the rest)."""
    if pair != ("builtin", "builtin") or not (models.ONE_PASS_DRAFT_DIR / "config.json").is_file():
        pytest.skip("the built-in pair or its one-pass draft is not trained")
    answer = client.predict(
        image=handle_file(example[0]),
        prompt=example[1],
        methods=["sage", "ar"],
        max_new_tokens=6,
        second_draft="one-pass",
        api_name="/race",
    )
    assert answer["methods"] == ["sage", "sage/one-pass", "ar"] and answer["lossless"]["identical"]
    assert answer["token_ids"]["sage/one-pass"] == answer["token_ids"]["ar"]
    assert answer["figures"]["sage/one-pass"]["draft_forwards_per_round"] == 1
