"""A page alive on arrival: a race recorded for this page, shown as the page opens.

The trace (`assets/landing/race.jsonl` and its picture, written by
`PYTHONPATH=. python scripts/record_landing_trace.py` with the app's own race code) is drawn once,
in its final state, through the same view as any replay and labelled as a recording; its picture
and prompt fill the inputs, so Start race races what the visitor sees. The view is rendered once,
when the app is built, as the page's initial values (`wire_landing`): a page load runs no event,
holds no worker and waits in no queue, so a crowd of arrivals costs what Gradio's page costs and
never waits ahead of a race (nor is there an event for a raw call to start a replay). In the
browser the texts then appear round by round at the recorded pace, compressed (`ANIMATE_JS`, no
server work). Start race replaces the landing's status at once.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.processing_utils import move_files_to_cache
from gradio_client import utils as client_utils
from pydantic import BaseModel

from .handlers import LANDING_TRACE, Handlers, Update, replay_status
from .page import Page
from .race import RaceData, replay_steps
from .race_trace import load_race
from .render import status_html
from .view import RaceView

ROOT = Path(__file__).resolve().parent.parent
#: The picture of the recorded race, beside its trace.
LANDING_PICTURE = LANDING_TRACE.with_name("picture.png")
#: The texts appear in the browser over this many seconds at most (each side in proportion to its recorded time).
ANIMATION_SECONDS = 8.0
LANDING_NOTE = (
    "This page opened with a <b>recorded race</b> (no model ran for it): its picture and prompt are in the "
    "inputs. Press <b>▶ Start race</b> to race them live on this machine, or pick an example, upload a picture "
    "or draw one."
)
STARTING = "Starting a live race on this machine…"
log = logging.getLogger("sage.app")


def landing_lead(data: RaceData | None = None) -> str:
    """The landing's lead: a recorded race, and what SAGE's α did in it (read off the recording)."""
    return status_html(LANDING_NOTE + (f" {alpha_sentence(data)}" if data else ""), "replay")


def alpha_sentence(data: RaceData) -> str:
    """What SAGE's α did in a recorded race, from its records: the range it moved over and the depths its trees
    took, or that it stayed put ("" without a SAGE lane)."""
    lane = next((lane for lane in data.lanes if lane.key == "sage"), None)
    rounds = [r for r in lane.records if r.phase == "decode" and r.alpha is not None] if lane else []
    if not rounds:
        return ""
    alphas, depths = [r.alpha for r in rounds if r.alpha is not None], [r.depth for r in rounds]
    if max(alphas) - min(alphas) < 0.05:
        return f"Here SAGE's α stayed at {min(alphas):.2f} every round: its trees kept one shape."
    moved = f"between {min(alphas):.2f} and {max(alphas):.2f}"
    return f"Here SAGE's α moved {moved}, its trees {min(depths)}–{max(depths)} deep."


def recorded_race(trace: Path) -> RaceData | None:
    """The landing's trace as recorded (None when it is missing or broken)."""
    if not trace.is_file():
        return None
    try:
        recorded = load_race(trace)
    except Exception:  # a broken landing trace must not break the page
        log.exception("the landing trace %s cannot be replayed", trace)
        return None
    recorded.source = "a race recorded for this page"
    return recorded


def final_state(recorded: RaceData) -> RaceData:
    """The recorded race replayed to its end without waiting: a new `RaceData` (the records are frozen)."""
    return deque(replay_steps(recorded, speed=0), maxlen=1)[0]


def pace_html(data: RaceData) -> str:
    """When each round of each side ended, as a share of the slowest side's time (a hidden element read
    by the browser's animation, `ANIMATE_JS`): sides separated by ';', rounds by ','."""
    longest = max((lane.records[-1].total_seconds for lane in data.lanes if lane.records), default=0.0) or 1.0
    sides = ";".join(",".join(f"{r.total_seconds / longest:.3f}" for r in lane.records) for lane in data.lanes)
    return f"<span id='landing-pace' data-rounds='{sides}' style='display:none'></span>"


