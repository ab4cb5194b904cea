"""The decoding methods' registry: what the library, the app, the benchmark and the studies read.

A method is one `MethodSpec`: its labels, colour and column order, whether it
drafts, its proposer (how it drafts a round's tree and what it learns from the
verdict, proposers.py), its settings (their class, and per setting its name,
default, range and label: the CLI flag, the /race API field and the app
control are all made from them, and a bad value is refused in the settings
class's own sentence) and how the explainer describes its rounds. Nothing else
names a method: a new one is a registry entry (`register`), a proposer and
their tests.

This module sits low: the configuration, the loop and the studies read it, and it names none of them (the
methods themselves, `builtin.py` and its neighbours, register here from above).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..errors import ConfigError
from ..method_settings import SageConfig, as_setting, shown
from ..records import OwnRecord, round_fields
from ..registry import Registry
from ..trees import RankPath

if TYPE_CHECKING:
    from ..proposers import Proposer
    from ..records import RoundRecord

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


@dataclass(frozen=True)
class Holds:
    """What a method holds from another lane of a race, unless its setting is given: that lane's average over
    its decode rounds (sage-frozen holds SAGE's mean α, best-first SAGE's mean node count), so that what differs
    is the part it takes away. Beside that lane, its own lane starts once that lane has finished."""

    lane: str  # the method whose lane it reads ("sage")
    field: str  # its settings' field that holds the average (left at its default: not given)
    # The average from that lane's decode rounds; None: nothing to average (its default is kept).
    average: Callable[[Sequence[RoundRecord]], Any]


class RunConfig(Protocol):
    """What a proposer factory may read of the run's whole configuration (`config.DecodeConfig` is one):
    SAGE's settings (its ablations and sage-cost are shaped by them) and any method's settings."""

    @property
    def sage(self) -> SageConfig: ...

    def settings_for(self, method: str | None = None) -> Any: ...


#: Makes a method's proposer for one run: (its settings, the run's whole configuration) -> Proposer.
ProposerFactory = Callable[[Any, RunConfig], "Proposer"]


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
    explainer: Explainer = "tree"
    # The explainer's sentence for one of its rounds (record, its settings); None: its subtitle and tree size.
    describe: Callable[[RoundRecord, Any], str] | None = None
    # Its look's second cues besides the colour, in the panels that plot methods together (Plotly's names).
    dash: str = "solid"
    marker: str = "circle"
    holds: Holds | None = None  # what it holds from another lane of a race unless given (None: nothing)
    # Its own record of a round beside the fields every method shares (`RoundRecord.own`: a frozen dataclass
    # subclassing records.OwnRecord, which checks itself and says itself in words); None: it keeps none.
    record: type[OwnRecord] | None = None
    # What the sweep, the benchmark and the race's headline read of it (nothing else names a method):
    budget: str = ""  # its settings' field that is its tree's node budget: the budget sweep runs it at each one
    chooses_budget: bool = False  # it chooses its own budget each round: the sweep marks its mean choice
    chosen_marker: str = "star"  # that mark's symbol in the sweep's figure (Plotly's names)
    rival_rank: int = 0  # its rank as the side a race's lead is shown against (1 first; 0: only when no other)
    lead_name: str = ""  # as a lead of the benchmark's comparison lines, its name there ("": it leads none)
    called: str = ""  # how a sentence names it ("the static tree"; "": its label)
    carried: bool = False  # its settings travel in every configuration (`DecodeConfig`'s own keywords)

    def default_settings(self) -> Any:
        return self.settings() if self.settings is not None else None

    def holds_in_race(self, settings: Any) -> bool:
        """Whether these settings leave its held field at its default, so that in a race beside `holds.lane`
        it holds that lane's average (False for a method that holds nothing)."""
        if self.holds is None:
            return False
        field = self.holds.field
        return settings is None or bool(getattr(settings, field) == getattr(self.default_settings(), field))

    def held_settings(self, settings: Any, rounds: Sequence[RoundRecord]) -> Any:
        """`settings` holding the average of `rounds` (its `holds.lane`'s decode rounds); as they were when
        there is nothing to average."""
        assert self.holds is not None, f"{self.name} holds nothing from another lane"
        value = self.holds.average([r for r in rounds if r.phase == "decode"])
        base = settings if settings is not None else self.default_settings()
        return base if value is None else replace(base, **{self.holds.field: value})

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


# The registry: process-wide, empty until the built-in methods register themselves (`methods_builtin`,
# imported by the package) and any other `register` call adds one.
_BY_NAME: Registry[MethodSpec] = Registry("method", lambda spec: spec.name)


