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
    found = race.headlines
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
        "acceptance": {lane.key: lane.acceptance.as_dict() for lane in race.lanes},
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
        "lossless": lossless_answer(race),
        "panels": {name: json.loads(fig.to_json()) for name, fig in figures.items()},
        "trace": "\n".join(race_trace_lines(data)) + "\n" if with_trace else None,
        # plain sentences said before the race (a picture outside the built-in pair's world); empty when none
        "notes": list(notes),
    }


def lossless_answer(race: RaceView) -> dict[str, Any] | None:
    """The verdict on identity (`view.Verdict`: whether the lanes agree token for token, where they first part),
    or None with fewer than two lanes to compare. A sampled race's verdict says so (`sampled`: true, and `note`):
    its lanes are samples, exact in distribution, not token-identical, so differing lanes are what sampling
    gives (docs/sampling.md); a greedy race's is the verdict alone, as before."""
    if race.verdict is None:
        return None
    verdict = asdict(race.verdict)
    sampling = race.header.sampling if race.header is not None else None
    if not (sampling and sampling.get("temperature")):
        return verdict
    return {**verdict, "sampled": True, "note": sampled_note(sampling)}


def sampled_note(sampling: dict[str, Any]) -> str:
    """The sentence a sampled race's verdict carries (the page's badge says the same)."""
    return (
        f"This race was sampled (temperature {sampling['temperature']:g}, top-p {sampling.get('top_p', 1):g}, "
        f"top-k {sampling.get('top_k', 0)}, seed {sampling.get('seed')}): each lane is one sample, so the lanes "
        "may differ; every method's output is exact in distribution (distributed exactly as the target's own "
        "sampling), not token-identical, so identical and first_difference compare these samples only."
    )


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
#: The most an MCP answer holds by default: a larger one (every method on both drafts at the app's 512 new tokens
#: is about 110 kB) leaves out its token ids, then cuts each lane's text (`bounded`).
MCP_MAX_BYTES = 64 * 1024
#: The fewest characters of each lane's text a bounded answer keeps before it leaves out more figures.
TEXT_FLOOR_CHARS = 256
#: What a bounded answer leaves out whole, in turn, before and after it cuts the texts' ends: what a client can
#: read again from the trace (trace=true), the least read first.
FIRST_LEFT = ("token_ids", "acceptance")
LAST_LEFT = ("account", "headlines")


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
    unless asked for (`left_out` names what was left out; a replay offers no trace: its caller sent it), and
    at most `MCP_MAX_BYTES` when neither is asked for (`bounded`)."""
    wanted = {"panels": panels, "trace": trace}
    kept = finite({k: v for k, v in result.items() if wanted.get(k, True)})
    kept["left_out"] = [name for name in offered if not wanted[name]]
    if not (panels or trace):
        kept = bounded(kept)
    return dumps(kept)


def dumps(answer: dict[str, Any]) -> str:
    return json.dumps(answer, ensure_ascii=False, allow_nan=False)


def size(value: Any) -> int:
    return len(dumps({"": value}).encode("utf-8"))


def bounded(answer: dict[str, Any], most: int = MCP_MAX_BYTES) -> dict[str, Any]:
    """`answer` within `most` bytes of JSON: as it is when it fits; else without its token ids (the texts say
    them) and its acceptance figures, then with each lane's text cut to the most characters that fit (at least
    `TEXT_FLOOR_CHARS`, with "…"), then without the account and the headlines. Each step is named in `left_out`
    ("token_ids", "texts' ends", a figure's name), the cut in `texts_cut_at` (characters), and a sentence in
    `bounded` says what was left out and where it is whole (the trace)."""
    if size(answer) <= most:
        return answer
    answer = {**answer, "left_out": list(answer["left_out"])}

    def fits() -> bool:
        return size({**answer, "bounded": bounded_words(answer, most)}) <= most

    for name in FIRST_LEFT:
        if not fits():
            answer.pop(name, None)
            answer["left_out"].append(name)
    texts: dict[str, str] = answer.get("texts") or {}
    if not fits():
        answer["texts_cut_at"] = len(str(most))  # its room, before the cut is known
        answer["left_out"].append("texts' ends")
        room = most - size({**answer, "texts": {}, "bounded": bounded_words(answer, most)})
        answer["texts_cut_at"] = cut_at = text_cut(texts, room)
        answer["texts"] = {key: cut_text(text, cut_at) for key, text in texts.items()}
    for name in LAST_LEFT:
        if not fits():
            answer.pop(name, None)
            answer["left_out"].append(name)
    answer["bounded"] = bounded_words(answer, most)
    return answer


def cut_text(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def text_cut(texts: dict[str, str], room: int) -> int:
    """The most characters a lane's text may keep (`cut_text`) so that `texts` fit in `room` bytes of JSON, and
    never fewer than `TEXT_FLOOR_CHARS` (a binary search over the longest text's length)."""
    low, high = TEXT_FLOOR_CHARS, max((len(t) for t in texts.values()), default=0)
    while low < high:
        middle = (low + high + 1) // 2
        if size({key: cut_text(text, middle) for key, text in texts.items()}) <= room:
            low = middle
        else:
            high = middle - 1
    return low


def bounded_words(answer: dict[str, Any], most: int) -> str:
    """The sentence of a bounded answer: what it left out to stay within `most` bytes (in `left_out`'s order),
    and where it is whole."""
    names = {"token_ids": "the token ids", "acceptance": "the acceptance figures", "account": "the account"}
    names |= {"headlines": "the headlines against every rival"}
    names["texts' ends"] = f"each lane's text past its first {answer.get('texts_cut_at', 0):,} characters (cut with …)"
    parts = [names[name] for name in answer["left_out"] if name in names] or ["nothing"]
    listed = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    return (
        f"This answer is kept within {most // 1024} kB, so it leaves out {listed}; ask for the trace (trace=true) "
        "for every token of every lane, or race fewer methods or fewer tokens."
    )
