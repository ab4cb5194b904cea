"""An export's frames: the race cut for showing, the rounds a film shows, one frame's contents (the page's own
renderers, from the records) and the frames as changes (`patch`), written as script-safe JSON."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from sage_core import RoundRecord

from .. import slides_gif, slides_video
from ..explain_view import explained_html
from ..panel_table import PANEL_NAMES, panel_figures
from ..race import Lane, RaceData
from ..render import badge_html, headline_html, lane_html
from ..view import race_view
from .budget import Budget, ExportError

#: Every panel's name in the table's order (`panel_table`: the export draws each).
PANEL_ORDER = PANEL_NAMES
#: One frame a round, shown this long by the player (ms) and the GIF.
FRAME_MS = slides_video.FRAME_MS
GIF_SIZE = slides_gif.GIF_SIZE
TEXT_START = "<div class='sage-text'>"


def cut_record(record: RoundRecord) -> RoundRecord:
    """The record with each token's text cut for showing (`slides_gif.cut`); itself when none is too long."""
    texts = record.new_token_texts
    if all(len(text) <= slides_gif.TOKEN_CHARS for text in texts):
        return record
    return replace(record, new_token_texts=tuple(slides_gif.cut(text) for text in texts))


def for_showing(data: RaceData) -> RaceData:
    """The race with every token's text cut to `slides_gif.TOKEN_CHARS` characters, the cut marked (…):
    what the exports show (one pass over the records, once an export), as a recording: a file replays what was
    measured, so its noise is the recording's, never "this machine now"."""
    lanes = [Lane(lane.method, lane.header, [cut_record(r) for r in lane.records], lane.draft) for lane in data.lanes]
    texts = {token: slides_gif.cut(text) for token, text in data.token_texts.items()}
    return replace(data, lanes=lanes, token_texts=texts, replay=True)


def race_at(data: RaceData, step: int) -> RaceData:
    """The race as it stood after `step` rounds on every side (round 0: the prefill)."""
    lanes = [Lane(lane.method, lane.header, list(lane.records[: step + 1]), lane.draft) for lane in data.lanes]
    return replace(data, lanes=lanes, stopped=False)


def rounds_of(data: RaceData) -> int:
    return max((len(lane.records) for lane in data.lanes), default=0)


def frame_steps(rounds: int, most: int) -> list[int]:
    """The rounds a film of at most `most` frames shows: all of them, or an even sample with the first and last."""
    if rounds <= most:
        return list(range(rounds))
    return sorted({round(i * (rounds - 1) / (most - 1)) for i in range(most)})


def frame(data: RaceData, step: int) -> dict[str, Any]:
    """One frame: the page's texts (one string a side), verdict, panels and explainer after `step` rounds, all
    from one view of the race as it stood then (`race_view`), handed to every renderer."""
    race = race_view(race_at(data, step))
    figures = panel_figures(race)
    return {
        "step": step,
        # each side as [its name and figures, its text]: the text grows at its end, the figures change
        "lanes": [lane_html(each, race).split(TEXT_START, 1) for each in race.lanes],
        "verdict": headline_html(race) + badge_html(race),
        "figures": {name: json.loads(figure.to_json()) for name, figure in figures.items()},
        "explain": explained_html(race),
    }


def frames(data: RaceData, most: int = Budget.frames) -> list[dict[str, Any]]:
    """Every frame whole (at most `most`, sampled): for tests and small races; exports write `patch`es."""
    rounds = rounds_of(data)
    if rounds == 0:
        raise ExportError("the race has no rounds to export; finish a race (or load a trace) first")
    shown = for_showing(data)
    return [frame(shown, step) for step in frame_steps(rounds, most)]


# -- frames as changes ----------------------------------------------------------------------------
# A patch turns the previous frame's value into the next one: {"v": value} replaces it, {"a": [...]}
# appends to a list, {"s": [kept_head, kept_tail, middle]} splices a string, {"l": {i: patch}, "t":
# [...]} patches a list's items and appends, {"d": {key: patch}, "r": [keys]} patches a dict.


def _list_patch(old: list, new: list) -> dict[str, Any]:
    if len(new) < len(old):
        return {"v": new}
    if new[: len(old)] == old:
        return {"a": new[len(old) :]}
    changed = {str(i): patch(a, b) for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b}
    return {"l": changed, "t": new[len(old) :]}


def _string_patch(old: str, new: str) -> dict[str, Any]:
    head = 0
    limit = min(len(old), len(new))
    while head < limit and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < limit - head and old[len(old) - 1 - tail] == new[len(new) - 1 - tail]:
        tail += 1
    return {"s": [head, tail, new[head : len(new) - tail]]}


def patch(old: Any, new: Any) -> dict[str, Any]:
    """What turns `old` into `new` (see above); the player's `apply` is its inverse."""
    if isinstance(old, dict) and isinstance(new, dict):
        changed = {key: patch(old.get(key), value) for key, value in new.items() if old.get(key) != value}
        return {"d": changed, "r": [key for key in old if key not in new]}
    if isinstance(old, list) and isinstance(new, list):
        return _list_patch(old, new)
    if isinstance(old, str) and isinstance(new, str) and len(new) > 64:
        return _string_patch(old, new)
    return {"v": new}


def script_json(value: Any) -> str:
    """JSON that cannot change how the page around it parses: no `<`, `>` or `&` (so no `</script>` or
    `<!--` from a token's text), and no U+2028/U+2029, all as \\u escapes (the same JSON once parsed)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char in "<>&\u2028\u2029":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text
