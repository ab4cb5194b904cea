"""A finished race (or a replay) for slides: one self-contained HTML file, and an animated GIF.

The HTML file holds Plotly's offline bundle, the race's frames (round by round: both texts, the
speedup and the badge, the five panels, the explainer of SAGE's round) and a small player, so it
replays in any browser with no server and no network. The GIF is that page filmed frame by frame
by Chromium (Playwright), so both show the same pictures.

    python -m app.export race.jsonl --html race.html --gif race.gif

The page's "Export for slides" buttons write the HTML of the race on screen (`slides_file`) and its GIF
(`gif_file`, when the server has Chromium).

Every frame is drawn by the app's own pure renderers (`render`, `panels`, `explain_view`) from the
recorded records; nothing is measured here.
"""

from __future__ import annotations

import argparse
import html
import json
import shutil
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import gradio as gr
from plotly.offline import get_plotlyjs

from sage_core.errors import SageError
from sage_core.methods import drafts

from .explain_view import explain_html
from .handlers import TRACE_DIR, TRACE_MAX_AGE, sage_of
from .inputs import remove_older
from .page import Page
from .panels import all_figures
from .race import Lane, RaceData
from .race_trace import load_race
from .render import CSS, badge_html, error_html, headline_html, race_html, status_html

PANEL_ORDER = ("confidence", "tree", "shapes", "accepted", "race")
#: One frame a round, shown this long by the player (ms) and the GIF.
FRAME_MS = 900
GIF_SIZE = (1280, 1080)  # the texts, panel ① and the round's tree


class ExportError(SageError):
    """An export that cannot be made (no rounds to show, no browser for the GIF)."""


def race_at(data: RaceData, step: int) -> RaceData:
    """The race as it stood after `step` rounds on every side (round 0: the prefill)."""
    lanes = [Lane(lane.method, lane.header, list(lane.records[: step + 1])) for lane in data.lanes]
    return replace(data, lanes=lanes, stopped=False)


def frame(data: RaceData, step: int) -> dict[str, Any]:
    """One frame: the page's texts, verdict, panels and explainer after `step` rounds."""
    shown = race_at(data, step)
    tree_method = next((m for m in shown.methods if m == "sage"), None) or next(
        (m for m in shown.methods if drafts(m)), shown.methods[0]
    )
    lane = shown.lane(tree_method)
    figures = all_figures(
        shown.records_by_method(), shown.token_texts, tree_method, None, shown.replay, sage_of(shown, "sage")
    )
    return {
        "step": step,
        "lanes": race_html(shown),
        "verdict": headline_html(shown) + badge_html(shown),
        "figures": {name: json.loads(figures[name].to_json()) for name in PANEL_ORDER},
        "explain": explain_html(
            lane.records if lane else [],
            None,
            shown.token_texts,
            tree_method,
            sage_of(shown, tree_method),
            shown.replay,
        ),
    }


def frames(data: RaceData) -> list[dict[str, Any]]:
    rounds = max((len(lane.records) for lane in data.lanes), default=0)
    if rounds == 0:
        raise ExportError("the race has no rounds to export; finish a race (or load a trace) first")
    return [frame(data, step) for step in range(rounds)]


