"""The race: decoders stepped alternately in one process, and replays of recorded races.

A live race makes one `sage_core.DecodeRun` per method on the same model pair
and calls `next()` on each in turn, one round at a time, so every column
streams while the races runs. Each record times its own step with device
synchronisation, so each side's time is its own (`total_seconds`), whatever
the other side did in between. The media go through each processor once per
race (the draft's not at all when it is the target's: `ModelPair.inputs_alike`);
each side is charged the preparation it needs, as measured once (its header
says the preparation was shared). There is no decoding logic here: the app
only collects the records the library yields.

A replay reads a recorded race back and hands the records out at their
recorded pace, each side on its own recorded clock (as if each had the
device to itself), with no model loaded.

A race is saved and read back as a trace by `app.race_trace`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sage_core import (
    DecodeConfig,
    DecodeRun,
    Media,
    ModelPair,
    RoundRecord,
    RunHeader,
    SageConfig,
    decode,
    prepare_inputs,
)
from sage_core.config import SamplingConfig
from sage_core.cost_curve import CostCurve
from sage_core.errors import ConfigError
from sage_core.media import thumbnail
from sage_core.methods import LANE_DRAFTS, ONE_PASS_OFF, LaneKey, drafts, in_order, method_spec
from sage_core.models import VisualBox
from sage_core.models.one_pass import reads_features, without_features
from sage_core.prepared import with_draft_inputs

#: The draft-view picture's height: the race keeps its medium shrunk to this, no larger.
DRAFT_VIEW_HEIGHT = 150


@dataclass
class Lane:
    """One side of a race: a method, its run header, its records so far, and the draft it drafts with when not
    the pair's own (a draft of `sage_core.methods.LANE_DRAFTS`, that the race's pair offers: `Choice.drafts`).
    `id` is the lane as a value; `key`, its text, names it wherever a race is keyed (JSON, traces)."""

    method: str
    header: RunHeader | None = None
    records: list[RoundRecord] = field(default_factory=list)
    draft: str = ""

    @property
    def id(self) -> LaneKey:
        """The lane as a value: its method and draft."""
        return LaneKey(self.method, self.draft)

    @property
    def key(self) -> str:
        """The lane's method, or its method and draft ("sage/one-pass": `str(LaneKey)`)."""
        return str(self.id)

    @property
    def finished(self) -> bool:
        return bool(self.records) and self.records[-1].finished

    @property
    def token_ids(self) -> tuple[int, ...]:
        return tuple(t for r in self.records for t in r.new_tokens)

    @property
    def text(self) -> str:
        return "".join(s for r in self.records for s in r.new_token_texts)


@dataclass
class RaceData:
    """What a race (live or replayed) has produced so far: the per-user state."""

    lanes: list[Lane]
    token_texts: dict[int, str] = field(default_factory=dict)
    replay: bool = False
    stopped: bool = False
    source: str = ""
    # With draft-side pruning: the medium and where each visual token looks (the draft-view panel).
    draft_view: tuple[Media, list[VisualBox | None]] | None = None
    # The verification cost curve measured when the pair was warmed up (recorded with the race).
    costs: CostCurve | None = None
    # The view every reader reads (app.view.race_view), with what it was made from: made once per step.
    view: tuple[tuple, Any] | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def finished(self) -> bool:
        return all(lane.finished for lane in self.lanes)

    def lane(self, key: str | LaneKey) -> Lane | None:
        """The lane of this key (`Lane.key`: a method, or a method on another draft), or of this value."""
        return next((lane for lane in self.lanes if lane.key == str(key)), None)

    @property
    def header(self) -> RunHeader | None:
        return next((lane.header for lane in self.lanes if lane.header is not None), None)

    def emptied(self) -> RaceData:
        """A recorded race before its first step: its lanes with their headers and no records, its token texts,
        its source and its cost curve (a replay fills it step by step)."""
        return RaceData(
            lanes=[Lane(lane.method, lane.header, draft=lane.draft) for lane in self.lanes],
            token_texts=dict(self.token_texts),
            replay=True,
            source=self.source,
            costs=self.costs,
        )


# -- the live race ---------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    """The pair a request names: what to load, and how to show it (a custom pair by the visitor's names)."""

    target: str = "builtin"
    draft: str = "builtin"
    names: tuple[str, str] | None = None
    # The pair's siblings the race also races each drafting method with, by the draft its lanes name: the same
    # target with another draft (`app.models.Preset.siblings`: ("one-pass", its one-pass sibling)); (): the pair's
    # own draft only.
    siblings: tuple[tuple[str, Choice], ...] = ()

    @property
    def shown(self) -> tuple[str, str]:
        return self.names or (self.target, self.draft)

    @property
    def drafts(self) -> tuple[str, ...]:
        """The drafts beside its own that a race with this pair adds lanes for (`LaneKey.draft`)."""
        return tuple(draft for draft, _ in self.siblings)


