"""The race's view model: what the page, the panels, the export and the API read, made once per step.

A race's records change only when a round lands, yet one page update reads
them many times (the headline, the badge, the columns, the table, the
account, five panels and the explainer; the API and the export the same).
`race_view(data)` reads them once: each lane's method entry, its settings as
its header records them, its summary figures and text, then the race's
lossless verdict, its headlines and its account, and what the studies say of
it (the speedups the cost curve predicts, the paper's premise on this input,
what adaptation bought; the explainer's round). The view is cached on the
race (`RaceData.view`) until another round lands, so every reader gets the
same figures and nothing is computed twice; the renderers and the explainer
only format them (they import no study).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from sage_core import RoundRecord, RunHeader, SageConfig, summarize
from sage_core.cost_curve import CostCurve
from sage_core.errors import SageError
from sage_core.methods import ONE_PASS, LaneKey, MethodSpec, drafts, holder, is_method, method_spec, rivals
from sage_core.studies.acceptance import AcceptanceStats, acceptance_stats
from sage_core.studies.account import RaceAccount, race_account
from sage_core.studies.costs import predicted_speedups
from sage_core.studies.explain import RoundExplained, explain_round
from sage_core.studies.premise import (
    AdaptationBought,
    Calibration,
    acceptance_histogram,
    adaptation_bought,
    calibration_of,
)
from sage_core.timing import Headline, SideTimes, headline, point_speedups, same_work, side_times
from sage_core.trace_check import recorded_settings

from .race import Lane, RaceData


@dataclass(frozen=True)
class LaneFigures:
    """The live figures of one side, all read off its records."""

    rounds: int
    tau: float
    tokens_per_forward: float
    tokens: int
    tokens_per_second: float
    seconds: float
    decode_tokens_per_second: float
    # Draft forwards a decode round (a one-pass draft: 1; a sequential one: one a level; 0 without a draft).
    draft_forwards_per_round: float = 0.0

    @classmethod
    def of(cls, records: Sequence[RoundRecord]) -> LaneFigures:
        s = summarize(records)
        return cls(
            rounds=s.rounds,
            tau=s.mean_accepted,
            tokens_per_forward=s.tokens_per_forward,
            tokens=len(s.token_ids),
            tokens_per_second=s.tokens_per_second,
            seconds=s.seconds,
            decode_tokens_per_second=s.decode_tokens_per_second,
            draft_forwards_per_round=s.draft_forwards / s.rounds if s.rounds else 0.0,
        )


def lead_method(methods: Iterable[str]) -> str:
    """The method the others are compared with: SAGE when it raced, else the first."""
    methods = list(methods)
    return "sage" if "sage" in methods else methods[0]


#: One line on how the two speedups differ (the table's caption, panel ⑤, the API's docs).
SPEEDUP_DEFINITION = (
    "speedup: each side's time per token with the same prefill charged once to both and its rounds at their "
    "median cost (what the headline says); wall clock: tokens ÷ seconds as the clock measured them, "
    "so another process's load on one side shows in it"
)


def speedups_of(figures: Mapping[str, LaneFigures], decode_only: bool = False) -> dict[str, float]:
    """The lead method's tokens/s over each other method's (decode-only: after the prefill), as the clock
    measured them (`RaceView.wall_speedups`; the speedup the app shows is `RaceView.speedups`). A method
    with no measured rate, or a ratio that is not a finite number (a doctored trace's times), is left out."""
    if len(figures) < 2:
        return {}
    lead = lead_method(figures)

    def rate(f: LaneFigures) -> float:
        return f.decode_tokens_per_second if decode_only else f.tokens_per_second

    mine = rate(figures[lead])
    if not (math.isfinite(mine) and mine > 0):
        return {}
    ratios = {m: mine / rate(f) for m, f in figures.items() if m != lead and math.isfinite(rate(f)) and rate(f) > 0}
    return {m: value for m, value in ratios.items() if math.isfinite(value)}


def recorded(header: RunHeader | None, method: str) -> Any:
    """`method`'s settings as `header` records them (`recorded_settings`: one way for every method); None
    without a header, for a method without settings, or for settings its class refuses."""
    if header is None:
        return None
    try:
        return recorded_settings(header, method)
    except SageError:
        return None


@dataclass(frozen=True)
class LaneView:
    """One side as every reader sees it: its method entry, the settings its header records (its own
    method's, and SAGE's for the panels that draw SAGE's policy), its figures, its tokens and text."""

    lane: Lane
    spec: MethodSpec | None  # None for a method no longer registered (a seam's toy, say): drawn by its name
    records: tuple[RoundRecord, ...]
    settings: Any  # its own method's settings (None: the method has none)
    sage: SageConfig  # SAGE's settings as this side ran them (the defaults when not recorded)
    figures: LaneFigures | None  # None before its first record
    token_ids: tuple[int, ...]
    text: str
    finished: bool

    @cached_property
    def acceptance(self) -> AcceptanceStats:
        """Its acceptance figures as serving engines report them (sage_core.studies.acceptance)."""
        return acceptance_stats(self.records)

    @property
    def method(self) -> str:
        return self.lane.method

    @property
    def key(self) -> str:
        """What the race is keyed by: the method, or the method on another draft (`Lane.key`)."""
        return self.lane.key

    @property
    def draft(self) -> str:
        """The draft it drafted with when not the pair's own ("one-pass"; "" for the pair's own)."""
        return self.lane.draft

    @property
    def header(self) -> RunHeader | None:
        return self.lane.header

    @property
    def drafts(self) -> bool:
        return drafts(self.method)


@dataclass(frozen=True)
class PremiseFigures:
    """The paper's premise on one race (sage_core.studies.premise), worked out once on its view: α against the
    accepted length where α does not choose the tree (and on SAGE's rounds), each drafting side's acceptance
    histogram (rounds that accepted 0, 1, 2, … draft tokens), and what adaptation bought (SAGE against the lane
    holding its α, when both ran)."""

    calibration: Calibration
    histograms: Mapping[str, tuple[int, ...]]
    adaptation: AdaptationBought | None


def explained_round(record: RoundRecord, sage: SageConfig, settings: Any = None) -> RoundExplained:
    """One round explained for the explainer (sage_core.studies.explain), from its record, its run's SAGE
    settings and its own method's (`settings`)."""
    return explain_round(record, sage, settings)


@dataclass(frozen=True)
class Verdict:
    """Whether the sides agree token for token (so far, while racing)."""

    identical: bool
    compared: int  # tokens compared
    reference: str
    first_difference: dict | None


@dataclass(frozen=True)
class RaceView:
    """A race as every reader sees it after one step: its lanes' views, the lossless verdict, the headlines
    (the lead against each other side, the main rival first), the account, and the figures' speedups. The
    headlines and the account are worked out when first read (a streamed step that redraws only the text
    reads neither), then kept with the view."""

    lanes: tuple[LaneView, ...]
    token_texts: Mapping[int, str]
    replay: bool
    stopped: bool
    source: str  # where the race came from (a trace's name for a replay)
    costs: CostCurve | None
    verdict: Verdict | None
    held_alpha: float | None  # the α held by the lane holding SAGE's (`holder("sage", "alpha")`; None without it)
    wall_speedups: Mapping[str, float]  # the lead's tokens/s over each other side's, as the clock measured

    @property
    def finished(self) -> bool:
        return all(lane.finished for lane in self.lanes)

    @cached_property
    def _sides(self) -> dict[str, SideTimes]:
        """Each side's times (`timing.side_times`), for the sides with a decode round: what the headline and
        the speedups are worked out from."""
        sides = {lane.key: side_times(lane.key, lane.records, lane.drafts) for lane in self.lanes}
        return {m: side for m, side in sides.items() if side.rounds}

    @property
    def headline_lead(self) -> str | None:
        """The side the headline and the speedups compare the others with (SAGE when it has raced a round)."""
        return lead_method(self._sides) if self._sides else None

    @cached_property
    def _points(self) -> dict[str, tuple[float, float]]:
        lead = self.headline_lead
        if lead is None:
            return {}
        found = {m: point_speedups(self._sides[lead], side) for m, side in self._sides.items() if m != lead}
        return {m: point for m, point in found.items() if point is not None}

    @property
    def speedups(self) -> dict[str, float]:
        """The lead's speedup over each other side, as the headline defines it (`timing.point_speedups`: the
        prefill charged once, the rounds at their median cost): the one figure the headline, the table,
        panel ⑤ and `/race` show. Raw tokens/s ratios are `wall_speedups`."""
        return {m: point[0] for m, point in self._points.items()}

    @property
    def decode_speedups(self) -> dict[str, float]:
        """The same after the prefill (decode only)."""
        return {m: point[1] for m, point in self._points.items()}

    @cached_property
    def headlines(self) -> tuple[Headline, ...]:
        found = _headlines(self.lanes, self._sides)
        return tuple(replace(h, recorded=True) for h in found) if self.replay else found

    @cached_property
    def account(self) -> RaceAccount:
        trusted = self.costs if self.costs is not None and self.costs.trusted else None
        main = self.headlines[0].rival if self.headlines and self.headlines[0].lead == "sage" else None
        lanes = {lane.key: lane.records for lane in self.lanes if lane.records}
        return race_account(lanes, trusted, self.held_alpha, against=main)  # the why told against the headline's

    @cached_property
    def predicted(self) -> dict[str, float]:
        """The decode-only speedup of the lead over each other side that the measured cost curve predicts from
        their rounds (tree sizes, tokens a round); none unless the curve is trusted (a noisy point would be read as
        a cost)."""
        if self.costs is None or not self.costs.trusted:
            return {}
        return predicted_speedups(self.costs, self.records, self.lead or "")

    @cached_property
    def premise(self) -> PremiseFigures | None:
        """The paper's premise on this race (`PremiseFigures`), over its drafting sides with a round; None
        without one."""
        lanes = {lane.key: lane.records for lane in self.lanes if lane.drafts and lane.records}
        if not lanes:
            return None
        sage, frozen = self.lane("sage"), self.lane(holder("sage", "alpha"))
        bought = None
        if sage is not None and frozen is not None:
            bought = adaptation_bought(sage.records, frozen.records, self.held_alpha)
        histograms = {key: acceptance_histogram(records) for key, records in lanes.items()}
        return PremiseFigures(calibration_of(lanes), histograms, bought)

    @property
    def methods(self) -> list[str]:
        """Every lane's key, in column order (a method, or a method on the one-pass draft: "sage/one-pass")."""
        return [lane.key for lane in self.lanes]

    @property
    def header(self) -> RunHeader | None:
        return next((lane.header for lane in self.lanes if lane.header is not None), None)

    @property
    def records(self) -> dict[str, tuple[RoundRecord, ...]]:
        return {lane.key: lane.records for lane in self.lanes}

    @property
    def figures(self) -> dict[str, LaneFigures]:
        """Each side's figures, for the sides with a record."""
        return {lane.key: lane.figures for lane in self.lanes if lane.figures is not None}

    @property
    def lead(self) -> str | None:
        return lead_method(self.figures) if self.figures else None

    def lane(self, key: str | LaneKey | None) -> LaneView | None:
        """The lane of this key (a method, or a method on another draft: `LaneView.key`), or of this value."""
        return next((lane for lane in self.lanes if key is not None and lane.key == str(key)), None)

    def twin(self, lane: LaneView) -> LaneView | None:
        """The same method's lane on the other draft, if raced: the pair's own lane's is its lane on the one-pass
        sibling (not the one with the target's features off), a lane on another draft's the pair's own."""
        other = "" if lane.draft else ONE_PASS
        return next((o for o in self.lanes if o.method == lane.method and o.draft == other), None)

    @property
    def tree_method(self) -> str:
        """The side whose tree the panels show first: SAGE when it raced, else the first that drafts."""
        if self.lane("sage") is not None:
            return "sage"
        return next((lane.key for lane in self.lanes if lane.drafts), self.lanes[0].key if self.lanes else "sage")

    def sage_for(self, method: str | None) -> SageConfig:
        """SAGE's settings for the confidence panel: SAGE's lane's when it raced, else `method`'s lane's."""
        lane = self.lane("sage") or self.lane(method)
        return lane.sage if lane is not None else SageConfig()


def lane_view(lane: Lane) -> LaneView:
    records = tuple(lane.records)
    sage = recorded(lane.header, "sage")
    return LaneView(
        lane=lane,
        spec=method_spec(lane.method) if is_method(lane.method) else None,
        records=records,
        settings=recorded(lane.header, lane.method),
        sage=sage if isinstance(sage, SageConfig) else SageConfig(),
        figures=LaneFigures.of(records) if records else None,
        token_ids=tuple(t for r in records for t in r.new_tokens),
        text="".join(s for r in records for s in r.new_token_texts),
        finished=bool(records) and records[-1].finished,
    )


def _verdict(lanes: Sequence[LaneView], token_texts: Mapping[int, str]) -> Verdict | None:
    """Compare every side with the reference (plain decoding when it ran, else the first)."""
    lanes = [lane for lane in lanes if lane.records]
    if len(lanes) < 2:
        return None
    reference = next((lane for lane in lanes if not lane.drafts), lanes[0])
    ref_ids = reference.token_ids
    compared = len(ref_ids)
    for lane in lanes:
        if lane is reference:
            continue
        ids = lane.token_ids
        common = min(len(ids), len(ref_ids))
        compared = min(compared, common)
        position = next((i for i in range(common) if ids[i] != ref_ids[i]), None)
        if position is None and lane.finished and reference.finished and len(ids) != len(ref_ids):
            position = common
        if position is not None:
            difference = {"position": position, "reference": _at(reference, position, token_texts)}
            difference["other"] = _at(lane, position, token_texts)
            return Verdict(False, position, reference.key, difference)
    return Verdict(True, compared, reference.key, None)


def _at(lane: LaneView, position: int, token_texts: Mapping[int, str]) -> dict:
    if position >= len(lane.token_ids):
        return {"method": lane.key, "token": None, "text": None}
    token = lane.token_ids[position]
    texts = [s for r in lane.records for s in r.new_token_texts]
    text = texts[position] if position < len(texts) else token_texts.get(token, "")
    return {"method": lane.key, "token": token, "text": text}


def _headlines(lanes: Sequence[LaneView], sides: Mapping[str, SideTimes]) -> tuple[Headline, ...]:
    """The lead (SAGE when it raced) against every other side with rounds (`sides`), the main rival first
    (the registry's `rivals`, the first present first): each an estimate with its interval and verdict
    (sage_core.timing.headline); a greedy race's interval is over its round times, a sampled one's over its
    rounds and their tokens."""
    if len(sides) < 2:
        return ()
    sampling = next((lane.header.sampling for lane in lanes if lane.header is not None), None)
    greedy = not (sampling and sampling.get("temperature"))
    lead = lead_method(sides)
    ranked = rivals()
    others = sorted((m for m in sides if m != lead), key=lambda m: ranked.index(m) if m in ranked else len(ranked))
    records = {lane.key: lane.records for lane in lanes}
    found = (headline(sides[lead], sides[m], fixed_answers=greedy) for m in others)
    return tuple(replace(h, same_work=same_work(records[h.lead], records[h.rival])) for h in found if h is not None)


def _held_alpha(lanes: Sequence[LaneView]) -> float | None:
    """The α the lane holding SAGE's held (the registry's `holder("sage", "alpha")`: sage-frozen), as its header
    records it; None without that lane."""
    method = holder("sage", "alpha")
    lane = next((lane for lane in lanes if lane.key == method), None)
    held = lane.header.settings_of(lane.method).get("alpha") if lane and lane.header else None
    return held if isinstance(held, int | float) and not isinstance(held, bool) else None


def _key(data: RaceData) -> tuple:
    """What a view depends on: its lanes, their headers and records (a new round, or one replaced), the
    curve, stop or replay (identities: a record is frozen, so the same object says the same thing)."""
    lanes = tuple((id(lane), lane.key, id(lane.header), tuple(map(id, lane.records))) for lane in data.lanes)
    return (id(data.lanes), lanes, id(data.costs), data.stopped, data.replay, id(data.token_texts), data.source)


def race_view(data: RaceData) -> RaceView:
    """The race's view after its latest step, made once and cached on the race until a round lands."""
    key = _key(data)
    if data.view is not None and data.view[0] == key:
        return data.view[1]
    lanes = tuple(lane_view(lane) for lane in data.lanes)
    held = _held_alpha(lanes)
    figures = {lane.key: lane.figures for lane in lanes if lane.figures is not None}
    view = RaceView(
        lanes=lanes,
        token_texts=data.token_texts,
        replay=data.replay,
        stopped=data.stopped,
        source=data.source,
        costs=data.costs,
        verdict=_verdict(lanes, data.token_texts),
        held_alpha=held,
        wall_speedups=speedups_of(figures),
    )
    data.view = (key, view)
    return view
