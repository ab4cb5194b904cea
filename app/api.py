"""The API's answer for a race or a replay: texts, figures, verdict, panels, the trace.

Everything is read off the records of the race; `trace` holds them, so a
caller can check every figure against the rounds it came from. A replay's
answer leaves the trace out (`trace` is null): the caller sent it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sage_core.studies.acceptance import acceptance_stats
from sage_core.timing import Headline

from .panel_table import Focus, panel_figures
from .panels import speedups, wall_clock_speedups
from .race import RaceData
from .race_trace import race_trace_lines
from .render import clock_words, headline_words
from .view import RaceView, race_view


def race_result(
    data: RaceData,
    tree_method: str | None = None,
    tree_round: int | None = None,
    with_trace: bool = True,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """The answer for the race as it stands, from one view of it (`race_view`) handed to every reader: its
    texts, figures, verdict, headlines, account, every panel of the table by name and the trace."""
    race = race_view(data)
    header = race.header
    figures = panel_figures(race, Focus(tree_method, tree_round))
    result, found = race.verdict, race.headlines
    return {
        "replay": race.replay,
        "stopped": race.stopped,
        "source": race.source,
        "target": header.target if header else "",
        "draft": next((lane.header.draft for lane in race.lanes if lane.header and lane.header.draft), ""),
        "device": header.device if header else "",
        "dtype": header.dtype if header else "",
        "prompt": header.prompt if header else "",
        "media": header.media if header else "",
        # every lane by its key: a method, or a method on the pair's one-pass sibling draft ("sage/one-pass")
        "methods": race.methods,
        "drafts": {lane.key: lane.header.draft if lane.header else "" for lane in race.lanes},
        "texts": {lane.key: lane.text for lane in race.lanes},
        # the target's prompt length, and each side's draft prompt after pruning (None: no draft)
        "prompt_tokens": header.prompt_tokens if header else 0,
        "draft_prompt_tokens": {
            lane.key: lane.header.draft_prompt_tokens if lane.header else None for lane in race.lanes
        },
        "token_ids": {lane.key: list(lane.token_ids) for lane in race.lanes},
        "figures": {m: asdict(f) for m, f in race.figures.items()},
        # each lane's acceptance figures as serving engines report them (vLLM's names, SGLang's beside them:
        # sage_core.acceptance), and the CPU threads its forwards ran on (0: not recorded)
        "acceptance": {lane.key: acceptance_stats(lane.records).as_dict() for lane in race.lanes},
        "threads": {lane.key: lane.lane.header.threads if lane.lane.header else 0 for lane in race.lanes},
        # the lead's speedup over each side as the headline defines it (the prefill charged once, the rounds at
        # their median cost: headline["speedup"] for the main rival); the clock's raw tokens/s ratios beside it
        "speedups": speedups(race),
        "wall_clock_speedups": wall_clock_speedups(race),
        # the lead against its main rival as an estimate: speedup, 90% interval, verdict (and the figures beside
        # it: decode-only, the prefill as charged, tokens per target forward); null with fewer than two sides
        "headline": headline_answer(race, found[0]) if found else None,
        "headlines": {h.rival: h.as_dict() for h in found},
        # why, from the race's own records: depth, reacting to entropy, budget, prefill and rounds
        # (sage_core.studies.account)
        "account": race.account.as_dict(),
        "lossless": asdict(result) if result is not None else None,
        "panels": {name: json.loads(fig.to_json()) for name, fig in figures.items()},
        "trace": "\n".join(race_trace_lines(data)) + "\n" if with_trace else None,
        # plain sentences said before the race (a picture outside the built-in pair's world); empty when none
        "notes": list(notes),
    }


def headline_answer(race: RaceView, h: Headline) -> dict[str, Any]:
    """The main headline as `/race` sends it: its figures, its words, and the lanes' own clock beside it (both
    sides' tokens/s and, when their ratio falls outside the interval, why: `render.clock_words`)."""
    return {
        **h.as_dict(),
        "words": headline_words(h, race.wall_speedups.get(h.rival)),
        "clock_words": clock_words(race, h),
    }


#: What the MCP tool's answer holds only when asked for (`panels=true`, `trace=true`): the Plotly panels and the
#: trace are about 100 kB of a race's answer, which an LLM client would read as some 30k tokens.
ASKED_FOR = ("panels", "trace")
#: The most an MCP answer holds by default (a race of every method at the app's 512 new tokens stays under it).
MCP_MAX_BYTES = 64 * 1024


def finite(value: Any) -> Any:
    """`value` with every float that is not finite (a figure of a side with no decode round) as null: strict
    JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def json_answer(
    result: dict[str, Any], panels: bool = False, trace: bool = False, offered: Sequence[str] = ASKED_FOR
) -> str:
    """A race's answer (`race_result`) as the MCP tools send it: JSON text, without the panels and the trace
    unless asked for (`left_out` names what of `offered` was left out; a replay offers no trace: its caller
    sent it)."""
    wanted = {"panels": panels, "trace": trace}
    kept = {k: v for k, v in result.items() if wanted.get(k, True)}
    kept["left_out"] = [name for name in offered if not wanted[name]]
    return json.dumps(finite(kept), ensure_ascii=False, allow_nan=False)
