"""Bounded queue and work: a full queue answers "busy, try again"; a race stops at its time budget; a race
whose client has gone is closed, so its decoding stops; a replay's waits are bounded in all."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
from app_records import synthetic_race
from app_server import form_values, running_app
from gradio_client import Client, handle_file

from app import handlers as handlers_module
from app.handlers import Budget, ReplayClock, replay_budget_note
from app.inputs import Limits, load_examples
from app.race import RaceData, replay_steps
from app.ui import BUSY

LIMITS = Limits(max_queue=1, max_race_seconds=30)


@pytest.fixture(scope="module")
def example() -> tuple[str, str]:
    first = next(e for e in load_examples() if not e.is_video)
    return first.file, first.prompt


@pytest.fixture(scope="module")
def url():
    with running_app("builtin", "builtin", limits=LIMITS) as address:
        yield address.rstrip("/")


def upload(url: str, file: str) -> dict:
    with open(file, "rb") as handle:
        path = httpx.post(f"{url}/gradio_api/upload", files={"files": ("picture.png", handle)}).json()[0]
    return {"path": path, "meta": {"_type": "gradio.FileData"}}


def race_values(image: dict, prompt: str, tokens: int = 8) -> list:
    return form_values(image=image, prompt=prompt, max_new_tokens=tokens)


def test_a_full_queue_answers_busy_try_again(url, example, monkeypatch):
    release = threading.Event()

    def blocked(self, form):  # a race that holds its worker until the test lets it go
        release.wait(60)
        return {"texts": {}}

    monkeypatch.setattr(handlers_module.Handlers, "race_to_end", blocked)
    body = json.dumps({"data": [*race_values(upload(url, example[0]), example[1]), None]})
    headers = {"content-type": "application/json"}
    answers = []
    try:
        for _ in range(6):  # 2 workers run, 1 may wait: the others are refused
            answers.append(httpx.post(f"{url}/gradio_api/call/race", content=body, headers=headers))
            time.sleep(0.3)
    finally:
        release.set()
    refused = [a for a in answers if a.status_code == 503]
    assert refused, [a.status_code for a in answers]
    assert all(a.status_code in (200, 503) for a in answers)
    detail = refused[0].json()["detail"]
    assert detail == BUSY.format(waiting=1, limit=1)
    assert "busy" in detail and "Try again" in detail
    time.sleep(1)  # the blocked races end; the app serves the next visitor
    monkeypatch.undo()
    good = Client(url, verbose=False).predict(
        image=handle_file(example[0]), prompt=example[1], max_new_tokens=3, api_name="/race"
    )
    assert good["texts"]["sage"] == good["texts"]["static"] != ""


def test_a_race_whose_client_has_gone_is_stopped(url, example, monkeypatch):
    seen = {"steps": 0, "closed": False}
    real = handlers_module.Handlers.race

    def counted(self, request, loaded) -> Iterator[RaceData]:
        try:
            for data in real(self, request, loaded):
                seen["steps"] += 1
                time.sleep(0.05)  # a slow race: the client leaves long before its end
                yield data
        finally:
            seen["closed"] = True

    monkeypatch.setattr(handlers_module.Handlers, "race", counted)
    values = [*race_values(upload(url, example[0]), "describe the image in detail.", tokens=512), None]
    event = httpx.post(f"{url}/gradio_api/call/race_live", json={"data": values}).json()["event_id"]
    with httpx.stream("GET", f"{url}/gradio_api/call/race_live/{event}", timeout=60) as stream:
        for _ in stream.iter_lines():
            if seen["steps"] >= 3:
                break  # the visitor closes the tab
    deadline = time.monotonic() + 10
    while not seen["closed"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert seen["closed"], "the race went on after its client had gone"
    stopped_at = seen["steps"]
    time.sleep(1)
    assert seen["steps"] == stopped_at  # no more decoding
    full = Client(url, verbose=False).predict(
        image=handle_file(example[0]), prompt="describe the image in detail.", max_new_tokens=512, api_name="/race"
    )
    records = len(full["trace"].splitlines()) - 3  # the race line and two headers, then one line a step
    assert stopped_at < records  # it stopped long before its end


def endless() -> Iterator[RaceData]:
    data = synthetic_race()
    for lane in data.lanes:  # never finished: a race that would run on
        lane.records = [r for r in lane.records if not r.finished]
    while True:
        yield data


def test_a_race_stops_at_its_time_budget_and_is_closed():
    ticks = iter(range(1000))
    budget = Budget(5.0, clock=lambda: float(next(ticks)))
    source = endless()
    handed = list(budget.spend(source))
    assert budget.spent and handed[-1].stopped
    assert 4 <= len(handed) <= 7
    assert source.gi_frame is None  # closed: its decoding ends there


def test_reading_the_video_counts_in_the_races_budget():
    """A clip that took 4 s of a 5 s budget to read leaves the race about 1 s (before: the whole 5 s after it)."""
    from types import SimpleNamespace

    from app.handlers import media_seconds

    request = SimpleNamespace(media=SimpleNamespace(load_seconds=4.0))
    assert media_seconds(request) == 4.0 and media_seconds(SimpleNamespace(media=None)) == 0.0
    ticks = iter(range(1000))
    budget = Budget(5.0, clock=lambda: float(next(ticks)), spent_before=media_seconds(request))
    handed = list(budget.spend(endless()))
    assert budget.spent and len(handed) <= 3


def test_the_page_says_the_race_reached_its_budget(monkeypatch):
    from app.handlers import Handlers, Settings

    class FakePage:  # every component named by its attribute
        def __getattr__(self, name: str) -> str:
            return name

    handlers = Handlers.__new__(Handlers)
    handlers.page = FakePage()
    handlers.settings = Settings(Limits(), [], "builtin", None, [])
    monkeypatch.setattr(handlers_module, "save_trace_file", lambda data: "trace.jsonl")
    ticks = iter(range(1000))
    budget = Budget(3.0, clock=lambda: float(next(ticks)))
    updates = list(handlers.stream(endless(), "running", None, budget))
    assert "time budget (3 s a race)" in updates[-1]["status"]


def test_a_replays_waits_are_bounded_in_all_and_said():
    recorded = synthetic_race()
    for lane in recorded.lanes:  # a forged trace: an hour between steps
        lane.records = [replace(r, total_seconds=3600.0 * (i + 1)) for i, r in enumerate(lane.records)]
    clock = ReplayClock(1.5)
    start = time.monotonic()
    steps = list(replay_steps(recorded, 1.0, sleep=clock.sleep))
    assert time.monotonic() - start < 3  # 1.5 s in all, not 2 s for every step
    assert clock.spent
    assert steps[-1].finished
    assert "the rest was shown at once" in replay_budget_note(1.5)


def long_race(steps: int) -> RaceData:
    """A recorded race of two sides with `steps` one-token steps each."""
    from app_records import header, record

    from app.race import Lane

    lanes = []
    for method in ("sage", "static"):
        base = record(method, 1, 1, 0, 0.01, 0.0)
        records = [
            replace(
                base,
                round=i,
                phase="decode" if i else "prefill",
                new_tokens=(11,),
                new_token_texts=(" w",),
                bonus_token=11,
                total_tokens=i + 1,
                total_seconds=0.01 * (i + 1),
                finish_reason="length" if i == steps - 1 else None,
            )
            for i in range(steps)
        ]
        lanes.append(Lane(method, replace(header(method), max_new_tokens=steps), records))
    return RaceData(lanes=lanes, replay=True)


def test_a_page_replay_sends_what_changed_not_the_whole_text(monkeypatch):
    from app.handlers import STREAMED_STEPS, Handlers, Settings

    class FakePage:
        def __getattr__(self, name: str) -> str:
            return name

    handlers = Handlers.__new__(Handlers)
    handlers.page = FakePage()
    handlers.settings = Settings(Limits(), [], "builtin", None, [], text_interval=0.0, figure_interval=3600.0)
    monkeypatch.setattr(handlers_module, "save_trace_file", lambda data: "trace.jsonl")
    updates = list(handlers.stream(replay_steps(long_race(1000), 0.0), "replaying", None))
    streamed, final = updates[:-1], updates[-1]
    assert len(streamed) > 100
    whole = len(final["lanes"])
    assert final["lanes"].count("<span class='sage-step' title=") == 2 * 1000  # the end shows every step of both sides
    biggest = max(len(u["lanes"]) for u in streamed)
    assert biggest < whole / 3  # each streamed update carries the latest steps only
    assert max(u["lanes"].count("<span class='sage-step' title=") for u in streamed) <= 2 * STREAMED_STEPS


def test_the_step_endpoint_is_not_offered_to_api_clients(url):
    """Step holds a race's caches between clicks: only the page reaches it (api_visibility="private"),
    never gradio_client, and its number per process is bounded (tests/test_stepping.py)."""
    api = Client(url, verbose=False).view_api(return_format="dict", print_info=False)
    named = set(api["named_endpoints"])
    assert {"/race", "/replay"} <= named
    assert not any("step" in name for name in named)
    assert not any("step" in str(endpoint) for endpoint in api.get("unnamed_endpoints", {}))
    with pytest.raises(Exception):  # noqa: B017 (any refusal: the client has no such endpoint)
        Client(url, verbose=False).predict(api_name="/step_live")
