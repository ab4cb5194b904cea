"""A finished race (or a replay) for slides: one self-contained HTML file, and an animated GIF.

The HTML file holds Plotly's offline bundle, the race's frames and a small player, so it replays in
any browser with no server and no network; it opens in the talk view's layout (the texts, the verdict,
panel ① and the round's tree on one 1280 x 720 screen; the explainer and panels ③–⑤ below). A frame
carries only what changed since the one before (`patch`: the new end of a text, the new points of a
panel), and the player rebuilds each frame from them, so the file grows with the race's length, not
with its square. The GIF is drawn from the records with PIL (`slides_gif`): no browser.

    python -m app.export race.jsonl --html race.html --gif race.gif --webm race.webm

Every export has a budget (`Budget`: frames, seconds, bytes), said in one sentence before it starts;
a race longer than its frames is sampled evenly (first and last rounds kept), and an export that
passes its time or size stops and says which bound it passed, within a frame as well as between
frames (the GIF's drawing runs the budget's check as it goes). A token's text is shown cut to
`slides_gif.TOKEN_CHARS` characters with a mark (…), in the HTML file as in the GIF, so no token makes a
frame slow or large.

The page's buttons run the export on a thread of its own (`ExportThread`), one frame each time the
page's generator asks (`export_job`); while a frame is drawn the generator yields its progress line
again every `HEARTBEAT_S` seconds, so that Gradio can close it when the visitor leaves (it cannot close a
generator while it runs). Closed, it stops the thread within the frame (the drawing's check) and its
partial file is removed; a thread whose page stops asking for `PATIENCE_S` seconds stops as well.
Exports take slots of their own (`ExportSlots`: small ones never wait behind large ones) outside the
races' concurrency group, a slot is given back only when its thread has stopped, and a visitor keeps one
export file of each kind, every one remembered in their session's list and removed with it (`forget_export`).

Every frame is drawn by the app's own pure renderers (`render`, `panels`, `explain_view`) from the
recorded records; nothing is measured here.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import os
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import gradio as gr
from gradio.utils import get_upload_folder
from plotly.offline import get_plotlyjs

from sage_core import RoundRecord
from sage_core.errors import SageError

from . import slides_gif, slides_video
from .explain_view import explained_html
from .inputs import Limits
from .models import between_races
from .page import Page
from .panel_table import PANEL_NAMES, Panel, panel_figures, placed
from .race import Lane, RaceData
from .race_trace import load_race
from .render import CSS, LEGEND, badge_html, error_html, headline_html, lane_html, status_html, wrap
from .view import race_view

#: Every panel's name in the table's order (`panel_table`: the export draws each).
PANEL_ORDER = PANEL_NAMES
#: One frame a round, shown this long by the player (ms) and the GIF.
FRAME_MS = slides_video.FRAME_MS
GIF_SIZE = slides_gif.GIF_SIZE
#: The page's export files live in Gradio's own cache folder, so Gradio serves them without a second copy.
EXPORT_DIR = Path(get_upload_folder()) / "sage-exports"
#: A race of at most this many rounds is a small export (its own slots: never behind a large one).
SMALL_ROUNDS = 60
TEXT_START = "<div class='sage-text'>"
#: While the page's export waits for a frame, it yields its progress line again this often (s): Gradio
#: closes a visitor's generator only between yields, so a visitor who leaves stops it within seconds.
HEARTBEAT_S = 2.0
#: An export thread waits this long (s) for its page to ask for the next frame; a page that never asks has gone.
PATIENCE_S = 30.0
#: How long closing the page's export waits for its thread to stop (s); the thread gives its slot back itself.
JOIN_S = 5.0


class ExportError(SageError):
    """An export that cannot be made (no rounds to show, a bound passed, a path that cannot be written)."""


class Stopped(ExportError):
    """An export stopped because its visitor left (nobody reads this one)."""


def never_stops() -> bool:
    """The stop of an export that only its budget stops (the command line's)."""
    return False


@dataclass(frozen=True)
class Budget:
    """What one export may spend: frames drawn (a longer race is sampled), seconds, and bytes written."""

    frames: int = 60
    seconds: float = 180.0
    megabytes: float = 40.0

    def sentence(self, rounds: int, kind: str = "HTML replay") -> str:
        drawn = min(rounds, self.frames)
        sampled = f"{drawn} of its {rounds} rounds, sampled evenly" if drawn < rounds else f"all {rounds} rounds"
        return (
            f"This {kind} draws {sampled}, within {self.seconds:g} s and {self.megabytes:g} MB "
            "(past either it stops and says so)."
        )


GIF_BUDGET = Budget(frames=slides_gif.GIF_FRAMES, seconds=180.0, megabytes=60.0)


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


# -- the page ---------------------------------------------------------------------------------------

PLAYER_JS = """
const PATCHES = JSON.parse(document.getElementById('sage-frames').textContent);
const PANELS = %(panels)s, FIT = %(fit)s;
const SHELL = %(shell)s, TEXT_START = %(text_start)s;
let at = -1, state = null, timer = null;
function apply(old, p) {
  if ('v' in p) return p.v;
  if ('a' in p) return old.concat(p.a);
  if ('s' in p) return old.slice(0, p.s[0]) + p.s[2] + old.slice(old.length - p.s[1]);
  if ('l' in p) {
    const out = old.slice();
    for (const [i, q] of Object.entries(p.l)) out[Number(i)] = apply(old[Number(i)], q);
    return out.concat(p.t);
  }
  const out = Object.assign({}, old);
  for (const k of p.r) delete out[k];
  for (const [k, q] of Object.entries(p.d)) out[k] = apply(old ? old[k] : undefined, q);
  return out;
}
function rebuild(i) {
  if (i < at || state === null) { state = null; at = -1; }
  while (at < i) { at += 1; state = apply(state, PATCHES[at]); }
  return state;
}
function draw(name, fig) {
  const layout = Object.assign({}, fig.layout);
  const box = document.getElementById('panel-' + name);
  if (FIT.includes(name) && box.clientHeight > 50) { layout.height = box.clientHeight; layout.width = box.clientWidth; }
  Plotly.react(box, fig.data, layout, {displaylogo: false, responsive: !FIT.includes(name)});
}
function show(i) {
  i = Math.max(0, Math.min(PATCHES.length - 1, i));
  const f = rebuild(i);
  document.getElementById('lanes').innerHTML = SHELL[0] + f.lanes.map((l) => l.join(TEXT_START)).join('') + SHELL[1];
  for (const t of document.querySelectorAll('#lanes .sage-text')) t.scrollTop = t.scrollHeight;
  document.getElementById('verdict').innerHTML = f.verdict;
  document.getElementById('explain').innerHTML = f.explain;
  for (const name of PANELS) draw(name, f.figures[name]);
  const where = 'round ' + f.step + ' (frame ' + (i + 1) + ' of ' + PATCHES.length + ')';
  document.getElementById('where').textContent = where;
  document.getElementById('scrub').value = i;
  document.body.dataset.frame = i;
  if (i === PATCHES.length - 1) { document.body.dataset.done = '1'; pause(); }
}
function pause() { clearInterval(timer); timer = null; document.getElementById('play').textContent = '▶ Play'; }
function play() {
  if (at >= PATCHES.length - 1) show(0);
  document.getElementById('play').textContent = '❚❚ Pause';
  timer = setInterval(() => show(at + 1), %(frame_ms)d / Number(document.getElementById('speed').value));
}
window.sageShow = show;
document.getElementById('play').onclick = () => (timer ? pause() : play());
document.getElementById('next').onclick = () => { pause(); show(at + 1); };
document.getElementById('scrub').max = PATCHES.length - 1;
document.getElementById('scrub').oninput = (e) => { pause(); show(Number(e.target.value)); };
document.addEventListener('keydown', (e) => {
  if (e.key === 'ArrowRight') { pause(); show(at + 1); }
  if (e.key === 'ArrowLeft') { pause(); show(at - 1); }
  if (e.key === ' ') { e.preventDefault(); timer ? pause() : play(); }
});
show(0);
if (!new URLSearchParams(location.search).has('still')) play();
"""

#: The first screen is the talk view (fills 1280 x 720): controls, verdict, texts, panel ① and the tree.
PAGE_CSS = """
body { font-family: Inter, system-ui, sans-serif; margin: 0; color: #0f172a; }
#talk { height: 100vh; box-sizing: border-box; padding: 6px 10px; display: grid; gap: 4px 12px;
  grid-template-columns: minmax(0, 42fr) minmax(0, 58fr);
  grid-template-rows: auto auto minmax(0, 34fr) minmax(0, 66fr); }
header { grid-column: 1 / 3; display: flex; gap: 10px; align-items: center; flex-wrap: nowrap; overflow: hidden; }
header h1 { font-size: 18px; margin: 0 8px 0 0; white-space: nowrap; }
header button { font-size: 14px; padding: 2px 10px; }
.note { font-size: 12px; color: #78350f; background: #fef3c7; border-radius: 6px; padding: 2px 8px;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; min-width: 0; }
#verdict { grid-column: 1 / 3; }
#verdict .sage-headline { font-size: 17px; margin: 0 0 2px 0; line-height: 1.2; }
#verdict .sage-headline .sage-headline-note { font-size: 12px; }
#verdict .sage-badge { padding: 3px 10px; font-size: 15px; }
#verdict .sage-badge small { display: none; }
#lanes { grid-column: 1 / 3; overflow: hidden; }
#lanes .sage-legend, #lanes .sage-sub { display: none; }
#lanes { height: 100%; }
#lanes .sage-text { font-size: 18px; line-height: 1.5; max-height: calc(34vh - 110px); overflow-y: auto; }
#panel-confidence, #panel-tree { min-height: 0; overflow: hidden; }
#below { padding: 12px 16px; }
#below .row { display: grid; grid-template-columns: repeat(auto-fit, minmax(340px, 1fr)); gap: 12px; }
#explain { max-height: 640px; overflow: auto; }
"""


def talk_panels() -> list[Panel]:
    """The panels of the talk view's first screen, fitted to their boxes: beside the texts, and the tree."""
    return [*placed("stage"), *placed("tree")]


def page_head(data: RaceData, title: str) -> str:
    """The page up to the frames: styles, Plotly's bundle, the controls and the talk view's boxes."""
    source = html.escape(data.source or ("a recorded race" if data.replay else "a race run in the app"))
    header = data.header
    where = html.escape(f"{header.device}, {header.dtype}, target {header.target}") if header else ""
    talk = "".join(f"<div id='{panel.element_id}'></div>" for panel in talk_panels())
    panels = "".join(f"<div id='{panel.element_id}'></div>" for panel in placed("row"))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{CSS}{PAGE_CSS}</style>
<script>{get_plotlyjs()}</script></head>
<body>
<div id="talk"><header><h1>{html.escape(title)}</h1>
<button id="play">▶ Play</button><button id="next">Step →</button>
<input id="scrub" type="range" min="0" value="0"><span id="where"></span>
<label>speed <select id="speed"><option value="0.5">0.5×</option><option value="1" selected>1×</option>
<option value="2">2×</option><option value="4">4×</option></select></label>
<span class="note" title="every number is the recorded one, not measured now">A recording of {source}
({where}), played one round a step: every number is the recorded one.</span></header>
<div id="verdict"></div><div id="lanes"></div>
{talk}</div>
<div id="below"><div id="explain"></div><div class="row">{panels}</div></div>
<script type="application/json" id="sage-frames">["""


def page_tail() -> str:
    shell = wrap(f"{LEGEND}<div class='sage-cols'>\0</div>").split("\0")
    player = PLAYER_JS % {
        "panels": script_json(list(PANEL_ORDER)),
        "fit": script_json([panel.name for panel in talk_panels()]),
        "frame_ms": FRAME_MS,
        "shell": script_json(shell),
        "text_start": script_json(TEXT_START),
    }
    return f"]</script>\n<script>{player}</script>\n</body></html>\n"


class Spend:
    """An export's spending against its budget: it raises the sentence naming the bound it passed."""

    def __init__(self, budget: Budget, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget, self.clock = budget, clock
        self.started = clock()
        self.bytes = 0

    def watch(self, done: int, total: int, stop: Callable[[], bool]) -> slides_gif.Check:
        """The check a frame's drawing runs as it goes: it raises when `stop()` (the visitor left) or
        when the budget is passed (`check`)."""

        def check() -> None:
            if stop():
                raise Stopped(f"the export stopped after {done} of {total} frames: its visitor left")
            self.check(done, total)

        return check

    def check(self, done: int, total: int) -> None:
        if self.clock() - self.started > self.budget.seconds:
            raise ExportError(
                f"the export passed its {self.budget.seconds:g} s budget after {done} of {total} frames; "
                "export a shorter race (or a trace cut to fewer rounds)"
            )
        if self.bytes > self.budget.megabytes * 2**20:
            raise ExportError(
                f"the export passed its {self.budget.megabytes:g} MB budget after {done} of {total} frames"
            )


#: The ending each kind of export's file name must have (the GIF's and the video's choose their format by it).
SUFFIXES = {"html": (".html", ".htm"), "gif": (".gif",), "webm": (".webm",)}


def cannot_write(path: Path, error: OSError) -> str:
    """The sentence for a write that failed: the path and the system's reason ("No space left on device")."""
    return f"cannot write {path}: {error.strerror or error.__class__.__name__}"


def writable(path: str | Path, kind: str = "html") -> Path:
    """The file an export of `kind` may write (through a link, the file it names), or one sentence saying why it
    cannot: a folder, a missing folder, a name without the kind's ending, or something other than a regular file
    there (a device, a FIFO: an export replaces only a file)."""
    path = Path(path)
    if path.is_dir():
        raise ExportError(f"cannot write {path}: it is a folder; name a file in it")
    if path.is_symlink():
        path = path.resolve()
    if not path.parent.is_dir():
        raise ExportError(f"cannot write {path}: the folder {path.parent} does not exist")
    endings = SUFFIXES[kind]
    if path.suffix.lower() not in endings:
        ending = " or ".join(endings)
        raise ExportError(f"cannot write {path}: a {kind.upper()} export's file name must end in {ending}")
    if path.exists() and not path.is_file():
        raise ExportError(f"cannot write {path}: it is not a regular file (a device, a FIFO or a socket); name a file")
    return path


@contextlib.contextmanager
def written_beside(path: Path) -> Iterator[Path]:
    """A new file beside `path` for the export to write, renamed onto `path` when the block ends well and removed
    when it does not: a failed or stopped export never touches what was at `path`, and only ever removes the
    file it created. A write the system refuses (a full disk) is one sentence (`cannot_write`)."""
    temp = path.with_name(f".{path.stem[:80]}.{uuid.uuid4().hex[:8]}.part{path.suffix}")
    try:
        os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # (the umask applies, as for open())
    except OSError as error:
        raise ExportError(cannot_write(path, error)) from error
    try:
        yield temp
        os.replace(temp, path)
    except OSError as error:
        raise ExportError(cannot_write(path, error)) from error
    finally:
        temp.unlink(missing_ok=True)


def open_for_writing(path: Path) -> TextIO:
    return path.open("w", encoding="utf-8")


def export_plan(data: RaceData, path: str | Path, budget: Budget, kind: str) -> tuple[Path, list[int], Spend, RaceData]:
    """What an export of `kind` writes: its checked path, the rounds it draws (sampled to the budget's frames),
    its spending, and the race with its token texts cut for showing."""
    rounds = rounds_of(data)
    if rounds == 0:
        raise ExportError("the race has no rounds to export; finish a race (or load a trace) first")
    return writable(path, kind), frame_steps(rounds, budget.frames), Spend(budget), for_showing(data)


def write_html(
    data: RaceData,
    path: str | Path,
    title: str = "SAGE race",
    budget: Budget = Budget(),
    stop: Callable[[], bool] = never_stops,
) -> Iterator[int]:
    """Write the HTML replay frame by frame, yielding after each frame (the count written), so that a
    caller can stop it between frames (`stop`, or closing it); stopped or failed, it leaves no partial
    file. Token texts are cut (`for_showing`), so a frame's time and size do not grow with one token."""
    path, steps, spend, shown = export_plan(data, path, budget, "html")
    with written_beside(path) as temp, open_for_writing(temp) as out:
        spend.bytes += out.write(page_head(shown, title))
        previous: Any = None
        for count, step in enumerate(steps):
            check = spend.watch(count, len(steps), stop)
            check()
            current = frame(shown, step)
            check()
            spend.bytes += out.write(("," if count else "") + script_json(patch(previous, current)))
            previous = current
            yield count + 1
        spend.check(len(steps), len(steps))
        out.write(page_tail())


def drawn_slides(
    shown: RaceData, steps: Sequence[int], spend: Spend, title: str, stop: Callable[[], bool]
) -> Iterator[Any]:
    """The GIF's and the video's slides, one a round of `steps`, each drawn under the export's budget and its
    visitor's leaving (`Spend.watch`, checked before and within the frame)."""
    rounds = rounds_of(shown)
    for count, step in enumerate(steps):
        check = spend.watch(count, len(steps), stop)
        check()
        yield slides_gif.slide(race_view(race_at(shown, step)), rounds, title, check)


def write_gif(
    data: RaceData,
    path: str | Path,
    title: str = "SAGE race",
    budget: Budget = GIF_BUDGET,
    stop: Callable[[], bool] = never_stops,
) -> Iterator[int]:
    """Draw the GIF frame by frame with PIL (no browser), yielding after each frame; stopped (`stop`,
    checked within a frame as the budget is) or failed, it leaves no partial file. At most
    `budget.frames` palette frames are held (0.9 MB each)."""
    path, steps, spend, shown = export_plan(data, path, budget, "gif")
    pictures = []
    palette = slides_gif.slide_palette()
    with written_beside(path) as temp:
        for count, picture in enumerate(drawn_slides(shown, steps, spend, title, stop), 1):
            pictures.append(slides_gif.palette_frame(picture, palette))
            yield count
        durations = [FRAME_MS] * (len(pictures) - 1) + [3 * FRAME_MS]  # hold the end
        slides_gif.write_gif(pictures, temp, durations)


def write_webm(
    data: RaceData,
    path: str | Path,
    title: str = "SAGE race",
    budget: Budget = GIF_BUDGET,
    stop: Callable[[], bool] = never_stops,
) -> Iterator[int]:
    """The GIF's frames as a WebM video (VP9, 1280 x 720, one frame a round at `FRAME_MS`, the end held),
    encoded as they are drawn (one frame held at a time); stopped or failed, it leaves no partial file."""
    path, steps, spend, shown = export_plan(data, path, budget, "webm")
    try:
        with written_beside(path) as temp:
            with slides_video.video(temp, GIF_SIZE) as writer:
                for count, picture in enumerate(drawn_slides(shown, steps, spend, title, stop), 1):
                    slides_video.add_frame(writer, picture, 3 if count == len(steps) else 1)  # (the end held)
                    yield count
            spend.bytes = temp.stat().st_size
            spend.check(len(steps), len(steps))
    except slides_video.VideoError as error:
        raise ExportError(str(error)) from error


def save_webm(data: RaceData, path: str | Path, title: str = "SAGE race", budget: Budget = GIF_BUDGET) -> Path:
    for _ in write_webm(data, path, title, budget):
        pass
    return Path(path)


def save_html(data: RaceData, path: str | Path, title: str = "SAGE race", budget: Budget = Budget()) -> Path:
    for _ in write_html(data, path, title, budget):
        pass
    return Path(path)


def save_gif(data: RaceData, path: str | Path, title: str = "SAGE race", budget: Budget = GIF_BUDGET) -> Path:
    for _ in write_gif(data, path, title, budget):
        pass
    return Path(path)


#: Each kind of export: its budget, its writer, and how its status line names it.
EXPORTS: dict[str, tuple[Budget, Callable[..., Iterator[int]], str]] = {
    "html": (Budget(), write_html, "HTML replay"),
    "gif": (GIF_BUDGET, write_gif, "GIF (drawn on the server, no browser)"),
    "webm": (GIF_BUDGET, write_webm, "WebM video (drawn on the server, no browser)"),
}


# -- the page's buttons -------------------------------------------------------------------------


class ExportSlots:
    """Exports running at once, small and large apart, so a small one never waits behind a large one.
    A slot is taken at once or refused in a sentence (nobody queues). A slot handed to a thread
    (`hand_over`) is given back by that thread when it has stopped, never before; a slot its export never
    gave back and no thread holds (a generator dropped before drawing) is free again after `lease` s."""

    def __init__(self, small: int = 2, large: int = 1, lease: float = Budget.seconds + 30.0) -> None:
        self.capacity = {"small": small, "large": large}
        self.lease = lease
        self.held: dict[str, dict[str, float]] = {"small": {}, "large": {}}
        self.threads: dict[str, threading.Thread] = {}
        self.lock = threading.Lock()

    def take(self, kind: str, clock: Callable[[], float] = time.monotonic) -> str:
        with self.lock:
            held = self.held[kind]
            for key, since in list(held.items()):
                thread = self.threads.get(key)
                if clock() - since > self.lease and (thread is None or not thread.is_alive()):
                    del held[key]
                    self.threads.pop(key, None)
            if len(held) >= self.capacity[kind]:
                raise ExportError(
                    f"{len(held)} {kind} exports are running (at most {self.capacity[kind]} at once); "
                    "try again in a few seconds"
                )
            key = uuid.uuid4().hex
            held[key] = clock()
            return key

    def give_back(self, kind: str, key: str) -> None:
        with self.lock:
            self.held[kind].pop(key, None)
            self.threads.pop(key, None)

    def hand_over(self, key: str, thread: threading.Thread) -> None:
        """From now on `thread` gives the slot back (when it has stopped); it cannot lapse before."""
        with self.lock:
            self.threads[key] = thread

    def handed_over(self, key: str) -> bool:
        with self.lock:
            return key in self.threads


@dataclass(frozen=True)
class Slot:
    """One taken export slot."""

    slots: ExportSlots
    kind: str
    key: str

    def give_back(self) -> None:
        self.slots.give_back(self.kind, self.key)


class ExportThread:
    """An export's writer on a thread of its own, drawing one frame each time the page asks (`frames`).
    The page's generator never draws, so it yields at least every `HEARTBEAT_S` s and Gradio can close it
    when its visitor leaves; closing it stops the thread within its frame (the writer's `stop`). The
    thread gives the slot back when it has stopped, and stops by itself when nobody asks for `PATIENCE_S` s."""

    def __init__(self, writer: Callable[[Callable[[], bool]], Iterator[int]], slot: Slot | None = None) -> None:
        self.stop = threading.Event()
        self.asked = threading.Semaphore(0)
        self.results: queue.SimpleQueue[int | BaseException | None] = queue.SimpleQueue()
        self.slot = slot
        self.thread = threading.Thread(target=self.run, args=(writer,), name="sage-export", daemon=True)

    def start(self) -> None:
        """Start the thread, the slot handed to it first (so it cannot lapse while the thread runs)."""
        if self.slot is not None:
            self.slot.slots.hand_over(self.slot.key, self.thread)
        try:
            self.thread.start()
        except BaseException:
            if self.slot is not None:
                self.slot.give_back()
            raise

    def run(self, writer: Callable[[Callable[[], bool]], Iterator[int]]) -> None:
        try:
            self.drive(writer(self.stop.is_set))
            self.results.put(None)
        except BaseException as error:  # handed to the page (a Stopped one to nobody)
            self.results.put(error)
        finally:
            if self.slot is not None:
                self.slot.give_back()

    def drive(self, drawn: Iterator[int]) -> None:
        """Draw a frame each time one is asked for, until the writer ends or nobody asks; the writer is
        closed either way (a writer closed early removes its partial file). Each frame is drawn in the race slot
        (`models.between_races`: when no race streams, or after a short wait), so an export takes turns with the
        races instead of running beside their steps: a race's measured time stays its own while a visitor
        exports."""
        try:
            while self.asked.acquire(timeout=PATIENCE_S) and not self.stop.is_set():
                try:
                    with between_races():  # never beside a race's step: its measured time stays its own
                        frame = next(drawn)
                    self.results.put(frame)
                except StopIteration:
                    return
            self.stop.set()
            raise Stopped("the export stopped: its visitor left")
        finally:
            close = getattr(drawn, "close", None)
            if close is not None:
                close()

    def frames(self) -> Generator[int | None, None, None]:
        """The writer's counts as its frames are drawn, and None every `HEARTBEAT_S` s while one is.
        Closed early (the visitor left) it stops the thread and waits up to `JOIN_S` s for it."""
        self.start()
        try:
            while True:
                self.asked.release()
                done = yield from self.result()
                if done is None:
                    return
                yield done
        finally:
            self.stop.set()
            self.asked.release()
            self.thread.join(JOIN_S)

    def result(self) -> Generator[None, None, int | None]:
        while True:
            try:
                done = self.results.get(timeout=HEARTBEAT_S)
            except queue.Empty:
                yield None
                continue
            if isinstance(done, BaseException):
                raise done
            return done


SLOTS = ExportSlots()


#: Guards every session's list of export files (two exports of one visitor may finish at once).
KEPT_LOCK = threading.Lock()


def kept_files(kept: Any) -> list[Any]:
    """A visitor's export files: their state's list itself (every export of the session adds to that one
    list, so two running at once both stay known); a fresh list for a state that holds none or one path."""
    if isinstance(kept, list):
        return kept
    return [kept] if isinstance(kept, str) else []


def forget_export(kept: Any, folder: Path = EXPORT_DIR) -> None:
    """Remove a visitor's export files (their state's `delete_callback`, when they leave): every path of their
    list (`kept_files`); only files of the exports' folder are ever removed."""
    with KEPT_LOCK:
        paths = list(kept_files(kept))
    for path in paths:
        if isinstance(path, str) and Path(path).parent == folder:
            Path(path).unlink(missing_ok=True)


def keep_export(kept: Any, path: Path, folder: Path = EXPORT_DIR) -> list[Any]:
    """The visitor's files with `path` added and their earlier export of its kind removed (one file of each
    kind a visitor: at most an HTML, a GIF and a video, all removed when they leave)."""
    files = kept_files(kept)
    with KEPT_LOCK:
        same_kind = [old for old in files if isinstance(old, str) and Path(old).suffix == path.suffix]
        files[:] = [old for old in files if old not in same_kind] + [str(path)]
    forget_export(same_kind, folder)
    return files


def hidden(message: str, previous: Any) -> tuple[Any, Any, Any]:
    return gr.update(visible=False, value=None), error_html(message), previous


def export_job(
    data: RaceData | None, previous: Any, kind: str = "html", folder: Path = EXPORT_DIR, slots: ExportSlots = SLOTS
) -> Iterator[tuple[Any, Any, Any]]:
    """The page's export buttons: the budget's sentence first, then a progress line a frame, then the
    file (the visitor's previous export of its kind removed: `keep_export`). Each yield is where a visitor who
    left stops it (Gradio stops pulling, or closes it); the slot is given back and no partial file stays."""
    if data is None or not any(lane.records for lane in data.lanes):
        yield hidden("Nothing to export yet: run or replay a race first.", previous)
        return
    rounds = rounds_of(data)
    size = "small" if rounds <= SMALL_ROUNDS else "large"
    try:
        slot = Slot(slots, size, slots.take(size))
    except ExportError as error:
        yield hidden(str(error), previous)
        return
    try:
        yield from run_export(data, previous, kind, folder, slot)
    finally:
        if not slots.handed_over(slot.key):  # (else its thread gives it back when it has stopped)
            slot.give_back()


def run_export(
    data: RaceData, previous: Any, kind: str, folder: Path, slot: Slot | None = None
) -> Iterator[tuple[Any, Any, Any]]:
    """The budget's sentence, a progress line a frame (again every `HEARTBEAT_S` s while one is drawn,
    on an `ExportThread`), then the file; the slot, when given, goes with the thread."""
    rounds = rounds_of(data)
    budget, writer, label = EXPORTS[kind]
    yield gr.update(), status_html(budget.sentence(rounds, label)), previous
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"sage-slides-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.{kind}"
    total = len(frame_steps(rounds, budget.frames))
    worker = ExportThread(lambda stop: writer(data, path, budget=budget, stop=stop), slot)
    shown = 0
    try:
        with contextlib.closing(worker.frames()) as drawn:
            for done in drawn:
                shown = done or shown
                line = f"Exporting the {label}: frame {shown} of {total}{'' if done else ', drawing'}…"
                yield gr.update(), status_html(line), previous
    except ExportError as error:
        yield hidden(str(error), previous)
        return
    kept = keep_export(previous, path, folder)
    notes = {
        "gif": f"Saved the race as an animated GIF, {total} frames of {rounds} rounds ({FRAME_MS} ms each, the end "
        "held).",
        "webm": f"Saved the race as a WebM video (VP9, 1280 × 720), {total} frames of {rounds} rounds ({FRAME_MS} ms "
        "each, the end held): it plays in browsers and PowerPoint 365.",
        "html": "Saved the race as one HTML file that replays offline (open it in any browser; space plays, → steps).",
    }
    note = notes[kind]
    yield gr.update(visible=True, value=str(path)), status_html(note), kept


def slides_file(data: RaceData | None, previous: Any = None) -> Iterator[tuple[Any, Any, Any]]:
    """The page's "Export for slides": the race on screen as an HTML replay to download."""
    yield from export_job(data, previous, "html")


def gif_file(data: RaceData | None, previous: Any = None) -> Iterator[tuple[Any, Any, Any]]:
    """The page's "… as a GIF": the race on screen drawn round by round (sampled), no browser."""
    yield from export_job(data, previous, "gif")


def video_file(data: RaceData | None, previous: Any = None) -> Iterator[tuple[Any, Any, Any]]:
    """The page's "… or a video": the GIF's frames as a WebM (VP9), no browser."""
    yield from export_job(data, previous, "webm")


def wire_export(page: Page) -> None:
    """The Export for slides buttons. They run outside the races' concurrency group, with no Gradio limit
    (so they never wait in, or fill, the queue the races share): `ExportSlots` takes or refuses at once."""
    kept: gr.State = gr.State([], delete_callback=forget_export)  # the visitor's export files, removed with them
    outputs = [page.slides_file, page.status, kept]
    group = {"api_visibility": "private", "concurrency_limit": None, "concurrency_id": "sage-export"}
    page.slides.click(slides_file, [page.state, kept], outputs, **group)
    if page.gif is not None:
        page.gif.click(gif_file, [page.state, kept], outputs, **group)
    if page.video_export is not None:
        page.video_export.click(video_file, [page.state, kept], outputs, **group)


# -- the command line --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.export", description="A race trace for slides.")
    parser.add_argument("trace", help="a race trace (.jsonl), as the app's Download trace or sage --trace saves")
    parser.add_argument("--html", help="write a self-contained HTML replay here")
    parser.add_argument("--gif", help="write an animated GIF of the race here (drawn with PIL: no browser)")
    parser.add_argument("--webm", help="write a WebM video (VP9) of the GIF's frames here (no browser)")
    parser.add_argument("--title", default="SAGE race")
    args = parser.parse_args(argv)
    if not args.html and not args.gif and not args.webm:
        parser.error("say what to write: --html, --gif and/or --webm")
    try:
        data = load_race(args.trace, max_bytes=Limits.from_env().max_trace_bytes)
        data.replay = True
        rounds = rounds_of(data)
        if args.html:
            print(Budget().sentence(rounds, "HTML replay"))
            print(f"wrote {save_html(data, args.html, args.title)}")
        if args.gif:
            print(GIF_BUDGET.sentence(rounds, "GIF"))
            print(f"wrote {save_gif(data, args.gif, args.title)}")
        if args.webm:
            print(GIF_BUDGET.sentence(rounds, "WebM video"))
            print(f"wrote {save_webm(data, args.webm, args.title)}")
    except SageError as error:  # (TraceError is one)
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
