"""Checks of a laid-out picture or page: texts over one another, texts outside their frame or figure, and text
cut by overflow. The slide's checks read the boxes the slide's own drawing recorded (`slides_gif.Canvas`, the
fonts it draws with); the page's are scripts for Chromium (playwright's `page.evaluate`), each returning a list
of what is wrong (empty when nothing is).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

Box = tuple[float, float, float, float]
#: A text placed on a picture: its words, its box (left, top, right, bottom) and its type's size in px.
Placed = tuple[str, Box, float]


def overlapping(placed: Sequence[Placed], slack: float = 1.0) -> list[tuple[str, str]]:
    """Each pair of texts whose boxes overlap by more than `slack` px both ways (empty texts aside)."""
    shown = [(text, box) for text, box, _ in placed if text.strip() and box[2] > box[0] and box[3] > box[1]]
    return [
        (a, b)
        for (a, p), (b, q) in itertools.combinations(shown, 2)
        if p[0] < q[2] - slack and q[0] < p[2] - slack and p[1] < q[3] - slack and q[1] < p[3] - slack
    ]


def outside(placed: Sequence[Placed], size: tuple[int, int]) -> list[tuple[str, Box]]:
    """Each text whose box leaves the `size` (width, height) picture."""
    width, height = size
    return [(text, box) for text, box, _ in placed if box[0] < 0 or box[1] < 0 or box[2] > width or box[3] > height]


#: Texts under `root` cut by an ancestor that hides its overflow (more than 2 px of them hidden; in a scroll box,
#: a text half in its view: a sliced line), and texts whose own content is wider or taller than their box while
#: they hide the overflow (an ellipsis): "why: text".
CUT_TEXT_JS = """root => {
  const found = [];
  const leaves = [...document.querySelectorAll(root + ' *')].filter(e => !(e instanceof SVGElement)
    && [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()));
  for (const e of leaves) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || getComputedStyle(e).visibility === 'hidden') continue;
    const style = getComputedStyle(e);
    if (style.overflow !== 'visible' && (e.scrollWidth > e.clientWidth + 2 || e.scrollHeight > e.clientHeight + 2)) {
      found.push('overflows its box: ' + e.textContent.trim().slice(0, 60));
      continue;
    }
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
      const b = a.getBoundingClientRect();
      const scrolls = ['auto', 'scroll'].includes(s.overflowY) || ['auto', 'scroll'].includes(s.overflowX);
      // a scroll box may hold text scrolled wholly out of its view (a lane's earlier lines), never a line half in
      // it; an inline text is checked line by line (a token wrapped across two lines is two boxes)
      const hang = parseFloat(style.fontSize);  // (a space that ends a wrapped line hangs past the right edge)
      const cut = [...e.getClientRects()].some(q => {
        const inside = q.left >= b.left - 2 && q.right <= b.right + hang
          && q.top >= b.top - 2 && q.bottom <= b.bottom + 2;
        const away = q.bottom <= b.top + 2 || q.top >= b.bottom - 2 || q.right <= b.left + 2 || q.left >= b.right - 2;
        return !inside && !(scrolls && away);
      });
      if (cut) {
        found.push('cut by ' + (a.id || a.className) + ': ' + e.textContent.trim().slice(0, 60));
        break;
      }
    }
  }
  return found;
}"""

#: In each Plotly figure under `root`: tick labels over one another on an axis, and SVG text outside its figure.
FIGURE_TEXT_JS = """root => {
  const box = e => e.getBoundingClientRect();
  const hit = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const found = [];
  for (const plot of document.querySelectorAll(root + ' .js-plotly-plot')) {
    const id = plot.closest('[id]').id;
    for (const axis of plot.querySelectorAll('.xaxislayer-above, .yaxislayer-above')) {
      const ticks = [...axis.querySelectorAll('text')].filter(t => t.textContent.trim() && box(t).width > 0);
      for (let i = 0; i < ticks.length; i++) for (let j = i + 1; j < ticks.length; j++)
        if (hit(box(ticks[i]), box(ticks[j])))
          found.push(`${id}: tick "${ticks[i].textContent}" over "${ticks[j].textContent}"`);
    }
    const frame = box(plot);
    for (const t of plot.querySelectorAll('svg text')) {
      const r = box(t);
      if (!t.textContent.trim() || r.width === 0) continue;
      if (r.left < frame.left - 1 || r.right > frame.right + 1 || r.top < frame.top - 1 || r.bottom > frame.bottom + 1)
        found.push(`${id}: "${t.textContent.slice(0, 40)}" outside its figure`);
    }
  }
  return found;
}"""

#: Each selector whose element is missing, empty or not wholly on the screen: [selector, its box].
OFF_SCREEN_JS = """sels => sels.map(sel => {
  const e = document.querySelector(sel);
  if (!e) return [sel, 'missing'];
  const r = e.getBoundingClientRect();
  const ok = r.width > 0 && r.height > 0 && r.left >= -1 && r.top >= -1 && r.right <= innerWidth + 1
    && r.bottom <= innerHeight + 1;
  return [sel, ok ? '' : [r.left, r.top, r.right, r.bottom].map(Math.round).join(',')];
}).filter(([, where]) => where)"""

#: Each lane's text in the talk view that does not show its newest line, or is not wholly on the screen.
LANE_TEXTS_JS = """() => [...document.querySelectorAll('#lanes .sage-text')].map((t, i) => {
  const r = t.getBoundingClientRect();
  const end = t.scrollHeight - t.scrollTop - t.clientHeight <= 1;
  const seen = r.height > 0 && r.top >= -1 && r.bottom <= innerHeight + 1 && r.left >= -1 && r.right <= innerWidth + 1;
  return end && seen ? '' : `lane ${i + 1}: ${end ? '' : 'its end out of view; '}${seen ? '' : 'off the screen'}`;
}).filter(Boolean)"""

#: Texts under `root` (not the figures' SVG) in type smaller than `px`: [its size, the text].
SMALL_TEXT_JS = """([root, px]) => [...document.querySelectorAll(root + ' *')].filter(e => !(e instanceof SVGElement)
  && e.getClientRects().length && [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))
  .map(e => [parseFloat(getComputedStyle(e).fontSize), e.textContent.trim().slice(0, 40)])
  .filter(([size]) => size < px)"""
