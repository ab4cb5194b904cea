"""A page alive on arrival: a shipped trace of a long race plays back as the page opens.

The trace (`assets/landing/race.jsonl`, written by `python -m scripts.record_landing_trace` with the
app's own race code) replays through the same view as any replay, labelled as one, so every
panel and the explainer are drawn before the visitor touches anything. Start race, Step or a
replay of the visitor's own cancel it; the live race then draws over it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from .handlers import Handlers, Update, replay_status
from .page import Page
from .race import load_race, replay_steps
from .render import status_html

ROOT = Path(__file__).resolve().parent.parent
LANDING_TRACE = ROOT / "assets" / "landing" / "race.jsonl"
#: The landing replay runs at this share of the recorded pace, so that the race can be watched.
LANDING_SPEED = 0.5
LANDING_NOTE = (
    "This page opened with a <b>recorded race</b> played back (no model ran for it). Pick an example, upload a "
    "picture or draw one, and press <b>▶ Start race</b> for a live race on this machine."
)
log = logging.getLogger("sage.app")


def landing_lead() -> str:
    return status_html(LANDING_NOTE, "replay")


def play_landing(
    handlers: Handlers, trace: Path = LANDING_TRACE, speed: float = LANDING_SPEED
) -> Callable[[], Iterator[Update]]:
    """The page-load handler: the landing trace replayed into the page's view (nothing when it is missing)."""

    def play() -> Iterator[Update]:
        if not trace.is_file():
            return
        try:
            recorded = load_race(trace)
        except Exception:  # a broken landing trace must not break the page
            log.exception("the landing trace %s cannot be replayed", trace)
            return
        recorded.source = "a race recorded for this page"
        playing = replay_status(recorded, speed=speed)
        for update in handlers.stream(replay_steps(recorded, speed), playing, None, lead=landing_lead()):
            update.pop(handlers.page.download, None)  # the visitor's own races offer their traces
            yield update

    return play


def wire_landing(demo: gr.Blocks, page: Page, handlers: Handlers) -> Any:
    """Play the landing replay on every page load; the page's own races and replays cancel it."""
    landing = demo.load(play_landing(handlers), None, page.view, api_visibility="private",
                        concurrency_id="landing", concurrency_limit=None)  # fmt: skip
    for button in (page.start, page.step, page.replay, page.replay_step):
        button.click(lambda: None, None, None, cancels=[landing], queue=False, api_visibility="private")
    return landing
