"""Reading a trace back: every field of every line checked before anything is used.

A trace (records.py: a `RunHeader` line, then one `RoundRecord` per round) may come from a file a
visitor uploads, so `parse_trace` refuses in one sentence (`TraceError`) whatever a run could not have
written: wrong types, values out of range, times that go backwards or do not add up, trees whose
parents do not form a tree, an unknown method, rounds out of order, settings the config types refuse.

Traces written before some settings were renamed still read (docs/cli-and-library.md lists the old
names and until when): the SAGE settings' `top_k` and `expansion_threshold` (method_settings.
OLD_SAGE_NAMES) and a record's `step` and `step_seconds` (records.OLD_RECORD_NAMES) under today's
names; a header without the dynamic tree's settings is one written before they were recorded. A round's own
record (`RoundRecord.own`) reads as the type its method declares (`MethodSpec.record`) and checks itself
(`OwnRecord.problem`); in traces of formats 1 and 2 its columns were flat in every record, and read into it
(`records.fold_former_columns`).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import select
import stat
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, BinaryIO

from .config import SamplingConfig, check_max_new_tokens, check_prune_ratio
from .cost_curve import COST_SIZES, CostCurve
from .errors import ConfigError, TraceError
from .method_settings import OLD_SAGE_NAMES, shown, with_current_names
from .methods import is_method, method_spec, registered_names
from .records import (
    CUT_RULES,
    FORMER_OWN_COLUMNS,
    MAX_THREADS,
    TRACE_FORMAT,
    TRACE_FORMAT_1,
    TRACE_FORMAT_2,
    OwnRecord,
    RoundRecord,
    RunHeader,
    fold_former_columns,
    is_count,
    is_number,
    own_fields,
    own_from_dict,
    record_from_dict,
)

#: Traces larger than this are refused before they are read (the app's own limit may be lower).
MAX_TRACE_BYTES = 64 * 2**20
#: The largest draft tree a trace may hold; no policy plans near it (SAGE's node budget is 64, its depth 10).
MAX_TREE_NODES = 4096
MAX_TREE_DEPTH = 256
#: A round's per-level columns (thresholds, cut counts) hold at most one entry a level of the deepest tree; every
#: other list of a round (cut candidates, offers, tried nodes, the root's top-k, the lists of its own record) at
#: most one entry a node of the largest tree and one for the root. The tree panel and the explainer draw them
#: outside the queue, so no column of a round may cost more to draw than its tree.
PER_LEVEL_COLUMNS = ("level_thresholds", "cut_by_width", "cut_by_threshold", "cut_by_budget")
MAX_COLUMN = MAX_TREE_NODES + 1
#: The tree's own columns, bounded as the tree (`_tree_problem`).
TREE_COLUMNS = ("tree_tokens", "tree_parents", "tree_draft_probs")
#: How long a trace that is not a regular file (a FIFO, a device) may send nothing before it is refused.
STREAM_IDLE_SECONDS = 10.0


def read_trace_text(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> str:
    """A trace file's text, refused when it is larger than `max_bytes`: a regular file by its size before
    reading; anything else (a device such as /dev/zero, a FIFO, a /proc file: their sizes read 0) by reading
    at most `max_bytes` + 1 bytes. A FIFO is opened without waiting for a writer, and a source that sends
    nothing for `STREAM_IDLE_SECONDS` (a FIFO nobody writes to) is refused: never read, or waited on, for ever."""
    try:
        descriptor = os.open(Path(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(descriptor, "rb", buffering=0) as handle:
            info = os.fstat(descriptor)
            if stat.S_ISREG(info.st_mode) and info.st_size > max_bytes:
                megabytes = info.st_size / 2**20
                raise TraceError(f"the trace file is {megabytes:.1f} MB; the limit is {max_bytes / 2**20:g} MB")
            data = read_bounded(handle, max_bytes + 1, STREAM_IDLE_SECONDS, stat.S_ISFIFO(info.st_mode))
        if len(data) > max_bytes:
            raise TraceError(f"the trace file holds more than the limit of {max_bytes / 2**20:g} MB")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(f"cannot read the trace file ({type(error).__name__})") from error


def read_bounded(handle: BinaryIO, most: int, idle_seconds: float, fifo: bool = False) -> bytes:
    """At most `most` bytes of a file opened without blocking, up to its end. Nothing to read yet (a pipe
    whose writer has not written; a FIFO's first end of file, before its writer opened it) is waited on with
    select() for at most `idle_seconds` at a time, then a TraceError."""
    chunks: list[bytes] = []
    left, before_writer = most, fifo
    while left > 0:
        chunk: bytes | None = handle.read(min(left, 2**20))
        if chunk == b"" and before_writer:  # a FIFO's writer may not have opened it yet: wait for it once
            before_writer, chunk = False, None
        if chunk is None:
            if not select.select([handle], [], [], idle_seconds)[0]:
                raise TraceError(f"the trace file sent nothing for {idle_seconds:g} s")
            continue
        if not chunk:
            break
        before_writer = False
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


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


def json_lines(text: str) -> list[str]:
    """A JSON Lines text's lines, split at "\\n" only, as the standard says (a "\\r" before it is JSON's white
    space): U+2028 and U+2029, which `str.splitlines` also splits at, are text inside a JSON string (written
    by `json.dumps(..., ensure_ascii=False)`), not line ends."""
    return text.split("\n")


def load_trace(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> tuple[RunHeader, list[RoundRecord]]:
    """Read a trace written by `save_trace`; raises TraceError when it is not one."""
    return parse_trace(json_lines(read_trace_text(path, max_bytes)))


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
        written = dict(rows[0]["header"])
        fields_of_header = current_header(dict(written))
        if isinstance(fields_of_header.get("kept_visual_indices"), list):
            fields_of_header["kept_visual_indices"] = tuple(fields_of_header["kept_visual_indices"])
        header = RunHeader(**fields_of_header)
    except (KeyError, TypeError, ValueError) as error:
        raise TraceError(f"not a SAGE trace (JSON lines with a header, then round records): {error}") from error
    problem = header_problem(header)
    if problem is not None:
        raise TraceError(f"the header of the trace is not valid: {problem}")
    records = _records_of(header, written.get("format") in (TRACE_FORMAT_1, TRACE_FORMAT_2), rows[1:])
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


def _records_of(header: RunHeader, former: bool, rows: Sequence[dict[str, Any]]) -> list[RoundRecord]:
    """The run's records from their lines (2 on), each with its own record as the run's method declares it
    (`MethodSpec.record`; refused in one sentence when it is not one); a `former` trace's (formats 1 and 2)
    flat columns read into it (`records.fold_former_columns`)."""
    kind = method_spec(header.method).record
    records = []
    for number, line in enumerate(rows, 2):
        flat = None if former else next((name for name in FORMER_OWN_COLUMNS if name in line), None)
        if flat is not None:
            raise TraceError(
                f"line {number} of the {header.method!r} run is not a valid round: {flat!r} is a column of trace "
                f"formats 1 and 2, which {TRACE_FORMAT} keeps in the round's own record"
            )
        row = fold_former_columns(line, kind) if former else line
        untyped = _untyped_own(row.get("own"), kind)
        if untyped is not None:
            raise TraceError(f"line {number} of the {header.method!r} run is not a valid round: {untyped}")
        try:
            own = own_from_dict(row.get("own"), kind)
        except ValueError as error:
            raise TraceError(f"line {number} of the {header.method!r} run is not a valid round: {error}") from error
        try:
            records.append(record_from_dict({**row, "own": own}, kind))
        except (KeyError, TypeError, ValueError) as error:
            raise TraceError(f"not a SAGE trace (JSON lines with a header, then round records): {error}") from error
    return records


def _untyped_own(own: object, kind: type[OwnRecord] | None) -> str | None:
    """An own record written as an object that names no type (`{}`, or fields without their type), said as
    such rather than as a record of type None; None for anything else (`own_from_dict` checks the rest)."""
    if kind is None or not isinstance(own, dict) or own.get("type") is not None:
        return None
    said = "it is an empty own record" if not own else "its own record names no type"
    return f"{said}: its method's is a {kind.__name__} with its type and fields (a round without one writes null)"


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


def is_text(value: Any) -> bool:
    """Text that can be written back out: a string with no lone surrogates."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_is_int, _is_number = is_count, is_number  # (records': an own record checks itself with them too)


