"""The stepped races of one app, bounded in number: the teaching mode's Step holds each race's runs (and
their caches) between clicks, so at most `MAX_STEPPED_RACES` live at once in the process.

Each visitor's stepper stays in that visitor's `gr.State` (dropped with it when its time-to-live ends);
this registry only holds weak references, in the order the races were last stepped. A new race beyond
the limit drops the least recently stepped one: its runs and caches are released at once, and its
visitor is told so on the next Step (`DROPPED`).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

from .race import RaceStepper

MAX_STEPPED_RACES = 8
DROPPED = (
    "Your stepped race was dropped to make room for newer ones (this server keeps at most {limit} at once, "
    "the least recently stepped goes first). Press ▶| Step to start it anew."
)


class SteppedRaces:
    """The live stepped races of a process, at most `limit`: the least recently stepped is dropped first."""

    def __init__(self, limit: int = MAX_STEPPED_RACES) -> None:
        self.limit = limit
        self._races: OrderedDict[int, weakref.ref[RaceStepper]] = OrderedDict()
        self._lock = threading.Lock()

    def stepped(self, stepper: RaceStepper) -> None:
        """Note that `stepper` was (re)started or stepped; drop the oldest beyond the limit."""
        if not stepper.runs:  # a replay, or a race already done with: nothing to hold
            return
        with self._lock:
            self._prune()
            self._races[id(stepper)] = weakref.ref(stepper)
            self._races.move_to_end(id(stepper))
            while len(self._races) > self.limit:
                _, oldest = self._races.popitem(last=False)
                race = oldest()
                if race is not None:
                    race.drop()

    def forget(self, stepper: RaceStepper) -> None:
        with self._lock:
            self._races.pop(id(stepper), None)

    def __len__(self) -> int:
        with self._lock:
            self._prune()
            return len(self._races)

    def _prune(self) -> None:
        for key in [key for key, ref in self._races.items() if (race := ref()) is None or race.dropped]:
            del self._races[key]
