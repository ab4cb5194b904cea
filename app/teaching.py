"""The teaching recording: a race of the built-in pair with its hesitant draft, recorded with
`scripts/record_landing_trace.py` (assets/teaching/), that the page offers to step through round by round as a
replay. In it SAGE's α falls and its tree goes wide; the note above each step says so from the recording's own
records (`landing.alpha_sentence`, the widest root), and that it is a recording, not a live race."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .boundary import user_message
from .handlers import Handlers, Update
from .landing import alpha_sentence
from .race import RaceData, RaceStepper, replay_stepper
from .render import error_html, status_html

#: The recording (and its picture beside it, picture.png).
TEACHING_TRACE = Path(__file__).resolve().parent.parent / "assets" / "teaching" / "hesitant-race.jsonl"


def teaching_note(data: RaceData) -> str:
    """Above each step: a recording, of what, and what SAGE's α and root did in it (read off its records)."""
    lane = next((lane for lane in data.lanes if lane.key == "sage"), None)
    rounds = [r for r in lane.records if r.phase == "decode"] if lane else []
    widest = max(rounds, key=lambda r: (r.root_width, -r.round), default=None)
    wide = f" Its widest root: {widest.root_width} candidates, in round {widest.round}." if widest else ""
    draft = data.lanes[0].header.draft if data.lanes and data.lanes[0].header else "the hesitant draft"
    return status_html(
        f"▶| A <b>recording</b>, not a live race (assets/teaching): the built-in target with its draft {draft}. "
        f"{alpha_sentence(data)}{wide} Step on with → and watch panel ① and the tree's shaded level.",
        "replay",
    )


def step_teaching(handlers: Handlers) -> Callable[[Any, RaceStepper | None], Update]:
    """The button's handler: the next recorded round of the teaching recording on every side (a new stepping
    when another race or replay was being stepped, or this one ended)."""
    key = ("replay", str(TEACHING_TRACE))

    def step(tree_lane: Any, stepper: RaceStepper | None) -> Update:
        try:
            if stepper is None or stepper.key != key or stepper.finished:
                recorded = handlers.open_trace(str(TEACHING_TRACE))
                stepper = replay_stepper(recorded, key)
                stepper.notes = teaching_note(recorded)
            return handlers.stepped(stepper, tree_lane)
        except Exception as error:
            return {handlers.page.status: error_html(user_message(error))}

    return step
