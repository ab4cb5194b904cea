"""SAGE's tree policy: confidence from draft entropy, tree shape from confidence.

Paper §3.2 (entropy-guided tree shape) and §3.3 (the acceptance window that
moves D_max). Pure functions of numbers, so each rule is checked by hand in
tests/test_policy.py.

Rounding (*open* in the paper): every real-valued size is rounded half up,
and every width is at least 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from .method_settings import SageConfig


def round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


def topk_entropy(top_probs: Sequence[float]) -> float:
    """Shannon entropy (nats) of the top-k draft probabilities, renormalised."""
    total = sum(top_probs)
    if total <= 0:
        raise ValueError("top-k probabilities must not all be zero")
    return -sum((p / total) * math.log(p / total) for p in top_probs if p > 0)


def confidence(top_probs: Sequence[float]) -> tuple[float, float]:
    """(entropy, alpha) with alpha = 1 - H / log k, clamped to [0, 1]."""
    entropy = topk_entropy(top_probs)
    alpha = 1.0 - entropy / math.log(len(top_probs))
    return entropy, min(1.0, max(0.0, alpha))


def planned_depth(alpha: float, depth_min: int, depth_max: int) -> int:
    """D(alpha) = D_min + alpha * (D_max - D_min): confident means deep."""
    return round_half_up(depth_min + alpha * (depth_max - depth_min))


def planned_width(alpha: float, width_min: int, width_max: int) -> int:
    """W(alpha) = W_min + (1 - alpha) * (W_max - W_min): unsure means wide."""
    return max(1, round_half_up(width_min + (1.0 - alpha) * (width_max - width_min)))


def level_width(root_width: int, level: int, parent_prob: float) -> int:
    """W_l = W(alpha) * (1 / l) * (0.5 + P_parent) for levels l >= 2.

    *open*: P_parent is the parent's own draft probability (given its
    parent), not its cumulative probability.
    """
    if level == 1:
        return root_width
    return max(1, round_half_up(root_width * (0.5 + parent_prob) / level))


def level_threshold(level: int, depth: int, base: float) -> float:
    """A node at `level` is kept only if its cumulative probability exceeds this."""
    return base * level / depth


class Candidate(NamedTuple):
    """A possible child: its parent (a node index, or -1 for the root). A named tuple: a level
    builds dozens of them per draft forward."""

    parent: int
    token: int
    prob: float
    cumulative: float


@dataclass(frozen=True)
class Expansion:
    """A node that is expanded at this level, with the draft's top-k after it."""

    node: int
    prob: float
    cumulative: float
    top_tokens: tuple[int, ...]
    top_probs: tuple[float, ...]


CutRule = Literal["width", "threshold", "budget"]


class Cut(NamedTuple):
    """A candidate the level rule left out, and the rule that cut it."""

    candidate: Candidate
    rule: CutRule


#: Cut candidates a `LevelDecision` lists (best first); the counts per rule are never capped.
CUT_LISTED = 4


@dataclass(frozen=True)
class LevelDecision:
    """One level of SAGE's tree, with the numbers its rules used (the teaching mode shows them).

    `widths` holds, per expanded parent (node index, -1 = the root), its P_parent and the
    W_l it offered; `cut` the best `CUT_LISTED` candidates left out, best first, and
    `cut_counts` how many each rule cut (width, threshold, budget).
    """

    level: int
    threshold: float
    widths: tuple[tuple[int, float, int], ...]
    kept: tuple[Candidate, ...]
    cut: tuple[Cut, ...]
    cut_counts: tuple[int, int, int]

    def cut_count(self, rule: CutRule) -> int:
        return self.cut_counts[("width", "threshold", "budget").index(rule)]


