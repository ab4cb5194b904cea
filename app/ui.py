"""The Gradio Blocks app: SAGE and its baselines racing side by side.

Events:
- "Start race" streams a live race; "Stop" cancels it.
- "Replay" streams a recorded trace at its recorded pace, no model needed.
- "Step" (or →) runs a race, or replays a trace, one round at a time on every
  side, for a speaker to talk over; the explainer beside the tree follows.
- The tree panel's method and step controls redraw one step's draft tree
  from the per-user state (the records), with no model either.
- `/race` and `/replay` are the API: the same inputs, one JSON answer
  (texts, figures, losslessness verdict, panels; a race's trace).

The layout is `page.py`, the handlers `handlers.py`; this module reads the
settings and wires the events. Races share one queue ("race") of
`RACE_CONCURRENCY` workers: loading a pair holds one of them but never the
race slot the steps take (`models.RACE_SLOT`), so a visitor's load does not
stall another's race.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from . import models
from .boundary import guard
from .handlers import TRACE_DIR, Handlers, Settings, controls, last, save_trace_file
from .inputs import Limits, load_examples
from .landing import wire_landing
from .page import KEYBOARD_JS, TITLE, Page, build_page, image_input
from .pruning_panel import show_draft_view
from .sketch import wire_sketch
from .spaces_compat import ZERO_GPU, gpu, gpu_for_race

RACE_CONCURRENCY = 2
REPLAY_CONCURRENCY = 4
#: Gradio removes the uploads and files it cached every `frequency` seconds once older than `age`.
DELETE_CACHE = (600, 3600)


def settings_from(
    default_target: str | None,
    default_draft: str | None,
    limits: Limits | None,
    custom: models.CustomModels | None,
    text_interval: float,
    figure_interval: float,
) -> Settings:
    configured = (default_target, default_draft) if default_target and default_draft else None
    offered = models.presets(configured)
    return Settings(
        limits=limits or Limits.from_env(),
        offered=offered,
        default_pair=models.default_preset_key(offered),
        custom=custom or models.CustomModels.from_env(),
        examples=load_examples(),
        text_interval=text_interval,
        figure_interval=figure_interval,
    )


def wire(page: Page, handlers: Handlers) -> None:
    """Connect the page's events to the handlers."""
    live = page.start.click(
        gpu_for_race(handlers.race_live), [*page.race_inputs, page.tree_lane], page.view, api_name="race_live",
        api_visibility="undocumented", concurrency_id="race", concurrency_limit=RACE_CONCURRENCY,
    )  # fmt: skip
    replaying = page.replay.click(
        handlers.replay_live, [page.trace_in, page.speed, page.tree_lane], page.view, api_name="replay_live",
        api_visibility="undocumented", concurrency_id="replay", concurrency_limit=REPLAY_CONCURRENCY,
    )  # fmt: skip
    # With draft-side pruning, the picture of what the draft read follows a race (hidden otherwise).
    for event in (live, replaying):
        event.then(show_draft_view, [page.state], [page.draft_seen, page.draft_note], api_visibility="private")
    # Stop cancels the stream, then draws the stopped race once more (a streamed update sent just
    # before Stop may reach the page after Stop's own).
    stopped_view = [page.status, page.verdict, page.lanes]
    stopping = page.stop.click(controls(handlers.stop, page), [page.state], [*stopped_view, page.download],
                               cancels=[live, replaying], queue=False, api_visibility="private")  # fmt: skip
    stopping.then(controls(handlers.after_stop, page), [page.state], stopped_view, queue=False,
                  api_visibility="private")  # fmt: skip
    # A streamed race or replay ends any stepped one; Step advances one round on every side.
    for button in (page.start, page.replay):
        button.click(lambda: None, None, page.stepper, queue=False, api_visibility="private")
    page.step.click(
        gpu(duration=60)(handlers.step_live), [*page.race_inputs, page.tree_lane, page.stepper],
        [*page.view, page.stepper], concurrency_id="race", concurrency_limit=RACE_CONCURRENCY,
        api_visibility="private",
    )  # fmt: skip
    page.replay_step.click(
        handlers.step_replay, [page.trace_in, page.tree_lane, page.stepper], [*page.view, page.stepper],
        concurrency_id="replay", concurrency_limit=REPLAY_CONCURRENCY, api_visibility="private",
    )  # fmt: skip
    page.gallery.select(controls(handlers.pick_example, page), None,
                        [page.image, page.video, page.prompt, page.media_tabs, page.status], queue=False,
                        api_visibility="private")  # fmt: skip
    page.tree_step.input(controls(handlers.show_tree, page), [page.state, page.tree_lane, page.tree_step],
                         [page.fig_tree, page.explain, page.status], queue=False,
                         api_visibility="private")  # fmt: skip
    page.tree_lane.input(controls(handlers.show_lane, page), [page.state, page.tree_lane],
                         [page.fig_tree, page.explain, page.tree_step, page.status], queue=False,
                         api_visibility="private")  # fmt: skip
    page.api_race.click(gpu_for_race(guard(handlers.race_api)), page.race_inputs, page.api_result,
                        api_name="race", concurrency_id="race", concurrency_limit=RACE_CONCURRENCY)  # fmt: skip
    page.api_replay.click(guard(handlers.replay_api), [page.trace_in, page.speed], page.api_result,
                          api_name="replay", concurrency_id="replay",
                          concurrency_limit=REPLAY_CONCURRENCY)  # fmt: skip


def build_demo(
    default_target: str | None = None,
    default_draft: str | None = None,
    limits: Limits | None = None,
    text_interval: float = 0.15,
    figure_interval: float = 0.8,
    custom: models.CustomModels | None = None,
) -> gr.Blocks:
    """The app. `default_target`/`default_draft` (or SAGE_APP_TARGET/SAGE_APP_DRAFT) add a pair and make it
    the default; `limits` and `custom` default to their environment settings (`Limits.from_env`,
    `CustomModels.from_env`); `*_interval` throttle how often the streamed view is redrawn."""
    settings = settings_from(default_target, default_draft, limits, custom, text_interval, figure_interval)
    if ZERO_GPU:  # ZeroGPU runs handlers in a fork: load the default pair up front
        default = next(p for p in settings.offered if p.key == settings.default_pair)
        models.PAIRS.get(default.target, default.draft)
    choices = models.preset_choices(settings.offered, settings.custom.enabled)
    with gr.Blocks(title=TITLE, fill_width=True, delete_cache=DELETE_CACHE) as demo:
        page = build_page(
            settings.examples, choices, settings.default_pair, settings.limits, settings.custom.describe()
        )
        handlers = Handlers(page, settings)
        wire(page, handlers)
        wire_sketch(page, page.sketch)
        wire_landing(demo, page, handlers)
    return demo


def launch_options(limits: Limits | None = None) -> dict[str, Any]:
    """What `launch` needs besides the address: Gradio refuses larger uploads before storing them."""
    limits = limits or Limits.from_env()
    return {"max_file_size": limits.max_file_bytes, "head": KEYBOARD_JS}


__all__ = ["TRACE_DIR", "build_demo", "image_input", "last", "launch_options", "save_trace_file"]
