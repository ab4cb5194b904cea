"""The page's status lines: which pair races, a race finished, stopped or past its budget, a replay
playing or done, a stepped race's round, and the race's why under the explainer (each one HTML line)."""

from __future__ import annotations

import functools
import html
from pathlib import Path

from sage_core import RunHeader
from sage_core.methods import method_label

from .inputs import Choice
from .race import RaceStepper
from .race_trace import load_race
from .render import loss_html, pace_note, status_html, why_html
from .view import RaceView, race_view

#: The race the page opens with (app/landing.py replays it).
LANDING_TRACE = Path(__file__).resolve().parent.parent / "assets" / "landing" / "race.jsonl"


def pair_status(choice: Choice, lead: str) -> str:
    target, draft = (html.escape(name) for name in choice.shown)
    return status_html(f"{lead} target <code>{target}</code>, draft <code>{draft}</code>")


def machine_words(header: RunHeader | None) -> str:
    """Where a race ran: its device, dtype and the CPU threads torch ran on ("cpu, float32, 1 thread"; the count
    left out of a trace that did not record it)."""
    if header is None:
        return "?"
    threads = f", {header.threads} thread{'s' * (header.threads != 1)}" if header.threads else ""
    return f"{header.device}, {header.dtype}{threads}"


def rounds_word(count: int) -> str:
    """A count of rounds with its plural ("1 round", "3 rounds")."""
    return f"{count} round{'s' * (count != 1)}"


def replay_status(race: RaceView, done: bool = False, speed: float = 1.0, note: str = "") -> str:
    header = race.header
    recorded = f"{machine_words(header)}; target {header.target}" if header else "unknown device"
    state = "finished" if done else f"playing at {speed:g}× the recorded pace"
    # (the talk view shows the first sentence and the why alone: the rest is detail, `sage-status-detail`)
    return status_html(
        f"▶ <b>REPLAY</b><span class='sage-status-detail'> of a recorded trace ({html.escape(race.source or 'trace')})"
        f"</span>, {state}.<span class='sage-status-detail'> No model is loaded: every number is the recorded one "
        f"({html.escape(recorded)})."
        f" Each side advances on its own recorded clock.{html.escape(note)}</span>{why_html(race) if done else ''}",
        "replay",
    )


def budget_status(seconds: float) -> str:
    return status_html(
        f"■ The race reached this server's time budget ({seconds:g} s a race) and was stopped. The rounds so far "
        "are kept; download the trace to replay them, or race again with fewer new tokens."
    )


def replay_budget_note(seconds: float) -> str:
    return f" The replay waited {seconds:g} s, this server's budget for one replay: the rest was shown at once."


def stopped_status(race: RaceView | None) -> str:
    if race is None:
        return status_html("Nothing is running.")
    what = "replay" if race.replay else "race"
    return status_html(f"■ The {what} was stopped. The rounds so far are kept; download the trace to replay them.")


def stepping_status(stepper: RaceStepper) -> str:
    data = stepper.data
    where = "the recorded trace" if data.replay else (data.header.device if data.header else "?")
    if stepper.finished:
        return status_html(
            f"▶| Stepped to the end ({html.escape(where)}): every side has finished. Walk back with the "
            "round slider; Start or Step again to race anew."
        )
    what = "Round 0 is the prefill" if stepper.round == 0 else f"Round {stepper.round}"
    return status_html(
        f"▶| <b>Stepping</b> ({html.escape(where)}): {what} on every side. Press → or ▶| Step for the next round; the "
        "explainer below shows this round's numbers."
    )


def race_note(race: RaceView) -> str:
    """Under the explainer's round: the race's why so far (the account's sentence), so the round explained and
    the race's figures are read together."""
    why = why_html(race)
    return f"<p class='sage-note'><b>Over this race{'' if race.finished else ' so far'}:</b>{why}</p>" if why else ""


def finished_status(race: RaceView, note: str = "") -> str:
    if race.stopped:
        return stopped_status(race)
    if race.replay:
        return replay_status(race, done=True, note=note)
    header = race.header
    where = machine_words(header)
    steps = ", ".join(f"{method_label(lane.key)} {rounds_word(len(lane.records) - 1)}" for lane in race.lanes)
    why = loss_html(race, header.device if header else None)
    pace = pace_note(race, opening_recording())
    pace = f" {html.escape(pace)}" if pace else ""
    # (the talk view shows the why alone: the rest is detail, `sage-status-detail`)
    return status_html(
        f"<span class='sage-status-detail'>✔ Race finished on {where}: {steps}.</span>{why_html(race)}"
        f"<span class='sage-status-detail'> Download the trace below to replay it later.{pace}{why}</span>"
    )


@functools.cache
def opening_recording() -> RaceView | None:
    """The race the page opens with (`LANDING_TRACE`), read once, as every reader sees it: what a live race's
    pace is compared with (None when it is missing or unreadable)."""
    try:
        return race_view(load_race(LANDING_TRACE))
    except Exception:
        return None
