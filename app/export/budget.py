"""What an export may spend and what it has spent: the one home of an export's cost (`Budget`: frames,
seconds and bytes; `Spend`: the check that stops it past any of them, or when its visitor has left)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sage_core.errors import SageError

from .. import slides_gif


class ExportError(SageError):
    """An export that cannot be made (no rounds to show, a bound passed, a path that cannot be written)."""


class Stopped(ExportError):
    """An export stopped because its visitor left (nobody reads this one)."""


def never_stops() -> bool:
    """The stop of an export that only its budget stops (the command line's)."""
    return False


@dataclass(frozen=True)
class Budget:
    """What one export may spend: frames drawn (a longer race is sampled), seconds, and bytes written."""

    frames: int = 60
    seconds: float = 180.0
    megabytes: float = 40.0

    def sentence(self, rounds: int, kind: str = "HTML replay") -> str:
        drawn = min(rounds, self.frames)
        sampled = (
            f"{drawn} of its {rounds} rounds, sampled evenly"
            if drawn < rounds
            else (f"all {rounds} rounds" if rounds != 1 else "its one round")
        )
        return (
            f"This {kind} draws {sampled}, within {self.seconds:g} s and {self.megabytes:g} MB "
            "(past either it stops and says so)."
        )


#: The HTML replay's budget (the default `Budget`).
HTML_BUDGET = Budget()
#: The GIF's and the video's budget.
GIF_BUDGET = Budget(frames=slides_gif.GIF_FRAMES, seconds=180.0, megabytes=60.0)


class Spend:
    """An export's spending against its budget: it raises the sentence naming the bound it passed."""

    def __init__(self, budget: Budget, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget, self.clock = budget, clock
        self.started = clock()
        self.bytes = 0

    def watch(self, done: int, total: int, stop: Callable[[], bool]) -> slides_gif.Check:
        """The check a frame's drawing runs as it goes: it raises when `stop()` (the visitor left) or
        when the budget is passed (`check`)."""

        def check() -> None:
            if stop():
                raise Stopped(f"the export stopped after {done} of {total} frames: its visitor left")
            self.check(done, total)

        return check

    def check(self, done: int, total: int) -> None:
        if self.clock() - self.started > self.budget.seconds:
            raise ExportError(
                f"the export passed its {self.budget.seconds:g} s budget after {done} of {total} frames; "
                "export a shorter race (or a trace cut to fewer rounds)"
            )
        if self.bytes > self.budget.megabytes * 2**20:
            raise ExportError(
                f"the export passed its {self.budget.megabytes:g} MB budget after {done} of {total} frames"
            )
