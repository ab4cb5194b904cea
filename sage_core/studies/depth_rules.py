"""Which signal should set how deep a round trusts its draft: chains at equal node budgets.

A one-pass draft gives every depth's distribution in the same forward, so a rule can read a confidence
signal at each depth and stop the round's chain where the draft stops being sure. Which signal? This module
simulates greedy chains under depth rules on recorded draft signals, and compares the rules at the same mean
node count (the same verification work), so that a rule wins only by putting its nodes where they are accepted.

Data (`Answer`): the target's greedy answer y_0 .. y_{T-1}, and per round start t (y_0 .. y_t committed, the
root y_t) the draft's top-k at depths 1 .. K (`DepthTop`): from a one-pass draft's block (its marginals), or,
for a sequential draft, its next-token distributions along the target's answer (teacher-forced: the chain it
would draft, exactly, up to the first depth it misses, which is all the accepted length depends on; deeper
depths' signals are read after the target's tokens, not the draft's own).

The rules (`RULES`), each with one knob swept to trace its curve of accepted length against nodes:

- `fixed`: the same depth every round (sage-frozen's kind of tree: no signal);
- `root entropy`: SAGE's D(α) from the root's entropy alone, α = 1 - H / log k (the paper's rule);
- `entropy`: trust depth d while every depth up to d has entropy at most h (SAGE's α read per depth);
- `margin`: ... while every depth's top-1 leads its runner-up by at least m (JetSpec's rule);
- `probability`: ... while the product of the top-1 probabilities stays at least c (SAGE's threshold θ);
- `cost`: the depth with the most expected tokens per millisecond by the pair's cost curve, the marginal
  cost scaled by λ (SMART / sage-cost on a chain; λ = 1 is the curve as measured).

Simulation: from t = 0, a rule picks L; the round accepts the leading depths whose top-1 is the target's
token (at most L, at most what is left) and adds the bonus; t moves by accepted + 1.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..backends import open_backend
from ..config import DecodeConfig
from ..cost_curve import CostCurve
from ..decode import decode
from ..drafting import draft_block, feed_committed, top_candidates
from ..media import Media
from ..models import ModelPair
from ..policy import confidence, planned_depth
from ..prepared import prepare_inputs, with_draft_inputs


@dataclass(frozen=True)
class DepthTop:
    """The draft's top-k at one depth: tokens and probabilities, most likely first."""

    tokens: tuple[int, ...]
    probs: tuple[float, ...]

    @property
    def margin(self) -> float:
        return self.probs[0] - (self.probs[1] if len(self.probs) > 1 else 0.0)

    @property
    def entropy(self) -> float:
        return confidence(self.probs)[0]


@dataclass(frozen=True)
class Answer:
    """One answer: its kind, the target's tokens, and per round start t (t = 0 .. T - 2) the draft's top-k at
    depths 1 .. K (`rounds[t][d - 1]` predicts `tokens[t + d]`)."""

    kind: str
    tokens: tuple[int, ...]
    rounds: tuple[tuple[DepthTop, ...], ...]


#: A rule: (the round's depths, the knob) -> how many depths to draft (a chain of that many nodes).
Rule = Callable[[Sequence[DepthTop], float], int]


def _leading(depths: Sequence[DepthTop], keep: Callable[[int, DepthTop], bool]) -> int:
    count = 0
    for d, top in enumerate(depths):
        if not keep(d, top):
            break
        count += 1
    return max(1, count)


def fixed_rule(depths: Sequence[DepthTop], knob: float) -> int:
    return max(1, min(len(depths), round(knob)))


def root_entropy_rule(depths: Sequence[DepthTop], knob: float) -> int:
    alpha = confidence(depths[0].probs)[1]
    return max(1, min(len(depths), planned_depth(alpha, 1, round(knob))))


def entropy_rule(depths: Sequence[DepthTop], knob: float) -> int:
    return _leading(depths, lambda d, top: top.entropy <= knob)


def margin_rule(depths: Sequence[DepthTop], knob: float) -> int:
    return _leading(depths, lambda d, top: top.margin >= knob)


def probability_rule(depths: Sequence[DepthTop], knob: float) -> int:
    products = [math.prod(t.probs[0] for t in depths[: d + 1]) for d in range(len(depths))]
    return _leading(depths, lambda d, top: products[d] >= knob)


