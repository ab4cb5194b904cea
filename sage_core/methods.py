"""The decoding methods, in one registry: what the library, the app, the benchmark and the studies read.

A method is one `MethodSpec`: its labels, colour and column order, whether it
drafts, its proposer (how it drafts a round's tree and what it learns from the
verdict, proposers.py), its settings (their class, and per setting its name,
default, range and label: the CLI flag, the /race API field and the app
control are all made from them, and a bad value is refused in the settings
class's own sentence) and how the explainer describes its rounds. Nothing else
names a method: a new one is a registry entry (`register`), a proposer and
their tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

from .errors import ConfigError
from .method_settings import (
    DYNAMIC_RANGES,
    FROZEN_ALPHA_SOURCE,
    SAGE_RANGES,
    DynamicConfig,
    FrozenSageConfig,
    SageConfig,
    as_setting,
    shown,
)
from .trees import CHAIN_TREE, STATIC_TREE, RankPath

if TYPE_CHECKING:
    from .config import DecodeConfig
    from .proposers import Proposer
    from .records import RoundRecord

#: A method's name (the registry's; `register` adds more).
Method = str
#: How the explainer shows a round: plain decoding, a fixed template, the dynamic tree's rerank, SAGE's
#: policy (its formulas filled in), or any other tree (the method's own sentence, then the verification).
Explainer = Literal["plain", "fixed", "rerank", "sage", "tree"]


@dataclass(frozen=True)
class Setting:
    """One setting of a method as every surface shows it: the flag `--name-with-dashes`, the /race API
    field and the app control `name`, read into the settings class's `field`; its default is the class's."""

    name: str
    field: str
    label: str  # the app control's label
    help: str  # one line: the flag's help and the API field's description
    low: float = 0
    high: float = 0
    whole: bool = True  # a whole number (else a real number in [low, high])
    choices: tuple[str, ...] = ()  # a choice among these (then low/high are unused)
    form: bool = True  # also an app control and a /race field (False: the command line only)

    def read(self, value: object) -> object:
        """The value as the settings class takes it ("8", 8.0 and 8 alike for a whole number)."""
        return value if self.choices else as_setting(value, self.whole)  # one number check: method_settings


#: Makes a method's proposer for one run: (its settings, the run's whole configuration) -> Proposer.
ProposerFactory = Callable[[Any, "DecodeConfig"], "Proposer"]


@dataclass(frozen=True)
class MethodSpec:
    """One decoding method as people and tools see it, and how it runs."""

    name: Method
    label: str  # for people: "SD-Tree (static 25-node tree)"
    short: str  # a column heading: "SD-Tree"
    subtitle: str  # one line under the heading
    colour: str  # one colour per method, everywhere (race columns, plots); Okabe-Ito, see app/palette.py
    order: int  # column order: SAGE first, then its rivals, plain decoding last
    drafts: bool  # whether it uses the draft model (plain decoding does not)
    proposer: ProposerFactory | None = None  # None: plain decoding, or a template's `TemplateProposer`
    pruned_label: str = ""  # its name with draft-side visual token pruning ("" when it has no draft)
    template: tuple[RankPath, ...] | None = None  # a fixed tree's rank template (None: shaped per round)
    in_race: bool = False  # raced by default in the app
    ablation: bool = False  # an ablation lane (SAGE without a part of it): run only when named
    # Whether its trees never depend on the draft's measured α (a fixed tree, SAGE with α frozen): its rounds
    # measure whether α predicts acceptance without α having chosen the tree (premise.calibration_of).
    alpha_free: bool = False
    settings: type | None = None  # its settings class (a frozen dataclass whose checks raise ConfigError)
    controls: tuple[Setting, ...] = ()  # its settings on the command line, the API and the page
    settings_title: str = ""  # the heading of its settings ("SAGE policy (paper defaults)")
    # The `DecodeConfig` field that carries its settings (SAGE's and the dynamic tree's, for the callers
    # that name them); "" carries them in `DecodeConfig.method_settings` under the method's name.
    settings_field: str = ""
    explainer: Explainer = "tree"
    # The explainer's sentence for one of its rounds (record, its settings); None: its subtitle and tree size.
    describe: Callable[[RoundRecord, Any], str] | None = None

    def default_settings(self) -> Any:
        return self.settings() if self.settings is not None else None

    def settings_from(self, values: Mapping[str, object]) -> Any:
        """Its settings from values by setting name (form, JSON or command line; missing ones take their
        defaults); a bad value is the settings class's ConfigError, one sentence."""
        if self.settings is None:
            return None
        names = {s.name: s for s in self.controls}
        given = {names[n].field: names[n].read(v) for n, v in values.items() if n in names}
        if hasattr(self.settings, "from_form"):
            return self.settings.from_form(given)
        try:
            return self.settings(**given)
        except TypeError as error:
            raise ConfigError(f"invalid {self.short} settings: {error}") from error


def _proposers() -> Any:
    from . import proposers  # the proposers import the decode configuration, which imports this registry

    return proposers