PLAYER_JS = """
const FRAMES = JSON.parse(document.getElementById('sage-frames').textContent);
const PANELS = %(panels)s;
let at = -1, timer = null;
function show(i) {
  i = Math.max(0, Math.min(FRAMES.length - 1, i));
  const f = FRAMES[i];
  document.getElementById('lanes').innerHTML = f.lanes;
  document.getElementById('verdict').innerHTML = f.verdict;
  document.getElementById('explain').innerHTML = f.explain;
  for (const name of PANELS) {
    const fig = f.figures[name];
    Plotly.react('panel-' + name, fig.data, fig.layout, {displaylogo: false, responsive: true});
  }
  at = i;
  document.getElementById('where').textContent = 'round ' + f.step + ' of ' + (FRAMES.length - 1);
  document.getElementById('scrub').value = i;
  document.body.dataset.frame = i;
  if (i === FRAMES.length - 1) { document.body.dataset.done = '1'; pause(); }
}
function pause() { clearInterval(timer); timer = null; document.getElementById('play').textContent = '▶ Play'; }
function play() {
  if (at >= FRAMES.length - 1) show(0);
  document.getElementById('play').textContent = '❚❚ Pause';
  timer = setInterval(() => show(at + 1), %(frame_ms)d / Number(document.getElementById('speed').value));
}
window.sageShow = show;
document.getElementById('play').onclick = () => (timer ? pause() : play());
document.getElementById('next').onclick = () => { pause(); show(at + 1); };
document.getElementById('scrub').max = FRAMES.length - 1;
document.getElementById('scrub').oninput = (e) => { pause(); show(Number(e.target.value)); };
document.addEventListener('keydown', (e) => {
  if (e.key === 'ArrowRight') { pause(); show(at + 1); }
  if (e.key === 'ArrowLeft') { pause(); show(at - 1); }
  if (e.key === ' ') { e.preventDefault(); timer ? pause() : play(); }
});
show(0);
if (!new URLSearchParams(location.search).has('still')) play();
"""

PAGE_CSS = """
body { font-family: Inter, system-ui, sans-serif; margin: 12px 16px; color: #0f172a; }
header { display: flex; gap: 12px; align-items: center; flex-wrap: wrap; margin-bottom: 6px; }
header h1 { font-size: 20px; margin: 0 12px 0 0; }
header button { font-size: 15px; padding: 4px 12px; }
.note { font-size: 13px; color: #78350f; background: #fef3c7; border-radius: 6px; padding: 4px 10px; }
.grid { display: grid; grid-template-columns: minmax(0, 5fr) minmax(0, 4fr); gap: 12px; }
.row { display: grid; grid-template-columns: repeat(auto-fit, minmax(340px, 1fr)); gap: 12px; margin-top: 12px; }
#explain { max-height: 640px; overflow: auto; }
"""


def html_export(data: RaceData, title: str = "SAGE race") -> str:
    """The race as one self-contained HTML page that replays offline (no server, no network)."""
    shots = frames(data)
    payload = json.dumps(shots, separators=(",", ":")).replace("</", "<\\/")
    source = html.escape(data.source or ("a recorded race" if data.replay else "a race run in the app"))
    header = data.header
    where = html.escape(f"{header.device}, {header.dtype}, target {header.target}") if header else ""
    player = PLAYER_JS % {"panels": json.dumps(list(PANEL_ORDER)), "frame_ms": FRAME_MS}
    panels = "".join(f"<div id='panel-{name}'></div>" for name in PANEL_ORDER[2:])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{CSS}{PAGE_CSS}</style>
<script>{get_plotlyjs()}</script></head>
<body>
<header><h1>{html.escape(title)}</h1>
<button id="play">▶ Play</button><button id="next">Step →</button>
<input id="scrub" type="range" min="0" value="0"><span id="where"></span>
<label>speed <select id="speed"><option value="0.5">0.5×</option><option value="1" selected>1×</option>
<option value="2">2×</option><option value="4">4×</option></select></label>
<span class="note">A recording of {source} ({where}), played one round a step: every number is the recorded
one, not measured now.</span></header>
<div class="grid"><div class="sage-wrap"><div id="verdict"></div><div id="lanes"></div></div>
<div id="panel-confidence"></div></div>
<div class="grid" style="margin-top:12px"><div id="panel-tree"></div><div id="explain"></div></div>
<div class="row">{panels}</div>
<script type="application/json" id="sage-frames">{payload}</script>
<script>{player}</script>
</body></html>
"""


def save_html(data: RaceData, path: str | Path, title: str = "SAGE race") -> Path:
    path = Path(path)
    path.write_text(html_export(data, title), encoding="utf-8")
    return path


def save_gif(html_path: str | Path, gif_path: str | Path, size: Sequence[int] = GIF_SIZE) -> Path:
    """Film the exported page frame by frame in Chromium (its top `size` pixels) into an animated GIF."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        raise ExportError("a GIF needs the playwright package (pip install playwright)") from error
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    from PIL import Image

    pictures: list[Image.Image] = []
    with sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        except Exception as error:
            raise ExportError(f"a GIF needs a Chromium browser ({error.__class__.__name__})") from error
        page = browser.new_page(viewport={"width": int(size[0]), "height": int(size[1])})
        page.goto(Path(html_path).resolve().as_uri() + "?still", wait_until="load")
        count = page.evaluate("FRAMES.length")
        for index in range(count):
            page.evaluate(f"window.sageShow({index})")
            page.wait_for_timeout(150)
            shot = Path(gif_path).with_suffix(f".{index}.png")
            page.screenshot(path=str(shot))
            with Image.open(shot) as image:
                pictures.append(image.convert("P", palette=Image.Palette.ADAPTIVE, colors=128))
            shot.unlink()
        browser.close()
    durations = [FRAME_MS] * (len(pictures) - 1) + [3 * FRAME_MS]  # hold the end
    pictures[0].save(gif_path, save_all=True, append_images=pictures[1:], duration=durations, loop=0)
    return Path(gif_path)


