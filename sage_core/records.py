"""Per-round records of a decoding run, and their JSON-lines form.

A run is a `RunHeader` followed by one `RoundRecord` per target forward: round
0 is the prefill, then one per round of drafting and verification. The records
hold plain numbers, strings and tuples (never tensors), so a run saves as JSON
lines and replays in the app or a test without a model.

Reading a trace back, with every field checked, is trace_check.py's. A record
written before some fields were renamed still reads: its fields under their former
names (OLD_RECORD_NAMES) are read under today's.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import MISSING, Field, asdict, dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

from .method_settings import shown, with_current_names
from .trees import Tree

TRACE_FORMAT = "sage-trace/3"
#: The format before methods kept their own round records (`RoundRecord.own`): their columns flat in every
#: record (`FORMER_OWN_COLUMNS`); still read, as today's (trace_check.current_header, `fold_former_columns`).
TRACE_FORMAT_2 = "sage-trace/2"
#: The format before a header's settings were one mapping (`sage`, `dynamic` and the run's own `settings`
#: apart): still read, as today's (trace_check.current_header).
TRACE_FORMAT_1 = "sage-trace/1"
#: A record's fields in traces written before the renames, and their names now.
OLD_RECORD_NAMES = {"step": "round", "step_seconds": "round_seconds"}
#: The columns every record held in formats 1 and 2, now fields of a method's own record: sage-cost's budgets
#: weighed (budget.SageCostRecord) and SMART's growth and weighing (smart.SmartRecord).
FORMER_OWN_COLUMNS = (
    "budget_nodes",
    "budget_depths",
    "budget_expected",
    "budget_rates",
    "budget_chosen",
    "node_ratios",
    "node_speedups",
    "cut_ratios",
    "cut_speedups",
)
#: The largest benefit/cost ratio a record holds (SMART: a node that costs nothing is recorded at it).
MAX_RATIO = 1e9
#: The rules every method's cut candidates may name; a method's own record adds its own (`OwnRecord.cut_rules`:
#: SMART's "cost").
CUT_RULES = ("width", "threshold", "budget")
#: No count, id or seed in a trace is this large (a 64-bit integer's bound).
MAX_TRACE_INT = 2**63
Phase = Literal["prefill", "decode"]
FinishReason = Literal["eos", "length"]


#: The most CPU threads a count may name (`sage_core.threads`; a typo such as 1000 is refused, not obeyed).
MAX_THREADS = 256


@dataclass(frozen=True)
class RunHeader:
    """What was decoded: the first line of a trace."""

    method: str
    target: str
    draft: str
    prompt: str
    media: str
    max_new_tokens: int
    prompt_tokens: int
    device: str
    dtype: str
    # Every method's settings the run carried, by method name (config.DecodeConfig.settings_record): SAGE's
    # ("sage"), the dynamic tree's ("dynamic"), the run's own method's and any other given, each as a dict
    # of its settings class's fields.
    settings: dict[str, dict[str, Any]]
    format: str = TRACE_FORMAT
    # The processors' time this run is charged (in its prefill, round 0), and
    # whether the inputs were prepared once for several runs (a race).
    prepare_seconds: float = 0.0
    prepare_shared: bool = False
    # Draft-side visual token pruning (pruning.py): the ratio asked for, the
    # prompt's visual tokens, the draft's prompt length after pruning (None
    # without a draft), and which visual tokens the draft read (indices among
    # the visual tokens; None when it read them all).
    prune_ratio: float = 0.0
    visual_tokens: int = 0
    draft_prompt_tokens: int | None = None
    kept_visual_indices: tuple[int, ...] | None = None
    # The sampling settings (config.SamplingConfig) with the seed the run used
    # (None when greedy). Absent in traces written before sampling existed: greedy.
    sampling: dict[str, Any] | None = None
    # The draft's block when it is a one-pass draft (models/one_pass.py: depths 1 .. K from one forward a
    # round); 0 for a sequential draft (one forward per tree level) and in traces written before it.
    draft_block: int = 0
    # The CPU threads torch ran on (`sage_core.threads`: chosen for the pair, or as asked); 0 in traces written
    # before it was recorded.
    threads: int = 0

    def settings_of(self, method: str) -> dict[str, Any]:
        """The settings `method` ran with as recorded (empty: its defaults, or a method without settings)."""
        recorded = self.settings.get(method) if isinstance(self.settings, dict) else None
        return recorded if isinstance(recorded, dict) else {}


def is_count(value: Any, low: int = 0) -> bool:
    """A whole number a trace may hold: an int (not a bool) in [low, MAX_TRACE_INT)."""
    return type(value) is int and low <= value < MAX_TRACE_INT


def is_number(value: Any, low: float = 0.0, high: float = math.inf) -> bool:
    """A finite number (not a bool) in [low, high], as a trace may hold one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int) and abs(value) >= MAX_TRACE_INT:
        return False
    return math.isfinite(value) and low <= value <= high