@dataclass(frozen=True)
class RaceRequest:
    """A checked race (`app.inputs.check_request` makes one from the page's or the API's form): the medium,
    the prompt, the methods and every setting, sampling and pruning included, and the pair to load. The
    race functions below take it whole."""

    media: Media
    prompt: str
    methods: tuple[str, ...]
    max_new_tokens: int = 128
    # Every method's settings with settings of its own: method name -> its settings (the rest: defaults).
    settings: Mapping[str, Any] = field(default_factory=dict)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    prune_ratio: float = 0.0
    pair: Choice = field(default_factory=Choice)
    # The methods whose held setting was not given (`MethodSpec.holds`: sage-frozen's α, best-first's node count),
    # so that beside the lane they read they hold its average in this race (and run once it has finished).
    holding: frozenset[str] = frozenset()

    @property
    def sage(self) -> SageConfig:
        return self.config("sage").sage

    @property
    def lanes(self) -> list[LaneKey]:
        """Each lane, in column order: every chosen method on the pair's draft, each that drafts followed by
        itself on each other draft the race's pair offers (`Choice.drafts`: its one-pass sibling's)."""
        lanes = []
        for method in in_order(self.methods):
            lanes.append(LaneKey(method))
            lanes += [LaneKey(method, draft) for draft in self.pair.drafts if drafts(method)]
        return lanes

    def config(self, method: str) -> DecodeConfig:
        """The decode configuration of one side: its method, the token limit, every method's settings, the
        sampling, and the pruning when it drafts (plain decoding has no draft to prune)."""
        return DecodeConfig(
            method, self.max_new_tokens, sampling=self.sampling, prune_ratio=self.prune_ratio * drafts(method)
        ).with_settings(self.settings)


def drafted_pairs(pair: ModelPair, request: RaceRequest, second: ModelPair | None) -> dict[str, ModelPair]:
    """The pair each lane's draft names: "" the pair itself, the other draft the request's pair offers
    (`Choice.drafts`: its one-pass sibling) `second`, its target with that draft, which those lanes need, and
    `ONE_PASS_OFF` that pair with the target's features off (`without_features`: the same draft, not loaded again;
    one sentence where its draft reads none)."""
    needed = [lane.draft for lane in request.lanes if lane.draft]
    if needed and second is None:
        raise ConfigError(f"a race with the {LANE_DRAFTS[needed[0]]} needs the pair's target with that draft (second=)")
    if ONE_PASS_OFF in needed and second is not None and not reads_features(second.draft):
        raise ConfigError(
            f"the one-pass draft {second.draft.name!r} reads none of the target's features, so it cannot also race "
            "with them off"
        )
    if second is None:
        return {"": pair}
    return {"": pair, **{d: without_features(second) if d == ONE_PASS_OFF else second for d in request.pair.drafts}}


def start_runs(
    pair: ModelPair,
    request: RaceRequest,
    lock: AbstractContextManager,
    costs: CostCurve | None = None,
    second: ModelPair | None = None,
) -> tuple[RaceData, list[DecodeRun]]:
    """One run per lane (in column order: `RaceRequest.lanes`) on inputs prepared once, and the race's empty
    lanes.

    Each processor runs once for the whole race; every run reads the same tensors (the one-pass lanes' draft
    reads its own only when its processor differs). The request's sampling (default: greedy) applies to every
    side, each with its own generator seeded alike; its pruning to every side that drafts; its settings to each
    method's side. `costs`: the pair's measured cost curve; `second`: the target with the one-pass sibling draft.
    """
    media, prompt, lanes = request.media, request.prompt, request.lanes
    pairs = drafted_pairs(pair, request, second)
    with lock:
        own = any(drafts(lane.method) for lane in lanes if not lane.draft)
        prepared = prepare_inputs(pair, media, prompt, with_draft=own)
        inputs = {"": prepared}
        for other in (d for d in pairs if d):  # the target's inputs as they are; the other draft's added
            inputs[other] = with_draft_inputs(pairs[other], replace(prepared, draft=None, draft_seconds=0.0))
        runs = [
            decode(pairs[lane.draft], media, prompt, request.config(lane.method), inputs[lane.draft]) for lane in lanes
        ]
        draft = prepared.draft if request.prune_ratio > 0 else None
        boxes = pair.draft.visual_token_boxes(draft) if draft is not None else None
    data = RaceData(
        lanes=[Lane(run.config.method, run.header, draft=key.draft) for run, key in zip(runs, lanes, strict=True)],
        costs=costs,
    )
    if boxes is not None:  # a small copy: the per-user state holds no full-size media
        data.draft_view = (thumbnail(media, DRAFT_VIEW_HEIGHT), boxes)
    return data, runs


