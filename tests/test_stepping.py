"""Stepped races are bounded per process: beyond the limit the least recently stepped is dropped, its
runs and caches freed at once, and its visitor told on the next Step."""

from __future__ import annotations

import gc
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