class OwnRecord:
    """The base of a method's own record of a round (`MethodSpec.record`, `RoundRecord.own`): a frozen dataclass
    of plain numbers, strings and tuples, as a round record holds them, that checks itself against its round
    (`problem`: trace_check refuses a trace with it in one sentence) and says itself in words (`words`: the
    explainer's text after the method's sentence). A trace writes it as its type's name and its fields
    (`own_to_dict`) and reads it back as the run's method declares (`own_from_dict`)."""

    #: The rules its method adds to a round's cut candidates (`RoundRecord.cut_rules`), each with its words
    #: (the tree panel's): SMART's "cost".
    cut_rules: ClassVar[Mapping[str, str]] = {}

    def problem(self, record: RoundRecord) -> str | None:
        """What makes it one its method could not have written beside `record` (one clause, as trace_check
        words a round's problems: "the budget chosen must be one of the budgets weighed"), or None."""
        return None

    def words(self, record: RoundRecord) -> str:
        """It in words, beside its round (`record`): the explainer's text after the method's sentence ("": nothing)."""
        return ""


@dataclass(frozen=True)
class RoundRecord:
    """One round: draft a tree, verify it in one target forward, commit.

    The prefill is round 0 (phase "prefill"): one target forward over the
    prompt, no tree, its argmax is the first new token (the "bonus").
    """

    method: str
    round: int
    phase: Phase
    # The draft tree below the root (the last committed token): tokens plus
    # parents (-1 = the root), and each node's draft probability given its
    # parent. Depths, paths and masks are derived from these (see trees.py).
    tree_tokens: tuple[int, ...]
    tree_parents: tuple[int, ...]
    tree_draft_probs: tuple[float, ...]
    # SAGE's policy state for this round (None for the baselines).
    entropy: float | None
    alpha: float | None
    depth_max: int | None
    planned_depth: int | None
    planned_width: int | None
    # Verification: the accepted path (node indices), its tokens, the bonus.
    accepted_nodes: tuple[int, ...]
    accepted_tokens: tuple[int, ...]
    bonus_token: int
    # What this round appended to the output (accepted tokens then the bonus,
    # cut at end-of-sequence or the token limit), with each token's text.
    new_tokens: tuple[int, ...]
    new_token_texts: tuple[str, ...]
    # Device-synchronised wall time of this round's parts, in seconds.
    draft_seconds: float
    verify_seconds: float
    round_seconds: float
    # Running totals after this round (prefill included).
    total_tokens: int
    total_seconds: float
    finish_reason: FinishReason | None = None
    # Sampling only: the children the verifier tried, in order, and each one's
    # acceptance probability (sampling.py); empty when greedy.
    tried_nodes: tuple[int, ...] = ()
    accept_probs: tuple[float, ...] = ()
    # -- What the teaching mode explains (optional: traces written before it hold none). --
    # The draft's top-k after the root, most likely first (what alpha is computed from).
    root_top_tokens: tuple[int, ...] = ()
    root_top_probs: tuple[float, ...] = ()
    # SAGE's online rule, level l = index + 1: the threshold theta_l it applied, and how
    # many candidates each rule cut (width, threshold, node budget).
    level_thresholds: tuple[float, ...] = ()
    cut_by_width: tuple[int, ...] = ()
    cut_by_threshold: tuple[int, ...] = ()
    cut_by_budget: tuple[int, ...] = ()
    # Per expanded node (-1 = the root) the width W_l it offered its children.
    offer_parents: tuple[int, ...] = ()
    offer_widths: tuple[int, ...] = ()
    # The best few candidates cut at each level: parent node, token, draft probability, rule.
    cut_parents: tuple[int, ...] = ()
    cut_tokens: tuple[int, ...] = ()
    cut_probs: tuple[float, ...] = ()
    cut_rules: tuple[str, ...] = ()
    # The target's choice (argmax) after the root and after each node: what greedy verification
    # compared (empty when sampling).
    target_choices: tuple[int, ...] = ()
    # The mean acceptance of SAGE's window when it closed after this round (None otherwise),
    # and the D_max it set for the next round.
    window_mean: float | None = None
    next_depth_max: int | None = None
    # The draft's entropy (nats, of its renormalised top-k) after the root and after each accepted node:
    # its uncertainty about each new token of the round, in answer order (shorter where a node was not
    # expanded; empty without a draft, and in traces written before it was recorded).
    path_entropies: tuple[float, ...] = ()
    # Draft forwards this round ran: 1 with a one-pass draft, the tokens fed plus one per expanded level
    # with a sequential one, 0 without a draft (None for the prefill, and in traces written before it).
    draft_forwards: int | None = None
    # The method's own record of the round (its `MethodSpec.record`: sage-cost's budgets weighed, SMART's
    # growth and weighing); None for a method without one, and for a round it recorded nothing in.
    own: OwnRecord | None = None

    @cached_property
    def tree(self) -> Tree:
        """The round's tree (made once: the panels, the account and the headline read it at every step of a
        streamed race; a record is frozen, and the cache sits outside its fields: traces and equality as
        before)."""
        return Tree(self.tree_tokens, self.tree_parents, self.tree_draft_probs)

    @cached_property
    def depth(self) -> int:
        return self.tree.depth

    @property
    def root_width(self) -> int:
        return self.tree.root_width

    @property
    def node_count(self) -> int:
        return len(self.tree_tokens)

    @property
    def accepted_length(self) -> int:
        """tau of this round: accepted draft tokens, bonus excluded."""
        return len(self.accepted_tokens)

    @property
    def draft_token_count(self) -> int:
        """How many of `new_tokens` came from the draft (the rest is the bonus)."""
        return min(len(self.accepted_tokens), len(self.new_tokens))

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