def current_header(fields_of_header: dict[str, Any]) -> dict[str, Any]:
    """A header's fields as today's format writes them: a `sage-trace/1` header's `sage`, `dynamic` and own
    `settings` (the run's method's) become one `settings` mapping by method name, and SAGE's settings read
    under their current names (`OLD_SAGE_NAMES`)."""
    if fields_of_header.get("format") == TRACE_FORMAT_2:  # (its records' own columns: fold_former_columns)
        return {**fields_of_header, "format": TRACE_FORMAT}
    if fields_of_header.get("format") != TRACE_FORMAT_1:
        return fields_of_header
    settings: dict[str, Any] = {}
    sage = fields_of_header.pop("sage", None)  # (format 1 kept SAGE's and the dynamic tree's under their names)
    dynamic = fields_of_header.pop("dynamic", None)
    own = fields_of_header.pop("settings", None)
    settings["sage"] = with_current_names(sage, OLD_SAGE_NAMES) if isinstance(sage, dict) else sage
    if dynamic is not None:
        settings["dynamic"] = dynamic
    method = fields_of_header.get("method")
    if own is not None and isinstance(method, str) and method not in settings:
        settings[method] = own
    return {**fields_of_header, "settings": settings, "format": TRACE_FORMAT}


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
    if not _is_number(header.prepare_seconds) or not isinstance(header.prepare_shared, bool):
        return "its preparation time must be a finite, non-negative number of seconds"
    if header.draft_prompt_tokens is not None and not _is_int(header.draft_prompt_tokens):
        return "the draft's prompt length must be a whole number"
    kept = header.kept_visual_indices
    if kept is not None and not (isinstance(kept, tuple) and all(_is_int(i) for i in kept)):
        return "the kept visual token indices must be a list of whole numbers"
    if not _is_int(header.draft_block) or header.draft_block == 1:
        return "the draft's block must be 0 (a sequential draft) or a whole number of at least 2"
    if not _is_int(header.threads) or header.threads > MAX_THREADS:
        return f"its thread count must be a whole number, 0 (not recorded) to {MAX_THREADS}"
    if not _is_number(header.prune_ratio, 0.0, 1.0) or not _is_int(header.visual_tokens):
        return "its pruning ratio must lie in [0, 1) and its visual token count be a whole number"
    return _sampling_problem(header.sampling) or _settings_problem(header)


