"""The built-in methods, registering themselves: plain decoding, the chain, the static tree, SAGE, the dynamic
tree (EAGLE-2), and the methods wing (sage-frozen, best-first, sage-cost, SMART). Each entry names its
proposer, imported here at the top; the registry (`methods/__init__.py`) knows none of them. `sage_core`
imports this module, so every method is registered before any is looked up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..method_settings import (
    BEST_FIRST_NODES,
    DYNAMIC_RANGES,
    FROZEN_ALPHA_SOURCE,
    SAGE_RANGES,
    BestFirstConfig,
    DynamicConfig,
    FrozenSageConfig,
    SageConfig,
)
from ..proposers import Proposer
from ..trees import CHAIN_TREE, STATIC_TREE
from .ablations import BestFirstProposer, FrozenSageProposer, mean_alpha, mean_nodes
from .budget import SageCostRecord
from .dynamic import DynamicProposer
from .registry import Holds, Method, MethodSpec, RunConfig, Setting, register
from .sage import SageProposer
from .sage_cost import SageCostProposer
from .smart import SMART_SPEC

if TYPE_CHECKING:
    from ..records import RoundRecord


def _sage_proposer(settings: SageConfig, config: RunConfig) -> Proposer:
    return SageProposer(settings)


def _dynamic_proposer(settings: DynamicConfig, config: RunConfig) -> Proposer:
    return DynamicProposer(settings)


def _frozen_proposer(settings: FrozenSageConfig, config: RunConfig) -> Proposer:
    return FrozenSageProposer(config.sage, settings.alpha)


def _best_first_proposer(settings: BestFirstConfig, config: RunConfig) -> Proposer:
    return BestFirstProposer(config.sage, settings.nodes)


def _sage_cost_proposer(settings: None, config: RunConfig) -> Proposer:
    # SAGE's settings (config.sage) shape it; N_max is its cap
    return SageCostProposer(config.sage)


def _sage_cost_round(record: RoundRecord, settings: Any) -> str:
    """sage-cost's round: the entropy's shape (its own record, `SageCostRecord.words`, then says the budgets
    weighed and their expected tokens per second)."""
    if record.own is None or record.alpha is None:
        return "SAGE-cost: SAGE's depth D(α), each round's nodes and budget chosen by expected tokens per second."
    return (
        f"SAGE-cost: α = {record.alpha:.3f} from this round's draft entropy set how deep the candidates may reach "
        f"(D(α) = {record.planned_depth}); every drafted candidate that could pay was offered, each budget weighed by "
        "expected tokens per second (calibrated acceptance over the measured cost of drafting and verifying it)."
    )


def _frozen_round(record: RoundRecord, settings: Any) -> str:
    if record.planned_depth is None or record.alpha is None:
        return "SAGE without adaptation: its first round uses the static tree, as SAGE's does."
    measured = ""
    if record.entropy is not None and len(record.root_top_probs) > 1:
        alpha = min(1.0, max(0.0, 1.0 - record.entropy / math.log(len(record.root_top_probs))))
        measured = f" (this round's draft entropy would give α = {alpha:.3f})"
    return (
        f"SAGE without adaptation: α is held at {record.alpha:.3f} for the whole answer{measured}; SAGE's "
        "rules shape the tree from it."
    )


def _best_first_round(record: RoundRecord, settings: Any) -> str:
    nodes = getattr(settings, "nodes", len(record.tree))
    alpha = "" if record.alpha is None else f" (the draft's α = {record.alpha:.3f}, not used)"
    return (
        f"Best-first at SAGE's average node count: the {len(record.tree)} drafted nodes of highest cumulative "
        f"draft probability (at most {nodes} a round{alpha}), drafted level by level on the nodes whose children "
        "could still rank among them, with no depth or width from the entropy."
    )


def _whole(name: str, field: str, label: str, help: str, ranges: Mapping[str, tuple[int, int]], **more: Any) -> Setting:
    low, high = ranges[field]
    return Setting(name, field, label, help, low, high, **more)


SAGE_CONTROLS: tuple[Setting, ...] = (
    _whole("depth_min", "depth_min", "D_min (shallowest tree)", "SAGE's shallowest tree (paper: 3).", SAGE_RANGES),
    _whole("depth_max", "depth_max", "D_max (deepest tree)", "SAGE's deepest tree at the start (paper: 8).",
           SAGE_RANGES),
    _whole("width_min", "width_min", "W_min (narrowest root)", "SAGE's narrowest level (paper: 2).", SAGE_RANGES),
    _whole("width_max", "width_max", "W_max (widest root)", "SAGE's widest level (paper: 10).", SAGE_RANGES),
    _whole("node_budget", "node_budget", "Node budget N_max", "the most draft tokens in one tree (paper: 64).",
           SAGE_RANGES),
    _whole("candidates", "candidates", "Candidates k per node (its entropy gives α)",
           "SAGE's k, the draft's candidates per node, whose entropy gives its confidence (paper: 10).",
           SAGE_RANGES),
    _whole("window", "window", "Acceptance window", "rounds in the acceptance window that moves D_max (paper: 10).",
           SAGE_RANGES, form=False),
    Setting("shape", "shape", "Shape", "online (grown from this round's draft) or template (planned from the last)",
            choices=("online", "template"), form=False),
    Setting("alpha_source", "alpha_source", "α source", "template mode's α: the root's or the accepted path's mean",
            choices=("root", "path_mean"), form=False),
)  # fmt: skip

DYNAMIC_CONTROLS: tuple[Setting, ...] = (
    _whole("dynamic_depth", "depth", "Dynamic tree: depth",
           "the dynamic tree's levels expanded below the first (EAGLE-2: 5), in [1, 10].", DYNAMIC_RANGES),
    _whole("dynamic_candidates", "candidates", "Dynamic tree: candidates per node",
           "the dynamic tree's frontier nodes expanded per level and children each (EAGLE-2's top_k: 10), in [1, 50].",
           DYNAMIC_RANGES),
    _whole("dynamic_total_tokens", "total_tokens", "Dynamic tree: nodes verified",
           "the dynamic tree's nodes verified after the rerank (EAGLE-2: 59), in [1, 256].", DYNAMIC_RANGES),
)  # fmt: skip

BUILTIN: tuple[MethodSpec, ...] = (
    MethodSpec("ar", "Plain decoding (AR)", "Plain AR", "the target alone, one token per forward", "#000000", 4,
               drafts=False, explainer="plain",
               dash="longdash", marker="x", rival_rank=4, called="plain decoding"),
    MethodSpec("chain", "SD-Chain (5 tokens)", "SD-Chain", "a chain of 5 draft tokens", "#CC79A7", 3, drafts=True,
               pruned_label="SD-Chain + pruning", template=CHAIN_TREE, explainer="fixed", alpha_free=True,
               dash="dot", marker="triangle-up", rival_rank=3, called="the 5-token chain"),
    MethodSpec("static", "SD-Tree (static 25-node tree)", "SD-Tree", "static 25-node tree (SpecVLM / EAGLE-1)",
               "#0072B2", 2, drafts=True, pruned_label="SD-Tree + pruning (SpecVLM)", template=STATIC_TREE,
               in_race=True, explainer="fixed", alpha_free=True,
               dash="dash", marker="square", rival_rank=1, called="the static tree"),
    MethodSpec("sage", "SAGE (adaptive tree)", "SAGE", "adaptive tree, shaped by the draft's confidence", "#D55E00",
               0, drafts=True, proposer=_sage_proposer, pruned_label="SAGE + pruning", in_race=True,
               settings=SageConfig, controls=SAGE_CONTROLS, settings_title="SAGE policy (paper defaults)",
               explainer="sage",
               dash="solid", marker="circle", budget="node_budget", lead_name="SAGE", called="the paper's SAGE",
               carried=True),
    MethodSpec("dynamic", "Dynamic tree (EAGLE-2)", "Dynamic", "EAGLE-2's tree: best cumulative probability, reranked",
               "#009E73", 1, drafts=True, proposer=_dynamic_proposer, pruned_label="Dynamic tree + pruning",
               settings=DynamicConfig, controls=DYNAMIC_CONTROLS,
               settings_title="dynamic tree, --method dynamic (EAGLE-2's defaults)",
               explainer="rerank",
               dash="dashdot", marker="diamond", budget="total_tokens", rival_rank=2,
               called="the dynamic tree (EAGLE-2)", carried=True),
    MethodSpec("sage-frozen", "SAGE, α frozen (no adaptation)", "SAGE-frozen",
               "SAGE's policy with α held fixed for the whole answer (ablation)", "#400060", 0, drafts=True,
               proposer=_frozen_proposer, pruned_label="SAGE-frozen + pruning", settings=FrozenSageConfig,
               controls=(Setting("frozen_alpha", "alpha", "SAGE-frozen: α held fixed",
                                 f"the α sage-frozen holds for the whole answer, in [0, 1] (default: "
                                 f"{FrozenSageConfig.alpha:g}, {FROZEN_ALPHA_SOURCE}).", 0.0, 1.0, whole=False),),
               settings_title="sage-frozen, --method sage-frozen (ablation: SAGE's settings, α held fixed)",
               explainer="sage", describe=_frozen_round, ablation=True, alpha_free=True,
               dash="longdashdot", marker="star", holds=Holds("sage", "alpha", mean_alpha),
               called="SAGE with α frozen"),
    MethodSpec("best-first", "Best-first tree (SAGE's node count)", "Best-first",
               "SAGE's node count, best cumulative probability first, no entropy shaping (ablation)", "#004000", 1,
               drafts=True, proposer=_best_first_proposer, pruned_label="Best-first + pruning", explainer="rerank",
               describe=_best_first_round, ablation=True, settings=BestFirstConfig,
               controls=(Setting("best_first_nodes", "nodes", "Best-first: nodes a round",
                                 f"best-first's nodes per round, in [1, 256] (default: SAGE's mean node count in a "
                                 f"race beside SAGE, else {BEST_FIRST_NODES}).", 1, 256),),
               settings_title="best-first, --method best-first (ablation: SAGE's average node count, no shaping)",
               dash="8px,3px,2px,3px,2px,3px", marker="pentagon", holds=Holds("sage", "nodes", mean_nodes),
               budget="nodes", called="the best-first tree"),
    MethodSpec("sage-cost", "SAGE-cost (SAGE's depth, budget by measured cost)", "SAGE-cost",
               "depth D(α) by entropy; each round's nodes maximise expected tokens/s on this device", "#E0C000", 0,
               drafts=True, proposer=_sage_cost_proposer, pruned_label="SAGE-cost + pruning", explainer="tree",
               describe=_sage_cost_round, record=SageCostRecord,
               dash="2px,2px", marker="star-diamond", chooses_budget=True, chosen_marker="star", lead_name="sage-cost"),
    SMART_SPEC,
)  # fmt: skip

for _spec in BUILTIN:
    register(_spec, built_in=True)

#: The built-in methods' names, labels and default race (the live registry: `registered()`).
METHODS: tuple[Method, ...] = tuple(spec.name for spec in BUILTIN)
DRAFTING_METHODS: tuple[Method, ...] = tuple(spec.name for spec in BUILTIN if spec.drafts)
#: The methods raced by default in the app (the design: SAGE against the static tree).
RACE_DEFAULT: tuple[Method, ...] = tuple(s.name for s in sorted(BUILTIN, key=lambda s: s.order) if s.in_race)