def slides_file(data: RaceData | None, folder: Path = TRACE_DIR, max_age: float = TRACE_MAX_AGE) -> Any:
    """The page's "Export for slides": the race on screen as an HTML replay to download (or a sentence)."""
    if data is None or not any(lane.records for lane in data.lanes):
        return gr.update(visible=False, value=None), error_html("Nothing to export yet: run or replay a race first.")
    folder.mkdir(parents=True, exist_ok=True)
    remove_older(folder, "sage-slides-*.html", max_age)
    path = folder / f"sage-slides-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.html"
    save_html(data, path)
    note = "Saved the race as one HTML file that replays offline (open it in any browser; space plays, → steps)."
    return gr.update(visible=True, value=str(path)), status_html(note)


def gif_file(data: RaceData | None, folder: Path = TRACE_DIR, max_age: float = TRACE_MAX_AGE) -> Any:
    """The page's "… as a GIF": the race on screen filmed round by round by Chromium on the server (or a
    sentence saying why not: nothing to export, no browser there)."""
    if data is None or not any(lane.records for lane in data.lanes):
        return gr.update(visible=False, value=None), error_html("Nothing to export yet: run or replay a race first.")
    folder.mkdir(parents=True, exist_ok=True)
    remove_older(folder, "sage-slides-*.gif", max_age)
    path = folder / f"sage-slides-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.gif"
    try:
        save_gif(save_html(data, path.with_suffix(".html")), path)
    except ExportError as error:
        return gr.update(visible=False, value=None), error_html(str(error))
    finally:
        path.with_suffix(".html").unlink(missing_ok=True)
    note = f"Saved the race as an animated GIF, one round a frame ({FRAME_MS} ms each, the end held)."
    return gr.update(visible=True, value=str(path)), status_html(note)


def wire_export(page: Page) -> None:
    """The Export for slides buttons: the race in the page's state, as an HTML replay or a GIF to download."""
    page.slides.click(slides_file, [page.state], [page.slides_file, page.status], api_visibility="private")
    if page.gif is not None:  # (one film at a time: Chromium on the server)
        page.gif.click(
            gif_file,
            [page.state],
            [page.slides_file, page.status],
            api_visibility="private",
            concurrency_limit=1,
            concurrency_id="sage-gif",
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.export", description="A race trace for slides.")
    parser.add_argument("trace", help="a race trace (.jsonl), as the app's Download trace or sage --trace saves")
    parser.add_argument("--html", help="write a self-contained HTML replay here")
    parser.add_argument("--gif", help="write an animated GIF of the race here (needs Chromium)")
    parser.add_argument("--title", default="SAGE race")
    args = parser.parse_args(argv)
    if not args.html and not args.gif:
        parser.error("say what to write: --html and/or --gif")
    try:
        data = load_race(args.trace)
        data.replay = True
        written = save_html(data, args.html or Path(args.gif).with_suffix(".html"), args.title)
        print(f"wrote {written}")
        if args.gif:
            print(f"wrote {save_gif(written, args.gif)}")
    except SageError as error:  # (TraceError is one)
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