def _settings_problem(header: RunHeader) -> str | None:
    """Whether the header's settings are ones a run could have had: checked by the config types
    themselves (each method's settings it records, the token limit, the pruning ratio, the sampling)."""
    if not isinstance(header.settings, dict):
        return "its settings must be an object: each method's settings by its name"
    for name, values in header.settings.items():
        if not is_method(name) or method_spec(name).settings is None:
            return f"it records settings for {shown(name)}, which is no method with settings"
        if not isinstance(values, dict):
            return f"the settings of {name} must be an object"
    try:
        for name in header.settings:
            recorded_settings(header, name)
        check_max_new_tokens(header.max_new_tokens)
        if header.prune_ratio:
            check_prune_ratio(header.prune_ratio)
        if header.sampling is not None:
            sampling = {k: v for k, v in header.sampling.items() if k in ("temperature", "top_p", "top_k", "seed")}
            SamplingConfig(**sampling)
    except (ConfigError, TypeError) as error:
        return str(error)
    return None


def recorded_settings(header: RunHeader, method: str | None = None) -> Any:
    """The settings `method` (default: the run's own) ran with, from the header (its settings class's
    defaults for what it does not record); None for a method without settings. A value its settings class
    refuses raises its ConfigError."""
    spec = method_spec(method or header.method)
    if spec.settings is None:
        return None
    known = {f.name for f in fields(spec.settings)}
    return spec.settings(**{k: v for k, v in header.settings_of(spec.name).items() if k in known})


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
    return (
        _kind_problem(record)
        or _column_problem(record)
        or _value_problem(record)
        or _tree_problem(record)
        or _verdict_problem(record)
        or _path_problem(record)
        or _teaching_problem(record)
        or _own_problem(record)
    )


def _kind_problem(record: RoundRecord) -> str | None:
    """Whether the record's method, phase and finish reason are ones a run writes, and its sequences lists."""
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
    return None


def _column_problem(record: RoundRecord) -> str | None:
    """Whether each list of the round and of its own record is within its bound (`PER_LEVEL_COLUMNS`: the
    deepest tree's levels; the others `MAX_COLUMN`), the column and its bound named."""
    columns = [(f.name, getattr(record, f.name)) for f in fields(record) if f.name not in TREE_COLUMNS]
    if isinstance(record.own, OwnRecord):
        columns += [(f"own record's {f.name}", getattr(record.own, f.name)) for f in own_fields(record.own)]
    for name, value in columns:
        limit = MAX_TREE_DEPTH if name in PER_LEVEL_COLUMNS else MAX_COLUMN
        if isinstance(value, tuple | list) and len(value) > limit:
            return (
                f"its {name} holds {len(value)} entries; the limit is {limit} "
                f"(a round's columns are bounded as its tree is: {MAX_TREE_NODES} nodes, {MAX_TREE_DEPTH} levels)"
            )
    return None


