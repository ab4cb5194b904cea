"""The Gradio Blocks app: SAGE and its baselines racing side by side.

Events:
- "Start race" streams a live race (`race_live`); "Stop" cancels it.
- "Replay" streams a recorded trace at its recorded pace, no model needed.
- The tree panel's method and step controls redraw one step's draft tree
  from the per-user state (the records), with no model either.
- `/race` and `/replay` are the API: the same inputs, one JSON answer
  (texts, figures, losslessness verdict, panels, the trace).

Handlers only check inputs, call `app.race` and render; all decoding is
`sage_core`'s.
"""

from __future__ import annotations

import html
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import torch

from sage_core import METHOD_LABELS, SageConfig, SageError
from sage_core.records import TraceError

from . import models
from .api import race_result
from .inputs import DEFAULT_PROMPT, InputProblem, Limits, check_request, load_examples
from .panels import all_figures, tree_figure
from .pruning_panel import draft_view_outputs, pruning_controls, show_draft_view
from .race import RaceData, load_race, race_steps, replay_steps, resolve_prune_ratio, save_race
from .render import CSS, badge_html, error_html, headline_html, race_html, status_html, table_html
from .spaces_compat import ZERO_GPU, gpu

DEFAULT_METHODS = ["sage", "static"]
DEFAULT_MAX_NEW_TOKENS = 128
OUT_OF_MEMORY = "not enough memory to decode this input: try fewer new tokens, a smaller image or a shorter video"
TITLE = "SAGE: entropy-guided adaptive speculative decoding, raced live"
TRACE_DIR = Path(tempfile.gettempdir()) / "sage-app-traces"
EXAMPLES_NOTE = (
    "<div class='sage-wrap' style='font-size:13px;color:#475569;margin:2px 0 -4px 2px'><b>Examples</b>: click one "
    "(each comes with a suggested prompt)</div>"
)
INTRO = f"""
<div class='sage-wrap'>
<h1 style='margin:0 0 4px 0;font-size:26px'>{TITLE}</h1>
<p style='margin:0;color:#475569;font-size:14px'>A small <b>draft</b> VLM proposes a tree of tokens; the large
<b>target</b> VLM checks the whole tree in one forward and keeps the longest path it agrees with, plus one token of its
own. <b>SAGE</b> (<a href='https://arxiv.org/abs/2602.00523' target='_blank'>arXiv 2602.00523</a>) shapes each tree
from the draft's confidence: deep and narrow when sure, shallow and wide when not. Here it races the static 25-node tree
(and optionally a 5-token chain and plain decoding) on the same device, step by step; every number comes from this
run's own timed steps. The output must equal the target's own greedy decoding.</p>
</div>
"""


def image_input(**kwargs: Any) -> gr.Image:
    """An image input that hands the uploaded file to the app unopened.

    The stock component opens the file with PIL first, so a corrupt upload
    would fail inside Gradio with no useful message; the app checks the file
    itself (`inputs.open_media`) and says what is wrong.
    """
    component = gr.Image(type="filepath", **kwargs)
    stock = component.preprocess

    def preprocess(payload: Any) -> Any:
        if payload is not None and getattr(payload, "path", None):
            return str(payload.path)
        return stock(payload)

    component.preprocess = preprocess  # type: ignore[method-assign]
    return component


def _html(value: str = "", **kwargs: Any) -> gr.HTML:
    return gr.HTML(value, css_template=CSS, **kwargs)


def tree_controls(data: RaceData | None, wanted: str | None) -> tuple[Any, Any, str | None]:
    """Updates of the tree panel's method radio and step slider, following the latest step."""
    drafting = [m for m in (data.methods if data else []) if m != "ar"]
    method = wanted if wanted in drafting else (drafting[0] if drafting else None)
    lane = data.lane(method) if data and method else None
    steps = [r.step for r in lane.records if r.phase == "decode"] if lane else []
    last = steps[-1] if steps else 0
    radio = gr.update(choices=[(METHOD_LABELS[m], m) for m in drafting], value=method)
    slider = gr.update(minimum=0, maximum=max(1, last), value=last, interactive=bool(steps))
    return radio, slider, method


def last(source: Iterable[RaceData]) -> RaceData:
    """Run a race or a replay to its end; its final state."""
    final = deque(source, maxlen=1)
    if not final:
        raise InputProblem("nothing was decoded")
    return final[0]


