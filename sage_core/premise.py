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

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .records import RoundRecord

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


@dataclass(frozen=True)
class Premise:
    """The two figures on one run's rounds, and how many rounds each rests on."""

    rounds: int  # decode rounds with a recorded α and entropy
    alpha_accept: float | None  # corr(α, accepted length)
    entropy_lag1: float | None  # corr(H_t, H_{t+1})

    def meaning(self) -> str:
        """One sentence on what the figures say about this input."""
        if self.alpha_accept is None or self.entropy_lag1 is None:
            return (f"{self.rounds} rounds with a recorded confidence: too few (or too uniform) to test the "
                    "premise on this input.")  # fmt: skip
        predicts = _strength(self.alpha_accept)
        persists = _strength(self.entropy_lag1)
        return (
            f"On these {self.rounds} rounds the draft's confidence {predicts} predicts how much is accepted "
            f"(r = {self.alpha_accept:+.2f}) and its entropy {persists} carries over to the next round "
            f"(r = {self.entropy_lag1:+.2f}): "
            + ("the premise holds here, so shaping the tree by entropy can pay."
               if self.alpha_accept >= 0.3 and self.entropy_lag1 >= 0.3
               else "the premise is weak here, so an entropy-shaped tree has little to go on.")
        )  # fmt: skip


def _strength(r: float) -> str:
    if r >= 0.5:
        return "strongly"
    if r >= 0.3:
        return "moderately"
    if r > 0.1:
        return "weakly"
    return "hardly (or inversely)"


def premise_of(records: Sequence[RoundRecord]) -> Premise:
    """The premise on a run's decode rounds that recorded α and the entropy (SAGE's rounds)."""
    rounds = [r for r in records if r.phase == "decode" and r.alpha is not None and r.entropy is not None]
    alphas = [r.alpha for r in rounds if r.alpha is not None]
    accepted = [float(r.accepted_length) for r in rounds]
    entropies = [r.entropy for r in rounds if r.entropy is not None]
    lag = pearson(entropies[:-1], entropies[1:]) if len(entropies) > MIN_ROUNDS else None
    return Premise(len(rounds), pearson(alphas, accepted), lag)
