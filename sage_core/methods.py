"""The decoding methods, in one registry: what the library, the app, the benchmark and the studies read.

A method is a name in `REGISTRY` (its labels, colour, column order, whether it
drafts, its tree) plus one proposer in proposers.py (how it drafts a round's
tree and what it learns from the verdict). Nothing else names a method: a new
one is a registry entry, a proposer and their tests.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from .errors import ConfigError
from .trees import CHAIN_TREE, STATIC_TREE, RankPath

Method = Literal["ar", "chain", "static", "sage", "dynamic", "sage-cost", "best-first"]


@dataclass(frozen=True)
class MethodSpec:
    """One decoding method as people and tools see it."""

    name: Method
    label: str  # for people: "SD-Tree (static 25-node tree)"
    short: str  # a column heading: "SD-Tree"
    subtitle: str  # one line under the heading
    colour: str  # one colour per method, everywhere (race columns, plots)
    order: int  # column order: SAGE first, then its rivals, plain decoding last
    drafts: bool  # whether it uses the draft model (plain decoding does not)
    pruned_label: str = ""  # its name with draft-side visual token pruning ("" when it has no draft)
    template: tuple[RankPath, ...] | None = None  # a fixed tree's rank template (None: shaped per round)
    in_race: bool = False  # raced by default in the app
    settings: str = ""  # the DecodeConfig field holding its tree settings ("" when it has none)


REGISTRY: tuple[MethodSpec, ...] = (
    MethodSpec("ar", "Plain decoding (AR)", "Plain AR", "the target alone, one token per forward", "#6b7280", 7,
               drafts=False),
    MethodSpec("chain", "SD-Chain (5 tokens)", "SD-Chain", "a chain of 5 draft tokens", "#db2777", 4, drafts=True,
               pruned_label="SD-Chain + pruning", template=CHAIN_TREE),
    MethodSpec("static", "SD-Tree (static 25-node tree)", "SD-Tree", "static 25-node tree (SpecVLM / EAGLE-1)",
               "#0e7490", 3, drafts=True, pruned_label="SD-Tree + pruning (SpecVLM)", template=STATIC_TREE,
               in_race=True),
    MethodSpec("sage", "SAGE (adaptive tree)", "SAGE", "adaptive tree, shaped by the draft's confidence", "#7c3aed",
               0, drafts=True, pruned_label="SAGE + pruning", in_race=True, settings="sage"),
    MethodSpec("dynamic", "Dynamic tree (EAGLE-2)", "Dynamic", "EAGLE-2's tree: best cumulative probability, reranked",
               "#ca8a04", 2, drafts=True, pruned_label="Dynamic tree + pruning", settings="dynamic"),
    MethodSpec("sage-cost", "SAGE-cost (SAGE's tree, budget by measured cost)", "SAGE-cost",
               "SAGE's shape; each round's node budget maximises expected tokens/s on this device", "#16a34a", 1,
               drafts=True, pruned_label="SAGE-cost + pruning", settings="sage"),
    MethodSpec("best-first", "Best-first tree (N_max nodes)", "Best-first",
               "the N_max drafted nodes of highest cumulative probability, no entropy shaping", "#0891b2", 6,
               drafts=True, pruned_label="Best-first tree + pruning", settings="sage"),
)  # fmt: skip

_BY_NAME: dict[str, MethodSpec] = {spec.name: spec for spec in REGISTRY}
METHODS: tuple[Method, ...] = tuple(spec.name for spec in REGISTRY)
DRAFTING_METHODS: tuple[Method, ...] = tuple(spec.name for spec in REGISTRY if spec.drafts)
METHOD_LABELS: dict[str, str] = {spec.name: spec.label for spec in REGISTRY}
PRUNED_METHOD_LABELS: dict[str, str] = {spec.name: spec.pruned_label for spec in REGISTRY if spec.pruned_label}
#: The methods raced by default in the app (the design: SAGE against SD-Tree).
RACE_DEFAULT: tuple[Method, ...] = tuple(s.name for s in sorted(REGISTRY, key=lambda s: s.order) if s.in_race)


def method_spec(name: str) -> MethodSpec:
    """The registry entry of `name`; one clear ConfigError for an unknown method."""
    spec = _BY_NAME.get(name)
    if spec is None:
        raise ConfigError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    return spec


def drafts(name: str) -> bool:
    """Whether the method uses the draft model (False for unknown names too)."""
    spec = _BY_NAME.get(name)
    return spec is not None and spec.drafts


def method_label(method: str, prune_ratio: float = 0.0) -> str:
    """A method's name for people, saying when the draft's visual tokens were pruned."""
    if prune_ratio > 0 and method in PRUNED_METHOD_LABELS:
        return PRUNED_METHOD_LABELS[method]
    return METHOD_LABELS.get(method, method)


def short_name(method: str) -> str:
    spec = _BY_NAME.get(method)
    return spec.short if spec else method


def colour(method: str) -> str:
    spec = _BY_NAME.get(method)
    return spec.colour if spec else "#334155"


def in_order(methods: Iterable[str]) -> list[str]:
    """The known methods among `methods`, once each, in column order."""
    wanted = set(methods)
    return [spec.name for spec in sorted(REGISTRY, key=lambda s: s.order) if spec.name in wanted]
