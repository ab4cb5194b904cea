"""The true why of one race, from its own records: what depth, reading the entropy, the node budget and the
prefill each bought SAGE against the other sides.

- depth: each side's deepest tree (SD-Tree's is its cap; SAGE's is D(α) each round) and how often a round
  accepted its tree's full depth (a round that did could have used a deeper tree);
- reacting to entropy: SAGE's α (its mean and its range) and, when the lane holding SAGE's α raced (the
  registry's `holder("sage", "alpha")`: sage-frozen), τ against it and the α it held (a race whose α never moves
  is credited with nothing);
- budget: nodes verified per round and what they cost on the cost curve in use;
- prefill and decode: as measured, the prefill the same work for every side that drafts.

Every figure is recomputed from the records by tests/test_explain_numbers.py.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..cost_curve import CostCurve
from ..methods import drafts, holder, short_name
from ..records import RoundRecord


@dataclass(frozen=True)
class SideAccount:
    """One side's figures: rounds, τ, its deepest tree, how often a round accepted the full depth of its tree,
    nodes verified per round and their cost on the curve, the prefill and the median round, alpha's mean and
    range (None where no α was read)."""

    method: str
    rounds: int
    tau: float
    depth_cap: int
    full_depth_rounds: int
    mean_depth: float
    nodes_per_round: float
    verify_ms_per_round: float | None
    prefill_ms: float
    median_round_ms: float
    alpha_mean: float | None
    alpha_range: tuple[float, float] | None

    @property
    def ms_per_token(self) -> float:
        """A median round's time over the tokens a round brings on average (τ accepted and the bonus)."""
        return self.median_round_ms / (self.tau + 1)

    @property
    def plain(self) -> bool:
        """Whether it decoded as plain decoding does: no tree in any round (plain decoding itself, or a method
        whose rule refused every candidate)."""
        return self.depth_cap == 0

    def sentence(self) -> str:
        if self.plain:
            rounds = f"{self.rounds} round{'s' * (self.rounds != 1)}"
            what = (
                "plain decoding: no draft, one token per target forward"
                if not drafts(self.method)
                else f"its rule refused every candidate in {rounds if self.rounds == 1 else 'all ' + rounds} "
                "(no node's chance of "
                "acceptance paid for its verification), so it decoded as plain decoding does, one token per "
                "target forward"
            )
            return (
                f"{self.method}: {what}, {rounds}; a round {self.median_round_ms:.1f} ms (median); "
                f"prefill {self.prefill_ms:.0f} ms"
            )
        alpha = (
            f"; α {self.alpha_mean:.2f} on average ({self.alpha_range[0]:.2f}–{self.alpha_range[1]:.2f})"
            if self.alpha_mean is not None and self.alpha_range is not None
            else ""
        )
        cost = f" ({self.verify_ms_per_round:.1f} ms on the curve)" if self.verify_ms_per_round is not None else ""
        rounds = f"{self.rounds} round{'s' * (self.rounds != 1)}"
        return (
            f"{self.method}: τ {self.tau:.2f} over {rounds}; trees up to {self.depth_cap} deep "
            f"({self.mean_depth:.1f} on average), the full depth accepted in {self.full_depth_rounds} of {rounds}; "
            f"{self.nodes_per_round:.1f} nodes verified a round{cost}; "
            f"prefill {self.prefill_ms:.0f} ms, a round {self.median_round_ms:.1f} ms (median), "
            f"{self.ms_per_token:.1f} ms a token{alpha}"
        )


def side_account(method: str, records: Sequence[RoundRecord], curve: CostCurve | None = None) -> SideAccount | None:
    """One side's account (None before its first decode round)."""
    rounds = [r for r in records if r.phase == "decode"]
    if not rounds:
        return None
    alphas = [r.alpha for r in rounds if r.alpha is not None and r.tree_tokens]
    drafted = [r for r in rounds if r.tree_tokens]
    return SideAccount(
        method=method,
        rounds=len(rounds),
        tau=statistics.fmean(r.accepted_length for r in rounds),
        depth_cap=max((r.depth for r in rounds), default=0),
        full_depth_rounds=sum(1 for r in drafted if r.accepted_length == r.depth),
        mean_depth=statistics.fmean(r.depth for r in rounds),
        nodes_per_round=statistics.fmean(r.node_count for r in rounds),
        verify_ms_per_round=statistics.fmean(curve.verify_at(r.node_count) for r in rounds) if curve else None,
        prefill_ms=1000 * sum(r.round_seconds for r in records if r.phase == "prefill"),
        median_round_ms=1000 * statistics.median(r.round_seconds for r in rounds),
        alpha_mean=statistics.fmean(alphas) if alphas else None,
        alpha_range=(min(alphas), max(alphas)) if alphas else None,
    )