#: The prefill's round (round 0): one target forward over the prompt, no tree, no policy, nothing accepted.
NO_TREE: dict[str, Any] = {
    "phase": "prefill",
    "tree_tokens": (),
    "tree_parents": (),
    "tree_draft_probs": (),
    "entropy": None,
    "alpha": None,
    "depth_max": None,
    "planned_depth": None,
    "planned_width": None,
    "accepted_nodes": (),
    "accepted_tokens": (),
}


@dataclass(frozen=True)
class RunSummary:
    """The figures of a whole run, derived from its records."""

    method: str
    token_ids: tuple[int, ...]
    text: str
    rounds: int
    target_forwards: int
    mean_accepted: float
    tokens_per_forward: float
    seconds: float
    decode_seconds: float
    tokens_per_second: float
    decode_tokens_per_second: float  # tokens after the prefill's one, over decode_seconds
    finish_reason: FinishReason | None
    draft_forwards: int = 0  # over the decode rounds (a one-pass draft: one a round; 0 without a draft)


def summarize(records: Sequence[RoundRecord]) -> RunSummary:
    """Fold a run's records into its figures (tau excludes the bonus token)."""
    if not records:
        raise ValueError("a run has at least its prefill record")
    decode_rounds = [r for r in records if r.phase == "decode"]
    token_ids = tuple(t for r in records for t in r.new_tokens)
    text = "".join(s for r in records for s in r.new_token_texts)
    seconds = records[-1].total_seconds
    prefill_seconds = sum(r.round_seconds for r in records if r.phase == "prefill")
    decode_seconds = seconds - prefill_seconds
    decode_tokens = sum(len(r.new_tokens) for r in decode_rounds)
    return RunSummary(
        method=records[0].method,
        token_ids=token_ids,
        text=text,
        rounds=len(decode_rounds),
        target_forwards=len(records),
        mean_accepted=statistics.fmean(r.accepted_length for r in decode_rounds) if decode_rounds else 0.0,
        tokens_per_forward=len(token_ids) / len(records),
        seconds=seconds,
        decode_seconds=decode_seconds,
        tokens_per_second=len(token_ids) / seconds if seconds > 0 else 0.0,
        decode_tokens_per_second=decode_tokens / decode_seconds if decode_seconds > 0 else 0.0,
        finish_reason=records[-1].finish_reason,
        draft_forwards=sum(r.draft_forwards or 0 for r in decode_rounds),
    )


