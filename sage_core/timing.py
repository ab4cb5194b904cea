"""Device-synchronised wall time: what every figure shown to a user is built on; and a race's headline
read from those times so that it keeps its verdict when another process shares the machine (`headline`)."""

from __future__ import annotations

import math
import statistics
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy
import torch

if TYPE_CHECKING:
    from .records import RoundRecord


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_ms(run: Callable[[], object], devices: Sequence[torch.device], repeats: int, warmup: int) -> float:
    """The median milliseconds of `run` over `repeats` runs after `warmup` untimed ones, each between two
    synchronisations of every device (wall time, as a round is timed)."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        for device in devices:
            synchronize(device)
        start = time.perf_counter()
        run()
        for device in devices:
            synchronize(device)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


class Stopwatch:
    """Seconds between two synchronised points: `with Stopwatch(d) as s: ...; s.seconds`."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds = 0.0

    def __enter__(self) -> Stopwatch:
        synchronize(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        self.seconds = time.perf_counter() - self._start


class Laps:
    """A step's wall time and its parts, with one synchronisation per device per step.

    The clock starts when made, without synchronising: the step before ended
    with a synchronisation, so the device is idle. `lap()` reads the clock
    without synchronising: call it right after a device-to-host copy (a
    `.tolist()`), which has waited for the device already. `stop()`
    synchronises once and returns the whole step's seconds.
    """

    def __init__(self, devices: Iterable[torch.device]) -> None:
        self.devices = tuple(dict.fromkeys(devices))
        self._start = self._last = time.perf_counter()

    def lap(self) -> float:
        """Seconds since the last lap (or the start)."""
        now = time.perf_counter()
        seconds, self._last = now - self._last, now
        return seconds

    def stop(self) -> float:
        for device in self.devices:
            synchronize(device)
        return time.perf_counter() - self._start


# -- a race's headline that keeps its verdict on a shared machine ---------------------------------------

#: The interval shown with a headline: the central 90 % of `BOOTSTRAPS` resamplings of each side's rounds.
INTERVAL = (5.0, 95.0)
BOOTSTRAPS = 1000
#: Below this many decode rounds on either side no verdict is given (an interval of two rounds says little).
MIN_ROUNDS = 4
Verdict = Literal["faster", "slower", "unclear", "same work"]


@dataclass(frozen=True)
class SideTimes:
    """One side's timings as a headline reads them: its prefill, and each decode round's time and tokens."""

    method: str
    prefill_seconds: float
    prefill_tokens: int
    round_seconds: tuple[float, ...]
    round_tokens: tuple[int, ...]
    drafts: bool = True  # whether its prefill is the target's and the draft's (else the target's alone)

    @property
    def rounds(self) -> int:
        return len(self.round_seconds)

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + sum(self.round_tokens)

    @property
    def tokens_per_forward(self) -> float:
        """Tokens per target forward (the prefill is one): the same on a quiet machine and a busy one."""
        return self.tokens / (1 + self.rounds)

    def round_cost(self) -> float:
        """The robust cost of one decode round, seconds: the median of its rounds (a round slowed by another
        process moves a mean, not a median, unless it slowed most rounds)."""
        return float(numpy.median(self.round_seconds)) if self.round_seconds else 0.0


def charged_prefill(sides: Sequence[SideTimes]) -> dict[str, float]:
    """The prefill each side is charged: the same work (the same target, and the same draft when both draft,
    on the same prompt) is measured once per side and charged once to all of them at its fastest
    measurement: another process only ever adds time, so the fastest is the one nearest the work's cost."""
    fastest: dict[bool, float] = {}
    for side in sides:
        fastest[side.drafts] = min(fastest.get(side.drafts, math.inf), side.prefill_seconds)
    return {side.method: fastest[side.drafts] for side in sides}


@dataclass(frozen=True)
class Headline:
    """`lead` against `rival`: the end-to-end speedup (each side charged the same prefill, its rounds at
    their median cost), its interval over resampled rounds, the verdict the interval allows, the decode-only
    speedup beside it, and tokens per target forward (which no load changes)."""

    lead: str
    rival: str
    speedup: float
    interval: tuple[float, float]
    decode_speedup: float
    decode_interval: tuple[float, float]
    prefill_seconds: float  # charged to the lead (and to the rival when it does the same prefill)
    rival_prefill_seconds: float
    tokens_per_forward: tuple[float, float]  # the lead's, the rival's
    rounds: tuple[int, int]
    same_work: bool = False  # the same trees and accepted paths every round (`same_work`)
    recorded: bool = False  # read off a recording (a replay): its noise is the recording's, not this machine's

    @property
    def verdict(self) -> Verdict:
        """ "same work" when both sides did the same work (the same trees and paths every round: any gap on
        the clock is the machine's); else faster when the whole interval is above 1, slower when below, else
        unclear (too noisy, or too close to call); "unclear" too when either side ran fewer than `MIN_ROUNDS`
        decode rounds."""
        low, high = self.interval
        if self.same_work:
            return "same work"
        if min(self.rounds) < MIN_ROUNDS:
            return "unclear"
        return "faster" if low > 1 else "slower" if high < 1 else "unclear"

    def as_dict(self) -> dict[str, Any]:
        """The `/race` answer's "headline"."""
        return {
            "lead": self.lead,
            "rival": self.rival,
            "speedup": round(self.speedup, 4),
            "interval": [round(v, 4) for v in self.interval],
            "verdict": self.verdict,
            "decode_speedup": round(self.decode_speedup, 4),
            "decode_interval": [round(v, 4) for v in self.decode_interval],
            "prefill_ms": {self.lead: 1000 * self.prefill_seconds, self.rival: 1000 * self.rival_prefill_seconds},
            "tokens_per_forward": {self.lead: self.tokens_per_forward[0], self.rival: self.tokens_per_forward[1]},
            "rounds": {self.lead: self.rounds[0], self.rival: self.rounds[1]},
        }


def headline(lead: SideTimes, rival: SideTimes, fixed_answers: bool = True) -> Headline | None:
    """The headline of `lead` against `rival` (None until both have decode rounds, or when a side's time per
    token is zero or the ratio is not a finite number: a doctored trace's times). The interval is over
    re-runs of the same race: with `fixed_answers` (greedy: a re-run gives the same tokens in the same
    rounds) it resamples each side's round times alone, its tokens as they are; else (sampling: a re-run
    draws other answers) it resamples each side's rounds with their tokens. Each side is resampled on its
    own seed (from its name), so the same records always give the same interval."""
    ratios = point_speedups(lead, rival)
    if ratios is None:
        return None
    prefill = charged_prefill((lead, rival))
    mine = _resampled(lead, prefill[lead.method], fixed_answers)
    theirs = _resampled(rival, prefill[rival.method], fixed_answers)
    with numpy.errstate(divide="ignore", invalid="ignore", over="ignore"):
        both = numpy.asarray(theirs) / numpy.asarray(mine)  # rows: end to end, decode only
    if not numpy.isfinite(both).all():
        return None  # times so far apart that a resampled ratio is not a number
    return Headline(
        lead.method,
        rival.method,
        ratios[0],
        _interval(both[0], ratios[0]),
        ratios[1],
        _interval(both[1], ratios[1]),
        prefill[lead.method],
        prefill[rival.method],
        (lead.tokens_per_forward, rival.tokens_per_forward),
        (lead.rounds, rival.rounds),
    )


def point_speedups(lead: SideTimes, rival: SideTimes) -> tuple[float, float] | None:
    """The speedup of `lead` over `rival` as the headline defines it, end to end and decode only: each side
    charged the same prefill once (`charged_prefill`), its rounds at their median cost. The one definition
    of a speedup the app shows (the headline, the table, panel ⑤, `/race`); no interval, so it is cheap to
    redraw with every streamed round. None until both have decode rounds, or when a side's time per token
    is zero or a ratio is not a finite number (a doctored trace's times)."""
    if not lead.rounds or not rival.rounds:
        return None
    prefill = charged_prefill((lead, rival))
    point = [_seconds_per_token(side, prefill[side.method]) for side in (lead, rival)]
    if not all(math.isfinite(t) and t > 0 for t in (*point[0], *point[1])):
        return None
    ratios = (point[1][0] / point[0][0], point[1][1] / point[0][1])
    return ratios if all(math.isfinite(r) for r in ratios) else None


def _seconds_per_token(side: SideTimes, prefill: float) -> tuple[float, float]:
    """End-to-end and decode-only seconds per token, the rounds at their median cost."""
    decode = side.rounds * side.round_cost()
    return (prefill + decode) / max(side.tokens, 1), decode / max(sum(side.round_tokens), 1)


def _resampled(side: SideTimes, prefill: float, fixed_answers: bool) -> tuple[numpy.ndarray, numpy.ndarray]:
    """`_seconds_per_token` over `BOOTSTRAPS` resamplings of the side's round times (with `fixed_answers`
    its tokens stay as they are; else each picked round brings its tokens), seeded by the side's name."""
    rng = numpy.random.default_rng(zlib.crc32(side.method.encode()))
    picks = rng.integers(0, side.rounds, size=(BOOTSTRAPS, side.rounds))
    decode = side.rounds * numpy.median(numpy.asarray(side.round_seconds)[picks], axis=1)
    if fixed_answers:
        tokens = numpy.full(BOOTSTRAPS, float(sum(side.round_tokens)))
    else:
        tokens = numpy.asarray(side.round_tokens, dtype=float)[picks].sum(axis=1)
    return (prefill + decode) / (side.prefill_tokens + tokens), decode / numpy.maximum(tokens, 1)


def _interval(ratios: numpy.ndarray, point: float) -> tuple[float, float]:
    low, high = (float(v) for v in numpy.percentile(ratios, INTERVAL))
    return min(low, point), max(high, point)


def same_work(mine: Sequence[RoundRecord], theirs: Sequence[RoundRecord]) -> bool:
    """Whether two sides did the same work: as many decode rounds, each with the same tree (tokens and
    parents) and the same accepted path (sage against sage-frozen with α at 1.00 every round, say). Their
    target forwards, nodes verified and tokens are then the same: a ratio of their times measures only the
    machine."""
    a = [r for r in mine if r.phase == "decode"]
    b = [r for r in theirs if r.phase == "decode"]
    return (
        bool(a)
        and len(a) == len(b)
        and all(
            (x.tree_tokens, x.tree_parents, x.accepted_nodes) == (y.tree_tokens, y.tree_parents, y.accepted_nodes)
            for x, y in zip(a, b, strict=True)
        )
    )


def side_times(method: str, records: Sequence[RoundRecord], drafts: bool = True) -> SideTimes:
    """A side's `SideTimes` read off its records (the prefill's, then every decode round's)."""
    prefill = [r for r in records if r.phase == "prefill"]
    rounds = [r for r in records if r.phase == "decode"]
    return SideTimes(
        method,
        sum(r.round_seconds for r in prefill),
        sum(len(r.new_tokens) for r in prefill),
        tuple(r.round_seconds for r in rounds),
        tuple(len(r.new_tokens) for r in rounds),
        drafts,
    )
