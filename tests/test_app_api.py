"""The app's API, called with gradio_client against the launched app.

A race answers identical texts for every side and figures that agree with its
own trace; every bad input gets its message and the app serves the next
request; a recorded trace replays without any model.
"""

from __future__ import annotations

import json
import time

import cv2
import numpy as np
import pytest
import torch
from app_records import synthetic_race
from app_server import model_pair, running_app
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from app import models, ui
from app.inputs import Limits, load_examples
from app.race import parse_race
from sage_core import summarize

LIMITS = Limits(max_upload_mb=1, max_video_seconds=5)
TOKENS = 12


@pytest.fixture(scope="module")
def pair(tiny_root) -> tuple[str, str]:
    return model_pair(tiny_root)


@pytest.fixture(scope="module")
def client(pair):
    with running_app(*pair, limits=LIMITS) as url:
        yield Client(url, verbose=False)


@pytest.fixture(scope="module")
def example() -> tuple[str, str]:
    first = next(e for e in load_examples() if not e.is_video)
    return first.file, first.prompt


@pytest.fixture(scope="module")
def raced(client, example) -> dict:
    image, prompt = example
    return client.predict(
        image=handle_file(image), prompt=prompt, methods=["sage", "static", "ar"], max_new_tokens=TOKENS,
        api_name="/race",
    )  # fmt: skip


def test_race_returns_identical_texts(raced, pair):
    assert raced["methods"] == ["sage", "static", "ar"]
    texts = raced["texts"]
    assert texts["sage"] == texts["static"] == texts["ar"] != ""
    ids = raced["token_ids"]
    assert ids["sage"] == ids["static"] == ids["ar"]
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
    assert race.methods == raced["methods"]
    rates = {}
    for lane in race.lanes:
        summary = summarize(lane.records)
        figures = raced["figures"][lane.method]
        assert figures["steps"] == summary.steps == len(lane.records) - 1
        assert figures["tokens"] == len(summary.token_ids)
        assert figures["tau"] == pytest.approx(summary.mean_accepted)
        assert figures["tokens_per_forward"] == pytest.approx(summary.tokens_per_forward)
        assert figures["seconds"] == pytest.approx(summary.seconds)
        assert figures["tokens_per_second"] == pytest.approx(summary.tokens_per_second)
        assert raced["texts"][lane.method] == summary.text
        rates[lane.method] = summary.tokens_per_second
        assert all(r.step_seconds > 0 for r in lane.records)
    assert raced["speedups"]["sage_over_static"] == pytest.approx(rates["sage"] / rates["static"])
    assert raced["speedups"]["sage_over_ar"] == pytest.approx(rates["sage"] / rates["ar"])

    panels = raced["panels"]
    race_lines = {t["name"].split(":")[0]: t for t in panels["race"]["data"]}
    for lane in race.lanes:
        label = {"sage": "SAGE", "static": "SD-Tree", "ar": "Plain AR"}[lane.method]
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
    return {p.stem: str(p) for p in (corrupt, text, big, broken_video, long_video)}


