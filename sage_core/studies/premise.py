"""The paper's premise, checked on a run's own rounds.

SAGE rests on two claims (paper §3.2): the draft's confidence α (from the
entropy of its top-k after the root) predicts how many draft tokens the
target accepts, and the entropy is correlated from one round to the next, so
this round's entropy can shape the next tree. On a run's SAGE rounds:

- the Pearson correlation of α with the accepted length (τ of the round);
- the lag-1 autocorrelation of the entropy (the Pearson correlation of
  round t's entropy with round t + 1's).

Both rest on the number of rounds they are computed from; with fewer than
`MIN_ROUNDS` rounds (or a constant series) a figure is None.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..methods import is_method, method_spec
from ..records import RoundRecord
from ..timing import same_work
from .stats import interval

MIN_ROUNDS = 4


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The Pearson correlation of two equally long series; None below MIN_ROUNDS points or without spread."""
    if len(xs) != len(ys) or len(xs) < MIN_ROUNDS:
        return None
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mean_x) ** 2 for x in xs)
    syy = sum((y - mean_y) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def _strength(r: float) -> str:
    if r >= 0.5:
        return "strongly"
    if r >= 0.3:
        return "moderately"
    if r > 0.1:
        return "weakly"
    return "hardly (or inversely)"


# -- the calibration picture: measured where α does not choose the tree ----------------------------

#: The α bins of the calibration picture (the last one closed).
ALPHA_EDGES = (0.0, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0)


@dataclass(frozen=True)
class AlphaBin:
    """Rounds whose α fell in [low, high): how many, and their mean accepted length."""

    low: float
    high: float
    rounds: int
    mean_accepted: float | None


@dataclass(frozen=True)
class Calibration:
    """Whether the draft's confidence predicts acceptance, and whether its uncertainty comes in stretches.

    `alpha_accept` and `bins` are measured on `lane`, a method whose trees α does not choose (a fixed
    tree, or SAGE with α frozen): there the accepted length answers the draft's confidence without α
    having set how deep the tree could reach. `sage_alpha_accept` is the same on SAGE's own rounds (where
    α also set the depth: confounded), for comparison. `token_lag1` is the lag-1 autocorrelation of the
    draft's entropy token by token along the answer (`RoundRecord.path_entropies`), `round_lag1` that
    of the root's entropy round by round (SAGE's rounds when SAGE ran, else the lane's)."""

    lane: str | None
    rounds: int
    alpha_accept: float | None
    bins: tuple[AlphaBin, ...]
    sage_rounds: int
    sage_alpha_accept: float | None
    tokens: int
    token_lag1: float | None
    round_lag1: float | None

    def meaning(self) -> str:
        """One sentence on what the figures say about this input (or these answers)."""
        if self.alpha_accept is None or self.token_lag1 is None:
            return (
                f"{self.rounds} rounds where α did not choose the tree and {self.tokens} token pairs: too few "
                "(or too uniform) to test the premise on this input."
            )
        predicts, persists = _strength(self.alpha_accept), _strength(self.token_lag1)
        holds = self.alpha_accept >= 0.3 and self.token_lag1 >= 0.3
        return (
            f"The draft's confidence {predicts} predicts how much is accepted (r = {self.alpha_accept:+.2f}) and "
            f"its uncertainty {persists} comes in stretches (r = {self.token_lag1:+.2f} from one token to the "
            "next): "
            + (
                "the premise holds here, so shaping the tree by entropy can pay."
                if holds
                else "the premise is weak here, so an entropy-shaped tree has little to go on."
            )
        )


def round_alpha(record: RoundRecord) -> float | None:
    """The draft's measured α after the root (1 − H / log k of its renormalised top-k), whatever α shaped
    the tree (sage-frozen's records carry the α it held)."""
    probs = record.root_top_probs
    if len(probs) < 2 or sum(probs) <= 0:
        return None
    total = sum(probs)
    entropy = -sum((p / total) * math.log(p / total) for p in probs if p > 0)
    return min(1.0, max(0.0, 1.0 - entropy / math.log(len(probs))))


def alpha_pairs(records: Sequence[RoundRecord]) -> list[tuple[float, int]]:
    """(measured α, accepted length) of each decode round that recorded the root's top-k."""
    pairs = []
    for record in records:
        alpha = round_alpha(record) if record.phase == "decode" else None
        if alpha is not None:
            pairs.append((alpha, record.accepted_length))
    return pairs


def alpha_bins(pairs: Sequence[tuple[float, int]], edges: Sequence[float] = ALPHA_EDGES) -> tuple[AlphaBin, ...]:
    """The rounds binned by α, with each bin's count and mean accepted length."""
    bins = []
    for index, (low, high) in enumerate(itertools.pairwise(edges)):
        last = index == len(edges) - 2
        inside = [a for alpha, a in pairs if low <= alpha < high or (last and alpha == high)]
        bins.append(AlphaBin(low, high, len(inside), sum(inside) / len(inside) if inside else None))
    return tuple(bins)


@dataclass(frozen=True)
class AcrossAnswers:
    """One correlation over several answers, three ways (each answer's (x, y) pairs stay its own):

    - per answer: the mean of each answer's own figure and the half-width of its 95 % interval over the answers
      where it is defined (whether the draft's state *within* an answer carries over);
    - centred: each answer's means taken out, then every pair pooled (within-answer variation only);
    - pooled: every pair together, which the gaps *between* answers inflate (rows hard throughout,
      descriptions easy throughout), so it is only ever shown labelled as pooled.
    """

    per_answer: float | None
    half_width: float | None
    answers: int  # the answers with a defined figure
    centred: float | None
    pooled: float | None
    points: int

    def words(self) -> str:
        def sign(value: float | None) -> str:
            return "–" if value is None else f"{value:+.2f}"

        half = f" ± {self.half_width:.2f}" if self.half_width is not None else ""
        return (
            f"per answer {sign(self.per_answer)}{half} ({self.answers} answers), centred {sign(self.centred)}, "
            f"pooled {sign(self.pooled)} ({self.points} points)"
        )


def across_answers(answers: Sequence[tuple[Sequence[float], Sequence[float]]]) -> AcrossAnswers:
    """`AcrossAnswers` of the (xs, ys) series of each answer."""
    per = [r for xs, ys in answers if (r := pearson(xs, ys)) is not None]
    mean, half = interval(per) if len(per) >= 2 else (per[0] if per else None, None)

    def centred(values: Sequence[float]) -> list[float]:
        middle = sum(values) / len(values) if values else 0.0
        return [v - middle for v in values]

    xs = [v for x, _ in answers for v in x]
    ys = [v for _, y in answers for v in y]
    centred_xs = [v for x, _ in answers for v in centred(x)]
    centred_ys = [v for _, y in answers for v in centred(y)]
    return AcrossAnswers(mean, half, len(per), pearson(centred_xs, centred_ys), pearson(xs, ys), len(xs))


def lag_pairs(series: Sequence[Sequence[float]]) -> list[tuple[Sequence[float], Sequence[float]]]:
    """Each series' (values, the next values) for a lag-1 autocorrelation that never spans two series."""
    return [(values[:-1], values[1:]) for values in series]


def lag1(series: Sequence[Sequence[float]]) -> tuple[float | None, int]:
    """The lag-1 autocorrelation pooled over several series (pairs never span two series), and its pairs."""
    before = [x for values in series for x in values[:-1]]
    after = [x for values in series for x in values[1:]]
    return pearson(before, after), len(before)


def token_entropies(records: Sequence[RoundRecord]) -> list[list[float]]:
    """The draft's entropy token by token along the answer, as runs of consecutive tokens (a round whose
    last accepted node was not expanded leaves a gap before the next round's)."""
    runs: list[list[float]] = [[]]
    for record in records:
        if record.phase != "decode" or not record.path_entropies:
            continue
        runs[-1].extend(record.path_entropies)
        if len(record.path_entropies) < record.accepted_length + 1:
            runs.append([])
    return [run for run in runs if run]


def unconfounded(methods: Iterable[str]) -> str | None:
    """The lane to measure α against acceptance on: one whose trees α does not choose, the rightmost column
    (the chain before the static tree before SAGE frozen)."""
    lanes = [m for m in methods if is_method(m) and method_spec(m).alpha_free]
    return max(lanes, key=lambda m: method_spec(m).order, default=None)


def calibration_of(lanes: Mapping[str, Sequence[RoundRecord]], sage: str = "sage") -> Calibration:
    """The calibration picture of a race (method -> its records), or of many answers pooled (then each
    lane's records are the answers' records one after the other)."""
    lane = unconfounded(lanes)
    pairs = alpha_pairs(lanes[lane]) if lane else []
    sage_pairs = alpha_pairs(lanes.get(sage, ()))
    any_lane = lanes.get(sage) or (lanes[lane] if lane else next(iter(lanes.values()), ()))
    token_lag, tokens = lag1(token_entropies(any_lane))
    roots = [r.entropy for r in any_lane if r.phase == "decode" and r.entropy is not None]
    if not roots:
        roots = [math.log(len(r.root_top_probs)) * (1 - a) for r in any_lane if (a := round_alpha(r)) is not None]
    return Calibration(
        lane=lane,
        rounds=len(pairs),
        alpha_accept=_corr(pairs),
        bins=alpha_bins(pairs),
        sage_rounds=len(sage_pairs),
        sage_alpha_accept=_corr(sage_pairs),
        tokens=tokens,
        token_lag1=token_lag,
        round_lag1=lag1([roots])[0],
    )


def _corr(pairs: Sequence[tuple[float, int]]) -> float | None:
    return pearson([a for a, _ in pairs], [float(n) for _, n in pairs])


# -- what adaptation bought: SAGE against itself with α frozen ------------------------------------


@dataclass(frozen=True)
class AdaptationBought:
    """SAGE against `sage-frozen` on the same input: the difference in τ and in wall time."""

    sage_tau: float
    frozen_tau: float
    sage_seconds: float
    frozen_seconds: float
    frozen_alpha: float | None
    same_work: bool = False  # the same trees and accepted paths every round (`timing.same_work`)

    @property
    def delta_tau(self) -> float:
        return self.sage_tau - self.frozen_tau

    @property
    def delta_seconds(self) -> float:
        return self.sage_seconds - self.frozen_seconds

    def sentence(self) -> str:
        """One plain sentence; it says "nothing" when both did the same work, "nothing measurable" when τ
        moved less than `NOTICEABLE_TAU` (wall time alone is never credited to adaptation), and else names
        each difference that is measurable (τ, then wall time) in its own direction."""
        held = f" at {self.frozen_alpha:.2f}" if self.frozen_alpha is not None else ""
        figures = (
            f"τ {self.sage_tau:.2f} against {self.frozen_tau:.2f} (Δτ {self.delta_tau:+.2f}), wall time "
            f"{self.sage_seconds:.2f} s against {self.frozen_seconds:.2f} s "
            f"(Δ {self.delta_seconds * 1000:+.0f} ms)"
        )
        if self.same_work:
            return (
                f"What adaptation bought on this input: nothing. SAGE reading the entropy every round built the "
                f"same trees and accepted the same tokens as SAGE with α held{held}, round for round: the same "
                f"work, so any gap in wall time is this machine's noise ({figures})."
            )
        if abs(self.delta_tau) < NOTICEABLE_TAU:  # no more tokens per round: a gap on the clock is not its doing
            return (
                f"What adaptation bought on this input: nothing measurable. SAGE reading the entropy every "
                f"round against SAGE with α held{held}: {figures}; with τ the same, wall time alone is "
                "not credited to adaptation."
            )
        verdicts = [f"accepted {'more' if self.delta_tau > 0 else 'fewer'} draft tokens per round"]
        if self.frozen_seconds > 0 and abs(self.delta_seconds) / self.frozen_seconds >= NOTICEABLE_TIME:
            verdicts.append(f"finished {'sooner' if self.delta_seconds < 0 else 'later'}")
        return (
            f"What adaptation bought on this input: SAGE reading the entropy every round {' and '.join(verdicts)}"
            f" than SAGE with α held{held}: {figures}."
        )


#: Below these a single race's difference is called nothing (one input, no interval): 0.1 accepted tokens per
#: round, 3 % of the wall time.
NOTICEABLE_TAU = 0.1
NOTICEABLE_TIME = 0.03


def adaptation_bought(
    sage: Sequence[RoundRecord], frozen: Sequence[RoundRecord], frozen_alpha: float | None = None
) -> AdaptationBought | None:
    """SAGE's and sage-frozen's τ and wall time on one input (None until both have decode rounds)."""
    sage_rounds = [r for r in sage if r.phase == "decode"]
    frozen_rounds = [r for r in frozen if r.phase == "decode"]
    if not sage_rounds or not frozen_rounds:
        return None
    return AdaptationBought(
        sage_tau=sum(r.accepted_length for r in sage_rounds) / len(sage_rounds),
        frozen_tau=sum(r.accepted_length for r in frozen_rounds) / len(frozen_rounds),
        sage_seconds=sage[-1].total_seconds,
        frozen_seconds=frozen[-1].total_seconds,
        frozen_alpha=frozen_alpha,
        same_work=same_work(sage, frozen),
    )


# -- the acceptance histogram -------------------------------------------------------------------------


def acceptance_histogram(records: Sequence[RoundRecord]) -> tuple[int, ...]:
    """How many decode rounds accepted 0, 1, 2, … draft tokens (index = accepted length)."""
    lengths = [r.accepted_length for r in records if r.phase == "decode"]
    counts = [0] * (max(lengths, default=-1) + 1)
    for length in lengths:
        counts[length] += 1
    return tuple(counts)