def judge_level(
    frontier: Sequence[Expansion],
    level: int,
    root_width: int,
    depth: int,
    budget: int,
    threshold_base: float,
) -> LevelDecision:
    """Pick the nodes of one tree level (paper §3.2), saying why the other candidates were cut.

    Each expanded node offers its top W_l children (the rest of its top-k are cut by
    *width*); a child is kept if its cumulative probability clears the level's threshold
    (else cut by *threshold*). Under the node budget, children are taken best-first by
    cumulative probability across the whole level (*open*: so siblings are not starved by
    the first parent; the rest are cut by *budget*). At level 1 the best child is always
    kept, so a tree is never empty.

    This runs once per draft level, in Python: only the candidates that can be kept or listed
    among the best cuts are built (a node's children beyond W_l are in rank order, so at most
    `CUT_LISTED` of them per node can be listed); the cuts are counted, not built.
    """
    threshold = level_threshold(level, depth, threshold_base)
    offered: list[Candidate] = []
    beyond_width: list[Candidate] = []
    widths: list[tuple[int, float, int]] = []
    width_cuts = 0
    for node in frontier:
        width = level_width(root_width, level, node.prob)
        widths.append((node.node, node.prob, width))
        parent, cumulative, tokens, probs = node.node, node.cumulative, node.top_tokens, node.top_probs
        offered += [
            Candidate(parent, tokens[r], probs[r], cumulative * probs[r]) for r in range(min(width, len(tokens)))
        ]
        listed = range(width, min(len(tokens), width + CUT_LISTED))
        beyond_width += [Candidate(parent, tokens[r], probs[r], cumulative * probs[r]) for r in listed]
        width_cuts += max(len(tokens) - width, 0)
    offered.sort(key=lambda c: -c.cumulative)
    cleared = sum(1 for c in offered if c.cumulative > threshold)  # offered is best first
    chosen = offered[: min(cleared, max(budget, 0))]
    if not chosen and level == 1 and offered and budget > 0:
        chosen = offered[:1]
    rest = offered[len(chosen) :]
    budget_cuts = max(cleared - len(chosen), 0)
    cut = [Cut(c, "budget" if c.cumulative > threshold else "threshold") for c in rest[:CUT_LISTED]]
    cut += [Cut(c, "width") for c in beyond_width]
    cut.sort(key=lambda c: -c.candidate.cumulative)
    counts = (width_cuts, len(rest) - budget_cuts, budget_cuts)
    return LevelDecision(level, threshold, tuple(widths), tuple(chosen), tuple(cut[:CUT_LISTED]), counts)


def choose_level(
    frontier: Sequence[Expansion],
    level: int,
    root_width: int,
    depth: int,
    budget: int,
    threshold_base: float,
) -> list[Candidate]:
    """The nodes `judge_level` keeps at one level."""
    return list(judge_level(frontier, level, root_width, depth, budget, threshold_base).kept)


@dataclass(frozen=True)
class DepthWindow:
    """The window of recent acceptance lengths that moves D_max (paper §3.3).

    Once `window` rounds are in, a mean below `lower_below` lowers D_max by
    one step and a mean above `raise_above` raises it, within
    [depth_min, depth_max_limit]; then a fresh window starts.
    """

    depth_max: int
    recent: tuple[int, ...] = ()

    def after(self, accepted_length: int, config: SageConfig) -> DepthWindow:
        recent = (*self.recent, accepted_length)
        if len(recent) < config.window:
            return DepthWindow(self.depth_max, recent)
        mean = sum(recent) / len(recent)
        depth_max = self.depth_max
        if mean < config.lower_below:
            depth_max -= config.depth_max_step
        elif mean > config.raise_above:
            depth_max += config.depth_max_step
        depth_max = min(config.depth_max_limit, max(config.depth_min, depth_max))
        return DepthWindow(depth_max, ())


def plan_template(
    alpha: float,
    depth_max: int,
    level_probs: Sequence[Sequence[float]],
    config: SageConfig,
) -> tuple[tuple[int, ...], ...]:
    """Plan a rank template before drafting (paper Algorithm 1; shape="template").

    The previous round's draft distributions stand in for this round's:
    `level_probs[l - 1]` is the mean top-k distribution of the nodes expanded
    at level l last round (the deepest one is reused below it). The same
    level rule as the online growth is applied to ranks instead of tokens.
    """
    depth = planned_depth(alpha, config.depth_min, depth_max)
    width = planned_width(alpha, config.width_min, config.width_max)
    paths: list[tuple[int, ...]] = []
    frontier = [Expansion(-1, 1.0, 1.0, tuple(range(len(level_probs[0]))), tuple(level_probs[0]))]
    for level in range(1, depth + 1):
        chosen = choose_level(frontier, level, width, depth, config.node_budget - len(paths), config.threshold_base)
        if not chosen:
            break
        start = len(paths)
        for candidate in chosen:
            parent_path = () if candidate.parent == -1 else paths[candidate.parent]
            paths.append((*parent_path, candidate.token))
        probs = tuple(level_probs[min(level, len(level_probs) - 1)])
        frontier = [
            Expansion(start + i, c.prob, c.cumulative, tuple(range(len(probs))), probs) for i, c in enumerate(chosen)
        ]
    order = sorted(range(len(paths)), key=lambda i: (len(paths[i]), i))
    return tuple(paths[i] for i in order)