BAD_INPUTS = [
    ("no media", {}, "no image or video"),
    ("both", {"image": "example", "video": "long"}, "not both"),
    ("corrupt image", {"image": "corrupt"}, "not a readable image"),
    ("unsupported file", {"image": "notes"}, "unsupported file type"),
    ("too large", {"image": "big"}, "upload limit is 1 MB"),
    ("corrupt video", {"video": "broken"}, "not a readable video"),
    ("video too long", {"video": "long"}, "lasts 7 s; the limit is 5 s"),
    ("empty prompt", {"image": "example", "prompt": "   "}, "prompt is empty"),
    ("one method", {"image": "example", "methods": ["sage"]}, "at least two methods"),
    ("bad SAGE setting", {"image": "example", "depth_min": 6, "depth_max": 4}, "invalid SAGE configuration"),
    ("missing model", {"image": "example", "pair": "custom", "custom_target": "/no/such/model",
                       "custom_draft": "/no/such/draft"}, "cannot load the target model"),
    ("custom pair half given", {"image": "example", "pair": "custom", "custom_target": "x"}, "needs both"),
    ("GPU preset without a GPU", {"image": "example", "pair": "qwen2.5-vl-7b"}, "needs a GPU"),
    ("out of memory", {"image": "example", "pair": "custom", "custom_target": "oom-target",
                       "custom_draft": "oom-draft"}, "not enough memory"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "inputs", "message"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_gets_its_message_and_the_app_keeps_serving(
    client, example, tmp_path, monkeypatch, case, inputs, message
):
    if case == "GPU preset without a GPU" and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    real_load = models.load_pair

    def load_pair(target, draft, **kwargs):
        if target == "oom-target":
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real_load(target, draft, **kwargs)

    monkeypatch.setattr(models, "load_pair", load_pair)
    files = _bad_files(tmp_path) | {"example": example[0]}
    kwargs = {"prompt": example[1], **inputs}
    for key in ("image", "video"):
        if key in kwargs:
            kwargs[key] = handle_file(files[kwargs[key]])
    with pytest.raises(AppError, match=message):
        client.predict(**kwargs, api_name="/race")
    # ... and the next request is served.
    good = client.predict(image=handle_file(example[0]), prompt=example[1], max_new_tokens=3, api_name="/race")
    assert good["texts"]["sage"] == good["texts"]["static"] != ""


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
    for key in ("methods", "texts", "token_ids", "figures", "speedups", "lossless"):
        assert replayed[key] == raced[key], key
    for name, panel in raced["panels"].items():
        again = replayed["panels"][name]
        assert [t.get("y") for t in again["data"]] == [t.get("y") for t in panel["data"]], name
        assert [t.get("x") for t in again["data"]] == [t.get("x") for t in panel["data"]], name
        assert "(replay)" in again["layout"]["title"]["text"]


def test_a_bad_trace_gets_its_message(client, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"hello": "world"}) + "\n")
    with pytest.raises(AppError, match="must start with a header"):
        client.predict(trace_file=handle_file(str(bad)), speed=50, api_name="/replay")
    with pytest.raises(AppError, match="choose a trace file"):
        client.predict(speed=50, api_name="/replay")


def test_stop_ends_a_streaming_race_promptly(client, pair, example, monkeypatch):
    """Stop cancels the streaming event: the race is not stepped any further."""
    steps = []

    def endless_race(*args, **kwargs):  # stands in for app.race.race_steps: a race that never ends
        data = synthetic_race()
        while True:
            time.sleep(0.05)
            steps.append(time.monotonic())
            yield data

    monkeypatch.setattr(ui, "race_steps", endless_race)
    key = models.BUILTIN.key if pair == ("builtin", "builtin") else models.ENV_KEY
    # The UI's streaming event takes its inputs in order: media, prompt, pair, custom pair, methods,
    # max new tokens, SAGE's six settings, the pruning control and its ratio, the tree panel's method.
    job = client.submit(handle_file(example[0]), None, example[1], key, "", "", ["sage", "static"], 64,
                        3, 8, 2, 10, 64, 10, "off", 0.5, None, api_name="/race_live")  # fmt: skip
    deadline = time.monotonic() + 60
    while len(job.outputs()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(job.outputs()) >= 2, "the race streamed nothing"
    running = len(steps)
    time.sleep(0.5)
    assert len(steps) > running, "the race should still be stepping before Stop"
    job.cancel()
    time.sleep(1.0)
    count = len(steps)
    time.sleep(1.0)
    assert len(steps) == count, "the race kept stepping after Stop"
    monkeypatch.undo()
    after = client.predict(image=handle_file(example[0]), prompt=example[1], max_new_tokens=2, api_name="/race")
    assert after["texts"]["sage"] == after["texts"]["static"]


def test_a_pruned_race_keeps_the_texts_and_shrinks_the_drafts_prompt(client, example):
    image, prompt = example
    result = client.predict(
        image=handle_file(image), prompt=prompt, methods=["sage", "static", "ar"], max_new_tokens=TOKENS,
        prune_choice="paper", api_name="/race",
    )  # fmt: skip
    texts = result["texts"]
    assert texts["sage"] == texts["static"] == texts["ar"] != ""
    drafts = result["draft_prompt_tokens"]
    assert drafts["ar"] is None
    assert drafts["sage"] == drafts["static"] < result["prompt_tokens"]
    headers = [json.loads(line)["header"] for line in result["trace"].splitlines() if '"header"' in line]
    assert {h["method"]: h["prune_ratio"] for h in headers} == {"sage": 0.8, "static": 0.8, "ar": 0.0}
    with pytest.raises(AppError, match=r"greater than maximum value 0.95"):  # the slider's bound
        client.predict(
            image=handle_file(image), prompt=prompt, methods=["sage", "ar"], max_new_tokens=TOKENS,
            prune_choice="chosen", prune_chosen=1.0, api_name="/race",
        )  # fmt: skip