def _sage_proposer(settings: SageConfig, config: DecodeConfig) -> Proposer:
    return _proposers().SageProposer(settings)


def _dynamic_proposer(settings: DynamicConfig, config: DecodeConfig) -> Proposer:
    return _proposers().DynamicProposer(settings)


def _frozen_proposer(settings: FrozenSageConfig, config: DecodeConfig) -> Proposer:
    from .ablations import FrozenSageProposer

    return FrozenSageProposer(config.sage, settings.alpha)


def _best_first_proposer(settings: None, config: DecodeConfig) -> Proposer:
    from .ablations import BestFirstProposer

    return BestFirstProposer(config.sage)


def _sage_cost_proposer(settings: None, config: DecodeConfig) -> Proposer:
    from .sage_cost import SageCostProposer  # SAGE's settings (config.sage) shape it; N_max is its cap

    return SageCostProposer(config.sage)


def _sage_cost_round(record: RoundRecord, settings: Any) -> str:
    """sage-cost's round: the entropy's shape, then the budgets weighed and their expected tokens per second."""
    if record.budget_chosen is None or record.alpha is None:
        return "SAGE-cost: SAGE's shape, each round's node budget chosen by expected tokens per second."
    weighed = ", ".join(
        f"{n} nodes (depth {d}): {e:.2f} accepted expected, {r:.0f} tokens/s"
        + (" (chosen)" if n == record.budget_chosen else "")
        for n, d, e, r in zip(
            record.budget_nodes, record.budget_depths, record.budget_expected, record.budget_rates, strict=True
        )
    )
    return (
        f"SAGE-cost: α = {record.alpha:.3f} from this round's draft entropy shaped the candidates (depth at most "
        f"D(α) = {record.planned_depth}, root width W(α) = {record.planned_width}); each budget weighed by "
        f"expected tokens per second (calibrated acceptance over the measured cost of drafting and verifying "
        f"it): {weighed}. It verified the best: {record.budget_chosen} nodes."
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
    alpha = "" if record.alpha is None else f" (α = {record.alpha:.3f})"
    return (
        f"Best-first at SAGE's node count: SAGE's rule would draft {len(record.tree)} nodes this round{alpha}; "
        f"the {len(record.tree)} drafted nodes of highest cumulative draft probability were verified instead, "
        "with no depth or width from the entropy."
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
               drafts=False, explainer="plain"),
    MethodSpec("chain", "SD-Chain (5 tokens)", "SD-Chain", "a chain of 5 draft tokens", "#CC79A7", 3, drafts=True,
               pruned_label="SD-Chain + pruning", template=CHAIN_TREE, explainer="fixed", alpha_free=True),
    MethodSpec("static", "SD-Tree (static 25-node tree)", "SD-Tree", "static 25-node tree (SpecVLM / EAGLE-1)",
               "#0072B2", 2, drafts=True, pruned_label="SD-Tree + pruning (SpecVLM)", template=STATIC_TREE,
               in_race=True, explainer="fixed", alpha_free=True),
    MethodSpec("sage", "SAGE (adaptive tree)", "SAGE", "adaptive tree, shaped by the draft's confidence", "#D55E00",
               0, drafts=True, proposer=_sage_proposer, pruned_label="SAGE + pruning", in_race=True,
               settings=SageConfig, controls=SAGE_CONTROLS, settings_title="SAGE policy (paper defaults)",
               settings_field="sage", explainer="sage"),
    MethodSpec("dynamic", "Dynamic tree (EAGLE-2)", "Dynamic", "EAGLE-2's tree: best cumulative probability, reranked",
               "#009E73", 1, drafts=True, proposer=_dynamic_proposer, pruned_label="Dynamic tree + pruning",
               settings=DynamicConfig, controls=DYNAMIC_CONTROLS,
               settings_title="dynamic tree, --method dynamic (EAGLE-2's defaults)", settings_field="dynamic",
               explainer="rerank"),
    MethodSpec("sage-frozen", "SAGE, α frozen (no adaptation)", "SAGE-frozen",
               "SAGE's policy with α held fixed for the whole answer (ablation)", "#400060", 0, drafts=True,
               proposer=_frozen_proposer, pruned_label="SAGE-frozen + pruning", settings=FrozenSageConfig,
               controls=(Setting("frozen_alpha", "alpha", "SAGE-frozen: α held fixed",
                                 f"the α sage-frozen holds for the whole answer, in [0, 1] (default: "
                                 f"{FrozenSageConfig.alpha:g}, {FROZEN_ALPHA_SOURCE}).", 0.0, 1.0, whole=False),),
               settings_title="sage-frozen, --method sage-frozen (ablation: SAGE's settings, α held fixed)",
               explainer="sage", describe=_frozen_round, ablation=True, alpha_free=True),
    MethodSpec("best-first", "Best-first tree (SAGE's node count)", "Best-first",
               "SAGE's node count, best cumulative probability first, no entropy shaping (ablation)", "#004000", 1,
               drafts=True, proposer=_best_first_proposer, pruned_label="Best-first + pruning", explainer="rerank",
               describe=_best_first_round, ablation=True),
    MethodSpec("sage-cost", "SAGE-cost (SAGE's shape, budget by measured cost)", "SAGE-cost",
               "SAGE's shape; each round's node budget maximises expected tokens/s on this device", "#E0C000", 0,
               drafts=True, proposer=_sage_cost_proposer, pruned_label="SAGE-cost + pruning", explainer="tree",
               describe=_sage_cost_round),
)  # fmt: skip