RULES: dict[str, Rule] = {
    "fixed": fixed_rule,
    "root entropy": root_entropy_rule,
    "entropy": entropy_rule,
    "margin": margin_rule,
    "probability": probability_rule,
}
#: Each rule's knobs, from the shallowest trees to the deepest (the cost rule's: `COST_SCALES`).
KNOBS: dict[str, tuple[float, ...]] = {
    "fixed": tuple(float(d) for d in range(1, 17)),
    "root entropy": tuple(float(d) for d in range(1, 17)),
    "entropy": (0.0005, 0.001, 0.003, 0.01, 0.03, 0.06, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.4),
    "margin": (0.999, 0.995, 0.99, 0.97, 0.95, 0.9, 0.8, 0.7, 0.5, 0.3, 0.1, 0.0),
    "probability": (0.999, 0.99, 0.97, 0.95, 0.9, 0.8, 0.7, 0.5, 0.3, 0.1, 0.03, 0.0),
}
COST_SCALES = (8.0, 4.0, 2.0, 1.5, 1.0, 0.75, 0.5, 0.25, 0.1, 0.0)


@dataclass(frozen=True)
class Costs:
    """What a chain round costs (ms), by the pair's curve: a sequential draft runs the feed and one forward per
    depth below the deepest; a one-pass draft (`block` > 0) one forward over the feed and the masks."""

    curve: CostCurve
    block: int = 0

    def round_ms(self, fed: int, depth: int) -> float:
        if self.block:
            drafting = self.curve.draft_at(fed + self.block - 1)
        else:
            drafting = self.curve.draft_at(fed) + (depth - 1) * self.curve.draft_at(1)
        return drafting + self.curve.verify_at(depth)


def cost_rule(costs: Costs, fed: int) -> Rule:
    """The depth with the most expected tokens (1 + the sum of the top-1 path probabilities) per ms, the
    marginal cost over a one-node chain scaled by the knob."""

    def rule(depths: Sequence[DepthTop], knob: float) -> int:
        base = costs.round_ms(fed, 1)
        best, best_rate, expected, path = 1, -1.0, 1.0, 1.0
        for depth, top in enumerate(depths, start=1):
            path *= top.probs[0]
            expected += path
            rate = expected / (base + knob * (costs.round_ms(fed, depth) - base))
            if rate > best_rate:
                best, best_rate = depth, rate
        return best

    return rule


@dataclass(frozen=True)
class Tally:
    """One answer under one rule and knob: rounds, nodes drafted, tokens accepted, tokens made, modelled ms."""

    rounds: int
    nodes: int
    accepted: int
    tokens: int
    ms: float


def simulate(answer: Answer, rule: Rule | str, knob: float, costs: Costs) -> Tally:
    """Decode `answer` with chains whose depth `rule` picks each round (`rule`: a `RULES` name, or "cost")."""
    t, rounds, nodes, accepted, ms, fed = 0, 0, 0, 0, 0.0, 1
    last = len(answer.tokens) - 1
    while t < last:
        depths = answer.rounds[t]
        chosen = cost_rule(costs, fed) if rule == "cost" else RULES[rule] if isinstance(rule, str) else rule
        depth = min(chosen(depths, knob), len(depths))
        hits = 0
        while hits < depth and t + hits + 1 <= last and depths[hits].tokens[0] == answer.tokens[t + hits + 1]:
            hits += 1
        rounds, nodes, accepted = rounds + 1, nodes + depth, accepted + hits
        ms += costs.round_ms(fed, depth)
        fed = hits + 1
        t += hits + 1
    return Tally(rounds, nodes, accepted, last, ms)


@dataclass(frozen=True)
class Point:
    """A group's figures under one rule and knob: mean nodes and accepted tokens a round, modelled speedup."""

    nodes: float
    tau: float
    speedup: float


def pooled(tallies: Sequence[Tally], one_token_ms: float) -> Point:
    rounds = sum(t.rounds for t in tallies) or 1
    ms = sum(t.ms for t in tallies) or 1.0
    return Point(
        sum(t.nodes for t in tallies) / rounds,
        sum(t.accepted for t in tallies) / rounds,
        sum(t.tokens for t in tallies) * one_token_ms / ms,
    )


def at_budget(points: Sequence[Point], nodes: float) -> Point | None:
    """The rule's curve read at `nodes` a round (linear between its two nearest knobs); None outside it."""
    ordered = sorted(points, key=lambda p: p.nodes)
    for low, high in itertools.pairwise(ordered):
        if low.nodes <= nodes <= high.nodes:
            share = 0.0 if high.nodes == low.nodes else (nodes - low.nodes) / (high.nodes - low.nodes)
            return Point(
                nodes,
                low.tau + share * (high.tau - low.tau),
                low.speedup + share * (high.speedup - low.speedup),
            )
    return None


def knobs_of(rule: str) -> tuple[float, ...]:
    return COST_SCALES if rule == "cost" else KNOBS[rule]


