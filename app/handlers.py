"""The app's event handlers: check the inputs, call `app.race`, render; all decoding is `sage_core`'s.

- `race_live` streams a live race; `replay_live` streams a recorded trace at
  its recorded pace (no model); `stop` ends either and says so everywhere.
- `race_api` and `replay_api` are the API (`/race`, `/replay`): the same
  inputs, one JSON answer.
- `step_live` and `step_replay` advance a race or a replay by one round on every side (the teaching
  mode's Step; the stepped race is per-user state in `page.stepper`).
- `show_tree`, `show_lane`, `pick_example` are the page's small controls.

Every race (streamed, stepped or through the API) is made the same way: its
inputs become one `inputs.RaceForm` (`ui.py` turns the page's values into
one; `race_api`'s named parameters are the API's documentation), and
`Handlers.request` checks it into one `inputs.RaceRequest` (media, prompt,
methods, SAGE settings, sampling, pruning, pair). A race runs within its
time budget (`budgets.Budget`); a replay waits a bounded time in all (`budgets.ReplayClock`). The status
lines are `status_lines.py`'s; the /race API's signature and docstring, `race_api.py`'s.

Handlers answer with updates keyed by the page's components (`Page`), never
by position. Every failure goes through the error boundary (`boundary.py`):
the visitor reads one sentence, a bug is logged with its traceback.
"""

from __future__ import annotations

import functools
import html
import math
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from sage_core import ModelPair
from sage_core.errors import InputError
from sage_core.methods import ONE_PASS_OFF, method_label
from sage_core.models.one_pass import declares_features
from sage_core.prepared import check_vocabulary
from sage_core.studies.sweep_figure import sweep_figure

from . import models
from .api import race_result
from .boundary import guard, user_message
from .budgets import MAX_REPLAY_SPEED, Budget, ReplayClock, media_seconds, replay_speed
from .explain_view import explained_html
from .inputs import (
    Choice,
    Example,
    InputProblem,
    Limits,
    RaceForm,
    RaceRequest,
    check_request,
    lane_drafts,
    remove_older,
    second_draft,
)
from .notes import notes_html, race_notes
from .one_pass_view import one_pass_html
from .page import DEFAULT_METHODS, STEPPER_TTL, Page
from .panel_table import Focus, panel_figures, panel_table
from .race import (
    RaceData,
    RaceStepper,
    live_stepper,
    race_steps,
    replay_stepper,
    replay_steps,
)
from .race_api import race_api_doc, race_api_function
from .race_trace import load_race, save_race
from .render import (
    badge_html,
    error_html,
    headline_html,
    race_html,
    status_html,
    table_html,
)
from .status_lines import (
    LANDING_TRACE,
    budget_status,
    finished_status,
    machine_words,
    opening_recording,
    pair_status,
    race_note,
    replay_budget_note,
    replay_status,
    stepping_status,
    stopped_status,
)
from .stepping import DROPPED, FULL, SteppedRaces
from .view import RaceView, race_view

TRACE_DIR = Path(tempfile.gettempdir()) / "sage-app-traces"
#: Trace files the app wrote are removed after this many seconds (Gradio serves its own copy meanwhile).
TRACE_MAX_AGE = 3600.0
#: While a race or replay streams, each side's text shows its latest rounds only (all of it at the end),
#: so an update sends what changed lately, not the whole text again.
STREAMED_STEPS = 200
#: Beyond this many steps in all, the panels are redrawn proportionally less often while streaming.
FIGURE_STEPS = 400
Update = dict[Any, Any]  # component -> its new value or update
#: A status line that reads the step's view of the race (the finished status: its account, its loss).
Status = str | Callable[[RaceView], str]


@dataclass(frozen=True)
class Settings:
    """What one app serves: its limits, its pairs, the custom models it allows, how often it redraws."""

    limits: Limits
    offered: list[models.Preset]
    default_pair: str
    custom: models.CustomModels
    examples: list[Example]
    text_interval: float = 0.15
    figure_interval: float = 0.8


