"""One round explained with its own numbers: the teaching mode's model (the app renders it).

Every value comes from the round's record (what the decode loop used) or from the
run's SAGE configuration in the trace header; the formulas are only spelled out
beside them. `tests/test_explain.py` checks these values against the policy
functions on recorded rounds of every method.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..method_settings import SageConfig
from ..methods import method_spec
from ..policy import topk_entropy
from ..records import RoundRecord
from ..trees import ROOT, STATIC_TREE

#: "prefill", "plain", SAGE's "sage-first" / "sage-template" / "sage-online", a fixed tree's or a reranked
#: tree's method name ("chain", "static", "dynamic"), or "tree" for any other method's round.
RoundKind = str


@dataclass(frozen=True)
class ParentWidth:
    """The width W_l a node offered its children: W(alpha) * (1 / l) * (0.5 + P_parent), rounded."""

    node: int  # -1 = the root
    parent_prob: float
    raw: float  # before rounding (level 1: W(alpha) itself)
    width: int  # what the rule used


@dataclass(frozen=True)
class LevelExplained:
    level: int
    threshold: float  # theta_l = base * l / D, as the rule applied it
    widths: tuple[ParentWidth, ...]
    kept: int
    cut_by_width: int
    cut_by_threshold: int
    cut_by_budget: int


@dataclass(frozen=True)
class NodeCheck:
    """A drafted node against the target's choice after its parent."""

    node: int
    parent: int
    depth: int
    token: int
    target_choice: int | None  # None when the trace did not record the target's choices
    agreed: bool | None
    accepted: bool
    draft_prob: float = 0.0  # the draft's probability of the node's token after its parent


@dataclass(frozen=True)
class CutCandidate:
    parent: int
    level: int
    token: int
    prob: float
    rule: str


@dataclass(frozen=True)
class RoundExplained:
    method: str
    round: int
    kind: RoundKind
    # The draft's top-k after the root, most likely first.
    top_tokens: tuple[int, ...]
    top_probs: tuple[float, ...]
    # SAGE's confidence and shape (None for the fixed trees).
    entropy: float | None
    alpha: float | None
    depth_min: int
    depth_max: int | None
    depth_raw: float | None  # D_min + alpha * (D_max - D_min)
    depth: int | None  # D(alpha), as used
    width_min: int
    width_max: int
    width_raw: float | None  # W_min + (1 - alpha) * (W_max - W_min)
    width: int | None  # W(alpha), as used
    threshold_base: float
    node_budget: int
    levels: tuple[LevelExplained, ...]
    cut: tuple[CutCandidate, ...]
    # Verification.
    nodes: tuple[NodeCheck, ...]
    root_choice: int | None  # the target's token after the root
    accepted_nodes: tuple[int, ...]
    accepted_tokens: tuple[int, ...]
    bonus_token: int
    # SAGE's acceptance window, when it closed after this round.
    window_mean: float | None
    next_depth_max: int | None
    lower_below: float
    raise_above: float
    fixed_tree_nodes: int  # nodes of the static or chain template (0 otherwise)
    # Sampling: the children the verifier tried, in order, with each one's acceptance probability.
    tried: tuple[tuple[int, float], ...] = ()
    # The dynamic tree's rerank: the nodes drafted, the kept ones best first with their cumulative
    # probabilities, and the cumulative probability of the last one kept (None for other methods).
    drafted_nodes: int = 0
    kept_cumulative: tuple[tuple[int, float], ...] = ()
    rerank_cutoff: float | None = None
    # How the method's registry entry explains its rounds, and its sentence for this one ("" when the
    # entry has none and its explainer shows its own formulas).
    explainer: str = "tree"
    description: str = ""
    # What the round added to the output: the accepted tokens up to an end (eos, token limit), then the
    # bonus unless the output ended first; `finish_reason` says why it ended (None: it goes on).
    emitted_tokens: tuple[int, ...] = ()
    finish_reason: str | None = None
    # Per depth of the tree (1 first), the highest cumulative probability of its nodes: why a tree stops
    # short of D(α) (under the next level's θ no child could pass, and that level is not drafted).
    best_cumulative: tuple[float, ...] = ()
    # How the round drafted: its draft forwards and what they were (`drafting_sentence`; "" without a draft).
    draft_forwards: int | None = None
    drafting: str = ""

    @property
    def bonus_emitted(self) -> bool:
        """Whether the target's bonus token was added to the output (not when it ended on the path)."""
        return len(self.emitted_tokens) > min(len(self.accepted_tokens), len(self.emitted_tokens))

    @property
    def accepted_emitted(self) -> tuple[int, ...]:
        """The accepted tokens that reached the output (all of them unless the output ended on the path)."""
        return self.accepted_tokens[: min(len(self.accepted_tokens), len(self.emitted_tokens))]

    @property
    def log_k(self) -> float:
        return math.log(len(self.top_probs)) if len(self.top_probs) > 1 else 0.0

    @property
    def measured_alpha(self) -> float:
        """1 − H / log k from the round's entropy (the α that shaped the tree, `alpha`, unless it was held)."""
        if self.entropy is None or self.log_k == 0:
            return self.alpha if self.alpha is not None else 0.0
        return min(1.0, max(0.0, 1.0 - self.entropy / self.log_k))

    @property
    def places(self) -> int:
        """The decimals its top-k probabilities print with (`probability_places`: enough to recompute H)."""
        return probability_places(self.top_probs)