def _value_problem(record: RoundRecord) -> str | None:
    """Whether the record's ids, counts, times, probabilities and planned shape are in range."""
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
    if record.draft_forwards is not None and not _is_int(record.draft_forwards):
        return "the round's draft forwards must be a whole number"
    return None


def _tree_problem(record: RoundRecord) -> str | None:
    """Whether the tree's columns agree and its parents make a tree within the size limits."""
    count = len(record.tree_tokens)
    if len(record.tree_parents) != count or len(record.tree_draft_probs) != count:
        return "the tree's tokens, parents and probabilities differ in length"
    if count > MAX_TREE_NODES:
        return f"its tree has {count} nodes; the limit is {MAX_TREE_NODES}"
    if any(not -1 <= parent < index for index, parent in enumerate(record.tree_parents)):
        return "a tree node's parent must come before it (or be the root, -1)"
    if count and record.tree.depth > MAX_TREE_DEPTH:
        return f"its tree is {record.tree.depth} levels deep; the limit is {MAX_TREE_DEPTH}"
    return None


def _verdict_problem(record: RoundRecord) -> str | None:
    """Whether the accepted and tried nodes are in the tree, and every new token has its text."""
    count = len(record.tree_tokens)
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
    return None


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
    return _teaching_value_problem(record) or _teaching_shape_problem(record) or _adaptation_problem(record)


def _teaching_value_problem(record: RoundRecord) -> str | None:
    """Whether the teaching fields are lists of ids, counts and probabilities in range."""
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
    return None


def _teaching_shape_problem(record: RoundRecord) -> str | None:
    """Whether the teaching fields' lengths agree with each other and with the tree."""
    count = len(record.tree_tokens)
    if len(record.root_top_tokens) != len(record.root_top_probs):
        return "the root's top-k tokens and probabilities differ in length"
    counts = (record.cut_by_width, record.cut_by_threshold, record.cut_by_budget)
    if any(len(c) not in (0, len(record.level_thresholds)) for c in counts):
        return "the cut counts must have one entry per level"
    if len(record.offer_parents) != len(record.offer_widths):
        return "each offering node needs one width"
    cut = (record.cut_parents, record.cut_tokens, record.cut_probs, record.cut_rules)
    if len({len(c) for c in cut}) != 1:
        return "the cut candidates' parents, tokens, probabilities and rules differ in length"
    if any(not -1 <= parent < count for parent in (*record.offer_parents, *record.cut_parents)):
        return "a cut candidate's parent is not in the tree"
    rules = (*CUT_RULES, *(record.own.cut_rules if isinstance(record.own, OwnRecord) else ()))
    if not all(isinstance(rule, str) and rule in rules for rule in record.cut_rules):
        return f"cut rules must be one of {', '.join(rules)}"
    if len(record.target_choices) not in (0, count + 1):
        return "the target's choices need one entry for the root and one per node"
    return None


def _adaptation_problem(record: RoundRecord) -> str | None:
    """Whether SAGE's window, next D_max and the path's entropies are in range."""
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


def _own_problem(record: RoundRecord) -> str | None:
    """What is wrong with the round's own record (its method's: sage-cost's budgets, SMART's weighing), in the
    record's own words (`OwnRecord.problem`), or None."""
    own = record.own
    if own is None:
        return None
    if not isinstance(own, OwnRecord):
        return "its own record must be its method's record type"
    return own.problem(record)


# -- a race's recorded cost curve ---------------------------------------------------------

#: A recorded time above this many milliseconds (1000 s) is no forward's.
MAX_CURVE_MS = 1e6
#: The most passes a curve is measured in (`CostCurve.repeats`), and the longest of its texts (device, dtype,
#: backend, where it comes from).
MAX_CURVE_REPEATS = 10_000
MAX_CURVE_TEXT = 200
#: The fields a recorded curve must have (the others take `CostCurve`'s defaults).
CURVE_REQUIRED = ("device", "dtype", "backend", "sizes", "one_token_ms", "verify_ms", "draft_level_ms")
CURVE_LISTS = ("sizes", "verify_ms", "draft_level_ms", "verify_spread_ms", "draft_spread_ms")
CURVE_NUMBERS = ("one_token_ms", "one_token_spread_ms", "repeats", "round_overhead_ms")


