"""A race's time budget and a replay's: `Budget` stops a race past its seconds (the rounds so far kept),
`ReplayClock` bounds a replay's waits, `replay_speed` checks a replay's pace (one sentence when it is not one)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from sage_core.method_settings import as_float

from .inputs import InputProblem
from .race import RaceData

MAX_REPLAY_SPEED = 1000.0


def replay_speed(value: object) -> float:
    number = as_float(value)
    speed = math.nan if number is None else number
    if not math.isfinite(speed) or not 0 <= speed <= MAX_REPLAY_SPEED:
        raise InputProblem(f"the replay speed must be a number in [0, {MAX_REPLAY_SPEED:g}] (0: no waiting)")
    return speed


class Budget:
    """A race's time budget: `spend` hands out the race's steps until it has run `seconds`, then stops
    the race (the steps so far are kept; `spent` says so) and closes it, so its decoding ends there.
    Closing the handed-out steps early (a visitor gone, Stop) closes the race as well. `spent_before` is what
    the race spent before its first step (reading its video: `Media.load_seconds`), counted in the budget."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic, spent_before: float = 0.0) -> None:
        self.seconds = seconds
        self.clock = clock
        self.spent_before = spent_before
        self.spent = False

    def spend(self, source: Iterator[RaceData]) -> Generator[RaceData, None, None]:
        start = self.clock() - self.spent_before
        try:
            for data in source:
                if not data.finished and self.clock() - start > self.seconds:
                    data.stopped = self.spent = True
                yield data
                if self.spent:
                    return
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()


def media_seconds(request: Any) -> float:
    """How long reading the request's picture or video took (counted in the race's budget)."""
    return float(getattr(getattr(request, "media", None), "load_seconds", 0.0) or 0.0)


class ReplayClock:
    """A replay's waits, `seconds` in all at most: once spent, the rest of the trace is shown at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds_allowed = seconds
        self.left = seconds
        self.spent = False

    def sleep(self, wait: float) -> None:
        wait = min(wait, max(0.0, self.left))
        self.left -= wait
        self.spent = self.left <= 0
        if wait > 0:
            time.sleep(wait)
