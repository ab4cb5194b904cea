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
stall another's race. The slides exports run in a group of their own with no Gradio limit
(`export.wire_export`): they never wait in, or fill, the queue the races share, and take or are refused
their own slots at once (`export.ExportSlots`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gradio as gr
from starlette.middleware import Middleware

from sage_core.methods import LaneKey

from . import models
from .boundary import guard, refusals_as_sentences
from .export import wire_export
from .gradio_patches import HeartbeatWatch, answer_full_queue, bound_sessions, page_open
from .handlers import TRACE_DIR, Handlers, Settings, Update, controls, last, race_api_function, save_trace_file
from .inputs import Limits, RaceForm, lane_drafts, load_examples, second_draft
from .landing import wire_landing
from .mcp_tool import McpBodyLimit, hidden_from_mcp, race_json_function, replay_json_function
from .page import HEAD, STATE_TTL, TITLE, Page, build_page, image_input
from .page_cache import PageCache
from .preview import wire_preview
from .pruning_panel import show_draft_view
from .sketch import SKETCH_PROMPT, empty_pad_note, forget_sketch, use_sketch
from .spaces_compat import ZERO_GPU, gpu, gpu_for_race, race_seconds
from .status_lines import opening_recording
from .teaching import step_teaching

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
    models.cost_curve_wanted()  # a bad SAGE_APP_COST_CURVE is one sentence at launch, not at the first race
    return Settings(
        limits=limits or Limits.from_env(),
        offered=offered,
        default_pair=models.default_preset_key(offered),
        custom=custom or models.CustomModels.from_env(),
        examples=load_examples(),
        text_interval=text_interval,
        figure_interval=figure_interval,
    )


def live_race(handlers: Handlers) -> Callable[..., Iterator[Update]]:
    """The Start event: the page's race inputs (then the tree lane) become one `RaceForm`."""

    def race_live(progress: gr.Progress = gr.Progress(), *values: Any) -> Iterator[Update]:  # noqa: B008
        *fields, tree_lane = values
        yield from handlers.race_live(RaceForm.of(fields), tree_lane, progress)

    return race_live


def race_gpu_seconds(*values: Any, **_: Any) -> int:
    """ZeroGPU's duration for a Start call: what the race of its form needs (`race_seconds`). The call's
    values are those of `live_race` (the progress tracker, the page's race inputs, the tree lane)."""
    fields = [v for v in values if not isinstance(v, gr.Progress)][:-1]
    try:
        form = RaceForm.of(fields)
        others = lane_drafts(second_draft(form))  # each method raced on the one-pass draft too (on and off)
    except Exception:  # a malformed call: ask for the most; the handler refuses it in a sentence
        return race_seconds(None, None, None)
    methods = form.methods
    if others and isinstance(methods, list | tuple):
        methods = [*methods, *(str(LaneKey(m, other)) for other in others for m in methods)]
    return race_seconds(form.max_new_tokens, methods, form.pair)


def stepped_race(handlers: Handlers) -> Callable[..., Update]:
    """The Step event: the page's race inputs (then the tree lane and the stepped race) as one `RaceForm`, and
    the page's session (a stepped race whose page is open is kept: `stepping.SteppedRaces`), read here, outside
    the GPU's call (`spaces_compat.gpu`), which is handed only the session's id."""

    @gpu(duration=60)
    def step(session: str, progress: Any, *values: Any) -> Update:
        *fields, tree_lane, stepper = values
        return handlers.step_live(RaceForm.of(fields), tree_lane, stepper, progress, session)

    def step_live(request: gr.Request, progress: gr.Progress = gr.Progress(), *values: Any) -> Update:  # noqa: B008
        return step(str(getattr(request, "session_hash", "") or ""), progress, *values)

    return step_live


def draw_tab_opened(examples: Sequence[str]) -> Callable[[Any, Any], tuple[Any, Any]]:
    """The Draw tab opened: the empty pad's note (`sketch.empty_pad_note`), and the prompt asking for a description
    when it was one the page put there (the landing's, an example's: a question about another picture), the
    visitor's own kept."""
    given = {*examples, *(race.header.prompt for race in (opening_recording(),) if race and race.header)}

    def opened(value: Any, prompt: Any) -> tuple[Any, Any]:
        ours = not isinstance(prompt, str) or not prompt.strip() or prompt in given
        return empty_pad_note(value), SKETCH_PROMPT if ours else gr.skip()

    return opened


def wire_sketch(page: Page, sketch: gr.Sketchpad, examples: Sequence[str] = ()) -> None:
    """Each change of the drawing becomes the race's picture (outside the queue: the work is bounded)."""
    drawn = gr.State(None, delete_callback=forget_sketch)  # the visitor's saved drawing, removed with them
    sketch.change(
        use_sketch,
        [sketch, page.prompt, drawn],
        [page.image, page.video, page.prompt, page.status, drawn],
        queue=False,
        api_visibility="private",
    )
    if page.draw_tab is not None:
        page.draw_tab.select(
            draw_tab_opened(examples),
            [sketch, page.prompt],
            [page.status, page.prompt],
            queue=False,
            api_visibility="private",
        )


def wire(page: Page, handlers: Handlers) -> None:
    """Connect the page's events to the handlers."""
    live = page.start.click(
        gpu(duration=race_gpu_seconds)(live_race(handlers)),
        [*page.race_inputs, page.tree_lane],
        page.view,
        api_name="race_live",
        api_visibility="undocumented",
        concurrency_id="race",
        concurrency_limit=RACE_CONCURRENCY,
    )
    replaying = page.replay.click(
        handlers.replay_live,
        [page.trace_in, page.speed, page.tree_lane],
        page.view,
        api_name="replay_live",
        api_visibility="undocumented",
        concurrency_id="replay",
        concurrency_limit=REPLAY_CONCURRENCY,
    )
    # With draft-side pruning, the picture of what the draft read follows a race (hidden otherwise).
    for event in (live, replaying):
        event.then(show_draft_view, [page.state], [page.draft_seen, page.draft_note], api_visibility="private")
    # Stop cancels the stream, then draws the stopped race once more (a streamed update sent just
    # before Stop may reach the page after Stop's own).
    stopped_view = [page.status, page.verdict, page.lanes]
    stopping = page.stop.click(
        controls(handlers.stop, page),
        [page.state],
        [*stopped_view, page.download],
        cancels=[live, replaying],
        queue=False,
        api_visibility="private",
    )
    stopping.then(
        controls(handlers.after_stop, page), [page.state], stopped_view, queue=False, api_visibility="private"
    )
    # One stream writes a tab's components at a time: Start cancels a streaming replay, Replay a streaming
    # race, and either ends any stepped one; Step (of a race or a replay) cancels both streams.
    for button, other in ((page.start, replaying), (page.replay, live)):
        button.click(lambda: None, None, page.stepper, cancels=[other], queue=False, api_visibility="private")
    for button in (page.step, page.replay_step):
        button.click(None, None, None, cancels=[live, replaying], queue=False, api_visibility="private")
    page.step.click(
        stepped_race(handlers),
        [*page.race_inputs, page.tree_lane, page.stepper],
        [*page.view, page.stepper],
        concurrency_id="race",
        concurrency_limit=RACE_CONCURRENCY,
        api_visibility="private",
    )
    if page.teach is not None:
        page.teach.click(None, None, None, cancels=[live, replaying], queue=False, api_visibility="private")
        page.teach.click(
            step_teaching(handlers),
            [page.tree_lane, page.stepper],
            [*page.view, page.stepper],
            concurrency_id="replay",
            concurrency_limit=REPLAY_CONCURRENCY,
            api_visibility="private",
        )
    page.replay_step.click(
        handlers.step_replay,
        [page.trace_in, page.tree_lane, page.stepper],
        [*page.view, page.stepper],
        concurrency_id="replay",
        concurrency_limit=REPLAY_CONCURRENCY,
        api_visibility="private",
    )
    page.gallery.select(
        controls(handlers.pick_example, page),
        None,
        [page.image, page.video, page.prompt, page.media_tabs, page.status],
        queue=False,
        api_visibility="private",
    )
    page.sweep_show.click(
        controls(handlers.show_sweep, page),
        [page.pair, page.custom_target, page.custom_draft],
        [page.fig_sweep, page.sweep_note, page.status],
        concurrency_id="race",
        concurrency_limit=RACE_CONCURRENCY,
        api_visibility="private",
    )
    page.tree_round.input(
        controls(handlers.show_tree, page),
        [page.state, page.tree_lane, page.tree_round],
        [page.plots["tree"], page.explain, page.status],
        queue=False,
        api_visibility="private",
    )
    page.tree_lane.input(
        controls(handlers.show_lane, page),
        [page.state, page.tree_lane],
        [page.plots["tree"], page.explain, page.tree_round, page.status],
        queue=False,
        api_visibility="private",
    )
    # The MCP tool first: it takes the name `race_api`; /race (the Python clients' dict) is kept off the tool list.
    page.api_race_json.click(
        gpu_for_race(guard(race_json_function(race_api_function(handlers)))),
        [*page.race_inputs, *page.api_json_asked],
        page.api_json,
        api_name="race_json",
        concurrency_id="race",
        concurrency_limit=RACE_CONCURRENCY,
    )
    page.api_race.click(
        hidden_from_mcp(gpu_for_race(guard(race_api_function(handlers)))),
        page.race_inputs,
        page.api_result,
        api_name="race",
        concurrency_id="race",
        concurrency_limit=RACE_CONCURRENCY,
    )
    page.api_replay_json.click(
        guard(replay_json_function(handlers.replay_api)),
        [page.trace_in, page.speed, page.api_json_asked[0]],
        page.api_json,
        api_name="replay_json",
        concurrency_id="replay",
        concurrency_limit=REPLAY_CONCURRENCY,
    )
    page.api_replay.click(
        hidden_from_mcp(guard(handlers.replay_api)),
        [page.trace_in, page.speed],
        page.api_result,
        api_name="replay",
        concurrency_id="replay",
        concurrency_limit=REPLAY_CONCURRENCY,
    )


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
        handlers.stepped_races.page_open = functools.partial(page_open, demo)  # the rules `queued` gives it
        wire(page, handlers)
        wire_sketch(page, page.sketch, [example.prompt for example in settings.examples])
        wire_preview(page)
        wire_landing(demo, page, handlers)
        wire_export(page)
    refusals_as_sentences(demo)
    return demo


BUSY = "The app is busy: {waiting} requests are already waiting (at most {limit} may wait). Try again in a minute."


def queued(demo: gr.Blocks, limits: Limits | None = None) -> gr.Blocks:
    """The app's queue: one worker per event unless the event says more, and at most `limits.max_queue`
    requests waiting; one more is answered that the app is busy (HTTP 503 with `BUSY`; the page and
    gradio_client show their own "busy, try again" line for it). What is kept per visitor is bounded
    (`gradio_patches.bound_sessions`): a visitor's session goes `limits.session_grace_seconds` after
    they leave, or after `STATE_TTL` unused, and at most `limits.max_sessions` are kept."""
    limits = limits or Limits.from_env()
    demo.queue(default_concurrency_limit=1, max_size=limits.max_queue)
    answer_full_queue(demo, lambda waiting, limit: BUSY.format(waiting=waiting, limit=limit))
    bound_sessions(demo, limits.session_grace_seconds, STATE_TTL)
    return demo


def launch_options(limits: Limits | None = None) -> dict[str, Any]:
    """What `launch` needs besides the address: Gradio refuses larger uploads before storing them; the page
    is served from memory (`page_cache`), so a crowd of arrivals does not hold up the races; at most
    `limits.max_sessions` visitors' sessions are kept, each page's heartbeat watched (`HeartbeatWatch`) so
    that a session follows its visitor, not the socket; an MCP request over the MCP SDK's body limit is told why
    in one sentence (`McpBodyLimit`)."""
    limits = limits or Limits.from_env()
    return {
        "max_file_size": limits.max_file_bytes,
        "state_session_capacity": limits.max_sessions,
        "head": HEAD,
        "app_kwargs": {"middleware": [Middleware(PageCache), Middleware(HeartbeatWatch), Middleware(McpBodyLimit)]},
    }


__all__ = ["BUSY", "TRACE_DIR", "build_demo", "image_input", "last", "launch_options", "queued", "save_trace_file"]