# The registry: process-wide, filled at import with the built-in methods; `register` adds one.
_BY_NAME: dict[str, MethodSpec] = {spec.name: spec for spec in BUILTIN}

#: The built-in methods' names, labels and default race (the live registry: `registered()`).
METHODS: tuple[Method, ...] = tuple(spec.name for spec in BUILTIN)
DRAFTING_METHODS: tuple[Method, ...] = tuple(spec.name for spec in BUILTIN if spec.drafts)
METHOD_LABELS: dict[str, str] = {spec.name: spec.label for spec in BUILTIN}
PRUNED_METHOD_LABELS: dict[str, str] = {spec.name: spec.pruned_label for spec in BUILTIN if spec.pruned_label}
#: The methods raced by default in the app (the design: SAGE against SD-Tree).
RACE_DEFAULT: tuple[Method, ...] = tuple(s.name for s in sorted(BUILTIN, key=lambda s: s.order) if s.in_race)
#: Kept for callers that read it: the built-in entries.
REGISTRY = BUILTIN


def register(spec: MethodSpec) -> MethodSpec:
    """Add a method to the registry (the library, the CLI, the app and the scripts then offer it)."""
    if spec.name in _BY_NAME:
        raise ConfigError(f"a method named {spec.name!r} is registered already")
    names = [s.name for s in spec.controls]
    taken = {s.name for other in _BY_NAME.values() for s in other.controls} & set(names)
    if taken or len(set(names)) != len(names):
        raise ConfigError(f"the settings of {spec.name!r} reuse a name: {', '.join(sorted(taken)) or names}")
    if spec.drafts and spec.template is None and spec.proposer is None:
        raise ConfigError(f"method {spec.name!r} drafts but has neither a template nor a proposer")
    if spec.settings is not None and {s.field for s in spec.controls} - {f.name for f in fields(spec.settings)}:
        raise ConfigError(f"a setting of {spec.name!r} names no field of {spec.settings.__name__}")
    _BY_NAME[spec.name] = spec
    METHOD_LABELS[spec.name] = spec.label
    if spec.pruned_label:
        PRUNED_METHOD_LABELS[spec.name] = spec.pruned_label
    return spec


def unregister(name: str) -> None:
    """Remove a method `register` added (the built-in ones stay)."""
    if name in METHODS:
        raise ConfigError(f"{name!r} is a built-in method")
    _BY_NAME.pop(name, None)
    METHOD_LABELS.pop(name, None)
    PRUNED_METHOD_LABELS.pop(name, None)


@contextmanager
def registered(spec: MethodSpec) -> Iterator[MethodSpec]:
    """The method registered for the block's duration (tests)."""
    register(spec)
    try:
        yield spec
    finally:
        unregister(spec.name)


def specs() -> list[MethodSpec]:
    """Every registered method, in column order."""
    return sorted(_BY_NAME.values(), key=lambda s: (s.order, s.name))


def method_names() -> tuple[Method, ...]:
    """Every registered method's name, in column order."""
    return tuple(s.name for s in specs())


def registered_names() -> tuple[Method, ...]:
    """Every registered method's name in the order they were registered (the built-in ones first): the order
    the refusals list them in."""
    return tuple(_BY_NAME)


def drafting_methods() -> tuple[Method, ...]:
    return tuple(s.name for s in specs() if s.drafts)


def form_settings() -> list[tuple[MethodSpec, Setting]]:
    """The settings every race form carries (app controls and /race fields), method by method in the order
    the methods were registered (the built-in ones first), so a new method's fields come after the others'."""
    return [(spec, setting) for spec in _BY_NAME.values() for setting in spec.controls if setting.form]


def method_spec(name: str) -> MethodSpec:
    """The registry entry of `name`; one clear ConfigError for an unknown method."""
    spec = _BY_NAME.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ConfigError(f"unknown method {shown(name)}; choose one of {', '.join(registered_names())}")
    return spec


def is_method(name: object) -> bool:
    return isinstance(name, str) and name in _BY_NAME


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


class ByMethod(Mapping[str, str]):
    """One field of every registered method, by name, read from the registry as it is now (a method
    registered later is in it too): `ByMethod("short")["sage"] == "SAGE"`."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __getitem__(self, name: str) -> str:
        return str(getattr(_BY_NAME[name], self.field))

    def __iter__(self) -> Iterator[str]:
        return iter(method_names())

    def __len__(self) -> int:
        return len(_BY_NAME)


def in_order(methods: Iterable[str]) -> list[str]:
    """The known methods among `methods`, once each, in column order."""
    wanted = set(methods)
    return [name for name in method_names() if name in wanted]
