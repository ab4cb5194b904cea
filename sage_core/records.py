"""Per-step records of a decoding run, and their JSON-lines form.

A run is a `RunHeader` followed by one `StepRecord` per target forward. The
records hold plain numbers, strings and tuples (never tensors), so a run
saves as JSON lines and replays in the app or a test without a model.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

from .config import METHODS
from .trees import Tree

TRACE_FORMAT = "sage-trace/1"
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
    # The processors' time this run is charged (in its prefill step), and
    # whether the inputs were prepared once for several runs (a race).
    prepare_seconds: float = 0.0
    prepare_shared: bool = False
    # The sampling settings (config.SamplingConfig) with the seed the run used
    # (None when greedy). Absent in traces written before sampling existed: greedy.
    sampling: dict[str, Any] | None = None


@dataclass(frozen=True)
class StepRecord:
    """One round: draft a tree, verify it in one target forward, commit.

    The prefill is step 0 (phase "prefill"): one target forward over the
    prompt, no tree, its argmax is the first new token (the "bonus").
    """

    method: str
    step: int
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
    # What this step appended to the output (accepted tokens then the bonus,
    # cut at end-of-sequence or the token limit), with each token's text.
    new_tokens: tuple[int, ...]
    new_token_texts: tuple[str, ...]
    # Device-synchronised wall time of this step's parts, in seconds.
    draft_seconds: float
    verify_seconds: float
    step_seconds: float
    # Running totals after this step (prefill included).
    total_tokens: int
    total_seconds: float
    finish_reason: FinishReason | None = None
    # Sampling only: the children the verifier tried, in order, and each one's
    # acceptance probability (sampling.py); empty when greedy.
    tried_nodes: tuple[int, ...] = ()
    accept_probs: tuple[float, ...] = ()

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
    steps: int
    target_forwards: int
    mean_accepted: float
    tokens_per_forward: float
    seconds: float
    decode_seconds: float
    tokens_per_second: float
    decode_tokens_per_second: float  # tokens after the prefill's one, over decode_seconds
    finish_reason: FinishReason | None


def summarize(records: Sequence[StepRecord]) -> RunSummary:
    """Fold a run's records into its figures (tau excludes the bonus token)."""
    if not records:
        raise ValueError("a run has at least its prefill record")
    decode_steps = [r for r in records if r.phase == "decode"]
    token_ids = tuple(t for r in records for t in r.new_tokens)
    text = "".join(s for r in records for s in r.new_token_texts)
    seconds = records[-1].total_seconds
    prefill_seconds = sum(r.step_seconds for r in records if r.phase == "prefill")
    decode_seconds = seconds - prefill_seconds
    decode_tokens = sum(len(r.new_tokens) for r in decode_steps)
    return RunSummary(
        method=records[0].method,
        token_ids=token_ids,
        text=text,
        steps=len(decode_steps),
        target_forwards=len(records),
        mean_accepted=statistics.fmean(r.accepted_length for r in decode_steps) if decode_steps else 0.0,
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


def record_to_dict(record: StepRecord) -> dict[str, Any]:
    """A record as JSON-ready data, with its derived shape figures added."""
    data = {k: _to_plain(v) for k, v in asdict(record).items()}
    data.update(depth=record.depth, root_width=record.root_width, node_count=record.node_count)
    return data


def record_from_dict(data: dict[str, Any]) -> StepRecord:
    """The inverse of `record_to_dict` (derived figures are ignored; fields with defaults may be absent)."""
    kwargs: dict[str, Any] = {}
    for f in fields(StepRecord):
        if f.name not in data and f.default is not MISSING:
            continue
        value = data[f.name]
        kwargs[f.name] = tuple(value) if isinstance(value, list) else value
    return StepRecord(**kwargs)


def save_trace(path: str | Path, header: RunHeader, records: Iterable[StepRecord]) -> None:
    """Write a run as JSON lines: the header, then one record per line."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps({"header": asdict(header)}) + "\n")
        for record in records:
            out.write(json.dumps(record_to_dict(record)) + "\n")


def trace_lines(header: RunHeader, records: Iterable[StepRecord]) -> Iterator[str]:
    """The JSON lines of a run (as `save_trace` writes them)."""
    yield json.dumps({"header": asdict(header)})
    for record in records:
        yield json.dumps(record_to_dict(record))


class TraceError(ValueError):
    """A trace file that cannot be read back."""


def load_trace(path: str | Path) -> tuple[RunHeader, list[StepRecord]]:
    """Read a trace written by `save_trace`; raises TraceError when it is not one."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(f"cannot read the trace file: {error}") from error
    return parse_trace(lines)


def parse_trace(lines: Sequence[str]) -> tuple[RunHeader, list[StepRecord]]:
    """Parse the JSON lines of a trace; raises TraceError when they are not one."""
    lines = [line for line in lines if line.strip()]
    try:
        first = json.loads(lines[0])
        header = RunHeader(**first["header"])
        if header.format != TRACE_FORMAT:
            raise TraceError(f"unsupported trace format {header.format!r} (expected {TRACE_FORMAT})")
        records = [record_from_dict(json.loads(line)) for line in lines[1:]]
    except TraceError:
        raise
    except (IndexError, KeyError, TypeError, ValueError) as error:
        raise TraceError(f"not a SAGE trace (JSON lines with a header, then step records): {error}") from error
    if not records:
        raise TraceError("the trace holds no steps")
    if header.method not in METHODS:
        raise TraceError(f"unknown method {header.method!r} in the trace; known: {', '.join(METHODS)}")
    previous_total = 0.0
    for number, record in enumerate(records, 2):
        problem = record_problem(record)
        if problem is None and record.total_seconds < previous_total:
            problem = "its total time goes backwards"
        if problem is not None:
            raise TraceError(f"line {number} of the {header.method!r} run is not a valid step: {problem}")
        previous_total = record.total_seconds
    return header, records


def record_problem(record: StepRecord) -> str | None:
    """What makes a record read from a file unusable (wrong types, times, or a tree that is not one), or None."""
    ints = (record.step, record.bonus_token, record.total_tokens)
    sequences = (
        record.tree_tokens,
        record.tree_parents,
        record.accepted_nodes,
        record.accepted_tokens,
        record.new_tokens,
    )
    if not all(type(v) is int for v in ints) or not all(type(v) is int for seq in sequences for v in seq):
        return "token ids, steps and node indices must be integers"
    times = (record.draft_seconds, record.verify_seconds, record.step_seconds, record.total_seconds)
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t >= 0 for t in times):
        return "times must be finite, non-negative numbers of seconds"
    if not all(isinstance(p, (int, float)) and 0.0 <= p <= 1.0 for p in record.tree_draft_probs):
        return "draft probabilities must lie in [0, 1]"
    count = len(record.tree_tokens)
    if len(record.tree_parents) != count or len(record.tree_draft_probs) != count:
        return "the tree's tokens, parents and probabilities differ in length"
    if any(not -1 <= parent < index for index, parent in enumerate(record.tree_parents)):
        return "a tree node's parent must come before it (or be the root, -1)"
    if any(not 0 <= node < count for node in record.accepted_nodes):
        return "an accepted node is not in the tree"
    if not all(type(v) is int and 0 <= v < count for v in record.tried_nodes):
        return "a tried node is not in the tree"
    if len(record.accept_probs) != len(record.tried_nodes) or not all(
        isinstance(p, (int, float)) and not isinstance(p, bool) and 0.0 <= p <= 1.0 for p in record.accept_probs
    ):
        return "each tried node needs an acceptance probability in [0, 1]"
    if not all(isinstance(t, str) for t in record.new_token_texts) or len(record.new_token_texts) != len(
        record.new_tokens
    ):
        return "each new token needs its text"
    return None