# -- the streamed view: the 13 outputs of a race or a replay ---------------------------------

SKIP_ALL_BUT_STATUS = 12


def view(data: RaceData | None, status: str, tree_lane: str | None, figures: bool = True, trace: str | None = None):
    """status, verdict, columns, table, 5 panels, tree step, tree method, download, state."""
    radio, slider, method = tree_controls(data, tree_lane)
    if figures and data is not None:
        figs = all_figures(data.records_by_method(), data.token_texts, method or "sage", None, data.replay)
        plots: list[Any] = [figs["race"], figs["accepted"], figs["confidence"], figs["shapes"], figs["tree"]]
        controls: list[Any] = [slider, radio]
    else:
        plots, controls = [gr.skip()] * 5, [gr.skip()] * 2
    download = gr.update(value=trace, visible=True) if trace else gr.skip()
    verdict = headline_html(data) + badge_html(data)
    return (status, verdict, race_html(data), table_html(data), *plots, *controls, download, data)


def status_only(status: str) -> tuple:
    return (status, *([gr.skip()] * SKIP_ALL_BUT_STATUS))


def save_trace_file(data: RaceData) -> str:
    TRACE_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return str(save_race(data, TRACE_DIR / f"sage-race-{stamp}-{uuid.uuid4().hex[:6]}.jsonl"))


def pair_status(target: str, draft: str, lead: str) -> str:
    return status_html(f"{lead} target <code>{html.escape(target)}</code>, draft <code>{html.escape(draft)}</code>")


def replay_status(data: RaceData, done: bool = False, speed: float = 1.0) -> str:
    header = data.header
    recorded = f"{header.device}, {header.dtype}; target {header.target}" if header else "unknown device"
    state = "finished" if done else f"playing at {speed:g}× the recorded pace"
    return status_html(
        f"▶ <b>REPLAY</b> of a recorded trace ({html.escape(data.source or 'trace')}), {state}. No model is "
        f"loaded: every number is the recorded one ({html.escape(recorded)}). Each side advances on its own "
        "recorded clock.",
        "replay",
    )


def finished_status(data: RaceData) -> str:
    if data.replay:
        return replay_status(data, done=True)
    header = data.header
    where = f"{header.device}, {header.dtype}" if header else "?"
    steps = ", ".join(f"{METHOD_LABELS[lane.method]} {len(lane.records) - 1} steps" for lane in data.lanes)
    note = ""
    if header is not None and header.device == "cpu":
        note = (
            " On a CPU with a tiny pair, a draft forward costs a sizeable share of a target forward and a "
            "tree verification costs more than a one-token step, so wall-time speedups stay well below the "
            "tokens per target forward (and below 1× on one-sentence answers, where the prefill dominates); "
            "τ and tokens per target forward are what carry over to a large target on a GPU."
        )
    return status_html(
        f"✔ Race finished on {where}: {steps}. Download the trace below to replay it later.{html.escape(note)}"
    )


def stream(
    source: Iterator[RaceData], running: str, tree_lane: str | None, text_interval: float, figure_interval: float
) -> Iterator[tuple]:
    """Redraw the text often and the panels less often while `source` yields; end with everything."""
    data: RaceData | None = None
    last_text = last_figures = 0.0
    for data in source:
        now = time.monotonic()
        if now - last_figures >= figure_interval:
            last_text = last_figures = now
            yield view(data, running, tree_lane)
        elif now - last_text >= text_interval:
            last_text = now
            yield view(data, running, tree_lane, figures=False)
    if data is not None:
        yield view(data, finished_status(data), tree_lane, trace=save_trace_file(data))