def register(spec: MethodSpec, *, built_in: bool = False) -> MethodSpec:
    """Add a method to the registry (the library, the CLI, the app and the scripts then offer it)."""
    if spec.name in _BY_NAME:
        raise ConfigError(_BY_NAME.taken.format(name=spec.name))
    names = [s.name for s in spec.controls]
    taken = {s.name for other in _BY_NAME.values() for s in other.controls} & set(names)
    if taken or len(set(names)) != len(names):
        raise ConfigError(f"the settings of {spec.name!r} reuse a name: {', '.join(sorted(taken)) or names}")
    if spec.drafts and spec.template is None and spec.proposer is None:
        raise ConfigError(f"method {spec.name!r} drafts but has neither a template nor a proposer")
    if spec.settings is not None and {s.field for s in spec.controls} - {f.name for f in fields(spec.settings)}:
        raise ConfigError(f"a setting of {spec.name!r} names no field of {spec.settings.__name__}")
    if spec.budget and (spec.settings is None or spec.budget not in {f.name for f in fields(spec.settings)}):
        raise ConfigError(f"the budget of {spec.name!r} names no field of its settings")
    problem = _own_record_problem(spec)
    if problem is not None:
        raise ConfigError(problem)
    _BY_NAME.add(spec, built_in=built_in)
    return spec


def _own_record_problem(spec: MethodSpec) -> str | None:
    """Why its own record type (`MethodSpec.record`) is not one a round record can carry, or None."""
    kind = spec.record
    if kind is None:
        return None
    if not (isinstance(kind, type) and issubclass(kind, OwnRecord) and is_dataclass(kind)):
        return f"the own record of {spec.name!r} must be a dataclass subclassing records.OwnRecord"
    if not getattr(getattr(kind, "__dataclass_params__", None), "frozen", False):
        return f"the own record of {spec.name!r} ({kind.__name__}) must be frozen, as a round record is"
    shared = {f.name for f in round_fields()} & {f.name for f in fields(kind)}
    if shared:
        return f"the own record of {spec.name!r} reuses a round record's field: {', '.join(sorted(shared))}"
    return None


def unregister(name: str) -> None:
    """Remove a method `register` added (the built-in ones stay)."""
    _BY_NAME.remove(name)  # (a built-in one: one sentence)


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


def race_default() -> tuple[Method, ...]:
    """The methods raced by default (`in_race`: SAGE against the static tree), in column order."""
    return tuple(s.name for s in specs() if s.in_race)


def budgeted() -> tuple[Method, ...]:
    """The methods given a node budget (`budget`), in the order they were registered: the budget sweep's lines."""
    return tuple(s.name for s in _BY_NAME.values() if s.budget)


def choosing_budget() -> tuple[Method, ...]:
    """The methods that choose their own budget each round (`chooses_budget`), in the order they were registered."""
    return tuple(s.name for s in _BY_NAME.values() if s.chooses_budget)


def rivals() -> tuple[Method, ...]:
    """The sides a race's lead is shown against, the first present first (`rival_rank`)."""
    return tuple(s.name for s in sorted(_BY_NAME.values(), key=lambda s: s.rival_rank) if s.rival_rank > 0)


def leads() -> tuple[Method, ...]:
    """The methods the benchmark's comparison lines lead with (`lead_name`), in the order they were registered."""
    return tuple(s.name for s in _BY_NAME.values() if s.lead_name)


def called(name: str) -> str:
    """How a sentence names a method (`called`, else its label); an unknown name as it is."""
    spec = _BY_NAME.get(name) if isinstance(name, str) else None
    return name if spec is None else spec.called or spec.label


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


def holding(lane: Method) -> list[MethodSpec]:
    """The registered methods that hold an average of `lane`'s in a race (sage-frozen and best-first: SAGE's)."""
    return [spec for spec in specs() if spec.holds is not None and spec.holds.lane == lane]


def holder(lane: Method, field: str) -> Method | None:
    """The method that holds `lane`'s average of `field` in a race (`holder("sage", "alpha")`: SAGE itself
    with α held, sage-frozen), or None when none is registered."""
    return next((spec.name for spec in holding(lane) if spec.holds and spec.holds.field == field), None)


def is_method(name: object) -> bool:
    return isinstance(name, str) and name in _BY_NAME


