"""Race traces: a race saved as JSON lines and read back, every field checked.

One `{"race": {...}}` line (format, methods, the text of every token seen in a draft
tree, for the tree panel, the cost curve measured at the warm-up, and each written run's
lane key: "sage/one-pass" for SAGE on the pair's one-pass sibling draft), then each run
as `sage_core` writes a single-run trace (its header line, then its records). A plain
single-run trace of the CLI loads too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sage_core.cost_curve import CostCurve
from sage_core.errors import TraceError
from sage_core.methods import LANE_DRAFTS, LaneKey, method_names, method_spec
from sage_core.records import trace_lines
from sage_core.trace_check import (
    MAX_TRACE_BYTES,
    is_text,
    json_line,
    json_lines,
    parse_trace_rows,
    read_trace_text,
    recorded_cost_curve,
)

from .race import Lane, RaceData

RACE_FORMAT = "sage-race/1"


def race_trace_lines(data: RaceData) -> Iterator[str]:
    """The JSON lines of a race: the race line, then each run's trace."""
    texts = {str(k): v for k, v in sorted(data.token_texts.items())}
    meta: dict[str, Any] = {
        "format": RACE_FORMAT,
        "methods": [lane.method for lane in data.lanes],
        "token_texts": texts,
        "lanes": [lane.key for lane in data.lanes if lane.header is not None and lane.records],
    }
    if data.costs is not None:
        meta["costs"] = asdict(data.costs)
    yield json.dumps({"race": meta})
    for lane in data.lanes:
        if lane.header is not None and lane.records:
            yield from trace_lines(lane.header, lane.records)


def save_race(data: RaceData, path: str | Path) -> Path:
    path = Path(path)
    path.write_text("\n".join(race_trace_lines(data)) + "\n", encoding="utf-8")
    return path


def load_race(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> RaceData:
    """Read a race trace (or a single-run trace) of at most `max_bytes`; raises TraceError when it is neither."""
    return parse_race(json_lines(read_trace_text(path, max_bytes)), source=trace_name(path))


#: The name Gradio gives a file sent as a data: URL ("file", or "file." and the extension its type suggests).
SENT_AS_DATA = re.compile(r"file(\.[A-Za-z0-9]+)?")


def trace_name(path: str | Path) -> str:
    """How the page and the answer name a trace: its file's name, or "the trace you sent" for one that came as
    a data: URL (Gradio names those `file.txt`, which names nothing the caller knows)."""
    name = Path(path).name
    return "the trace you sent" if SENT_AS_DATA.fullmatch(name) else name


def parse_race(lines: Sequence[str], source: str = "") -> RaceData:
    """A race from its JSON lines, every field checked (`sage_core.trace_check.parse_trace`); TraceError else."""
    rows = [json_line(line, number) for number, line in enumerate((line for line in lines if line.strip()), 1)]
    if not rows:
        raise TraceError("the trace file is empty")
    texts: dict[int, str] = {}
    costs, keys = None, None
    if "race" in rows[0]:
        texts = _race_meta(rows[0]["race"])
        costs = _race_costs(rows[0]["race"])
        keys = rows[0]["race"].get("lanes")
        rows = rows[1:]
    starts = [i for i, row in enumerate(rows) if "header" in row]
    if not starts or starts[0] != 0:
        raise TraceError("not a SAGE trace: it must start with a header line")
    lanes = []
    for begin, end in zip(starts, [*starts[1:], len(rows)], strict=True):
        header, records = parse_trace_rows(rows[begin:end])
        lanes.append(Lane(header.method, header, records))
    for lane, draft in zip(lanes, _lane_drafts(keys, lanes), strict=True):
        lane.draft = draft
    methods = [lane.key for lane in lanes]
    if len(set(methods)) != len(methods):
        raise TraceError("a race trace holds one run per method (and draft)")
    first = lanes[0].header
    assert first is not None
    for lane in lanes[1:]:
        assert lane.header is not None
        if (lane.header.prompt, lane.header.media) != (first.prompt, first.media):
            raise TraceError("the runs in this trace decode different inputs; a race compares one prompt")
    # the registry's column order, each method on the pair's draft before itself on the one-pass draft
    lanes.sort(key=lambda lane: (method_names().index(lane.method), lane.draft))
    for lane in lanes:
        for record in lane.records:
            for token, text in zip(record.new_tokens, record.new_token_texts, strict=True):
                texts.setdefault(token, text)
    return RaceData(lanes=lanes, token_texts=texts, replay=True, source=source, costs=costs)


def _race_meta(meta: object) -> dict[int, str]:
    """The race line's token texts, checked: its format, token ids as keys, texts as values."""
    if not isinstance(meta, dict) or meta.get("format") != RACE_FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise TraceError(f"unsupported race format {found!r} (expected {RACE_FORMAT})")
    texts = meta.get("token_texts") or {}
    if not isinstance(texts, dict):
        raise TraceError("the race line's token_texts must map token ids to texts")
    checked: dict[int, str] = {}
    for key, text in texts.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit()) or not is_text(text):
            raise TraceError(f"the race line's token_texts must map token ids to texts, not {key[:20]!r}")
        checked[int(key)] = text
    return checked


def _lane_drafts(keys: object, lanes: Sequence[Lane]) -> list[str]:
    """Each run's draft as the race line's `lanes` names it (absent in races recorded before it: the pair's
    own), checked against its run: one key per run, each its run's method on a draft a lane may name
    (`LANE_DRAFTS`), a draft only for a method that drafts, and a lane on the one-pass draft only for a run whose
    header records a one-pass draft (its block): keys swapped between runs are refused, not read as true."""
    if keys is None:
        return ["" for _ in lanes]
    if not isinstance(keys, list) or len(keys) != len(lanes) or not all(isinstance(k, str) for k in keys):
        raise TraceError("the race line's lanes must name each run's lane, one key per run in the trace's order")
    drafts = []
    for key, lane in zip(keys, lanes, strict=True):
        parsed = LaneKey.parse(key)  # (read once, here: the trace's edge)
        method, draft = parsed.method, parsed.draft
        if method != lane.method or not parsed.known_draft:
            raise TraceError(
                f"the race line's lane {key[:40]!r} is not its run's method {lane.method!r} on a known draft"
            )
        if draft and not method_spec(method).drafts:
            raise TraceError(f"the race line's lane {key!r} names a draft, but {method!r} decodes with no draft")
        if draft and lane.header is not None and not lane.header.draft_block:
            raise TraceError(
                f"the race line's lane {key!r} names the {LANE_DRAFTS[draft]}, but its run's header records a "
                f"sequential draft ({lane.header.draft[:40]!r}, block 0): the lanes' keys are not their runs'"
            )
        drafts.append(draft)
    return drafts


def _race_costs(meta: dict) -> CostCurve | None:
    """The race line's recorded cost curve (absent in races recorded before it), checked for sense
    (`sage_core.trace_check.recorded_cost_curve`)."""
    return recorded_cost_curve(meta.get("costs"))