def _best_per_depth(cumulative: Sequence[float], depths: Sequence[int]) -> tuple[float, ...]:
    """The highest cumulative probability at each depth of a tree, depth 1 first."""
    deepest = max(depths, default=0)
    return tuple(
        max(c for c, d in zip(cumulative, depths, strict=True) if d == level) for level in range(1, deepest + 1)
    )


def round_kind(record: RoundRecord, config: SageConfig) -> RoundKind:
    """What the explainer shows for the round, as the method's registry entry says (`MethodSpec.explainer`)."""
    if record.phase == "prefill":
        return "prefill"
    spec = method_spec(record.method)
    if spec.explainer == "plain" or not spec.drafts:
        return "plain"
    if spec.explainer in ("fixed", "rerank"):
        return spec.name
    if spec.explainer == "tree":
        return "tree"
    if record.planned_depth is None:
        return "sage-first"
    return "sage-online" if record.level_thresholds or config.shape == "online" else "sage-template"


def describe_round(record: RoundRecord, settings: Any = None) -> str:
    """The method's own sentence for a round (its registry entry's `describe`), or one made from its
    entry: its label and subtitle, and the round's tree size; then its own record in words, when it keeps one
    (`OwnRecord.words`: sage-cost's budgets weighed, SMART's growth and weighing)."""
    spec = method_spec(record.method)
    if spec.describe is not None:
        sentence = spec.describe(record, settings)
    else:
        tree = record.tree
        size = f"{len(tree)} nodes, {tree.depth} levels deep" if tree.tokens else "no tree"
        sentence = f"{spec.label}: {spec.subtitle}. This round's tree: {size}."
    own = record.own.words(record) if record.own is not None else ""
    return f"{sentence} {own}" if own else sentence


def _cut_candidates(record: RoundRecord) -> tuple[CutCandidate, ...]:
    """The best few candidates the round cut, each with its level and the rule that cut it."""
    return tuple(
        CutCandidate(parent, _level_of(record, parent), token, prob, rule)
        for parent, token, prob, rule in zip(
            record.cut_parents, record.cut_tokens, record.cut_probs, record.cut_rules, strict=True
        )
    )


def explain_round(record: RoundRecord, config: SageConfig, settings: Any = None) -> RoundExplained:
    """Explain one round from its record and the run's SAGE configuration (`settings`: the run's own
    method's settings, for its registry entry's sentence)."""
    spec = method_spec(record.method)
    kind = round_kind(record, config)
    alpha, (depth_raw, width_raw) = record.alpha, _raw_shape(record, config)
    tree, choices = record.tree, record.target_choices
    depths = tree.depths
    template = spec.template if spec.explainer == "fixed" else None
    fixed = len(template) if template else len(STATIC_TREE) if kind == "sage-first" else 0
    cumulative = tree.cumulative_probs()
    ranked = sorted(range(len(tree)), key=lambda n: (-cumulative[n], depths[n], n))
    rerank = spec.explainer == "rerank" and kind != "prefill"
    said = spec.describe is not None or kind == "tree" or record.own is not None  # a sentence of its own
    return RoundExplained(
        method=record.method,
        round=record.round,
        kind=kind,
        top_tokens=record.root_top_tokens,
        top_probs=record.root_top_probs,
        entropy=record.entropy,
        alpha=alpha,
        depth_min=config.depth_min,
        depth_max=record.depth_max,
        depth_raw=depth_raw,
        depth=record.planned_depth,
        width_min=config.width_min,
        width_max=config.width_max,
        width_raw=width_raw,
        width=record.planned_width,
        threshold_base=config.threshold_base,
        node_budget=config.node_budget,
        levels=_levels_explained(record),
        best_cumulative=_best_per_depth(cumulative, depths),
        cut=_cut_candidates(record),
        nodes=_node_checks(record),
        root_choice=choices[0] if choices else None,
        accepted_nodes=record.accepted_nodes,
        accepted_tokens=record.accepted_tokens,
        bonus_token=record.bonus_token,
        window_mean=record.window_mean,
        next_depth_max=record.next_depth_max,
        lower_below=config.lower_below,
        raise_above=config.raise_above,
        fixed_tree_nodes=fixed,
        tried=tuple(zip(record.tried_nodes, record.accept_probs, strict=True)),
        drafted_nodes=len(tree) + sum(record.cut_by_budget) if rerank else 0,
        kept_cumulative=tuple((n, cumulative[n]) for n in ranked) if rerank else (),
        rerank_cutoff=record.level_thresholds[0] if rerank and record.level_thresholds else None,
        explainer=spec.explainer,
        description=describe_round(record, settings) if said and kind != "prefill" else "",
        emitted_tokens=record.new_tokens,
        finish_reason=record.finish_reason,
        draft_forwards=record.draft_forwards,
        drafting=drafting_sentence(record),
    )