#: A lane's key as text: its method, then after `DRAFT_MARK` the draft it ran with when that is not the pair's own
#: ("sage/one-pass"): how saved traces, the /race API's JSON keys and MCP name a lane; read once, at that edge,
#: into a `LaneKey`.
DRAFT_MARK = "/"
#: The pair's one-pass sibling draft, as a lane names it (PARD: the whole tree in one draft forward a round).
ONE_PASS = "one-pass"
#: The one-pass sibling draft with the target's features off (`sage_core.models.one_pass.without_features`: the
#: same weights, the lane with them off), as a lane names it; raced only beside `ONE_PASS`, whose pair it derives.
ONE_PASS_OFF = "one-pass-off"
#: The drafts a lane may name beside the pair's own, each as a label ends with it.
LANE_DRAFTS: dict[str, str] = {ONE_PASS: "one-pass draft", ONE_PASS_OFF: "one-pass draft, features off"}


@dataclass(frozen=True)
class LaneKey:
    """A race lane as a value: its method, and the draft it ran with when not the pair's own ("": the pair's;
    else one of `LANE_DRAFTS`, whose pair the race's pair names). `str(lane)` is its key as text ("sage/one-pass",
    or the method alone); `LaneKey.parse` reads that text back. The lookups below by name (`drafts`,
    `method_label`, `short_name`, `look`, `ByMethod`) read a key as its method, its label saying the draft;
    `is_method` and `method_spec` take methods only."""

    method: Method
    draft: str = ""

    def __str__(self) -> str:
        return f"{self.method}{DRAFT_MARK}{self.draft}" if self.draft else self.method

    @classmethod
    def parse(cls, key: str) -> LaneKey:
        """A key's method and draft: `LaneKey.parse("sage/one-pass") == LaneKey("sage", "one-pass")` (the draft
        unchecked: `known_draft` says whether a lane may name it)."""
        method, _, draft = key.partition(DRAFT_MARK)
        return cls(method, draft)

    @property
    def known_draft(self) -> bool:
        """Whether its draft is the pair's own or one a lane may name (`LANE_DRAFTS`)."""
        return not self.draft or self.draft in LANE_DRAFTS


def _lane_spec(key: object) -> tuple[MethodSpec | None, str]:
    """The registry entry a lane key reads as, and its draft (None for an unknown method or draft)."""
    if not isinstance(key, str):
        return None, ""
    lane = LaneKey.parse(key)
    if not lane.known_draft:
        return None, ""
    return _BY_NAME.get(lane.method), lane.draft


def _saying_draft(text: str, draft: str) -> str:
    return f"{text} · {LANE_DRAFTS[draft]}" if draft else text


def drafts(name: str) -> bool:
    """Whether the method (or a lane key's method) uses the draft model (False for unknown names too)."""
    spec, _ = _lane_spec(name)
    return spec is not None and spec.drafts


def method_label(method: str, prune_ratio: float = 0.0) -> str:
    """A method's (or a lane key's) name for people, saying when the draft's visual tokens were pruned and
    which draft a lane ran with when not the pair's own."""
    spec, draft = _lane_spec(method)
    if spec is None:
        return method
    return _saying_draft(spec.pruned_label if prune_ratio > 0 and spec.pruned_label else spec.label, draft)


def short_name(method: str) -> str:
    spec, draft = _lane_spec(method)
    return _saying_draft(spec.short, draft) if spec else method


def colour(method: str) -> str:
    return look(method).colour


@dataclass(frozen=True)
class Look:
    """How a method is drawn, all in its registry entry: its colour, line dash and marker."""

    colour: str = "#334155"  # (a name no method has: slate)
    dash: str = "solid"
    marker: str = "circle"


def look(method: str) -> Look:
    """A method's look; a lane on another draft than the pair's (`LaneKey`) has its method's, markers open."""
    spec, draft = _lane_spec(method)
    if spec is None:
        return Look()
    return Look(spec.colour, spec.dash, f"{spec.marker}-open" if draft else spec.marker)


class ByMethod(Mapping[str, str]):
    """One field of every registered method, by name, read from the registry as it is now (a method
    registered later is in it too): `ByMethod("short")["sage"] == "SAGE"`."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __getitem__(self, name: str) -> str:
        """The field of `name`'s entry; a lane key's (`LaneKey`) label, heading and subtitle say its draft."""
        spec, draft = _lane_spec(name)
        if spec is None:
            raise KeyError(name)
        value = str(getattr(spec, self.field))
        return _saying_draft(value, draft) if self.field in ("label", "short", "subtitle") else value

    def __iter__(self) -> Iterator[str]:
        return iter(method_names())

    def __len__(self) -> int:
        return len(_BY_NAME)


def in_order(methods: Iterable[str]) -> list[str]:
    """The known methods among `methods`, once each, in column order."""
    wanted = set(methods)
    return [name for name in method_names() if name in wanted]
