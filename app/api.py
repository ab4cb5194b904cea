"""The API's answer for a race or a replay: texts, figures, verdict, panels, the trace.

Everything is read off the records of the race; `trace` holds them, so a
caller can check every figure against the rounds it came from. A replay's
answer leaves the trace out (`trace` is null): the caller sent it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sage_core.methods import drafts

from .panels import all_figures, speedups
from .race import RaceData
from .race_trace import race_trace_lines
from .render import LaneFigures, verdict


def default_tree_method(data: RaceData) -> str:
    drafting = [m for m in data.methods if drafts(m)]
    return drafting[0] if drafting else data.methods[0]


def race_result(
    data: RaceData,
    tree_method: str | None = None,
    tree_round: int | None = None,
    with_trace: bool = True,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    lanes = data.records_by_method()
    header = data.header
    figures = all_figures(lanes, data.token_texts, tree_method or default_tree_method(data), tree_round, data.replay)
    result = verdict(data)
    return {
        "replay": data.replay,
        "stopped": data.stopped,
        "source": data.source,
        "target": header.target if header else "",
        "draft": next((lane.header.draft for lane in data.lanes if lane.header and lane.header.draft), ""),
        "device": header.device if header else "",
        "dtype": header.dtype if header else "",
        "prompt": header.prompt if header else "",
        "media": header.media if header else "",
        "methods": data.methods,
        "texts": {lane.method: lane.text for lane in data.lanes},
        # the target's prompt length, and each side's draft prompt after pruning (None: no draft)
        "prompt_tokens": header.prompt_tokens if header else 0,
        "draft_prompt_tokens": {
            lane.method: lane.header.draft_prompt_tokens if lane.header else None for lane in data.lanes
        },
        "token_ids": {lane.method: list(lane.token_ids) for lane in data.lanes},
        "figures": {m: asdict(LaneFigures.of(rs)) for m, rs in lanes.items() if rs},
        "speedups": speedups(lanes),
        "lossless": asdict(result) if result is not None else None,
        "panels": {name: json.loads(fig.to_json()) for name, fig in figures.items()},
        "trace": "\n".join(race_trace_lines(data)) + "\n" if with_trace else None,
        # plain sentences said before the race (a picture outside the built-in pair's world); empty when none
        "notes": list(notes),
    }
