"""The HTML replay: one self-contained file (Plotly's offline bundle, the frames as patches, a small player)
that opens in the talk view's layout on one 1280 x 720 screen."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from plotly.offline import get_plotlyjs

from ..panel_table import Panel, placed
from ..race import RaceData
from ..render import CSS, LEGEND, wrap
from .budget import HTML_BUDGET, Budget, never_stops
from .files import export_plan, open_for_writing, written_beside
from .frame_format import FRAME_MS, PANEL_ORDER, TEXT_START, frame, patch, script_json

PLAYER_JS = """
const PATCHES = JSON.parse(document.getElementById('sage-frames').textContent);
const PANELS = %(panels)s, FIT = %(fit)s;
const SHELL = %(shell)s, TEXT_START = %(text_start)s, SIDE_BY_SIDE = %(side_by_side)d, LINE_PX = %(line_px)d;
const TICK_PX = %(tick_px)d, LEGEND_PX = %(legend_px)d;
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
function thin(layout) {
  // a fitted panel's axes keep their tick labels apart (TICK_PX on a y axis, twice that on an x axis): fewer
  // ticks where a subplot is short, none where it cannot hold two
  const m = layout.margin || {};
  const room = {y: layout.height - (m.t || 0) - (m.b || 0), x: layout.width - (m.l || 0) - (m.r || 0)};
  for (const [key, axis] of Object.entries(layout)) {
    const side = key.startsWith('yaxis') ? 'y' : key.startsWith('xaxis') ? 'x' : '';
    if (!side || !axis || !axis.domain || axis.tickvals) continue;
    const px = room[side] * (axis.domain[1] - axis.domain[0]), gap = side === 'y' ? TICK_PX : 2 * TICK_PX;
    const most = Math.floor(px / gap), span = axis.range ? axis.range[1] - axis.range[0] : 0;
    // a step over a known range widened; else Plotly's own ticks, at most `most` (an explicit step let go)
    let wider = {tickmode: 'auto', dtick: null, nticks: most};
    if (axis.dtick && span) wider = {dtick: Math.max(axis.dtick, Math.ceil(span / Math.max(most, 1)))};
    if (most < 2) wider = {showticklabels: false};
    layout[key] = Object.assign({}, axis, wider);
  }
}
function roomier(layout) {
  // a fitted panel whose title and legend above it leave its plots under half its height: the legend beside them
  const m = layout.margin || {}, legend = layout.legend || {};
  if (legend.orientation !== 'h' || layout.showlegend === false) return;
  if (layout.height - (m.t || 0) - (m.b || 0) >= layout.height / 2) return;
  const lines = layout.title && layout.title.text ? layout.title.text.split('<br>').length : 0;
  layout.margin = Object.assign({}, m, {t: 24 + 22 * lines, r: (m.r || 0) + LEGEND_PX});
  layout.legend = Object.assign({}, legend, {orientation: 'v', x: 1.02, xanchor: 'left', y: 1, yanchor: 'top'});
}
function draw(name, fig) {
  const layout = Object.assign({}, fig.layout);
  const box = document.getElementById('panel-' + name);
  if (FIT.includes(name) && box.clientHeight > 50) {
    layout.height = box.clientHeight; layout.width = box.clientWidth; roomier(layout); thin(layout);
  }
  const drawn = Plotly.react(box, fig.data, layout, {displaylogo: false, responsive: !FIT.includes(name)});
  if (FIT.includes(name)) drawn.then(() => holdLabels(box));
}
function holdLabels(box) {
  // a point's label past the figure's right edge (the tree's last level): the x axis widened once to hold it
  const right = box.getBoundingClientRect().right;
  const labels = [...box.querySelectorAll('.textpoint text')].map((t) => t.getBoundingClientRect().right - right);
  const over = Math.max(0, ...labels), axis = box._fullLayout && box._fullLayout.xaxis;
  if (over <= 0 || !axis || !axis._length) return;
  const [low, high] = axis.range;
  Plotly.relayout(box, {'xaxis.range': [low, high + (high - low) * (over + 12) / axis._length]});
}
function fitRows() {
  // many lanes: each lane's text gets the whole lines the screen has left below the cards (one at least)
  const lanes = document.getElementById('lanes');
  lanes.style.setProperty('--rows', 1);
  if (!document.getElementById('talk').classList.contains('many')) return;
  const rows = new Set([...lanes.querySelectorAll('.sage-col')].map((c) => c.offsetTop)).size || 1;
  const spare = innerHeight - 6 - lanes.getBoundingClientRect().bottom;
  lanes.style.setProperty('--rows', Math.max(1, 1 + Math.floor(spare / rows / LINE_PX)));
}
function show(i) {
  i = Math.max(0, Math.min(PATCHES.length - 1, i));
  const f = rebuild(i);
  document.getElementById('talk').classList.toggle('many', f.lanes.length > SIDE_BY_SIDE);
  document.getElementById('verdict').innerHTML = f.verdict;
  document.getElementById('lanes').innerHTML = SHELL[0] + f.lanes.map((l) => l.join(TEXT_START)).join('') + SHELL[1];
  fitRows();
  for (const t of document.querySelectorAll('#lanes .sage-text')) t.scrollTop = t.scrollHeight;
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

#: Up to this many lanes the talk view shows them side by side in large type beside panel ① and the tree; with
#: more, in small cards filling the first screen, each text given the whole lines left (`LINE_PX` tall), the
#: panels below.
SIDE_BY_SIDE = 4
LINE_PX = 18
#: A fitted panel's y tick labels stay this far apart (px): a short subplot gets fewer ticks.
TICK_PX = 16
#: A fitted panel too short for its title, its legend above its plots and the plots: the legend moves beside
#: them, in a margin this wide (px).
LEGEND_PX = 200
#: The first screen is the talk view (fills 1280 x 720): controls, verdict, texts, panel ① and the tree.
PAGE_CSS = """
body { font-family: Inter, system-ui, sans-serif; margin: 0; color: #0f172a; }
#talk { height: 100vh; box-sizing: border-box; padding: 6px 10px; display: grid; gap: 4px 12px;
  grid-template-columns: minmax(0, 42fr) minmax(0, 58fr);
  grid-template-rows: auto auto minmax(0, 34fr) minmax(0, 66fr); }
header { grid-column: 1 / 3; display: flex; gap: 10px; align-items: center; flex-wrap: nowrap; }
header h1 { font-size: 18px; margin: 0 8px 0 0; white-space: nowrap; }
header button { font-size: 14px; padding: 2px 10px; }
.note { font-size: 12px; color: #78350f; background: #fef3c7; border-radius: 6px; padding: 2px 8px; min-width: 0; }
#verdict { grid-column: 1 / 3; }
#verdict .sage-headline { font-size: 17px; margin: 0 0 2px 0; line-height: 1.2; }
#verdict .sage-headline .sage-headline-note { font-size: 12px; }
#verdict .sage-badge { padding: 3px 10px; font-size: 15px; }
#verdict .sage-badge small { display: none; }
#lanes { grid-column: 1 / 3; overflow: hidden; }
#lanes .sage-legend, #lanes .sage-sub { display: none; }
#lanes .sage-tag { font-size: 12px; }
#lanes { height: 100%; }
#lanes .sage-text { font-size: 18px; line-height: 27px; max-height: round(down, calc(34vh - 110px), 27px);
  overflow-y: auto; }
#panel-confidence, #panel-tree { min-height: 0; overflow: hidden; }
#talk.many { height: auto; grid-template-rows: auto auto auto 440px; }
#talk.many #lanes { height: auto; overflow: visible; }
#talk.many .sage-cols { grid-template-columns: repeat(auto-fill, minmax(196px, 1fr)); gap: 4px 6px; }
#talk.many .sage-col { padding: 3px 8px; border-radius: 6px; }
#talk.many .sage-col h3 { font-size: 13px; gap: 4px; }
#talk.many .sage-tag { display: none; }
#talk.many .sage-stats { font-size: 12px; gap: 0 8px; margin-bottom: 2px; }
#talk.many .sage-stats b { font-size: 12px; }
#talk.many #lanes .sage-text { font-size: 13px; line-height: LINE_PXpx; max-height: none;
  height: calc(var(--rows, 1) * LINE_PXpx); }
#talk.many #verdict .sage-headline { font-size: 16px; }
#talk.many #verdict .sage-rivals { font-size: 12px; font-weight: 400; }
#talk.many #verdict .sage-badge { font-size: 13px; }
#below { padding: 12px 16px; }
#below .row { display: grid; grid-template-columns: repeat(auto-fit, minmax(600px, 1fr)); gap: 12px; }
#explain { max-height: 640px; overflow: auto; }
""".replace("LINE_PX", str(LINE_PX))


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
        "side_by_side": SIDE_BY_SIDE,
        "line_px": LINE_PX,
        "tick_px": TICK_PX,
        "legend_px": LEGEND_PX,
    }
    return f"]</script>\n<script>{player}</script>\n</body></html>\n"


def write_html(
    data: RaceData,
    path: str | Path,
    title: str = "SAGE race",
    budget: Budget = HTML_BUDGET,
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


def save_html(data: RaceData, path: str | Path, title: str = "SAGE race", budget: Budget = HTML_BUDGET) -> Path:
    for _ in write_html(data, path, title, budget):
        pass
    return Path(path)