def last(source: Iterable[RaceData]) -> RaceData:
    """Run a race or a replay to its end; its final state."""
    final = deque(source, maxlen=1)
    if not final:
        raise InputProblem("nothing was decoded")
    return final[0]


def save_trace_file(data: RaceData, folder: Path = TRACE_DIR, max_age: float = TRACE_MAX_AGE) -> str:
    """Write the race for download; trace files older than `max_age` seconds are removed first."""
    folder.mkdir(parents=True, exist_ok=True)
    remove_older(folder, "sage-race-*.jsonl", max_age)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return str(save_race(data, folder / f"sage-race-{stamp}-{uuid.uuid4().hex[:6]}.jsonl"))


# -- status lines ----------------------------------------------------------------------


# -- the handlers ------------------------------------------------------------------------


class Handlers:
    """The handlers of one app: its page and settings; per-user state only in `page.state`."""

    def __init__(self, page: Page, settings: Settings) -> None:
        self.page = page
        self.settings = settings
        self.stepped_races = SteppedRaces()  # weak references only: each stepper is its visitor's state

    # -- the streamed view --

    def tree_controls(self, race: RaceView | None, wanted: str | None) -> tuple[Any, Any, str | None]:
        """Updates of the tree panel's method radio and round slider, following the latest round."""
        drafting = [lane.key for lane in (race.lanes if race else ()) if lane.drafts]
        method = wanted if wanted in drafting else (race.tree_method if race and drafting else None)
        lane = race.lane(method) if race and method else None
        steps = [r.round for r in lane.records if r.phase == "decode"] if lane else []
        latest = steps[-1] if steps else 0
        radio = gr.update(choices=[(method_label(m), m) for m in drafting], value=method)
        slider = gr.update(minimum=0, maximum=max(1, latest), value=latest, interactive=bool(steps))
        return radio, slider, method

    def view(
        self,
        data: RaceData | None,
        status: Status,
        tree_lane: str | None,
        figures: bool = True,
        trace: str | None = None,
        tail: int | None = None,
    ) -> Update:
        """The page after a step, from one view of the race (`race_view`, handed to every renderer): status (a
        line, or one made from the view), columns (each side's latest `tail` rounds while streaming), table,
        state; the headline (its interval resamples every round: a long race's dearest text), every panel of
        `panel_table` and the tree controls when `figures`; the download when a trace was written."""
        page = self.page
        race = race_view(data) if data is not None else None
        update: Update = {
            page.status: status if isinstance(status, str) else status(race) if race else "",
            page.lanes: race_html(race, tail),
            page.table: table_html(race),
            page.state: data,
        }
        if figures:
            update[page.verdict] = headline_html(race) + one_pass_html(race) + badge_html(race)
        if figures and race is not None:
            update |= self.panels(race, tree_lane)
        if trace:
            update[page.download] = gr.update(value=trace, visible=True)
        return update

    def panels(self, race: RaceView, tree_lane: str | None) -> Update:
        """Every panel of the table (each keyed by its plot, `Panel.attribute`), the explainer and the tree
        controls, following `tree_lane` (else the view's tree lane)."""
        radio, slider, method = self.tree_controls(race, tree_lane)
        figures = panel_figures(race, Focus(method))
        plots = {getattr(self.page, panel.attribute): figures[panel.name] for panel in panel_table()}
        explained = explained_html(race, method) + race_note(race)
        return plots | {self.page.explain: explained, self.page.tree_round: slider, self.page.tree_lane: radio}

    def status_only(self, status: str) -> Update:
        return {self.page.status: status}

    def declined(self, status: str) -> Update:
        """A request refused before its race: the refusal, and the columns and headline emptied, so no earlier
        answer stands under the new question (the earlier race stays in the state: its trace, its replay)."""
        return {self.page.status: status, self.page.lanes: race_html(None), self.page.verdict: ""}

    def stream(
        self,
        source: Iterator[RaceData],
        running: str,
        tree_lane: str | None,
        budget: Budget | None = None,
        finished: Callable[[RaceView], str] | None = None,
        lead: str = "",
    ) -> Iterator[Update]:
        """Redraw the text often and the panels less often while `source` yields; end with everything.
        A race the visitor stopped, or one past its time `budget`, ends at once, saying so. `lead` (the
        race's notes) stays above the status."""
        budget = budget or Budget(math.inf)
        steps = budget.spend(source)
        try:
            yield from self.redraw(steps, lead + running, tree_lane, budget, finished or finished_status, lead)
        finally:
            steps.close()  # a visitor gone (Gradio closes this generator) stops the decoding too

    def redraw(
        self,
        source: Iterator[RaceData],
        running: str,
        tree_lane: str | None,
        budget: Budget,
        finished: Callable[[RaceView], str],
        lead: str = "",
    ) -> Iterator[Update]:
        data: RaceData | None = None
        last_text = last_figures = 0.0
        for data in source:
            if data.stopped:
                break
            now = time.monotonic()
            update = None
            steps = sum(len(lane.records) for lane in data.lanes)
            # the panels hold every step: a long race (or replay) redraws them less often, in proportion
            figure_interval = self.settings.figure_interval * max(1.0, steps / FIGURE_STEPS)
            if now - last_figures >= figure_interval:
                last_text = last_figures = now
                update = self.view(data, running, tree_lane, tail=STREAMED_STEPS)
            elif now - last_text >= self.settings.text_interval:
                last_text = now
                update = self.view(data, running, tree_lane, figures=False, tail=STREAMED_STEPS)
            if data.stopped:  # Stop came while the view was drawn: a "running" view must not follow it
                break
            if update is not None:
                yield update
        if data is not None:

            def status(race: RaceView) -> str:
                return lead + (budget_status(budget.seconds) if budget.spent else finished(race))

            yield self.view(data, status, tree_lane, trace=save_trace_file(data))

    # -- races --

    def request(self, form: RaceForm) -> RaceRequest:
        """The one way a race request is made (page, API, stepped race): the pair it names, then every
        check that needs no model (`inputs.check_request`)."""
        return check_request(form, self.choice(form), self.settings.limits)

    def choice(self, form: RaceForm) -> Choice:
        pair = form.pair or self.settings.default_pair
        if not isinstance(pair, str):
            raise InputProblem("the model pair must be one of the listed choices")
        custom_target, custom_draft = str(form.custom_target or ""), str(form.custom_draft or "")
        target, draft = models.resolve_pair(
            pair, self.settings.offered, custom_target, custom_draft, self.settings.custom
        )
        names = None
        if pair == models.CUSTOM_KEY:
            names = (custom_target.strip(), custom_draft.strip())
        elif shown := next((p.shown_draft for p in self.settings.offered if p.key == pair and p.shown_draft), ""):
            names = (target, shown)  # a built-in draft by its name, not its server path
        elif pair == models.ENV_KEY:  # the operator's folders, shown (and recorded) by their names only
            names = (Path(target).name, Path(draft).name)
        drafts = lane_drafts(second_draft(form))  # the drafts the race adds lanes for, which the pair must offer
        siblings: tuple[tuple[str, Choice], ...] = ()
        if drafts:  # ("one-pass", and its features-off twin: the same sibling, not loaded again)
            sibling = self.sibling_choice(pair, drafts[0], names[0] if names else target)
            if ONE_PASS_OFF in drafts and not declares_features(sibling.draft):
                raise InputProblem(
                    f"the one-pass draft {sibling.shown[1]!r} reads none of the target's features, so there are none "
                    'to turn off: race with second_draft "one-pass"'
                )
            siblings = tuple((lane_draft, sibling) for lane_draft in drafts)
        return Choice(target, draft, names, siblings)

    def sibling_choice(self, pair: str, lane_draft: str, target_name: str) -> Choice:
        """The chosen pair's sibling with the draft `lane_draft` (`models.sibling_preset`: one sentence for a pair
        without one), shown by its draft's name."""
        sibling = models.sibling_preset(pair, lane_draft, self.settings.offered)
        target, draft = models.resolve_pair(sibling.key, self.settings.offered, "", "", self.settings.custom)
        return Choice(target, draft, (target_name, sibling.shown_draft or Path(draft).name))

    def load_for(self, request: RaceRequest, progress: Any = None) -> models.LoadedPair:
        """The request's pair, loaded (`load`), and the prompt checked against its vocabulary."""
        loaded = self.load(request.pair, progress)
        check_vocabulary(loaded.pair.target, request.prompt, f"the model {request.pair.shown[0]}")
        return loaded

    def load(self, choice: Choice, progress: Any = None) -> models.LoadedPair:
        """The pair, loaded first when needed (outside the race slot), its stages shown by `progress`."""

        def report(stage: str, done: float) -> None:
            if progress is not None:
                progress(done, desc=stage)

        return models.PAIRS.get(choice.target, choice.draft, report=report, names=choice.names)

    def second(self, request: RaceRequest, loaded: models.LoadedPair) -> ModelPair | None:
        """The pair's target with its one-pass sibling draft when the race asks for it (loaded once, with the pair:
        `models.PairCache.sibling`), else None."""
        sibling = next((choice for _, choice in request.pair.siblings), None)
        if sibling is None:
            return None
        return models.PAIRS.sibling(loaded, sibling.draft, name=sibling.shown[1])

    def race(self, request: RaceRequest, loaded: models.LoadedPair) -> Iterator[RaceData]:
        second = self.second(request, loaded)
        return models.racing(
            race_steps(loaded.pair, request, loaded.token_texts, loaded.slot, costs=loaded.costs, second=second)
        )

    def race_live(self, form: RaceForm, tree_lane: Any, progress: Any = None) -> Iterator[Update]:
        """Stream a race of the form's request (`ui.py` turns the page's values into the form)."""
        try:
            request = self.request(form)
            choice = request.pair
            notes = notes_html(race_notes(choice.target, request.media, request.prompt))
            if notes:  # said before the race, before any load
                yield self.status_only(notes + pair_status(choice, "Starting the race with"))
            if not models.PAIRS.loaded(choice.target, choice.draft):
                lead = "Loading the pair (download if needed, load, warm-up; a hub download can take minutes):"
                yield self.status_only(notes + pair_status(choice, lead))
            loaded = self.load_for(request, progress)
            running = pair_status(choice, f"Racing on {loaded.pair.device}, round by round:")
            budget = Budget(self.settings.limits.max_race_seconds, spent_before=media_seconds(request))
            yield from self.stream(self.race(request, loaded), running, tree_lane, budget, lead=notes)
        except InputError as error:  # declined before the race: the earlier answer must not stand under it
            yield self.declined(error_html(user_message(error)))
        except Exception as error:
            yield self.status_only(error_html(user_message(error)))

    def race_api(self, *args: Any, **kwargs: Any) -> dict:
        """The /race API (`race_api_function`: its signature and docstring are made from `race_fields()`)."""
        return race_api_function(self)(*args, **kwargs)

    def race_api_answer(self, form: RaceForm) -> dict:
        if form.methods is None:  # left out: the page's default
            form = form.replace(methods=DEFAULT_METHODS)
        return self.race_to_end(form)

    def race_to_end(self, form: RaceForm) -> dict:
        request = self.request(form)
        budget = Budget(self.settings.limits.max_race_seconds, spent_before=media_seconds(request))
        notes = race_notes(request.pair.target, request.media, request.prompt)
        return race_result(last(budget.spend(self.race(request, self.load_for(request)))), notes=notes)

    # -- replays --

    def open_trace(self, trace_file: Any) -> RaceData:
        if not trace_file or not isinstance(trace_file, str):
            raise InputProblem("choose a trace file (JSON lines, from 'Download trace') to replay")
        return load_race(trace_file, max_bytes=self.settings.limits.max_trace_bytes)

    def replay_live(self, trace_file: Any, speed: Any, tree_lane: Any) -> Iterator[Update]:
        try:
            pace = replay_speed(speed)
            recorded = self.open_trace(trace_file)
            playing = replay_status(race_view(recorded), speed=pace)
            clock = ReplayClock(self.settings.limits.max_replay_seconds)

            def finished(race: RaceView) -> str:
                note = replay_budget_note(clock.seconds_allowed) if clock.spent else ""
                return finished_status(race, note)

            yield from self.stream(
                replay_steps(recorded, pace, sleep=clock.sleep), playing, tree_lane, finished=finished
            )
        except Exception as error:
            yield self.status_only(error_html(user_message(error)))

    def replay_api(self, trace_file: str | None = None, speed: float = 1.0) -> dict:
        """Replay a recorded race trace (no model); the same answer as /race, marked replay, without the
        trace itself (the caller sent it).

        Args:
            trace_file: a trace (JSON lines) as a public http(s) URL or a data: URL (data:text/plain;base64,...).
            speed: the replay's pace, times the recorded one (0: no waiting), in [0, 1000].

        Returns:
            JSON: the same answer as the race tool's, marked as a replay, without the trace.
        """
        pace = replay_speed(speed)
        clock = ReplayClock(self.settings.limits.max_replay_seconds)
        recorded = self.open_trace(trace_file)
        return race_result(last(replay_steps(recorded, pace, sleep=clock.sleep)), with_trace=False)

    # -- the page's controls --

    def unchanged(self) -> Update:
        """A control's answer that changes nothing (Gradio reads an empty dict as one value for several
        outputs and answers a bare "Error"; every page control has the status line among its outputs)."""
        return {self.page.status: gr.skip()}

    def stop(self, data: RaceData | None) -> Update:
        """Stop the race or replay: every status line says so (the streaming event is cancelled too)."""
        page = self.page
        if data is None:
            return {page.status: stopped_status(None)}
        data.stopped = not data.finished
        if not data.stopped:  # a finished race (or the landing one): nothing to stop
            return self.unchanged()
        return self.stopped_view(race_view(data)) | {
            page.download: gr.update(value=save_trace_file(data), visible=True)
        }

    def stopped_view(self, race: RaceView) -> Update:
        """A stopped race's status, headline, badge and columns, from its view."""
        page = self.page
        return {
            page.status: stopped_status(race),
            page.verdict: headline_html(race) + badge_html(race),
            page.lanes: race_html(race),
        }

    def after_stop(self, data: RaceData | None) -> Update:
        """Once the streaming event is cancelled, draw the stopped race again: an update the stream
        had sent before Stop may reach the page after Stop's own."""
        if data is None or not data.stopped:
            return self.unchanged()
        return self.stopped_view(race_view(data))

    def show_tree(self, data: RaceData | None, method: str | None, step: float | None) -> Update:
        race = race_view(data) if data is not None else None
        if race is None or not method or race.lane(method) is None:
            return self.unchanged()
        return self.tree_view(race, method, None if step is None else int(step))

    def tree_view(self, race: RaceView, method: str, step: int | None) -> Update:
        """The tree panel and the explainer for one lane at one round (None: its latest), from the race's view."""
        tree = next(panel for panel in panel_table() if panel.name == "tree")
        figure = tree.figure(race, Focus(method, step))
        explained = explained_html(race, method, step) + race_note(race)
        return {getattr(self.page, tree.attribute): figure, self.page.explain: explained}

    def show_lane(self, data: RaceData | None, method: str | None) -> Update:
        race = race_view(data) if data is not None else None
        _, slider, chosen = self.tree_controls(race, method)
        if race is None or not chosen or race.lane(chosen) is None:
            return self.unchanged()
        return {**self.tree_view(race, chosen, None), self.page.tree_round: slider}

    # -- the teaching mode's Step: one round at a time on every side --

    def step_live(
        self, form: RaceForm, tree_lane: Any, stepper: RaceStepper | None, progress: Any = None, session: str = ""
    ) -> Update:
        """Advance the stepped race by one round (starting one, or a new one when the inputs changed); `session`:
        the page's (a race whose page is open is kept: `stepping.SteppedRaces`)."""
        key = ("live", form)
        limit = self.stepped_races.limit
        if stepper is not None and stepper.dropped:
            return {self.page.status: status_html(DROPPED.format(limit=limit), "error"), self.page.stepper: None}
        try:
            if stepper is None or stepper.key != key or stepper.data.replay or stepper.finished:
                if not self.stepped_races.room(session):
                    return {self.page.status: error_html(FULL.format(limit=limit, minutes=STEPPER_TTL // 60))}
                request = self.request(form)
                loaded = self.load_for(request, progress)
                second = self.second(request, loaded)
                stepper = live_stepper(loaded.pair, request, loaded.token_texts, loaded.slot, key, loaded.costs, second)
                stepper.notes = notes_html(race_notes(request.pair.target, request.media, request.prompt))
            return self.stepped(stepper, tree_lane, session)
        except Exception as error:
            return {self.page.status: error_html(user_message(error))}

    def step_replay(self, trace_file: Any, tree_lane: Any, stepper: RaceStepper | None) -> Update:
        """Advance the stepped replay by one recorded round on every side."""
        key = ("replay", trace_file)
        try:
            if stepper is None or stepper.key != key or stepper.finished:
                stepper = replay_stepper(self.open_trace(trace_file), key)
            return self.stepped(stepper, tree_lane)
        except Exception as error:
            return {self.page.status: error_html(user_message(error))}

    def stepped(self, stepper: RaceStepper, tree_lane: Any, session: str = "") -> Update:
        data = stepper.step()
        if stepper.finished:  # nothing more to step: its runs' caches go now, not when the state expires
            stepper.release()
            self.stepped_races.forget(stepper)
        else:
            self.stepped_races.stepped(stepper, session)
        trace = save_trace_file(data) if stepper.finished and not data.replay else None
        status = stepper.notes + stepping_status(stepper)
        return self.view(data, status, tree_lane, trace=trace) | {self.page.stepper: stepper}

    def show_sweep(self, pair: Any, custom_target: Any, custom_draft: Any) -> Update:
        """The budget sweep of the chosen pair beside its warm-up cost curve (the pair loaded first when needed;
        the sweep measured the first time it is asked for: `models.measured_sweep`)."""
        choice = self.choice(RaceForm(pair=pair, custom_target=custom_target, custom_draft=custom_draft))
        loaded = self.load(choice)
        result = models.measured_sweep(loaded)
        title = f"The budget sweep, {choice.shown[0]} / {choice.shown[1]}"
        note = (
            f"<p class='sage-note'>{html.escape(loaded.sweep_note)} The star: sage-cost's mean choice of budget; "
            "the hexagram: SMART's (the nodes its rule kept, on average).</p>"
        )
        return {self.page.fig_sweep: sweep_figure(result, loaded.costs, title), self.page.sweep_note: note}

    def pick_example(self, selected: gr.SelectData) -> Update:
        page = self.page
        example = self.settings.examples[int(selected.index)]
        if example.is_video:
            return {
                page.image: None,
                page.video: example.file,
                page.prompt: example.prompt,
                page.media_tabs: gr.Tabs(selected="video"),
            }
        return {
            page.image: example.file,
            page.video: None,
            page.prompt: example.prompt,
            page.media_tabs: gr.Tabs(selected="image"),
        }


def controls(handler: Any, page: Page) -> Any:
    """A page control whose failure shows its sentence in the status line (and changes nothing else)."""

    @functools.wraps(handler)
    def guarded(*args: Any) -> Update:
        try:
            return handler(*args)
        except Exception as error:
            return {page.status: error_html(user_message(error))}

    return guarded


#: What importers read from here (the budgets, the status lines and the API's function live in their own modules).
__all__ = [
    "LANDING_TRACE",
    "MAX_REPLAY_SPEED",
    "Budget",
    "Handlers",
    "ReplayClock",
    "Settings",
    "Update",
    "controls",
    "guard",
    "last",
    "machine_words",
    "media_seconds",
    "opening_recording",
    "race_api_doc",
    "race_api_function",
    "replay_budget_note",
    "replay_speed",
    "replay_status",
    "save_trace_file",
]