def round_fields() -> tuple[Field[Any], ...]:
    """A round record's fields, in order: the one list of them for everyone who copies, writes or prints a
    record (its method's own record is the last, `own`)."""
    return fields(RoundRecord)


def _to_plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_to_plain(v) for v in value]
    if isinstance(value, OwnRecord):
        return own_to_dict(value)
    return value


def own_fields(own: OwnRecord | type[OwnRecord]) -> tuple[Field[Any], ...]:
    """An own record's fields (of its type, or of one of them): a method's own record is a dataclass."""
    return fields(cast(Any, own))


def own_to_dict(own: OwnRecord) -> dict[str, Any]:
    """A method's own record as JSON-ready data: its type's name (`type`), then its fields."""
    return {"type": type(own).__name__, **{f.name: _to_plain(getattr(own, f.name)) for f in own_fields(own)}}


def own_from_dict(data: Any, kind: type[OwnRecord] | None) -> OwnRecord | None:
    """The inverse of `own_to_dict`, as the run's method declares its own record (`kind`; None: it keeps
    none); a ValueError of one clause when `data` is not one of `kind` (trace_check words it a round's
    problem)."""
    if data is None or (kind is not None and type(data) is kind):
        return data
    if kind is None:
        raise ValueError("it holds an own record, but its method keeps none")
    if not isinstance(data, dict):
        raise ValueError(f"its own record must be an object of {kind.__name__}'s fields")
    if data.get("type") != kind.__name__:
        raise ValueError(f"its own record is a {shown(data.get('type'))}, not its method's {kind.__name__}")
    known = [f.name for f in own_fields(kind)]
    unknown = [name for name in data if name != "type" and name not in known]
    if unknown:
        raise ValueError(f"its own record has no field {shown(unknown[0])} ({kind.__name__}'s are {', '.join(known)})")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "type"}
    try:
        return kind(**values)
    except Exception as error:  # its fields missing, or its own checks (a method's class) refusing them
        said = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(f"its own record is not a {kind.__name__}: {said}") from error


def fold_former_columns(data: dict[str, Any], kind: type[OwnRecord] | None) -> dict[str, Any]:
    """A record of a trace written before methods kept their own records (formats 1 and 2), as today's: its
    flat columns (`FORMER_OWN_COLUMNS`) that are fields of its method's own record (`kind`) become that record
    (None when they are all empty, as in a prefill); the others, no method's now, are left out."""
    folded = {k: v for k, v in data.items() if k not in FORMER_OWN_COLUMNS}
    if kind is None or "own" in data:
        return folded
    mine = {f.name: data[f.name] for f in own_fields(kind) if f.name in data}
    if any(value not in (None, [], ()) for value in mine.values()):
        folded["own"] = {"type": kind.__name__, **mine}
    return folded


def record_to_dict(record: RoundRecord) -> dict[str, Any]:
    """A record as JSON-ready data, with its derived shape figures added (its own record as `own_to_dict`)."""
    data = {f.name: _to_plain(getattr(record, f.name)) for f in round_fields()}
    data.update(depth=record.depth, root_width=record.root_width, node_count=record.node_count)
    return data


def record_from_dict(data: dict[str, Any], own: type[OwnRecord] | None = None) -> RoundRecord:
    """The inverse of `record_to_dict` (derived figures are ignored; fields with defaults may be absent;
    the names of traces written before the renames are read as today's; its own record as its method
    declares, `own`: `own_from_dict`)."""
    data = with_current_names(data, OLD_RECORD_NAMES)
    kwargs: dict[str, Any] = {}
    for f in round_fields():
        value = data[f.name] if f.default is MISSING else data.get(f.name, f.default)
        kwargs[f.name] = tuple(value) if isinstance(value, list) else value
    kwargs["own"] = own_from_dict(kwargs["own"], own)
    return RoundRecord(**kwargs)


def save_trace(path: str | Path, header: RunHeader, records: Iterable[RoundRecord]) -> None:
    """Write a run as JSON lines: the header, then one record per line."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps({"header": asdict(header)}) + "\n")
        for record in records:
            out.write(json.dumps(record_to_dict(record)) + "\n")


def trace_lines(header: RunHeader, records: Iterable[RoundRecord]) -> Iterator[str]:
    """The JSON lines of a run (as `save_trace` writes them)."""
    yield json.dumps({"header": asdict(header)})
    for record in records:
        yield json.dumps(record_to_dict(record))