@dataclass(frozen=True)
class RaceAccount:
    """Every side's account, and what reacting to entropy bought (SAGE's τ minus sage-frozen's, when both
    raced; the α sage-frozen held), and the side the why is told against when the race's headline names one."""

    sides: tuple[SideAccount, ...]
    reacting_delta_tau: float | None
    frozen_alpha: float | None
    against: str | None = None  # the side the race's headline compares SAGE with, so the why is told against it

    def dearer_reason(self, lead: str, rival: str) -> str:
        """Why `lead`'s tokens cost more than `rival`'s, from their tokens and time (`cost_reason`: "extra
        tokens" only where it accepted more); "" unless both sides are accounted and the lead's are dearer."""
        mine, theirs = self.side(lead), self.side(rival)
        if mine is None or theirs is None or cost_per_token(mine, theirs) != "dearer":
            return ""
        return cost_reason(mine, theirs)

    def side(self, method: str) -> SideAccount | None:
        return next((s for s in self.sides if s.method == method), None)

    def lines(self) -> list[str]:
        """The account in plain sentences: one per side, then what reacting to entropy bought."""
        out = [s.sentence() + "." for s in self.sides]
        sage = self.side("sage")
        if self.reacting_delta_tau is not None:
            held = f" held at {self.frozen_alpha:.2f}" if self.frozen_alpha is not None else " held"
            out.append(
                f"Reacting to entropy: SAGE against itself with α{held}, Δτ {self.reacting_delta_tau:+.2f} a round."
            )
        elif sage is not None and sage.alpha_range is not None and sage.alpha_range[0] == sage.alpha_range[1]:
            out.append("Reacting to entropy bought nothing here: SAGE's α never moved.")
        return out

    def rival(self) -> SideAccount | None:
        """The side SAGE's why is told against: the headline's main rival (`against`) when it raced, else SD-Tree
        when it raced, else the first other side that drafts (sage-frozen, SAGE's own ablation, last), else plain
        decoding (or a side that made no tree)."""
        others = [s for s in self.sides if s.method != "sage"]
        named = next((s for s in others if s.method == self.against), None)
        if named is not None:
            return named
        frozen = holder("sage", "alpha")
        others.sort(key=lambda s: (s.plain, s.method != "static", s.method == frozen))
        return others[0] if others else None

    def why(self) -> str:
        """Why SAGE went as it did against its rival, in one sentence of this account's own figures: depth (each
        side's deepest tree and how often the rival accepted all of it), τ, nodes verified, and what reacting to
        the entropy bought (measured only when sage-frozen raced); "" without SAGE and a rival."""
        sage, rival = self.side("sage"), self.rival()
        if sage is None or rival is None:
            return ""
        name = short_name(rival.method)
        if rival.plain:
            parts = [
                f"{name} made one token per target forward ({'no draft' if not drafts(rival.method) else 'no tree'})"
                f", SAGE {sage.tau + 1:.2f} a round with trees up to {sage.depth_cap} deep",
            ]
        else:
            parts = [
                f"SAGE's trees went up to {sage.depth_cap} deep ({sage.mean_depth:.1f} on average) against "
                f"{name}'s {rival.depth_cap}, and {name} accepted its full depth in {rival.full_depth_rounds} of its "
                f"{rival.rounds} round{'s' * (rival.rounds != 1)}",
                f"τ {sage.tau:.2f} against {rival.tau:.2f}, with {sage.nodes_per_round:.1f} nodes verified a round "
                f"against {rival.nodes_per_round:.1f}",
            ]
        parts.append(per_token(sage, rival, name))
        if self.reacting_delta_tau is not None:
            held = f" at {self.frozen_alpha:.2f}" if self.frozen_alpha is not None else ""
            parts.append(f"reacting to the entropy bought Δτ {self.reacting_delta_tau:+.2f} against α held{held}")
        elif sage.alpha_range is not None and sage.alpha_range[0] == sage.alpha_range[1]:
            parts.append("reacting to the entropy bought nothing: α never moved")
        else:
            parts.append("what reacting to the entropy bought is measured only beside SAGE, α frozen")
        return "Why: " + "; ".join(parts) + "."

    def why_brief(self) -> str:
        """`why` in one short line (the talk view's status box holds two): tokens a round and the cost of a token,
        each side's; "" without SAGE and a rival."""
        sage, rival = self.side("sage"), self.rival()
        if sage is None or rival is None:
            return ""
        verdict = {
            "same": "about the same per token, neither faster",
            "cheaper": "SAGE's rounds cheaper per token",
            "dearer": "SAGE's rounds dearer per token",
        }[cost_per_token(sage, rival)]
        return (
            f"Why: {sage.tau + 1:.2f} tokens a round against {rival.tau + 1:.2f} ({short_name(rival.method)}); "
            f"{sage.ms_per_token:.1f} ms a token against {rival.ms_per_token:.1f}: {verdict}."
        )

    def as_dict(self) -> dict:
        return {
            "sides": {s.method: {k: v for k, v in vars(s).items() if k != "method"} for s in self.sides},
            "reacting_delta_tau": self.reacting_delta_tau,
            "frozen_alpha": self.frozen_alpha,
            "lines": self.lines(),
            "why": self.why(),
        }