def build_demo(
    default_target: str | None = None,
    default_draft: str | None = None,
    limits: Limits | None = None,
    text_interval: float = 0.15,
    figure_interval: float = 0.8,
) -> gr.Blocks:
    """The app. `default_target`/`default_draft` (or SAGE_APP_TARGET/SAGE_APP_DRAFT) add a pair
    and make it the default; `*_interval` throttle how often the streamed view is redrawn."""
    limits = limits or Limits.from_env()
    configured = (default_target, default_draft) if default_target and default_draft else None
    offered = models.presets(configured)
    default_key = models.default_preset_key(offered)
    examples = load_examples()
    sage_defaults = SageConfig()
    if ZERO_GPU:  # ZeroGPU runs handlers in a fork: load the default pair up front
        default = next(p for p in offered if p.key == default_key)
        models.PAIRS.get(default.target, default.draft)

    # -- handlers ----------------------------------------------------------------------

    def prepare(
        image: str | None,
        video: str | None,
        prompt: str,
        pair: str,
        custom_target: str,
        custom_draft: str,
        methods: list[str],
        max_new_tokens: float,
        sage: tuple[float, ...],
    ) -> tuple[Any, str, str]:
        request = check_request(image, video, prompt, methods, max_new_tokens, sage, limits)  # type: ignore[arg-type]
        target, draft = models.resolve_pair(pair, offered, custom_target, custom_draft)
        return request, target, draft

    @gpu(duration=180)
    def race_live(
        image: str | None,
        video: str | None,
        prompt: str,
        pair: str,
        custom_target: str,
        custom_draft: str,
        methods: list[str],
        max_new_tokens: float,
        depth_min: float,
        depth_max: float,
        width_min: float,
        width_max: float,
        node_budget: float,
        top_k: float,
        prune_choice: str | None,
        prune_chosen: float | None,
        tree_lane: str | None,
    ) -> Iterator[tuple]:
        sage = (depth_min, depth_max, width_min, width_max, node_budget, top_k)
        try:
            request, target, draft = prepare(
                image, video, prompt, pair, custom_target, custom_draft, methods, max_new_tokens, sage
            )
            if not models.PAIRS.loaded(target, draft):
                yield status_only(pair_status(target, draft, "Loading the models (a hub download can take minutes):"))
            prune_ratio = resolve_prune_ratio(prune_choice, prune_chosen, request.media.kind)
            loaded = models.PAIRS.get(target, draft)
            running = pair_status(target, draft, f"Racing on {loaded.pair.device}, step by step:")
            source = race_steps(
                loaded.pair, request.media, request.prompt, request.methods, request.max_new_tokens,
                request.sage, loaded.token_texts, loaded.lock, prune_ratio=prune_ratio,
            )  # fmt: skip
            yield from stream(source, running, tree_lane, text_interval, figure_interval)
        except SageError as error:
            yield status_only(error_html(str(error)))
        except torch.OutOfMemoryError:
            models.release_memory()
            yield status_only(error_html(OUT_OF_MEMORY))

    @gpu(duration=180)
    def race_api(
        image: str | None = None,
        video: str | None = None,
        prompt: str = "",
        pair: str = default_key,
        custom_target: str = "",
        custom_draft: str = "",
        methods: list[str] | None = None,
        max_new_tokens: float = DEFAULT_MAX_NEW_TOKENS,
        depth_min: float = sage_defaults.depth_min,
        depth_max: float = sage_defaults.depth_max,
        width_min: float = sage_defaults.width_min,
        width_max: float = sage_defaults.width_max,
        node_budget: float = sage_defaults.node_budget,
        top_k: float = sage_defaults.top_k,
        prune_choice: str = "off",
        prune_chosen: float = 0.5,
    ) -> dict:
        """Run a race to the end; answer texts, figures, the losslessness verdict, panels and the trace."""
        methods = DEFAULT_METHODS if methods is None else methods
        sage = (depth_min, depth_max, width_min, width_max, node_budget, top_k)
        try:
            request, target, draft = prepare(
                image, video, prompt, pair, custom_target, custom_draft, methods, max_new_tokens, sage
            )
            prune_ratio = resolve_prune_ratio(prune_choice, prune_chosen, request.media.kind)
            loaded = models.PAIRS.get(target, draft)
            data = last(
                race_steps(
                    loaded.pair, request.media, request.prompt, request.methods, request.max_new_tokens,
                    request.sage, loaded.token_texts, loaded.lock, prune_ratio=prune_ratio,
                )
            )  # fmt: skip
        except SageError as error:
            raise gr.Error(str(error), print_exception=False) from error
        except torch.OutOfMemoryError as error:
            models.release_memory()
            raise gr.Error(OUT_OF_MEMORY, print_exception=False) from error
        return race_result(data)

    def open_trace(trace_file: str | None) -> RaceData:
        if not trace_file:
            raise InputProblem("choose a trace file (JSON lines, from 'Download trace') to replay")
        try:
            return load_race(trace_file)
        except TraceError as error:
            raise InputProblem(str(error)) from error

    def replay_live(trace_file: str | None, speed: float, tree_lane: str | None) -> Iterator[tuple]:
        try:
            recorded = open_trace(trace_file)
        except SageError as error:
            yield status_only(error_html(str(error)))
            return
        playing = replay_status(recorded, speed=float(speed))
        yield from stream(replay_steps(recorded, float(speed)), playing, tree_lane, text_interval, figure_interval)

    def replay_api(trace_file: str | None = None, speed: float = 1.0) -> dict:
        """Replay a recorded race trace (no model); the same answer as /race, marked replay."""
        try:
            return race_result(last(replay_steps(open_trace(trace_file), float(speed))))
        except SageError as error:
            raise gr.Error(str(error), print_exception=False) from error

    def show_tree(data: RaceData | None, method: str | None, step: float | None) -> Any:
        lane = data.lane(method) if data is not None and method else None
        if data is None or lane is None:
            return gr.skip()
        return tree_figure(
            lane.records, None if step is None else int(step), data.token_texts, lane.method, data.replay
        )

    def show_lane(data: RaceData | None, method: str | None) -> tuple:
        _, slider, chosen = tree_controls(data, method)
        lane = data.lane(chosen) if data is not None and chosen else None
        if data is None or lane is None:
            return gr.skip(), gr.skip()
        return tree_figure(lane.records, None, data.token_texts, lane.method, data.replay), slider

    def pick_example(selected: gr.SelectData) -> tuple:
        example = examples[selected.index]
        if example.is_video:
            return None, example.file, example.prompt, gr.Tabs(selected="video")
        return example.file, None, example.prompt, gr.Tabs(selected="image")

    def stop(data: RaceData | None) -> tuple:
        if data is None:
            return status_html("Nothing is running."), gr.skip(), gr.skip()
        data.stopped = not data.finished
        message = "■ Stopped. The steps so far are kept; download the trace to replay them."
        return status_html(message), race_html(data), gr.update(value=save_trace_file(data), visible=True)

    # -- layout -----------------------------------------------------------------------------

    with gr.Blocks(title=TITLE, fill_width=True) as demo:
        state = gr.State(None)
        _html(INTRO)
        with gr.Row(equal_height=False):
            with gr.Column(scale=4, min_width=340):
                with gr.Tabs() as media_tabs:
                    with gr.Tab("Image", id="image"):
                        image = image_input(label="Image", height=220, sources=["upload", "clipboard"])
                    with gr.Tab("Video", id="video"):
                        video = gr.Video(label="Video", height=220, sources=["upload"])
                _html(EXAMPLES_NOTE)
                gallery = gr.Gallery(
                    [(e.thumbnail(), ("video: " if e.is_video else "") + e.prompt) for e in examples],
                    label="Examples", show_label=False, columns=4, height=250, allow_preview=False,
                    object_fit="contain", elem_id="examples", buttons=[],
                )  # fmt: skip
                prompt = gr.Textbox(label="Prompt", value="", placeholder=DEFAULT_PROMPT, lines=2)
                with gr.Row():
                    start = gr.Button("▶ Start race", variant="primary", elem_id="start-race")
                    stop_button = gr.Button("■ Stop", variant="stop", elem_id="stop-race")
                pair = gr.Dropdown(
                    models.preset_choices(offered),
                    value=default_key,
                    label="Model pair (target + draft)",
                    allow_custom_value=True,
                )
                methods = gr.CheckboxGroup(
                    [(METHOD_LABELS[m], m) for m in ("sage", "static", "chain", "ar")],
                    value=DEFAULT_METHODS,
                    label="Methods in the race",
                )
                max_new = gr.Slider(
                    1, limits.max_new_tokens, value=DEFAULT_MAX_NEW_TOKENS, step=1, label="Max new tokens"
                )
                prune_choice, prune_chosen = pruning_controls()
                with gr.Accordion("Advanced: SAGE's tree policy, custom models", open=False):
                    with gr.Row():
                        d_min = gr.Slider(1, 10, value=sage_defaults.depth_min, step=1, label="D_min (shallowest tree)")
                        d_max = gr.Slider(1, 10, value=sage_defaults.depth_max, step=1, label="D_max (deepest tree)")
                    with gr.Row():
                        w_min = gr.Slider(1, 10, value=sage_defaults.width_min, step=1, label="W_min (narrowest root)")
                        w_max = gr.Slider(1, 10, value=sage_defaults.width_max, step=1, label="W_max (widest root)")
                    with gr.Row():
                        budget = gr.Slider(1, 256, value=sage_defaults.node_budget, step=1, label="Node budget N_max")
                        top_k = gr.Slider(2, 20, value=sage_defaults.top_k, step=1, label="top-k (entropy, candidates)")
                    custom_target = gr.Textbox("", label="Custom target (hub id or local folder; pick 'Custom' above)")
                    custom_draft = gr.Textbox("", label="Custom draft (same family and tokenizer as the target)")
                with gr.Accordion("Replay a recorded trace (no model needed)", open=False):
                    trace_in = gr.File(
                        label="Trace (.jsonl)",
                        file_types=[".jsonl", ".json", ".txt"],
                        type="filepath",
                        elem_id="replay-file",
                    )
                    speed = gr.Slider(
                        0.25, 50, value=1, step=0.25, label="Replay speed (× the recorded pace)", elem_id="replay-speed"
                    )
                    replay_button = gr.Button("▶ Replay trace", elem_id="replay")
            with gr.Column(scale=8, min_width=480):
                status = _html(status_html("Ready. The models load on the first race."), elem_id="status")
                verdict = _html(badge_html(None), elem_id="verdict")
                lanes = _html(race_html(None), elem_id="lanes")
                table = _html("", elem_id="figures-table")
                download = gr.DownloadButton("⬇ Download trace (JSON lines)", visible=False, size="sm")
                draft_seen, draft_note = draft_view_outputs()
        with gr.Row(equal_height=False):
            fig_race = gr.Plot(show_label=False, elem_id="panel-race")
            fig_accepted = gr.Plot(show_label=False, elem_id="panel-accepted")
        with gr.Row(equal_height=False):
            fig_confidence = gr.Plot(show_label=False, elem_id="panel-confidence")
            fig_shapes = gr.Plot(show_label=False, elem_id="panel-shapes")
        with gr.Row(equal_height=False):
            tree_lane = gr.Radio([], value=None, label="Draft tree of", scale=1)
            tree_step = gr.Slider(0, 1, value=0, step=1, label="Step (walk through the run; 0 = prefill)", scale=3,
                                  interactive=False, elem_id="tree-step")  # fmt: skip
        fig_tree = gr.Plot(show_label=False, elem_id="panel-tree")
        api_race_button = gr.Button(visible=False)
        api_replay_button = gr.Button(visible=False)
        api_result = gr.JSON(visible=False)

        race_inputs = [image, video, prompt, pair, custom_target, custom_draft, methods, max_new,
                       d_min, d_max, w_min, w_max, budget, top_k, prune_choice, prune_chosen]  # fmt: skip
        outputs = [status, verdict, lanes, table, fig_race, fig_accepted, fig_confidence, fig_shapes, fig_tree,
                   tree_step, tree_lane, download, state]  # fmt: skip
        live = start.click(race_live, [*race_inputs, tree_lane], outputs, api_name="race_live",
                           api_visibility="undocumented", concurrency_id="race", concurrency_limit=1)  # fmt: skip
        live.then(show_draft_view, [state], [draft_seen, draft_note], api_visibility="private")
        replaying = replay_button.click(replay_live, [trace_in, speed, tree_lane], outputs, api_name="replay_live",
                                        api_visibility="undocumented", concurrency_id="replay",
                                        concurrency_limit=4)  # fmt: skip
        stop_button.click(stop, [state], [status, lanes, download], cancels=[live, replaying], queue=False,
                          api_visibility="private")  # fmt: skip
        gallery.select(pick_example, None, [image, video, prompt, media_tabs], queue=False, api_visibility="private")
        tree_step.input(show_tree, [state, tree_lane, tree_step], fig_tree, queue=False, api_visibility="private")
        tree_lane.input(show_lane, [state, tree_lane], [fig_tree, tree_step], queue=False, api_visibility="private")
        api_race_button.click(race_api, race_inputs, api_result, api_name="race", concurrency_id="race",
                              concurrency_limit=1)  # fmt: skip
        api_replay_button.click(replay_api, [trace_in, speed], api_result, api_name="replay",
                                concurrency_id="replay", concurrency_limit=4)  # fmt: skip
    return demo


__all__ = ["build_demo", "image_input"]
