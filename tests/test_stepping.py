"""Stepped races are bounded per process: beyond the limit the least recently stepped is dropped, its
runs and caches freed at once, and its visitor told on the next Step."""

from __future__ import annotations

import gc
import time
import weakref

import pytest

from app.race import RaceRequest, live_stepper
from app.stepping import SteppedRaces
from sage_core import load_media


@pytest.fixture(scope="module")
def pair(builtin_pair):
    return builtin_pair


@pytest.fixture(scope="module")
def media():
    from app.inputs import load_examples

    return load_media(next(e for e in load_examples() if not e.is_video).file)


def caches_of(stepper) -> list[weakref.ref]:
    """Weak references to the stepper's runs and their loops (whose frames hold the KV caches)."""
    found = []
    for run in stepper.runs:
        found += [weakref.ref(run), weakref.ref(run._steps)]
        frame = run._steps.gi_frame
        assert frame is not None and any(isinstance(v, object) for v in frame.f_locals.values())
    return found


def start(pair, media, key: str):
    stepper = live_stepper(pair, RaceRequest(media, "describe the image.", ("sage", "static"), 24), key=key)
    stepper.step()  # the prefill: the caches now exist
    return stepper


def test_the_oldest_stepped_race_is_dropped_and_its_caches_freed(pair, media):
    races = SteppedRaces(limit=2)
    first, second = start(pair, media, "a"), start(pair, media, "b")
    races.stepped(first)
    races.stepped(second)
    held = caches_of(first)
    assert held and all(ref() is not None for ref in held)
    races.stepped(first)  # stepped again: now the most recent, so the second is the oldest
    third = start(pair, media, "c")
    races.stepped(third)
    assert len(races) == 2
    assert second.dropped and not first.dropped and not third.dropped
    assert second.step() is second.data  # a dropped race steps no more, and keeps its records
    dropped_caches = caches_of(second)
    assert dropped_caches == []  # its runs are gone from it...
    fourth = start(pair, media, "d")
    held = caches_of(first)
    races.stepped(fourth)
    assert first.dropped
    del fourth
    gc.collect()
    assert all(ref() is None for ref in held)  # ... and the caches freed, though the visitor's state lives on


def test_a_dropped_race_tells_its_visitor(pair, media):
    from app.handlers import Handlers
    from app.inputs import RaceForm
    from app.stepping import DROPPED

    handlers = Handlers.__new__(Handlers)
    handlers.stepped_races = SteppedRaces(limit=1)

    class FakePage:  # every component named by its attribute
        def __getattr__(self, name: str) -> str:
            return name

    handlers.page = FakePage()
    stepper = start(pair, media, "x")
    stepper.drop()
    update = handlers.step_live(RaceForm(), None, stepper)
    assert DROPPED.format(limit=1).split(" (")[0] in update["status"]
    assert update["stepper"] is None


class Held:
    """A stand-in stepped race: what `SteppedRaces` reads of one (its runs, whether it was dropped)."""

    def __init__(self) -> None:
        self.runs = [object()]
        self.dropped = False

    def drop(self) -> None:
        self.dropped, self.runs = True, []


def test_a_race_whose_page_is_open_is_kept_and_a_newcomer_refused_when_every_page_is() -> None:
    from app.stepping import MAX_STEPPED_RACES

    open_pages = {"speaker"}
    races = SteppedRaces(page_open=lambda session: session in open_pages)
    speaker = Held()
    assert races.room("speaker")
    races.stepped(speaker, "speaker")
    others = [Held() for _ in range(3 * MAX_STEPPED_RACES)]  # an audience pressing Step, then leaving
    for n, race in enumerate(others):
        assert races.room(f"visitor-{n}")
        races.stepped(race, f"visitor-{n}")
        if n % 5 == 0:  # the speaker steps now and then
            races.stepped(speaker, "speaker")
    assert not speaker.dropped and len(races) == MAX_STEPPED_RACES  # the bound holds: the others went
    assert sum(not race.dropped for race in others) == MAX_STEPPED_RACES - 1
    # every held race's page open: a newcomer is refused (before anything is loaded), nobody is dropped
    open_pages |= {f"visitor-{n}" for n in range(len(others))}
    assert not races.room("latecomer") and races.room("speaker")  # a page may always replace its own race
    # a page's new race (its inputs changed) lets its earlier one go at once
    again = Held()
    races.stepped(again, "speaker")
    assert speaker.dropped and not again.dropped and len(races) == MAX_STEPPED_RACES
    # a page that closes frees its place for the next visitor
    open_pages.discard("visitor-23")
    assert races.room("latecomer")
    latecomer = Held()
    races.stepped(latecomer, "latecomer")
    assert others[23].dropped and not again.dropped and len(races) == MAX_STEPPED_RACES


def test_a_full_server_refuses_a_new_stepped_race_in_one_sentence() -> None:
    from app.handlers import Handlers
    from app.inputs import RaceForm
    from app.stepping import FULL

    handlers = Handlers.__new__(Handlers)
    handlers.stepped_races = SteppedRaces(limit=1, page_open=lambda session: True)
    speaker = Held()  # held by the speaker's state (the registry's references are weak)
    handlers.stepped_races.stepped(speaker, "speaker")

    class FakePage:  # every component named by its attribute
        def __getattr__(self, name: str) -> str:
            return name

    handlers.page = FakePage()
    update = handlers.step_live(RaceForm(), None, None, session="latecomer")
    assert set(update) == {"status"}, update
    assert FULL.format(limit=1, minutes=15).split(":")[0] in update["status"], update


@pytest.mark.timeout(300)
def test_served_a_speakers_stepped_race_outlives_others_steps_while_the_page_is_open() -> None:
    """On a served app with one stepped race allowed: the speaker's page holds its heartbeat and steps; another
    visitor's Step is refused in a sentence; the speaker steps on; once the speaker's page closes, the other
    visitor's Step takes its place and the speaker, back, is told."""
    import inspect
    import json

    import httpx
    from app_server import form_values
    from test_sessions import fn_index, open_heartbeat, queued_call

    from app.inputs import load_examples
    from app.serving import running_demo

    full, dropped = "This server already holds its", "Your stepped race was dropped"
    with running_demo("builtin", "builtin") as (demo, url):
        index = fn_index(demo, "step_live")
        step = inspect.getclosurevars(demo.fns[index].fn).nonlocals["step"]
        handlers = inspect.getclosurevars(getattr(step, "__wrapped__", step)).nonlocals["handlers"]
        handlers.stepped_races.limit = 1
        example = next(e for e in load_examples() if not e.is_video)
        with open(example.file, "rb") as handle:
            path = httpx.post(f"{url}gradio_api/upload", files={"files": ("picture.png", handle)}).json()[0]
        image = {"path": path, "meta": {"_type": "gradio.FileData"}}
        values = [*form_values(image=image, prompt=example.prompt, max_new_tokens=24), None, None]

        def said(session: str) -> str:
            answer = queued_call(url, session, index, values)
            assert answer.get("success"), answer
            return json.dumps(answer["output"], ensure_ascii=False)

        heartbeat = open_heartbeat(url, "speaker")
        time.sleep(0.5)
        first = said("speaker")
        assert full not in first and dropped not in first and len(handlers.stepped_races) == 1
        assert full in said("visitor")  # the speaker's page is open: the newcomer is refused, nobody dropped
        assert dropped not in said("speaker") and len(handlers.stepped_races) == 1
        heartbeat.close()
        time.sleep(1.0)
        assert full not in said("visitor")  # the speaker's page closed: its place goes to the visitor
        assert dropped in said("speaker")