def drafting_sentence(record: RoundRecord) -> str:
    """What the round's draft forwards were: one a level (a sequential draft), or one for the whole block (a
    one-pass draft, and why its siblings help less); "" for plain decoding, the prefill and old traces."""
    forwards, depth = record.draft_forwards, record.tree.depth
    if record.phase != "decode" or not forwards or not record.tree.tokens:
        return ""
    if forwards == 1 and depth > 1:
        return (
            f"The draft ran one forward for this whole {depth}-level tree: a one-pass draft reads the tokens "
            "committed last round and a mask for each deeper place, and gives every depth's distribution at "
            "once. Each depth's distribution is the same whichever token comes before it, so a second child "
            "at a depth is the draft's second guess for that place, not a guess that follows its sibling: "
            "siblings help less than with a draft that runs level by level."
        )
    levels = forwards - 1
    return (
        f"The draft ran {forwards} forward{'s' if forwards != 1 else ''} in sequence: one over the tokens "
        f"committed last round, then {levels} for the level{'s' if levels != 1 else ''} it expanded, each "
        "waiting for the one before (a one-pass draft would run one)."
    )


def _raw_shape(record: RoundRecord, config: SageConfig) -> tuple[float | None, float | None]:
    """D(α) and W(α) before rounding, when the round planned its shape from α."""
    alpha = record.alpha
    if alpha is None or record.depth_max is None or record.planned_depth is None:
        return None, None
    depth_raw = config.depth_min + alpha * (record.depth_max - config.depth_min)
    return depth_raw, config.width_min + (1.0 - alpha) * (config.width_max - config.width_min)


def _level_of(record: RoundRecord, node: int) -> int:
    """The level of `node`'s children (1 under the root)."""
    return 1 if node == ROOT else record.tree.depths[node] + 1


def _levels_explained(record: RoundRecord) -> tuple[LevelExplained, ...]:
    """SAGE's online rule level by level: the threshold, each parent's offered width, what was kept and cut."""
    depths = record.tree.depths if record.tree.tokens else ()
    probs = record.tree_draft_probs

    def parent_prob(node: int) -> float:
        return 1.0 if node == ROOT else probs[node]

    levels = []
    offers = list(zip(record.offer_parents, record.offer_widths, strict=True))
    for index, threshold in enumerate(record.level_thresholds):
        level = index + 1
        widths = []
        for node, width in offers:
            if _level_of(record, node) != level:
                continue
            raw = (
                float(record.planned_width or 0)
                if level == 1
                else (record.planned_width or 0) * (0.5 + parent_prob(node)) / level
            )
            widths.append(ParentWidth(node, parent_prob(node), raw, width))
        levels.append(
            LevelExplained(
                level=level,
                threshold=threshold,
                widths=tuple(widths),
                kept=sum(1 for d in depths if d == level),
                cut_by_width=_at(record.cut_by_width, index),
                cut_by_threshold=_at(record.cut_by_threshold, index),
                cut_by_budget=_at(record.cut_by_budget, index),
            )
        )
    return tuple(levels)


def probability_places(probs: Sequence[float], most: int = 8) -> int:
    """The fewest decimals (3 to `most`) that print `probs` so that the entropy a student recomputes from the
    printed numbers (renormalised, as SAGE does) rounds to the printed H at 3 decimals: 0.0004 printed 0.000
    would leave a term out (a landing round's H 0.025 against the printed 0.038)."""
    if not probs or sum(probs) <= 0:
        return 3
    target = f"{topk_entropy(probs):.3f}"
    for places in range(3, most + 1):
        shown = [float(f"{p:.{places}f}") for p in probs]
        kept = all(p == 0 or v > 0 for p, v in zip(probs, shown, strict=True))  # no term printed as 0
        if kept and f"{topk_entropy(shown):.3f}" == target:
            return places
    return most


def _node_checks(record: RoundRecord) -> tuple[NodeCheck, ...]:
    """Each drafted node against the target's choice after its parent."""
    tree, choices, accepted = record.tree, record.target_choices, set(record.accepted_nodes)
    depths = tree.depths if tree.tokens else ()
    nodes = []
    for node, (token, parent) in enumerate(zip(tree.tokens, tree.parents, strict=True)):
        choice = choices[1 + parent] if choices else None
        nodes.append(
            NodeCheck(
                node=node,
                parent=parent,
                depth=depths[node],
                token=token,
                target_choice=choice,
                agreed=None if choice is None else choice == token,
                accepted=node in accepted,
                draft_prob=record.tree_draft_probs[node] if node < len(record.tree_draft_probs) else 0.0,
            )
        )
    return tuple(nodes)


def _at(values: tuple[int, ...], index: int) -> int:
    return values[index] if index < len(values) else 0
