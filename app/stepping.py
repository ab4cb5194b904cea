"""The stepped races of one app, bounded in number: the teaching mode's Step holds each race's runs (and
their caches) between clicks, so at most `MAX_STEPPED_RACES` live at once in the process.

Each visitor's stepper stays in that visitor's `gr.State` (dropped with it when its time-to-live ends);
this registry only holds weak references, in the order the races were last stepped, each with its page's
session. A race whose page is open (its heartbeat held: `gradio_patches.SessionRules.page_open`) is kept: a
speaker stepping through a race in a talk is never dropped because others pressed Step. A new race beyond the
limit drops the least recently stepped race whose page is gone (its runs and caches are released at once, and
its visitor, back within the grace, is told so on the next Step: `DROPPED`); when every held race's page is
open, the new one is refused in one sentence (`FULL`) before anything is loaded.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

from .race import RaceStepper

MAX_STEPPED_RACES = 8
DROPPED = (
    "Your stepped race was dropped to make room for newer ones (this server keeps at most {limit} at once, "
    "and lets go first the least recently stepped one whose page was closed). Press ▶| Step to start it anew."
)
FULL = (
    "This server already holds its {limit} stepped races, each for a visitor whose page is open, so a new one "
    "cannot start now: press ▶ Start to race to the end, or ▶| Step again in a few minutes (a stepped race is "
    "let go when its page closes or {minutes} minutes after its last step)."
)


def no_page_known(session: str) -> bool:
    """Without the app's session rules (a bare `Handlers` in a test) no page is known to be open."""
    return False


class SteppedRaces:
    """The live stepped races of a process, at most `limit`: a race whose page is open (`page_open(session)`)
    is kept; beyond the limit the least recently stepped of the others is dropped first."""

    def __init__(self, limit: int = MAX_STEPPED_RACES, page_open: Callable[[str], bool] = no_page_known) -> None:
        self.limit = limit
        self.page_open = page_open
        self._races: OrderedDict[int, tuple[weakref.ref[RaceStepper], str]] = OrderedDict()
        self._lock = threading.Lock()

    def room(self, session: str = "") -> bool:
        """Whether the page of `session` may start a new stepped race: one under the limit, or a held race that
        `stepped` would let go (its page gone, or this page's own earlier race)."""
        with self._lock:
            self._prune()
            return len(self._races) < self.limit or any(self._replaceable(s, session) for _, s in self._races.values())

    def stepped(self, stepper: RaceStepper, session: str = "") -> None:
        """Note that `stepper` (of the page of `session`; "" unknown) was (re)started or stepped; its page's
        earlier race is let go, and beyond the limit the least recently stepped race whose page is gone (when
        every page is open, which `room` refuses first, the least recently stepped)."""
        if not stepper.runs:  # a replay, or a race already done with: nothing to hold
            return
        with self._lock:
            self._prune()
            key = id(stepper)
            self._races[key] = (weakref.ref(stepper), session)
            self._races.move_to_end(key)
            for other, (_, held) in list(self._races.items()):
                if session and held == session and other != key:  # its inputs changed: one race a page
                    self._drop(other)
            while len(self._races) > self.limit:
                others = [k for k, (_, held) in self._races.items() if k != key]
                self._drop(next((k for k in others if not self.page_open(self._races[k][1])), others[0]))

    def forget(self, stepper: RaceStepper) -> None:
        with self._lock:
            self._races.pop(id(stepper), None)

    def __len__(self) -> int:
        with self._lock:
            self._prune()
            return len(self._races)

    def _replaceable(self, held: str, session: str) -> bool:
        return (bool(session) and held == session) or not self.page_open(held)

    def _drop(self, key: int) -> None:
        ref, _ = self._races.pop(key)
        race = ref()
        if race is not None:
            race.drop()

    def _prune(self) -> None:
        for key in [key for key, (ref, _) in self._races.items() if (race := ref()) is None or race.dropped]:
            del self._races[key]
