"""The race: decoders stepped alternately in one process, and replays of recorded races.

A live race makes one `sage_core.DecodeRun` per method on the same model pair
and calls `next()` on each in turn, one round at a time, so every column
streams while the races runs. Each record times its own step with device
synchronisation, so each side's time is its own (`total_seconds`), whatever
the other side did in between. The media go through each processor once per
race; each side is charged the preparation it needs, as measured once (its
header says the preparation was shared). There is no decoding logic here: the app only
collects the records the library yields.

A replay reads a recorded race back and hands the records out at their
recorded pace, each side on its own recorded clock (as if each had the
device to itself), with no model loaded.

Race traces are JSON lines: one `{"race": {...}}` line (format, methods, the
text of every token seen in a draft tree, for the tree panel), then each
run as `sage_core` writes a single-run trace (its header line, then its
records). A plain single-run trace of the CLI loads too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from sage_core import (
    DecodeConfig,
    Media,
    ModelPair,
    RunHeader,
    RunSummary,
    SageConfig,
    StepRecord,
    decode,
    prepare_inputs,
    summarize,
)
from sage_core.adapter import VisualBox
from sage_core.errors import InputError
from sage_core.pruning import PAPER_RATIOS
from sage_core.records import TraceError, parse_trace, trace_lines

RACE_FORMAT = "sage-race/1"
# Canonical column order: SAGE first, then its baselines.
METHOD_ORDER = ("sage", "static", "chain", "ar")


@dataclass
class Lane:
    """One side of a race: a method, its run header, its records so far."""

    method: str
    header: RunHeader | None = None
    records: list[StepRecord] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return bool(self.records) and self.records[-1].finished

    @property
    def token_ids(self) -> tuple[int, ...]:
        return tuple(t for r in self.records for t in r.new_tokens)

    @property
    def text(self) -> str:
        return "".join(s for r in self.records for s in r.new_token_texts)

    def summary(self) -> RunSummary | None:
        return summarize(self.records) if self.records else None


@dataclass
class RaceData:
    """What a race (live or replayed) has produced so far: the per-user state."""

    lanes: list[Lane]
    token_texts: dict[int, str] = field(default_factory=dict)
    replay: bool = False
    stopped: bool = False
    source: str = ""
    # With draft-side pruning: the medium and where each visual token looks (the draft-view panel).
    draft_view: tuple[Media, list[VisualBox | None]] | None = None

    @property
    def finished(self) -> bool:
        return all(lane.finished for lane in self.lanes)

    @property
    def methods(self) -> list[str]:
        return [lane.method for lane in self.lanes]

    def lane(self, method: str) -> Lane | None:
        return next((lane for lane in self.lanes if lane.method == method), None)

    def records_by_method(self) -> dict[str, list[StepRecord]]:
        return {lane.method: lane.records for lane in self.lanes}

    @property
    def header(self) -> RunHeader | None:
        return next((lane.header for lane in self.lanes if lane.header is not None), None)


def resolve_prune_ratio(choice: str | None, chosen: float | None, kind: str) -> float:
    """The pruning control: "off", "paper" (80% of an image's visual tokens, 90% of a video's) or "chosen"."""
    if choice in (None, "", "off"):
        return 0.0
    if choice == "paper":
        return PAPER_RATIOS[kind]
    if choice != "chosen":
        raise InputError(f"unknown pruning choice {choice!r}; use off, paper or chosen")
    ratio = float(chosen or 0.0)
    if not 0.0 <= ratio < 1.0:
        raise InputError(f"the pruning ratio must lie in [0, 1), not {ratio:g}")
    return ratio


def order_methods(methods: Sequence[str]) -> list[str]:
    """The chosen methods, once each, in column order."""
    return [m for m in METHOD_ORDER if m in methods]


# -- the live race ---------------------------------------------------------------


def race_steps(
    pair: ModelPair,
    media: Media,
    prompt: str,
    methods: Sequence[str],
    max_new_tokens: int,
    sage: SageConfig,
    token_texts: Callable[[Sequence[int]], list[str]] | None = None,
    lock: AbstractContextManager | None = None,
    source: str = "",
    prune_ratio: float = 0.0,
) -> Iterator[RaceData]:
    """Step one run per method alternately; yield the race after every step.

    `token_texts` turns token ids into their texts (for the tree panel's
    node labels; it runs between steps, outside the timed parts). `lock` is
    held around each step, so two races never touch a model at once.
    """
    lock = lock or nullcontext()
    chosen = order_methods(methods)
    with lock:
        # Each processor runs once for the whole race; every run reads the same tensors.
        prepared = prepare_inputs(pair, media, prompt, with_draft=any(m != "ar" for m in chosen))
        # `prune_ratio` applies to every side that drafts (plain decoding has no draft).
        configs = [DecodeConfig(m, max_new_tokens, sage, prune_ratio=prune_ratio * (m != "ar")) for m in chosen]  # type: ignore[arg-type]
        runs = [decode(pair, media, prompt, config, prepared) for config in configs]
        boxes = pair.draft.visual_token_boxes(prepared.draft) if prune_ratio > 0 and prepared.draft else None
    data = RaceData(lanes=[Lane(run.config.method, run.header) for run in runs], source=source)
    if boxes is not None:
        data.draft_view = (media, boxes)
    active = list(zip(data.lanes, runs, strict=True))
    while active:
        for lane, run in list(active):
            with lock:
                record = next(run, None)
            if record is None:
                active.remove((lane, run))
                continue
            lane.records.append(record)
            lane.header = run.header  # after the prefill it names the visual tokens the draft kept
            if record.finished:
                active.remove((lane, run))
            if token_texts is not None:
                _learn_texts(data.token_texts, record, token_texts)
            yield data


def _learn_texts(known: dict[int, str], record: StepRecord, token_texts: Callable[[Sequence[int]], list[str]]) -> None:
    wanted = {*record.tree_tokens, *record.new_tokens, record.bonus_token}
    missing = sorted(t for t in wanted if t not in known)
    if missing:
        known.update(zip(missing, token_texts(missing), strict=True))


# -- replay ------------------------------------------------------------------------


#: The longest a replay waits for its next step, in seconds, whatever the trace says.
REPLAY_MAX_WAIT = 2.0


def replay_steps(
    recorded: RaceData,
    speed: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[RaceData]:
    """Hand out a recorded race's steps at their recorded pace.

    Each side advances on its own recorded clock (a step appears when that
    side's `total_seconds` is reached), `speed` times faster; speed <= 0
    replays without waiting. No single wait exceeds `REPLAY_MAX_WAIT` seconds
    (a trace with huge recorded times cannot hold a replay slot for long).
    """
    events = sorted(
        ((record.total_seconds, index, record) for index, lane in enumerate(recorded.lanes) for record in lane.records),
        key=lambda event: (event[0], event[1]),
    )
    data = RaceData(
        lanes=[Lane(lane.method, lane.header) for lane in recorded.lanes],
        token_texts=dict(recorded.token_texts),
        replay=True,
        source=recorded.source,
    )
    start = clock()
    for at, index, record in events:
        if speed > 0:
            wait = start + at / speed - clock()
            if wait > REPLAY_MAX_WAIT:
                start -= wait - REPLAY_MAX_WAIT  # skip the rest of this gap: later steps keep their spacing
                wait = REPLAY_MAX_WAIT
            if wait > 0:
                sleep(wait)
        data.lanes[index].records.append(record)
        yield data


# -- race traces ---------------------------------------------------------------------


def race_trace_lines(data: RaceData) -> Iterator[str]:
    """The JSON lines of a race: the race line, then each run's trace."""
    texts = {str(k): v for k, v in sorted(data.token_texts.items())}
    yield json.dumps({"race": {"format": RACE_FORMAT, "methods": data.methods, "token_texts": texts}})
    for lane in data.lanes:
        if lane.header is not None and lane.records:
            yield from trace_lines(lane.header, lane.records)


def save_race(data: RaceData, path: str | Path) -> Path:
    path = Path(path)
    path.write_text("\n".join(race_trace_lines(data)) + "\n", encoding="utf-8")
    return path


def load_race(path: str | Path) -> RaceData:
    """Read a race trace (or a single-run trace); raises TraceError when it is neither."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(f"cannot read the trace file: {error}") from error
    return parse_race(text.splitlines(), source=Path(path).name)


def parse_race(lines: Sequence[str], source: str = "") -> RaceData:
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise TraceError("the trace file is empty")
    rows: list[dict] = []
    for number, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise TraceError(f"line {number} is not JSON: {error.msg}") from error
        if not isinstance(row, dict):
            raise TraceError(f"line {number} is not a JSON object")
        rows.append(row)
    meta: dict = {}
    if "race" in rows[0]:
        meta = rows[0]["race"] if isinstance(rows[0]["race"], dict) else {}
        if meta.get("format") != RACE_FORMAT:
            raise TraceError(f"unsupported race format {meta.get('format')!r} (expected {RACE_FORMAT})")
        lines, rows = lines[1:], rows[1:]
    starts = [i for i, row in enumerate(rows) if "header" in row]
    if not starts or starts[0] != 0:
        raise TraceError("not a SAGE trace: it must start with a header line")
    lanes = []
    for begin, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        header, records = parse_trace(lines[begin:end])
        if any(r.method != header.method for r in records):
            raise TraceError(f"the run of {header.method!r} holds records of another method")
        lanes.append(Lane(header.method, header, records))
    methods = [lane.method for lane in lanes]
    if len(set(methods)) != len(methods):
        raise TraceError("a race trace holds one run per method")
    first = lanes[0].header
    assert first is not None
    for lane in lanes[1:]:
        assert lane.header is not None
        if (lane.header.prompt, lane.header.media) != (first.prompt, first.media):
            raise TraceError("the runs in this trace decode different inputs; a race compares one prompt")
    lanes.sort(key=lambda lane: METHOD_ORDER.index(lane.method) if lane.method in METHOD_ORDER else len(METHOD_ORDER))
    texts = {int(k): str(v) for k, v in (meta.get("token_texts") or {}).items()}
    for lane in lanes:
        for record in lane.records:
            for token, text in zip(record.new_tokens, record.new_token_texts, strict=False):
                texts.setdefault(token, text)
    return RaceData(lanes=lanes, token_texts=texts, replay=True, source=source)
