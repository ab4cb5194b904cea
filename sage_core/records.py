"""Per-round records of a decoding run, and their JSON-lines form.

A run is a `RunHeader` followed by one `RoundRecord` per target forward: round
0 is the prefill, then one per round of drafting and verification. The records
hold plain numbers, strings and tuples (never tensors), so a run saves as JSON
lines and replays in the app or a test without a model.

Traces written before some fields were renamed still read: a record's fields
under their former names (OLD_RECORD_NAMES), and the SAGE settings' (config.
OLD_SAGE_NAMES), are read under today's; a header without the dynamic tree's
settings is one written before they were recorded.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

from .config import SamplingConfig, check_max_new_tokens, check_prune_ratio
from .errors import ConfigError, TraceError
from .method_settings import OLD_DYNAMIC_NAMES, OLD_SAGE_NAMES, DynamicConfig, SageConfig, with_current_names
from .methods import is_method, method_spec, registered_names
from .trees import Tree

TRACE_FORMAT = "sage-trace/1"
#: A record's fields in traces written before the renames, and their names now.
OLD_RECORD_NAMES = {"step": "round", "step_seconds": "round_seconds"}
CUT_RULES = ("width", "threshold", "budget")
Phase = Literal["prefill", "decode"]
FinishReason = Literal["eos", "length"]


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
    sage: dict[str, Any]
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
    # The dynamic tree's settings (method_settings.DynamicConfig: depth, candidates, total_tokens), written by
    # every run as the SAGE settings are. None in traces written before they were recorded.
    dynamic: dict[str, Any] | None = None
    # The settings of the run's own method (its registry entry's class; SAGE's are `sage` as well). None
    # for a method without settings, and in traces written before they were recorded.
    settings: dict[str, Any] | None = None


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
    # sage-cost (budget.py): the budgets it weighed (node counts, best first by calibrated path
    # probability), the depth each reaches, its expected accepted length and expected tokens per
    # second by the measured cost curve, and the node count it chose (None for other methods).
    budget_nodes: tuple[int, ...] = ()
    budget_depths: tuple[int, ...] = ()
    budget_expected: tuple[float, ...] = ()
    budget_rates: tuple[float, ...] = ()
    budget_chosen: int | None = None
    # The draft's entropy (nats, of its renormalised top-k) after the root and after each accepted node:
    # its uncertainty about each new token of the round, in answer order (shorter where a node was not
    # expanded; empty without a draft, and in traces written before it was recorded).
    path_entropies: tuple[float, ...] = ()

    @property
    def tree(self) -> Tree:
        return Tree(self.tree_tokens, self.tree_parents, self.tree_draft_probs)

    @property
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
    )


def _to_plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_to_plain(v) for v in value]
    return value


def record_to_dict(record: RoundRecord) -> dict[str, Any]:
    """A record as JSON-ready data, with its derived shape figures added."""
    data = {k: _to_plain(v) for k, v in asdict(record).items()}
    data.update(depth=record.depth, root_width=record.root_width, node_count=record.node_count)
    return data


def record_from_dict(data: dict[str, Any]) -> RoundRecord:
    """The inverse of `record_to_dict` (derived figures are ignored; fields with defaults may be absent;
    the names of traces written before the renames are read as today's)."""
    data = with_current_names(data, OLD_RECORD_NAMES)
    kwargs: dict[str, Any] = {}
    for f in fields(RoundRecord):
        value = data[f.name] if f.default is MISSING else data.get(f.name, f.default)
        kwargs[f.name] = tuple(value) if isinstance(value, list) else value
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


#: Traces larger than this are refused before they are read (the app's own limit may be lower).
MAX_TRACE_BYTES = 64 * 2**20
#: The largest draft tree a trace may hold; no policy plans near it (SAGE's node budget is 64, its depth 10).
MAX_TREE_NODES = 4096
MAX_TREE_DEPTH = 256


def read_trace_text(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> str:
    """A trace file's text, refused when it is larger than `max_bytes` (checked before reading)."""
    try:
        size = Path(path).stat().st_size
        if size > max_bytes:
            raise TraceError(f"the trace file is {size / 2**20:.1f} MB; the limit is {max_bytes / 2**20:g} MB")
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(f"cannot read the trace file ({type(error).__name__})") from error


def json_line(line: str, number: int) -> dict[str, Any]:
    """One line of a trace as a JSON object; TraceError when it is not one (too deeply nested included)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise TraceError(f"line {number} is not JSON: {error.msg}") from error
    except RecursionError as error:
        raise TraceError(f"line {number} is nested too deeply to be a trace line") from error
    except ValueError as error:  # an integer of thousands of digits
        raise TraceError(f"line {number} holds a number too long to be a trace value") from error
    if not isinstance(row, dict):
        raise TraceError(f"line {number} is not a JSON object")
    return row


def load_trace(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> tuple[RunHeader, list[RoundRecord]]:
    """Read a trace written by `save_trace`; raises TraceError when it is not one."""
    return parse_trace(read_trace_text(path, max_bytes).splitlines())


def parse_trace(lines: Sequence[str]) -> tuple[RunHeader, list[RoundRecord]]:
    """Parse and check the JSON lines of a trace; raises TraceError when they are not one.

    Every field is checked against the record types before anything is used:
    types, ranges, finite non-negative times that never go backwards, trees
    whose parents form a tree, a known method, rounds numbered in order.
    """
    rows = [json_line(line, number) for number, line in enumerate((line for line in lines if line.strip()), 1)]
    return parse_trace_rows(rows)


def parse_trace_rows(rows: Sequence[dict[str, Any]]) -> tuple[RunHeader, list[RoundRecord]]:
    """`parse_trace` on lines already read as JSON objects."""
    if not rows:
        raise TraceError("the trace is empty")
    try:
        fields_of_header = dict(rows[0]["header"])
        for name, old_names in (("sage", OLD_SAGE_NAMES), ("dynamic", OLD_DYNAMIC_NAMES)):
            if isinstance(fields_of_header.get(name), dict):
                fields_of_header[name] = with_current_names(fields_of_header[name], old_names)
        if isinstance(fields_of_header.get("kept_visual_indices"), list):
            fields_of_header["kept_visual_indices"] = tuple(fields_of_header["kept_visual_indices"])
        header = RunHeader(**fields_of_header)
        records = [record_from_dict(row) for row in rows[1:]]
    except (KeyError, TypeError, ValueError) as error:
        raise TraceError(f"not a SAGE trace (JSON lines with a header, then round records): {error}") from error
    problem = header_problem(header)
    if problem is not None:
        raise TraceError(f"the header of the trace is not valid: {problem}")
    if not records:
        raise TraceError("the trace holds no rounds")
    previous_total = 0.0
    produced = 0
    for number, record in enumerate(records, 2):
        index = number - 2
        problem = record_problem(record)
        if problem is None:
            produced += len(record.new_tokens)
            problem = _sequence_problem(header, record, index, len(records), previous_total, produced)
        if problem is not None:
            raise TraceError(f"line {number} of the {header.method!r} run is not a valid round: {problem}")
        previous_total = record.total_seconds
    return header, records


def _sequence_problem(
    header: RunHeader, record: RoundRecord, index: int, count: int, previous_total: float, produced: int
) -> str | None:
    """What makes a valid record wrong in its place in the run, or None."""
    if record.method != header.method:
        return f"it is a round of {record.method!r}, not of {header.method!r}"
    if record.round != index:
        return f"it is numbered {record.round}, not {index}"
    if (record.phase == "prefill") != (index == 0):
        return "a run is its prefill (round 0), then its rounds"
    if record.total_seconds < previous_total:
        return "its total time goes backwards"
    if not math.isclose(record.total_seconds, previous_total + record.round_seconds, rel_tol=1e-6, abs_tol=1e-6):
        return "its total time is not the rounds' times added up"
    if record.round_seconds + 1e-6 < record.draft_seconds + record.verify_seconds:
        return "its drafting and verification take longer than the whole round"
    if record.total_tokens != produced:
        return f"its running total is {record.total_tokens} tokens, but the rounds so far made {produced}"
    if record.finish_reason is not None and index != count - 1:
        return "only the last round may finish the run"
    if produced > header.max_new_tokens:
        return f"the run made {produced} tokens, more than its limit of {header.max_new_tokens}"
    if record.finish_reason == "length" and produced != header.max_new_tokens:
        return f"it ends the run at its token limit, but the run made {produced} of {header.max_new_tokens}"
    return None


#: No count, id or seed in a trace is this large (a 64-bit integer's bound).
MAX_TRACE_INT = 2**63


def is_text(value: Any) -> bool:
    """Text that can be written back out: a string with no lone surrogates."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_int(value: Any, low: int = 0) -> bool:
    return type(value) is int and low <= value < MAX_TRACE_INT


def _is_number(value: Any, low: float = 0.0, high: float = math.inf) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int) and abs(value) >= MAX_TRACE_INT:
        return False
    return math.isfinite(value) and low <= value <= high


def header_problem(header: RunHeader) -> str | None:
    """What makes a header read from a file unusable, or None."""
    if header.format != TRACE_FORMAT:
        return f"unsupported trace format {header.format!r} (expected {TRACE_FORMAT})"
    texts = (header.method, header.target, header.draft, header.prompt, header.media, header.device, header.dtype)
    if not all(is_text(t) for t in texts):
        return "its names, prompt and devices must be text (valid Unicode)"
    if not is_method(header.method):
        return f"unknown method {header.method!r}; known: {', '.join(registered_names())}"
    if not _is_int(header.max_new_tokens, 1) or not _is_int(header.prompt_tokens):
        return "its token counts must be whole numbers"
    if not isinstance(header.sage, dict):
        return "its SAGE settings must be an object"
    if header.dynamic is not None and not isinstance(header.dynamic, dict):
        return "its dynamic tree settings must be an object"
    if header.settings is not None and not isinstance(header.settings, dict):
        return "its method's settings must be an object"
    if not _is_number(header.prepare_seconds) or not isinstance(header.prepare_shared, bool):
        return "its preparation time must be a finite, non-negative number of seconds"
    if header.draft_prompt_tokens is not None and not _is_int(header.draft_prompt_tokens):
        return "the draft's prompt length must be a whole number"
    kept = header.kept_visual_indices
    if kept is not None and not (isinstance(kept, tuple) and all(_is_int(i) for i in kept)):
        return "the kept visual token indices must be a list of whole numbers"
    if not _is_number(header.prune_ratio, 0.0, 1.0) or not _is_int(header.visual_tokens):
        return "its pruning ratio must lie in [0, 1) and its visual token count be a whole number"
    return _sampling_problem(header.sampling) or _settings_problem(header)


def _settings_problem(header: RunHeader) -> str | None:
    """Whether the header's settings are ones a run could have had: checked by the config types
    themselves (the SAGE and dynamic tree settings it names, the token limit, the pruning ratio, the
    sampling)."""
    known = {f.name for f in fields(SageConfig)}
    try:
        SageConfig(**{k: v for k, v in header.sage.items() if k in known})
        if header.dynamic is not None:
            DynamicConfig(**{k: v for k, v in header.dynamic.items() if k in ("depth", "candidates", "total_tokens")})
        if header.settings is not None:
            settings_of_header(header)
        check_max_new_tokens(header.max_new_tokens)
        if header.prune_ratio:
            check_prune_ratio(header.prune_ratio)
        if header.sampling is not None:
            sampling = {k: v for k, v in header.sampling.items() if k in ("temperature", "top_p", "top_k", "seed")}
            SamplingConfig(**sampling)
    except (ConfigError, TypeError) as error:
        return str(error)
    return None


def settings_of_header(header: RunHeader) -> Any:
    """The settings the run's method ran with, from its header (SAGE's and the dynamic tree's from their
    own fields in traces written before `settings`); None for a method without settings. A value its
    settings class refuses raises its ConfigError."""
    spec = method_spec(header.method)
    if spec.settings is None:
        return None
    recorded = header.settings
    if recorded is None and spec.settings_field in ("sage", "dynamic"):
        recorded = getattr(header, spec.settings_field)
    known = {f.name for f in fields(spec.settings)}
    return spec.settings(**{k: v for k, v in (recorded or {}).items() if k in known})


def _sampling_problem(sampling: Any) -> str | None:
    """What is wrong with a header's sampling settings (None: greedy), or None."""
    if sampling is None:
        return None
    if not isinstance(sampling, dict):
        return "its sampling settings must be an object"
    numbers = (sampling.get("temperature", 0.0), sampling.get("top_p", 1.0))
    seed, top_k = sampling.get("seed"), sampling.get("top_k", 0)
    if not all(_is_number(v) for v in numbers) or not _is_int(top_k) or not (seed is None or _is_int(seed)):
        return "its sampling settings must hold a temperature, top-p, top-k and seed that are numbers"
    return None


def record_problem(record: RoundRecord) -> str | None:
    """What makes a record read from a file unusable (wrong types, ranges, times, or a tree that is not
    one), or None."""
    if not isinstance(record.method, str) or record.phase not in ("prefill", "decode"):
        return "its method must be text and its phase 'prefill' or 'decode'"
    if record.finish_reason not in (None, "eos", "length"):
        return "its finish reason must be 'eos', 'length' or null"
    sequences = (
        record.tree_tokens,
        record.tree_parents,
        record.tree_draft_probs,
        record.accepted_nodes,
        record.accepted_tokens,
        record.new_tokens,
        record.new_token_texts,
    )
    if not all(isinstance(seq, tuple) for seq in sequences):
        return "its trees, paths and tokens must be lists"
    ints = (record.round, record.bonus_token, record.total_tokens, *record.tree_tokens, *record.accepted_tokens)
    if not all(_is_int(v) for v in (*ints, *record.new_tokens, *record.accepted_nodes)):
        return "token ids, rounds and node indices must be non-negative integers"
    if not all(type(p) is int for p in record.tree_parents):
        return "tree parents must be integers"
    times = (record.draft_seconds, record.verify_seconds, record.round_seconds, record.total_seconds)
    if not all(_is_number(t) for t in times):
        return "times must be finite, non-negative numbers of seconds"
    if not all(_is_number(p, 0.0, 1.0) for p in record.tree_draft_probs):
        return "draft probabilities must lie in [0, 1]"
    if record.entropy is not None and not _is_number(record.entropy):
        return "the entropy must be a finite, non-negative number"
    if record.alpha is not None and not _is_number(record.alpha, 0.0, 1.0):
        return "the confidence alpha must lie in [0, 1]"
    if not all(v is None or _is_int(v) for v in (record.depth_max, record.planned_depth, record.planned_width)):
        return "planned depths and widths must be non-negative integers"
    count = len(record.tree_tokens)
    if len(record.tree_parents) != count or len(record.tree_draft_probs) != count:
        return "the tree's tokens, parents and probabilities differ in length"
    if count > MAX_TREE_NODES:
        return f"its tree has {count} nodes; the limit is {MAX_TREE_NODES}"
    if any(not -1 <= parent < index for index, parent in enumerate(record.tree_parents)):
        return "a tree node's parent must come before it (or be the root, -1)"
    if count and record.tree.depth > MAX_TREE_DEPTH:
        return f"its tree is {record.tree.depth} levels deep; the limit is {MAX_TREE_DEPTH}"
    if any(not 0 <= node < count for node in record.accepted_nodes):
        return "an accepted node is not in the tree"
    if len(record.accepted_tokens) != len(record.accepted_nodes):
        return "the accepted path's nodes and tokens differ in length"
    if not all(type(v) is int and 0 <= v < count for v in record.tried_nodes):
        return "a tried node is not in the tree"
    if len(record.accept_probs) != len(record.tried_nodes) or not all(
        _is_number(p, 0.0, 1.0) for p in record.accept_probs
    ):
        return "each tried node needs an acceptance probability in [0, 1]"
    if not all(is_text(t) for t in record.new_token_texts) or len(record.new_token_texts) != len(record.new_tokens):
        return "each new token needs its text"
    return _path_problem(record) or _teaching_problem(record) or _budget_problem(record)


def _path_problem(record: RoundRecord) -> str | None:
    """Whether the accepted nodes form a path of the tree down from the root, with the tree's tokens, and
    the round's new tokens are that path's tokens and then the bonus (cut only where the run finished)."""
    parent = -1
    for node, token in zip(record.accepted_nodes, record.accepted_tokens, strict=True):
        if record.tree_parents[node] != parent:
            return "the accepted nodes are not a path of the tree down from the root"
        if record.tree_tokens[node] != token:
            return "an accepted token is not the token of its node in the tree"
        parent = node
    produced = (*record.accepted_tokens, record.bonus_token)
    if record.phase == "prefill" and (record.tree_tokens or record.accepted_nodes):
        return "the prefill drafts no tree"
    if not record.new_tokens:
        return "a round adds at least one token"
    if record.finish_reason is None and record.new_tokens != produced:
        return "its new tokens are not the accepted tokens and then the bonus token"
    if record.new_tokens != produced[: len(record.new_tokens)]:
        return "its new tokens are not the accepted tokens and then the bonus token (cut where the run ended)"
    return None


def _teaching_problem(record: RoundRecord) -> str | None:
    """What is wrong with a record's optional teaching fields, or None."""
    counts = (record.cut_by_width, record.cut_by_threshold, record.cut_by_budget)
    whole = (record.root_top_tokens, *counts, record.offer_widths, record.cut_tokens, record.target_choices)
    probabilities = (record.root_top_probs, record.cut_probs, record.level_thresholds)
    parents = (record.offer_parents, record.cut_parents)
    sequences = (*whole, *probabilities, *parents, record.cut_rules)
    if not all(isinstance(seq, tuple) for seq in sequences):
        return "its teaching fields must be lists"
    if not all(_is_int(v) for seq in whole for v in seq) or not all(_is_int(v, -1) for seq in parents for v in seq):
        return "token ids, node indices and counts must be integers"
    if not all(_is_number(p, 0.0, 1.0) for seq in probabilities for p in seq):
        return "draft probabilities and thresholds must lie in [0, 1]"
    count = len(record.tree_tokens)
    if len(record.root_top_tokens) != len(record.root_top_probs):
        return "the root's top-k tokens and probabilities differ in length"
    if any(len(c) not in (0, len(record.level_thresholds)) for c in counts):
        return "the cut counts must have one entry per level"
    if len(record.offer_parents) != len(record.offer_widths):
        return "each offering node needs one width"
    cut = (record.cut_parents, record.cut_tokens, record.cut_probs, record.cut_rules)
    if len({len(c) for c in cut}) != 1:
        return "the cut candidates' parents, tokens, probabilities and rules differ in length"
    if any(not -1 <= parent < count for parent in (*record.offer_parents, *record.cut_parents)):
        return "a cut candidate's parent is not in the tree"
    if not all(isinstance(rule, str) and rule in CUT_RULES for rule in record.cut_rules):
        return f"cut rules must be one of {', '.join(CUT_RULES)}"
    if len(record.target_choices) not in (0, count + 1):
        return "the target's choices need one entry for the root and one per node"
    if record.window_mean is not None and not _is_number(record.window_mean):
        return "the window's mean acceptance must be a finite, non-negative number"
    if record.next_depth_max is not None and not _is_int(record.next_depth_max, 1):
        return "D_max must be a positive integer"
    entropies = record.path_entropies
    if not isinstance(entropies, tuple) or len(entropies) > len(record.accepted_nodes) + 1:
        return "the path's entropies need at most one entry for the root and one per accepted node"
    if not all(_is_number(h, 0.0, 100.0) for h in entropies):
        return "the path's entropies must be finite, non-negative numbers"
    return None


def _budget_problem(record: RoundRecord) -> str | None:
    """What is wrong with a record's budget fields (sage-cost), or None."""
    columns = (record.budget_nodes, record.budget_depths, record.budget_expected, record.budget_rates)
    if not all(isinstance(c, tuple) for c in columns) or len({len(c) for c in columns}) != 1:
        return "the budgets weighed need one node count, depth, expectation and rate each"
    if not all(_is_int(v, 1) for v in (*record.budget_nodes, *record.budget_depths)):
        return "the budgets' node counts and depths must be positive integers"
    if not all(_is_number(v) for v in (*record.budget_expected, *record.budget_rates)):
        return "the budgets' expectations and rates must be finite, non-negative numbers"
    if record.budget_chosen is not None and record.budget_chosen not in record.budget_nodes:
        return "the budget chosen must be one of the budgets weighed"
    return None