def landing_view(handlers: Handlers, trace: Path = LANDING_TRACE) -> tuple[Update, str]:
    """The page as the landing race leaves it, the records as the visitors' initial state, and its prompt
    (empty when the trace is missing or broken)."""
    recorded = recorded_race(trace)
    if recorded is None:
        return {}, ""
    data = final_state(recorded)

    def status(race: RaceView) -> str:  # (read off the view the page's update is made from)
        return landing_lead(data) + replay_status(race, done=True) + pace_html(data)

    return handlers.view(data, status, None), data.header.prompt if data.header else ""


def cached_picture(image: gr.Image, picture: Path) -> dict[str, Any] | None:
    """The landing's picture as the image input's value in the browser: a file in Gradio's cache, kept."""
    if not picture.is_file():
        return None
    data = image.postprocess(str(picture))
    if data is None:
        return None
    value: dict[str, Any] = move_files_to_cache(data.model_dump(), image, postprocess=True, keep_in_cache=True)
    image.keep_in_cache.add(value["path"])
    return value


def inputs_js(picture: dict[str, Any] | None, prompt: str) -> str:
    """On page load, in the browser: the landing's picture and prompt into the inputs (not their initial
    values, which are the API's defaults: a raw /race call without an image must still be refused), then
    the animation."""
    values = [picture, prompt] if picture is not None and prompt else [None, ""]
    return f"() => {{ ({ANIMATE_JS.strip()})(); return {json.dumps(values)}; }}"


def set_initial(component: Any, value: Any) -> None:
    """Make `value` (a value or a `gr.update`) the component's initial value, as its constructor would."""
    if isinstance(value, dict) and value.get("__type__") == "update":
        for name, prop in value.items():
            if name not in ("__type__", "value"):
                setattr(component, name, prop)
                # a session's later update rebuilds the component from its constructor's arguments
                component.constructor_args[name] = prop
        if "value" not in value:
            return
        value = value["value"]
    if isinstance(component, gr.State):
        component.value = value  # each session starts from its own deep copy (Gradio's `SessionState`)
        return
    initial = component.postprocess(value)
    if isinstance(initial, BaseModel):
        initial = initial.model_dump()
    component.value = move_files_to_cache(initial, component, postprocess=True, keep_in_cache=True)
    if client_utils.is_file_obj(component.value):
        component.keep_in_cache.add(component.value["path"])


#: At Start race's click, in the browser: the recording's status lines give way to one saying a live race is
#: starting. Only those lines: should the race's own first status (a refusal) be drawn first, it stays.
STARTING_JS = f"""
() => {{
  const replayed = document.querySelectorAll('#status .sage-status.replay');
  replayed.forEach((line, i) => {{
    if (i === 0) line.outerHTML = {json.dumps(f"<div class='sage-status info'>{STARTING}</div>")};
    else line.remove();
  }});
  const pace = document.getElementById('landing-pace');
  if (pace) pace.remove();
}}
"""

#: The texts of the landing race appear round by round in the browser, each round when it ended on its
#: side's recorded clock, the whole race compressed into `ANIMATION_SECONDS`; any later update of the
#: page redraws the columns, and with them every round.
ANIMATE_JS = f"""
() => {{
  const pace = document.getElementById('landing-pace');
  if (!pace) return;
  const sides = pace.dataset.rounds.split(';').map(s => s.split(',').map(Number));
  document.querySelectorAll('#lanes .sage-col').forEach((column, i) => {{
    const rounds = Array.from(column.querySelectorAll('.sage-text .sage-step'));
    const ends = sides[i] || [];
    rounds.forEach((r, k) => {{
      r.style.visibility = 'hidden';
      setTimeout(() => {{ r.style.visibility = ''; }}, 1000 * {ANIMATION_SECONDS} * (ends[k] ?? 1));
    }});
  }});
}}
"""


def wire_landing(demo: gr.Blocks, page: Page, handlers: Handlers) -> None:
    """Open every page on the landing race: its view is the page's initial value (no event, no worker),
    animated in the browser; Start race says at once that a live race is starting."""
    view, prompt = landing_view(handlers)
    for component, value in view.items():
        set_initial(component, value)
    picture = cached_picture(page.image, LANDING_PICTURE) if view else None
    demo.load(
        None, None, [page.image, page.prompt], js=inputs_js(picture, prompt), queue=False, api_visibility="private"
    )
    page.start.click(None, None, None, js=STARTING_JS, queue=False, api_visibility="private")