@dataclass(frozen=True)
class Comparison:
    """One group at one budget: each rule's τ and modelled speedup, and its τ gain over the fixed depth with a
    95 % bootstrap interval (answers resampled)."""

    group: str
    answers: int
    budget: float
    tau: dict[str, float]
    speedup: dict[str, float]
    gain: dict[str, tuple[float, float, float]]  # rule -> (gain, low, high) in τ over `fixed`


def compare(
    answers: Sequence[Answer], costs: Costs, budget: float, group: str, resamples: int = 200, seed: int = 0
) -> Comparison | None:
    """The rules on these answers at `budget` nodes a round (None when the fixed depth cannot reach it)."""
    rules = [*RULES, "cost"]
    tallies = {(r, k): [simulate(a, r, k, costs) for a in answers] for r in rules for k in knobs_of(r)}
    one = costs.curve.one_token_ms

    def read(indices: Sequence[int]) -> dict[str, Point | None]:
        return {
            r: at_budget([pooled([tallies[(r, k)][i] for i in indices], one) for k in knobs_of(r)], budget)
            for r in rules
        }

    every = read(range(len(answers)))
    base = every["fixed"]
    if base is None:
        return None
    rng = random.Random(seed)
    draws: dict[str, list[float]] = {r: [] for r in rules}
    for _ in range(resamples):
        sample = [rng.randrange(len(answers)) for _ in answers]
        read_now = read(sample)
        fixed_now = read_now["fixed"]
        for r in rules:
            point = read_now[r]
            if point is not None and fixed_now is not None:
                draws[r].append(point.tau - fixed_now.tau)
    gain: dict[str, tuple[float, float, float]] = {}
    for r in rules:
        point = every[r]
        if point is not None and len(draws[r]) >= resamples // 2:
            ordered = sorted(draws[r])
            low, high = ordered[int(0.025 * len(ordered))], ordered[int(0.975 * len(ordered)) - 1]
            gain[r] = (point.tau - base.tau, low, high)
    return Comparison(
        group,
        len(answers),
        budget,
        {r: p.tau for r, p in every.items() if p is not None},
        {r: p.speedup for r, p in every.items() if p is not None},
        gain,
    )


def reach(answers: Sequence[Answer], depth_count: int) -> tuple[list[float], list[float]]:
    """Per depth d: how often the draft's top-1 at depth d is the target's token (marginal), and how often a
    chain accepts at least d tokens (every depth up to d right), over every round start."""
    right, reached, seen = [0] * depth_count, [0] * depth_count, [0] * depth_count
    for answer in answers:
        last = len(answer.tokens) - 1
        for t, depths in enumerate(answer.rounds):
            chain = True
            for d in range(min(depth_count, len(depths), last - t)):
                hit = depths[d].tokens[0] == answer.tokens[t + d + 1]
                chain = chain and hit
                seen[d] += 1
                right[d] += hit
                reached[d] += chain
    return [r / s if s else math.nan for r, s in zip(right, seen, strict=True)], [
        r / s if s else math.nan for r, s in zip(reached, seen, strict=True)
    ]


# -- recording an answer's signals ------------------------------------------------------------------------


def target_answer(pair: ModelPair, media: Media, prompt: str, max_new_tokens: int) -> tuple[int, ...]:
    """The target's greedy answer (plain decoding: what every lossless method makes)."""
    return decode(pair, media, prompt, DecodeConfig("ar", max_new_tokens)).run_to_end().token_ids


def draft_signals(
    pair: ModelPair, media: Media, prompt: str, tokens: Sequence[int], depth_count: int, k: int = 4
) -> tuple[tuple[DepthTop, ...], ...]:
    """Per round start t (0 .. len(tokens) - 2), the pair's draft's top-k at depths 1 .. `depth_count` (a
    one-pass draft: at most its block): its block after tokens[: t + 1], or (a sequential draft) its
    next-token distributions after tokens[: t + d] (teacher-forced)."""
    prepared = with_draft_inputs(pair, prepare_inputs(pair, media, prompt, with_draft=True))
    assert prepared.draft is not None
    backend = open_backend(pair.draft, "fast", draft=True)
    one_pass, vocab = pair.draft.one_pass, pair.shared_vocab_size
    with torch.inference_mode():
        state = backend.prefill(prepared.draft, len(tokens) + depth_count + 8).state
        if one_pass is not None:
            return tuple(
                tuple(
                    DepthTop(*top)
                    for top in top_candidates(draft_block(backend, state, [token], one_pass), k, vocab)[:depth_count]
                )
                for token in tokens[:-1]
            )
        after = [top_candidates(feed_committed(backend, state, [token])[None], k, vocab)[0] for token in tokens[:-1]]
    return tuple(tuple(DepthTop(*top) for top in after[t : t + depth_count]) for t in range(len(after)))