def race_steps(
    pair: ModelPair,
    request: RaceRequest,
    token_texts: Callable[[Sequence[int]], list[str]] | None = None,
    lock: AbstractContextManager | None = None,
    source: str = "",
    costs: CostCurve | None = None,
    second: ModelPair | None = None,
) -> Iterator[RaceData]:
    """Step one run per lane alternately; yield the race after every round.

    `token_texts` turns token ids into their texts (for the tree panel's
    node labels; it runs between steps, outside the timed parts). `lock` is
    held around each step, so two races never touch a model at once.
    `costs`, `second`: the pair's measured cost curve, its target with the one-pass draft (see `start_runs`).
    """
    lock = lock or nullcontext()
    pairs = drafted_pairs(pair, request, second)
    data, runs = start_runs(pair, request, lock, costs, second)
    data.source = source
    active = list(zip(data.lanes, runs, strict=True))
    waiting = [(lane, run) for lane, run in active if _holds_average(request, lane.method)]
    active = [pair_ for pair_ in active if pair_ not in waiting]
    yield from _step_lanes(data, active, lock, token_texts)
    for lane, _ in waiting:  # the lanes they read have finished: hold their averages in this race
        config = _held_config(request, data, lane)
        with lock:
            run = decode(pairs[lane.draft], request.media, request.prompt, config)
        lane.header = run.header
        yield from _step_lanes(data, [(lane, run)], lock, token_texts)


def _holds_average(request: RaceRequest, method: str) -> bool:
    """Whether this lane holds another lane's average in this race (its registry entry's `holds`, its setting
    not given) while that lane races: it starts once that lane has finished."""
    holds = method_spec(method).holds if method in request.holding else None
    return holds is not None and holds.lane in request.methods


def _source(data: RaceData, lane: Lane) -> Lane | None:
    """The lane whose average `lane` holds (`MethodSpec.holds`), on the same draft; None when it holds none."""
    holds = method_spec(lane.method).holds
    return data.lane(LaneKey(holds.lane, lane.draft)) if holds is not None else None


def _held_config(request: RaceRequest, data: RaceData, lane: Lane) -> DecodeConfig:
    """The configuration of a lane holding another lane's average in this race (`MethodSpec.held_settings`:
    sage-frozen SAGE's mean α, best-first SAGE's mean node count, rounded), that lane on the same draft."""
    method, spec, source = lane.method, method_spec(lane.method), _source(data, lane)
    held = spec.held_settings(request.settings.get(method), source.records if source is not None else ())
    return replace(request, settings={**request.settings, method: held}).config(method)


def _step_lanes(
    data: RaceData, active: list[tuple[Lane, Any]], lock: AbstractContextManager, token_texts: Any
) -> Iterator[RaceData]:
    """Step each active lane alternately, yielding the race after every round, until all have finished."""
    while active:
        for lane, run in list(active):
            with lock:
                record = next(run, None)
            if record is None:
                active.remove((lane, run))
                continue
            lane.records.append(record)
            lane.header = run.header  # after the prefill it names the visual tokens the draft kept
            if record.finished:
                active.remove((lane, run))
            if token_texts is not None:
                _learn_texts(data.token_texts, record, token_texts)
            yield data


#: What a stepped lane answers while it waits for the lane whose average it holds to finish.
WAITING: Literal["waiting"] = "waiting"
#: A stepped side's next step: its record, `WAITING`, or None when it has no more.
Advance = Callable[[], RoundRecord | Literal["waiting"] | None]