def recorded_cost_curve(costs: object) -> CostCurve | None:
    """A race line's recorded cost curve (`costs`), checked for sense before the page or sage-cost reads it:
    positive finite times, sizes among those a curve is measured at (COST_SIZES), increasing, each once,
    one time and one spread (or none) per size, text for its device, a bounded number of passes. None when
    the race has none (recorded before curves were); one TraceError sentence when it is not a curve."""
    if costs is None:
        return None
    problem = cost_curve_problem(costs)
    if problem is not None:
        raise TraceError(f"the race line's cost curve is not valid: {problem}")
    assert isinstance(costs, dict)
    values: dict[str, Any] = {name: tuple(v) if isinstance(v, list) else v for name, v in costs.items()}
    return CostCurve(**values)


def cost_curve_problem(costs: object) -> str | None:
    """What makes a recorded cost curve (its JSON object) one no measurement gives, or None."""
    if not isinstance(costs, dict):
        return "it must be an object of CostCurve's fields"
    known = {f.name: f.default for f in fields(CostCurve)}
    unknown = [name for name in costs if name not in known]
    if unknown:
        return f"{shown(unknown[0])} is not a field of a cost curve"
    missing = [name for name in CURVE_REQUIRED if name not in costs]
    if missing:
        return f"it has no {missing[0]}"
    texts = [name for name, default in known.items() if isinstance(default, str) or name in CURVE_REQUIRED[:3]]
    if not all(is_text(costs.get(name, "")) and len(costs.get(name, "")) <= MAX_CURVE_TEXT for name in texts):
        return f"its {', '.join(texts)} must be text of at most {MAX_CURVE_TEXT} characters"
    if not all(isinstance(costs.get(name, []), list) for name in CURVE_LISTS):
        return f"its {', '.join(CURVE_LISTS)} must be lists"
    others = [name for name in known if name not in (*texts, *CURVE_LISTS, *CURVE_NUMBERS)]
    if not all(costs.get(name) is None or _is_number(costs.get(name), 0.0, MAX_CURVE_MS) for name in others):
        return f"its {', '.join(others)} must be finite, non-negative numbers"
    return _curve_sizes_problem(costs) or _curve_times_problem(costs)


def _curve_sizes_problem(costs: dict[str, Any]) -> str | None:
    """Whether the curve's sizes are among COST_SIZES, increasing, each once, with one time (and one spread,
    or none) per size."""
    sizes = costs["sizes"]
    allowed = ", ".join(str(size) for size in COST_SIZES)
    if not 1 <= len(sizes) <= len(COST_SIZES):
        return f"it has {len(sizes)} sizes; a curve is measured at 1 to {len(COST_SIZES)} of {allowed} nodes"
    if not all(type(size) is int and size in COST_SIZES for size in sizes):
        return f"its sizes must be among {allowed} nodes"
    if any(later <= earlier for earlier, later in itertools.pairwise(sizes)):
        return "its sizes must increase, each given once"
    if not len(costs["verify_ms"]) == len(costs["draft_level_ms"]) == len(sizes):
        return f"it needs one verification and one draft level time per size ({len(sizes)})"
    spreads = (costs.get("verify_spread_ms", []), costs.get("draft_spread_ms", []))
    if any(len(spread) not in (0, len(sizes)) for spread in spreads):
        return f"its spreads need one entry per size ({len(sizes)}), or none"
    return None


def _curve_times_problem(costs: dict[str, Any]) -> str | None:
    """Whether the curve's times are positive and finite, its spreads finite and non-negative, its passes and
    round overhead in range."""
    times = (costs["one_token_ms"], *costs["verify_ms"], *costs["draft_level_ms"])
    if not all(_is_number(ms, 0.0, MAX_CURVE_MS) and ms > 0 for ms in times):
        return f"its times must be positive, finite numbers of milliseconds (below {MAX_CURVE_MS:g})"
    spreads = (costs.get("one_token_spread_ms", 0.0), *costs.get("verify_spread_ms", []))
    if not all(_is_number(ms, 0.0, MAX_CURVE_MS) for ms in (*spreads, *costs.get("draft_spread_ms", []))):
        return "its spreads must be finite, non-negative numbers of milliseconds"
    repeats = costs.get("repeats", 0)
    if not (_is_int(repeats) and repeats <= MAX_CURVE_REPEATS):
        return f"its repeats must be a whole number in [0, {MAX_CURVE_REPEATS}], not {shown(repeats)}"
    overhead = costs.get("round_overhead_ms")
    if overhead is not None and not _is_number(overhead, 0.0, MAX_CURVE_MS):
        return f"its round overhead must be a finite, non-negative number of milliseconds, not {shown(overhead)}"
    return None