def no_tree_note(method: str, records: Sequence[RoundRecord]) -> str:
    """One sentence when a method that drafts made no tree in any decode round (its rule refused every
    candidate: SMART or sage-cost when no node's chance of acceptance pays for its verification), so it
    decoded as plain decoding does; "" otherwise."""
    rounds = [r for r in records if r.phase == "decode"]
    if not drafts(method) or not rounds or any(r.tree_tokens for r in rounds):
        return ""
    return (
        f"{short_name(method)} made no tree in any of its {len(rounds)} rounds: its rule refused every candidate "
        "(no node's chance of acceptance paid for its verification on the cost curve), so it decoded as plain "
        "decoding does, one token per target forward."
    )


#: Below this relative gap two sides' time per token is "about the same" (one race, no interval).
SAME_COST = 0.03


def per_token(sage: SideAccount, rival: SideAccount, name: str) -> str:
    """What decides the race after the prefill, true whichever side won: each side's median round over the
    tokens it brought, which was cheaper per token, and why (`cost_reason`)."""
    mine, theirs = sage.ms_per_token, rival.ms_per_token
    figures = (
        f"a round {sage.median_round_ms:.1f} ms for {sage.tau + 1:.2f} tokens against {rival.median_round_ms:.1f} ms "
        f"for {rival.tau + 1:.2f}: {mine:.1f} ms a token against {theirs:.1f}"
    )
    verdict = {
        "same": "about the same per token, so neither was faster after the prefill",
        "cheaper": f"so SAGE's rounds were cheaper per token than {name}'s",
        "dearer": f"so SAGE's rounds were dearer per token than {name}'s",
    }[cost_per_token(sage, rival)]
    return f"{figures}, {verdict}: {cost_reason(sage, rival)}"


def compared(mine: float, theirs: float, places: int) -> int:
    """1, 0 or -1: `mine` above, equal to or below `theirs` as both are printed (to `places` decimals)."""
    a, b = round(mine, places), round(theirs, places)
    return (a > b) - (a < b)


def cost_reason(sage: SideAccount, rival: SideAccount) -> str:
    """Why SAGE's time per token came out as it did, from what it is made of: the tokens a round brought (τ, as
    printed) and a round's median time (as printed), each against the rival's. Only what those figures show:
    "extra tokens" only where SAGE accepted more per round, "fewer" or "as many" where it did not."""
    tau = f"τ {sage.tau:.2f} against {rival.tau:.2f}"
    tokens = compared(sage.tau, rival.tau, 2)
    longer = compared(sage.median_round_ms, rival.median_round_ms, 1)
    cost = cost_per_token(sage, rival)
    if tokens == 0:
        rounds = {1: "in longer rounds", 0: "in rounds as long", -1: "in shorter rounds"}[longer]
        return f"it accepted as many tokens per round ({tau}) {rounds}"
    if tokens < 0:
        if cost == "dearer":
            tail = {1: ", in longer rounds", 0: "", -1: ", which its shorter rounds did not make up for"}[longer]
            return f"it accepted fewer tokens per round: {tau}{tail}"
        if longer < 0:
            just = " just" if cost == "same" else ""
            return f"its shorter rounds{just} made up for fewer tokens per round ({tau})"
        return f"it accepted fewer tokens per round ({tau}) {'in longer rounds' if longer else 'in rounds as long'}"
    if longer <= 0:
        return f"it accepted more tokens per round ({tau}) {'in shorter rounds' if longer else 'in rounds as long'}"
    return {
        "dearer": "its rounds cost more than the extra tokens bought",
        "same": f"its extra tokens ({tau}) just paid for its longer rounds",
        "cheaper": f"its extra tokens ({tau}) paid for its longer rounds",
    }[cost]


def cost_per_token(sage: SideAccount, rival: SideAccount) -> Literal["same", "cheaper", "dearer"]:
    """SAGE's cost per token against its rival's: about the same (within `SAME_COST`), cheaper or dearer."""
    mine, theirs = sage.ms_per_token, rival.ms_per_token
    if theirs > 0 and abs(mine - theirs) / theirs < SAME_COST:
        return "same"
    return "cheaper" if mine < theirs else "dearer"


def race_account(
    lanes: Mapping[str, Sequence[RoundRecord]],
    curve: CostCurve | None = None,
    frozen_alpha: float | None = None,
    against: str | None = None,
) -> RaceAccount:
    """The account of a race's sides (lanes in column order), on the cost curve in use; its why told against
    `against` when given (the race's headline's main rival)."""
    sides = tuple(a for m, records in lanes.items() if (a := side_account(m, records, curve)) is not None)
    by_method = {s.method: s for s in sides}
    frozen_lane = holder("sage", "alpha")  # SAGE itself with α held (sage-frozen): what reacting to entropy bought
    sage, frozen = by_method.get("sage"), by_method.get(frozen_lane) if frozen_lane else None
    delta = sage.tau - frozen.tau if sage is not None and frozen is not None else None
    return RaceAccount(sides, delta, frozen_alpha if frozen is not None else None, against)