class RaceStepper:
    """A race (live or replayed) advanced one round per call, every side together: the teaching
    mode's Step. Per-user state: it lives in the visitor's session, never in a module global.

    A live stepper holds one `DecodeRun` per method (its caches included) and steps each under
    `lock`, like `race_steps`; a replay stepper hands out each side's next recorded step.
    """

    def __init__(
        self,
        data: RaceData,
        advance: Sequence[Advance],
        key: object = None,
        token_texts: Callable[[Sequence[int]], list[str]] | None = None,
    ) -> None:
        self.data = data
        self._advance = list(advance)
        self.key = key
        self._token_texts = token_texts
        self._exhausted: set[int] = set()  # sides with no more steps (a stopped recording ends unfinished)
        self.runs: list[DecodeRun] = []  # a live stepper's runs (their caches), released by `drop`
        self.dropped = False
        self.notes = ""  # the race's notes (app/notes.py), shown above every step's status

    def release(self) -> None:
        """Release the runs and their caches (the records so far are kept); the stepper steps no more."""
        self.runs = []
        self._advance = [lambda: None for _ in self._advance]  # (each side: no more steps)

    def drop(self) -> None:
        """Release the runs to make room for another visitor's (`app.stepping`), saying so (`dropped`)."""
        self.dropped = True
        self.release()

    @property
    def finished(self) -> bool:
        done = all(lane.finished or i in self._exhausted for i, lane in enumerate(self.data.lanes))
        return done or self.data.stopped or self.dropped

    @property
    def round(self) -> int:
        """The latest step number any side reached (0 = the prefill; -1 before it)."""
        return max((lane.records[-1].round for lane in self.data.lanes if lane.records), default=-1)

    def step(self) -> RaceData:
        """One more step on every side that has not finished."""
        for index, (lane, advance) in enumerate(zip(self.data.lanes, self._advance, strict=True)):
            if lane.finished or index in self._exhausted:
                continue
            record = advance()
            if record == WAITING:  # (a lane holding another's average waits for it to finish)
                continue
            if not isinstance(record, RoundRecord):
                self._exhausted.add(index)
                continue
            lane.records.append(record)
            if self._token_texts is not None:
                _learn_texts(self.data.token_texts, record, self._token_texts)
        return self.data


def live_stepper(
    pair: ModelPair,
    request: RaceRequest,
    token_texts: Callable[[Sequence[int]], list[str]] | None = None,
    lock: AbstractContextManager | None = None,
    key: object = None,
    costs: CostCurve | None = None,
    second: ModelPair | None = None,
) -> RaceStepper:
    """A live race to step through (its runs started as `race_steps` starts them)."""
    guard = lock or nullcontext()
    pairs = drafted_pairs(pair, request, second)
    data, runs = start_runs(pair, request, guard, costs, second)

    def advancer(lane: Lane, run: Any) -> Advance:
        held = _holds_average(request, lane.method)  # it starts once the lane it reads has finished, as in a race
        current: list[DecodeRun] = [] if held else [run]

        def advance() -> RoundRecord | Literal["waiting"] | None:
            if not current:
                source = _source(data, lane)
                if source is not None and not source.finished:
                    return WAITING
                config = _held_config(request, data, lane)
                with guard:
                    current.append(decode(pairs[lane.draft], request.media, request.prompt, config))
                stepper.runs.append(current[0])
            with guard:
                record = next(current[0], None)
            lane.header = current[0].header  # after the prefill it names the visual tokens the draft kept
            return record

        return advance

    stepper = RaceStepper(
        data, [advancer(lane, run) for lane, run in zip(data.lanes, runs, strict=True)], key, token_texts
    )
    stepper.runs = runs
    return stepper


def replay_stepper(recorded: RaceData, key: object = None) -> RaceStepper:
    """A recorded race to step through, one recorded step per side per call."""
    data = recorded.emptied()
    return RaceStepper(data, [functools.partial(next, iter(lane.records), None) for lane in recorded.lanes], key)


def _learn_texts(known: dict[int, str], record: RoundRecord, token_texts: Callable[[Sequence[int]], list[str]]) -> None:
    wanted = {
        *record.tree_tokens,
        *record.new_tokens,
        record.bonus_token,
        *record.root_top_tokens,
        *record.cut_tokens,
        *record.target_choices,
    }
    missing = sorted(t for t in wanted if t not in known)
    if missing:
        known.update(zip(missing, token_texts(missing), strict=True))


# -- replay ------------------------------------------------------------------------


#: The longest a replay waits for its next step, in seconds, whatever the trace says.
REPLAY_MAX_WAIT = 2.0


def replay_steps(
    recorded: RaceData,
    speed: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[RaceData]:
    """Hand out a recorded race's steps at their recorded pace.

    Each side advances on its own recorded clock (a step appears when that
    side's `total_seconds` is reached), `speed` times faster; speed <= 0
    replays without waiting. No single wait exceeds `REPLAY_MAX_WAIT` seconds
    (a trace with huge recorded times cannot hold a replay slot for long).
    """
    events = sorted(
        ((record.total_seconds, index, record) for index, lane in enumerate(recorded.lanes) for record in lane.records),
        key=lambda event: (event[0], event[1]),
    )
    data = recorded.emptied()
    start = clock()
    for at, index, record in events:
        if speed > 0:
            wait = start + at / speed - clock()
            if wait > REPLAY_MAX_WAIT:
                start -= wait - REPLAY_MAX_WAIT  # skip the rest of this gap: later steps keep their spacing
                wait = REPLAY_MAX_WAIT
            if wait > 0:
                sleep(wait)
        data.lanes[index].records.append(record)
        yield data
