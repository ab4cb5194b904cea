"""The pair's cost curve as data: what a tree of N nodes and a draft level of N nodes cost, in milliseconds,
with each time's spread, where and when it was measured, and the checks that say whether a method may decide
from it. Measuring it is `studies/costs.py`'s work (timing on the device); reading it is here, with no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .records import RoundRecord

COST_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
#: A time is noise when its runs' interquartile range is above this share of their median (`CostCurve.noise`),
#: over `PRECISION_PASSES` passes; over more passes the bound grows as their square root, so the median's
#: own uncertainty (about 0.3 of the interquartile range over 9 passes) stays under about 8 % of it.
NOISY_SPREAD = 0.25
PRECISION_PASSES = 9
#: ... or when it is dearer than a larger tree's by more than the two spreads and this share of the larger.
MONOTONE_SLACK = 0.1
#: The one-node verification against the one-token step outside which a curve is not a machine's (`problems`).
SANE_RATIOS = (0.5, 5.0)
TREE_WIDTH = 4  # the measured trees: the root's first 4 children, then 4 children per node in order


@dataclass(frozen=True)
class CostCurve:
    """Measured milliseconds: a one-token target step, a verification of N nodes, a draft level of N nodes."""

    device: str
    dtype: str
    backend: str
    sizes: tuple[int, ...]
    one_token_ms: float
    verify_ms: tuple[float, ...]
    draft_level_ms: tuple[float, ...]
    #: The spread of each time: the interquartile range of its `repeats` runs, ms (`measure_cost_spread`;
    #: empty or 0 when the curve was measured without it).
    one_token_spread_ms: float = 0.0
    verify_spread_ms: tuple[float, ...] = ()
    draft_spread_ms: tuple[float, ...] = ()
    repeats: int = 0
    #: Where the curve comes from ("measured" on this machine, or "recorded with the pair" when the
    #: measurement would not settle), when (UTC, ISO 8601), and why a measurement was set aside ("" if none).
    origin: str = "measured"
    measured_at: str = ""
    set_aside: str = ""
    #: The CPU threads torch measured it on (`sage_core.threads`); 0 when not recorded.
    threads: int = 0

    def noise(self) -> tuple[str, ...]:
        """Per size, why its verification time is noise rather than a cost ("" when it is not): a spread
        above `NOISY_SPREAD` of its median, or dearer than a larger tree's time beyond both spreads (and
        `MONOTONE_SLACK`): a bigger tree never costs less, and interference only ever adds time."""
        spread = self.verify_spread_ms or (0.0,) * len(self.sizes)
        out = []
        for i, (size, ms) in enumerate(zip(self.sizes, self.verify_ms, strict=True)):
            dearer = [
                n
                for j, n in enumerate(self.sizes)
                if j > i and ms - self.verify_ms[j] > max(spread[i] + spread[j], MONOTONE_SLACK * self.verify_ms[j])
            ]
            if ms > 0 and spread[i] * self._passes_factor() > NOISY_SPREAD * ms:
                out.append(f"{size} nodes: runs spread over {spread[i] / ms:.0%} of the median{self._over()}")
            elif dearer:
                out.append(f"{size} nodes: dearer than {dearer[-1]} nodes beyond the spread")
            else:
                out.append("")
        return tuple(out)

    def step_noise(self) -> str:
        """Why the one-token step's time is noise ("" when it is not): its spread above `NOISY_SPREAD`."""
        ms = self.one_token_ms
        if ms > 0 and self.one_token_spread_ms * self._passes_factor() > NOISY_SPREAD * ms:
            return (
                f"the one-token step: runs spread over {self.one_token_spread_ms / ms:.0%} of the median{self._over()}"
            )
        return ""

    def _passes_factor(self) -> float:
        """How much a spread weighs against `NOISY_SPREAD`: a median of more passes is surer (its uncertainty
        shrinks as the square root of the passes), so the bound is stated for `PRECISION_PASSES` passes."""
        return math.sqrt(PRECISION_PASSES / self.repeats) if self.repeats > PRECISION_PASSES else 1.0

    def _over(self) -> str:
        return f" over {self.repeats} passes" if self.repeats > PRECISION_PASSES else ""

    @property
    def noisy(self) -> bool:
        return bool(self.step_noise() or any(self.noise()))

    def problems(self) -> tuple[str, ...]:
        """Every reason not to decide from this curve: its noise (`noise`, `step_noise`) and any ratio no
        machine gives (`SANE_RATIOS`): a verification of one node cheaper than half a one-token step or
        dearer than five, the largest tree cheaper than the smallest, a draft level dearer than a target step."""
        found = [why for why in (self.step_noise(), *self.noise()) if why]
        one, verify, draft = self.one_token_ms, self.verify_ms, self.draft_level_ms
        if not (one > 0 and verify and draft and min(verify) > 0 and min(draft) > 0):
            return (*found, "a time that is not positive")
        low, high = SANE_RATIOS
        if not low <= verify[0] / one <= high:
            found.append(f"{self.sizes[0]} nodes cost {verify[0] / one:.2f} one-token steps (sane: {low}-{high})")
        if verify[-1] < verify[0] * (1 - MONOTONE_SLACK):
            found.append(f"{self.sizes[-1]} nodes cost less than {self.sizes[0]}")
        if draft[0] > one:
            found.append("a draft level of one node costs more than the target's one-token step")
        return tuple(found)

    @property
    def trusted(self) -> bool:
        """Whether a method may decide from it: no noise and sane ratios (`problems`)."""
        return not self.problems()

    def label(self) -> str:
        """Which curve this is, where and when: what the page says about the curve in use."""
        when = f" at {self.measured_at}" if self.measured_at else ""
        threads = f", {self.threads} thread{'s' * (self.threads != 1)}" if self.threads else ""
        where = f"{self.device}, {self.dtype}{threads}"
        if self.origin == "measured":
            return f"measured on this machine ({where}){when}"
        aside = f"; this machine's measurement was set aside: {self.set_aside}" if self.set_aside else ""
        return f"{self.origin} ({where}{when}){aside}"

    # What a decode round costs besides its forwards (ms); None: sage-cost learns it from the run's own rounds.
    round_overhead_ms: float | None = None

    def verify_at(self, nodes: int) -> float:
        """A round's verification of `nodes` nodes (0: plain decoding's one-token step)."""
        return self.one_token_ms if nodes == 0 else interpolate(self.sizes, self.verify_ms, nodes)

    def draft_at(self, nodes: int) -> float:
        return interpolate(self.sizes, self.draft_level_ms, max(nodes, 1))

    def round_ms(self, record: RoundRecord) -> float:
        """What a decode round costs by this curve: the draft's feed of the committed tokens, one draft
        level per tree level below the deepest (over that level's nodes), and the verification."""
        tree = record.tree
        if not tree.tokens:
            return self.verify_at(0)
        per_level = [sum(1 for d in tree.depths if d == level) for level in range(1, tree.depth)]
        drafting = self.draft_at(1) + sum(self.draft_at(n) for n in per_level)
        return drafting + self.verify_at(len(tree))

    def predicted_rate(self, records: Sequence[RoundRecord]) -> float | None:
        """Decode-only tokens per second these costs predict for a run's rounds (None without rounds)."""
        rounds = [r for r in records if r.phase == "decode"]
        milliseconds = sum(self.round_ms(r) for r in rounds)
        if not rounds or milliseconds <= 0:
            return None
        return 1000 * sum(len(r.new_tokens) for r in rounds) / milliseconds

    def lines(self) -> list[str]:
        """The curve as text lines (the benchmark prints them)."""
        out = [
            f"verification cost on {self.device} ({self.dtype}, backend {self.backend}): "
            f"one-token step {self.one_token_ms:.2f} ms"
        ]
        rows = zip(self.sizes, self.verify_ms, self.draft_level_ms, self.noise(), strict=True)
        for size, verify, draft, noise in rows:
            ratio = verify / self.one_token_ms if self.one_token_ms > 0 else float("nan")
            flag = f"  [noise: {noise.split(': ', 1)[1]}]" if noise else ""
            out.append(
                f"  {size:>3} nodes: verify {verify:7.2f} ms ({ratio:4.2f} one-token steps), "
                f"draft level {draft:6.2f} ms{flag}"
            )
        return out


def interpolate(sizes: Sequence[int], values: Sequence[float], at: int) -> float:
    """Piecewise linear in the node count; flat below the first size, extended from the last two above."""
    if at <= sizes[0]:
        return values[0]
    for i in range(1, len(sizes)):
        if at <= sizes[i]:
            x0, x1, y0, y1 = sizes[i - 1], sizes[i], values[i - 1], values[i]
            return y0 + (y1 - y0) * (at - x0) / (x1 - x0)
    x0, x1, y0, y1 = sizes[-2], sizes[-1], values[-2], values[-1]
    return y1 + (y1 - y0) * (at - x1) / (x1 - x0)
