"""A race as an animated GIF drawn from its records with PIL: no browser, nothing but the README's install.

The picture is the talk view's layout on one 16:9 slide (1280 x 720), however many lanes race: on top the
headline's main comparison in one sentence in large type (the page's words, whole: its type gets smaller
before a word is lost), the other rivals and the one-pass lanes one short item each (the page's short words;
those that do not fit are counted, "+3 more"), the round and the lossless line, whole (the drafting lanes
counted instead of named when naming them takes more than two lines). Below, the lanes: up to four side by
side, up to eight in two rows of four, more in a table of two columns, one line a lane (its name, figures and
the last words of its text); names wrap at their words and no lane's word is ever cut. At the bottom, panel ①
(tokens each round brought, per side; dashed on the one-pass draft, whose lane's dot is a ring) with its legend
beside it, or past six sides a line saying the colours are the lanes', and the round's draft tree, whole (its
labels fitted to their level, and only the accepted path's when the rows are too close for each). Text is
16 px or larger, the tree's labels 14 px or larger. Every text drawn goes through `Canvas`, which records its
box with the font it is drawn in, so the tests check the layout itself. The same frames make the WebM video
(`slides_video`). Frames are drawn one at a time and turned into a palette
image at once (a 1280 x 720 palette frame is 0.9 MB), and a long race is sampled to at most
`GIF_FRAMES` rounds, so the memory an export holds is bounded whatever the race's length.

A frame's time is bounded whatever its text: a token's text is cut to `TOKEN_CHARS` characters with a
mark (…), only the tail of each side's text that its box can show is wrapped, a line holds at most
`LINE_CHARS` characters, and wrapping is linear in the text (a cut is found by a binary search over at
most `LINE_CHARS` characters). When the whole text was wrapped for every frame, a frame with one
8,000-character token took 0.9 s, 40,000 characters 22 s and 80,000 characters 224 s (quadratic: a
400,000-character token, over half an hour a frame); with one of 400,000 characters a frame takes 0.02
to 0.1 s now. Drawing takes a `check` that raises to stop (the export's budget, or its visitor
gone), called between the frame's parts and every line or few hundred tree nodes.

Right-to-left text is drawn in its direction and shaped by Pillow's layout with raqm (`RAQM`: whether
this Pillow has it). Without raqm each right-to-left run is reversed as a best effort: its letters in
order, but unshaped (Arabic letters unjoined), and a line mixing directions keeps its runs left to right.
"""

from __future__ import annotations

import html
import itertools
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from PIL import Image, ImageDraw, ImageFont, features

from sage_core import RoundRecord

from .headline import rivals_html
from .palette import ACCEPTED, REJECTED
from .render import DOTS, SHORT, badge_html, headline_html, headline_words
from .view import LaneView, RaceView

GIF_SIZE = (1280, 720)
#: The most frames one GIF draws (a longer race is sampled evenly, its first and last rounds kept).
GIF_FRAMES = 48
INK = (15, 23, 42)
QUIET = (100, 116, 139)
FONT_FILES = ("DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "Arial.ttf")
Font = ImageFont.FreeTypeFont | ImageFont.ImageFont
#: A check called while a frame is drawn: it raises to stop the drawing (a budget passed, a visitor gone).
Check = Callable[[], None]
#: Whether Pillow lays text out with raqm (bidirectional and shaped); without it RTL runs are reversed.
RAQM = features.check("raqm")
#: A token's text is drawn cut to this many characters, the cut marked with `MARK`.
TOKEN_CHARS = 256
MARK = "…"
#: The most characters one line holds (more than any line of 18 px text 1,248 px wide that is not
#: zero-width marks), so the last n lines of a text are in its last n x LINE_CHARS characters.
LINE_CHARS = 320
#: Rows of text a side's box shows, this far apart.
ROW_PX = 24
#: A box on the slide (left, top, right, bottom) and a text placed on it (its words, its box, its type's px).
Box = tuple[float, float, float, float]
Placed = tuple[str, tuple[float, float, float, float], float]
#: The headline's sizes, tried largest first until its sentence takes at most two lines; then the smaller
#: lines' size, and the width every line of the slide's top fits in.
HEADLINE_PX = (28, 24, 21)
STATUS_PX = 18
SLIDE_TEXT_PX = 1248
#: Lanes are columns up to `COLUMN_LANES`, two rows of four up to `GRID_LANES`, else a table of two columns,
#: one line a lane in `TABLE_PX` type, each row at least `TABLE_ROW_PX` tall.
COLUMN_LANES = 4
GRID_LANES = 8
TABLE_PX = 17
TABLE_ROW_PX = 23
#: Panel ①'s legend sits beside its plot up to this many sides (rows this far apart).
LEGEND_LANES = 6
LEGEND_ROW_PX = 20
DASH_PX = 7
#: Where panel ① and the tree start.
PANELS_TOP = 430
RTL_CLASSES = frozenset({"R", "AL"})
NEUTRAL_CLASSES = frozenset({"WS", "ON", "NSM", "BN", "CS", "ES", "ET", "S"})


def never() -> None:
    """The check of a drawing that nothing stops."""


def font(size: int) -> Font:
    """A scalable font of `size` px: DejaVu Sans where the system has it, else Pillow's own; laid out
    with raqm where Pillow has it (right-to-left text in its direction, shaped)."""
    engine = ImageFont.Layout.RAQM if RAQM else ImageFont.Layout.BASIC
    for name in FONT_FILES:
        try:
            return ImageFont.truetype(name, size, layout_engine=engine)
        except OSError:
            continue
    return ImageFont.load_default(size=size)


def plain(fragment: str) -> str:
    """An HTML fragment's words (the page's headline and badge, drawn here as text)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def cut(text: str, most: int = TOKEN_CHARS) -> str:
    """`text`, or its first `most` - 1 characters and the mark when it is longer: never drawn whole."""
    return text if len(text) <= most else text[: most - 1] + MARK


def visual(line: str) -> str:
    """The line as handed to Pillow: itself with raqm (which orders and shapes it), else each
    right-to-left run reversed (letters and the spaces and marks between them; digits break a run)."""
    if RAQM:
        return line
    out: list[str] = []
    run: list[str] = []
    for char in line:
        kind = unicodedata.bidirectional(char)
        if kind in RTL_CLASSES or (run and kind in NEUTRAL_CLASSES):
            run.append(char)
            continue
        out.append(reversed_run(run))
        run = []
        out.append(char)
    return "".join([*out, reversed_run(run)])


def reversed_run(run: list[str]) -> str:
    """A right-to-left run reversed, the neutrals that trail it kept after it in their order."""
    end = len(run)
    while end and unicodedata.bidirectional(run[end - 1]) not in RTL_CLASSES:
        end -= 1
    return "".join(reversed(run[:end])) + "".join(run[end:])


def draw_line(draw: ImageDraw.ImageDraw, xy: tuple[float, float], line: str, face: Font, fill: Any) -> None:
    """One line of text at `xy`, in its direction (see `visual`)."""
    draw.text(xy, visual(line), font=face, fill=fill)


def fitting(draw: ImageDraw.ImageDraw, text: str, face: Font, width: float) -> int:
    """How many of `text`'s first characters fit in `width` (at least 1, at most `LINE_CHARS`): a binary
    search, about 9 measurements of at most `LINE_CHARS` characters however long the text."""
    low, high = 1, min(len(text), LINE_CHARS)
    if draw.textlength(text[:high], font=face) <= width:
        return high
    while high - low > 1:  # text[:low] fits (or is one character), text[:high] does not
        middle = (low + high) // 2
        if draw.textlength(text[:middle], font=face) <= width:
            low = middle
        else:
            high = middle
    return low


def wrapped(
    draw: ImageDraw.ImageDraw,
    text: str,
    face: Font,
    width: float,
    most: int | None = None,
    check: Check = never,
) -> list[str]:
    """`text` in lines no wider than `width` and no longer than `LINE_CHARS` (a word longer than a line
    is cut, never lost), the first `most` of them when `most` is given. Linear in the text: a line is
    measured once a word and a word is cut by `fitting`, never measured whole. `check` runs every line."""
    lines: list[str] = []
    line = ""
    for word in text.replace("\n", " ").split(" "):
        trial = f"{line} {word}" if line else word
        if len(trial) <= LINE_CHARS and draw.textlength(trial, font=face) <= width:
            line = trial
            continue
        if line:
            lines.append(line)
        start = 0
        while len(word) - start > 1 and (
            len(word) - start > LINE_CHARS or draw.textlength(word[start:], font=face) > width
        ):
            piece = fitting(draw, word[start : start + LINE_CHARS], face, width)
            lines.append(word[start : start + piece])
            start += piece
            check()
            if most is not None and len(lines) >= most:
                return lines[:most]
        line = word[start:]
        check()
        if most is not None and len(lines) >= most:
            return lines[:most]
    return [*lines, line] if line else lines


def tail_lines(
    draw: ImageDraw.ImageDraw, text: str, face: Font, width: float, rows: int, check: Check = never
) -> list[str]:
    """The last `rows` lines of `text` wrapped. Only a tail is wrapped: first one of about rows + 1 lines
    of narrow letters, then, when that gave too few lines, one of rows + 1 full lines (`LINE_CHARS`),
    which always holds them; a tail's first line (maybe cut mid-word) is never shown."""
    narrow = int(width / (0.3 * getattr(face, "size", 19))) + 1
    for per_line in (min(narrow, LINE_CHARS), LINE_CHARS):
        start = max(0, len(text) - (rows + 1) * per_line)
        lines = wrapped(draw, text[start:], face, width, check=check)
        if start == 0 or len(lines) > rows:
            return lines[-rows:]
    return lines[-rows:]


def lane_tail(records: Sequence[RoundRecord], chars: int) -> str:
    """The last `chars` characters of a side's text, each token's text cut (`cut`), read from the end:
    the cost is the tail's, not the text's."""
    parts: list[str] = []
    held = 0
    for record in reversed(records):
        for text in reversed(record.new_token_texts):
            parts.append(cut(text))
            held += len(parts[-1])
            if held >= chars:
                return "".join(reversed(parts))[-chars:]
    return "".join(reversed(parts))


def lane_figures(lane: LaneView) -> str:
    """A side's figures, counted as the page counts them: its decode rounds (the prefill is round 0, not one of
    them), its tokens and its seconds."""
    rounds = sum(1 for r in lane.records if r.phase == "decode")
    tokens = sum(len(r.new_tokens) for r in lane.records)
    seconds = lane.records[-1].total_seconds if lane.records else 0.0
    return f"{rounds} round{'s' * (rounds != 1)}, {tokens} token{'s' * (tokens != 1)}, {seconds:.2f} s"


def lane_title(lane: LaneView) -> str:
    """A side's name and figures (`lane_figures`) in one line."""
    return f"{SHORT.get(lane.key, lane.key)}: {lane_figures(lane)}"


def lane_cells(count: int, box: Box) -> tuple[list[Box], bool]:
    """The boxes the lanes are drawn in, and whether as a table (one line a lane): up to `COLUMN_LANES` lanes
    side by side, up to `GRID_LANES` in two rows of four, more in a table of two columns read down, as many rows
    as `TABLE_ROW_PX` allows (a race with more lanes than cells gives its last cell to the count of the rest)."""
    left, top, right, bottom = box
    table = count > GRID_LANES
    if table:
        rows = max(1, min(-(-count // 2), int((bottom - top) // TABLE_ROW_PX)))
        cols = 2
    else:
        cols, rows = min(count, COLUMN_LANES) or 1, 1 if count <= COLUMN_LANES else 2
    width, height = (right - left) / cols, (bottom - top) / rows
    cells = []
    for index in range(min(count, cols * rows)):
        col, row = divmod(index, rows) if table else (index % cols, index // cols)
        x, y = left + col * width, top + row * height
        cells.append((x, y, x + width, y + height))
    return cells, table


def dot(draw: ImageDraw.ImageDraw, lane: LaneView, x: float, y: float) -> None:
    """A lane's colour: a disc for the pair's own draft, a ring for the one-pass draft (its twin shares the colour)."""
    colour = DOTS.get(lane.key, "#334155")
    if lane.draft:
        draw.ellipse((x, y, x + 14, y + 14), outline=colour, width=3)
    else:
        draw.ellipse((x, y, x + 14, y + 14), fill=colour)


def draw_lane(draw: ImageDraw.ImageDraw, lane: LaneView, cell: Box, check: Check = never) -> None:
    """A lane in a column: its name (whole words, wrapped), its figures, then its text's newest lines that fit."""
    left, top, right, bottom = cell
    name_face, small, text_face = font(20), font(17), font(18)
    dot(draw, lane, left + 4, top + 6)
    y = top
    for line in wrapped(draw, SHORT.get(lane.key, lane.key), name_face, right - left - 32):
        draw_line(draw, (left + 24, y), line, name_face, INK)
        y += 25
    draw_line(draw, (left + 24, y), lane_figures(lane), small, QUIET)
    y += 24
    rows = int((bottom - y - 4) // ROW_PX)
    if rows > 0:
        text = lane_tail(lane.records, (rows + 1) * LINE_CHARS)
        for line in tail_lines(draw, text, text_face, right - left - 16, rows, check):
            draw_line(draw, (left + 8, y), line, text_face, INK)
            y += ROW_PX


def draw_lane_row(draw: ImageDraw.ImageDraw, lane: LaneView, cell: Box, names: float, check: Check = never) -> None:
    """A lane in the table: its name, its figures and the last words of its text, on one line."""
    left, top, right, _ = cell
    face, small = font(TABLE_PX), font(TABLE_PX - 1)
    dot(draw, lane, left + 4, top + 5)
    draw_line(draw, (left + 24, top), SHORT.get(lane.key, lane.key), face, INK)
    x = left + 32 + names
    figures = lane_figures(lane)
    draw_line(draw, (x, top + 1), figures, small, QUIET)
    x += draw.textlength(figures, font=small) + 12
    if right - 10 - x > 40:
        lines = tail_lines(draw, lane_tail(lane.records, 2 * LINE_CHARS), face, right - 10 - x, 1, check)
        draw_line(draw, (x, top), lines[-1] if lines else "", face, INK)


def draw_lanes(draw: ImageDraw.ImageDraw, race: RaceView, box: Box, check: Check = never) -> None:
    """Every lane, however many (`lane_cells`): no label over another, no word cut, nothing outside `box`; the
    newest lines of each text shown (only the tail that fits is read and wrapped: `lane_tail`, `tail_lines`)."""
    cells, table = lane_cells(len(race.lanes), box)
    shown = race.lanes if len(cells) >= len(race.lanes) else race.lanes[: len(cells) - 1]
    names = max((draw.textlength(SHORT.get(lane.key, lane.key), font=font(TABLE_PX)) for lane in shown), default=0)
    for lane, cell in zip(shown, cells, strict=False):
        check()
        if table:
            draw_lane_row(draw, lane, cell, names, check)
        else:
            draw_lane(draw, lane, cell, check)
    if len(shown) < len(race.lanes):
        more = f"+{len(race.lanes) - len(shown)} more lanes (all of them in the HTML replay)"
        draw_line(draw, (cells[-1][0] + 24, cells[-1][1]), more, font(TABLE_PX), QUIET)


def dashed(draw: ImageDraw.ImageDraw, points: Sequence[tuple[float, float]], fill: str, width: int) -> None:
    """A line through `points` in dashes of `DASH_PX` (a one-pass lane's, beside its twin's whole line)."""
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        length = math.hypot(x1 - x0, y1 - y0)
        for start in range(0, int(length) + 1, 2 * DASH_PX):
            a, b = start / max(length, 1), min(1.0, (start + DASH_PX) / max(length, 1))
            draw.line(
                (x0 + (x1 - x0) * a, y0 + (y1 - y0) * a, x0 + (x1 - x0) * b, y0 + (y1 - y0) * b), fill=fill, width=width
            )


def draw_legend(draw: ImageDraw.ImageDraw, race: RaceView, x: float, top: float) -> None:
    """Panel ①'s legend beside its plot: a line (dashed for the one-pass draft) and the side's name."""
    face = font(16)
    for row, lane in enumerate(race.lanes):
        y = top + row * LEGEND_ROW_PX
        line = [(x, y + 10), (x + 24, y + 10)]
        colour = DOTS.get(lane.key, "#334155")
        dashed(draw, line, colour, 3) if lane.draft else draw.line(line, fill=colour, width=3)
        draw_line(draw, (x + 30, y), SHORT.get(lane.key, lane.key), face, INK)


def draw_rounds_panel(draw: ImageDraw.ImageDraw, race: RaceView, rounds: int, box: Box) -> None:
    """Panel ①: the tokens each round brought, one line a side (dashed on the one-pass draft), on axes sized
    for the whole race; its legend beside the plot, or, past `LEGEND_LANES` sides, a line saying the colours
    are the lanes' dots."""
    left, top, right, bottom = box
    draw_line(draw, (left, top), "① tokens each round brought", font(20), INK)
    names = [SHORT.get(lane.key, lane.key) for lane in race.lanes]
    legend = len(names) <= LEGEND_LANES
    key = max((draw.textlength(name, font=font(16)) for name in names), default=0) + 44 if legend else 0
    if not legend:
        draw_line(draw, (left, top + 28), "each side in its lane's colour, dashed: the one-pass draft", font(16), QUIET)
    plot = (left + 40, top + (34 if legend else 58), right - 8 - key, bottom - 28)
    draw.rectangle(plot, outline=QUIET)
    most = max((len(r.new_tokens) for lane in race.lanes for r in lane.records), default=1) or 1
    draw_line(draw, (left, plot[1] - 4), str(most), font(18), QUIET)
    draw_line(draw, (left + 8, plot[3] - 18), "0", font(18), QUIET)
    draw_line(draw, (plot[0], plot[3] + 4), f"round 0 … {max(rounds - 1, 0)}", font(18), QUIET)
    if legend:
        draw_legend(draw, race, plot[2] + 12, plot[1])
    span = max(1, rounds - 1)
    for lane in race.lanes:
        points = [
            (plot[0] + (plot[2] - plot[0]) * r.round / span, plot[3] - (plot[3] - plot[1]) * len(r.new_tokens) / most)
            for r in lane.records
        ]
        colour = DOTS.get(lane.key, "#334155")
        if len(points) > 1:
            dashed(draw, points, colour, 3) if lane.draft else draw.line(points, fill=colour, width=3)
        elif points:
            draw.ellipse((points[0][0] - 3, points[0][1] - 3, points[0][0] + 3, points[0][1] + 3), fill=INK)


def tree_layout(record: RoundRecord) -> tuple[list[int], list[int]]:
    """Each node's depth (1 below the root) and row (leaves in draft order, a parent at its first child's)."""
    depth: list[int] = []
    for parent in record.tree_parents:
        depth.append(1 if parent < 0 else depth[parent] + 1)
    children: dict[int, list[int]] = {}
    for node, parent in enumerate(record.tree_parents):
        children.setdefault(parent, []).append(node)
    row = [0] * len(depth)
    next_row = 0
    # children before their parent, in draft order (a stack, not recursion: a deep tree is no error)
    stack = [(top, False) for top in reversed(children.get(-1, []))]
    while stack:
        node, placed_kids = stack.pop()
        kids = children.get(node, [])
        if kids and not placed_kids:
            stack.append((node, True))
            stack.extend((kid, False) for kid in reversed(kids))
        elif kids:
            row[node] = row[kids[0]]
        else:
            row[node], next_row = next_row, next_row + 1
    return depth, row


def draw_tree(
    draw: ImageDraw.ImageDraw, record: RoundRecord | None, texts: Mapping[int, str], box: tuple, check: Check = never
) -> None:
    """The round's draft tree, whole: every node scaled into the box, the accepted path in green, each
    label cut to 14 characters (`cut`). `check` runs every 256 nodes."""
    left, top, right, bottom = box
    title = f"the draft tree of round {record.round} ({record.method})" if record else "the draft tree"
    draw.text((left, top), title, font=font(20), fill=INK)
    if record is None or not record.tree_tokens:
        draw.text((left, top + 40), "no tree this round (the prefill)", font=font(19), fill=QUIET)
        return
    depth, row = tree_layout(record)
    columns, rows = max(depth) + 1, max(row) + 1
    dx, dy = (right - left - 20) / columns, (bottom - top - 40) / rows
    face = font(max(14, min(20, int(dy * 0.7))))
    every = dy >= draw.textbbox((0, 0), "Ag", font=face)[3] + 1  # rows tall enough for a label each, else the path's
    face = face if every else font(18)  # (the accepted path alone is labelled: one row, larger type)
    height = draw.textbbox((0, 0), "Ag", font=face)[3]
    alternate = dy >= 2 * height + 14 or not every  # labels above and below the path in turn: two levels' width
    where = [(left + 10 + dx * d, top + 40 + dy * (r + 0.5)) for d, r in zip(depth, row, strict=True)]
    root = (left + 10, where[0][1] if where else top + 40)
    accepted = set(record.accepted_nodes)
    for node, parent in enumerate(record.tree_parents):
        if node % 256 == 0:
            check()
        start = root if parent < 0 else where[parent]
        good = node in accepted
        draw.line((start, where[node]), fill=ACCEPTED if good else REJECTED, width=4 if good else 2)
    for node, (x, y) in enumerate(where):
        if node % 256 == 0:
            check()
        good = node in accepted
        draw.ellipse((x - 5, y - 5, x + 5, y + 5), fill=ACCEPTED if good else REJECTED)
        if good or every:
            label = cut(texts.get(record.tree_tokens[node], str(record.tree_tokens[node])).strip() or "␣", 14)
            below = alternate and depth[node] % 2 == 0
            room = (2 if alternate else 1) * dx - 16  # (never into the next labelled level's)
            label, small = fitted_label(draw, label, getattr(face, "size", 14), room)
            spot, anchor = ((x + 6, y + 5), "lt") if below else ((x + 6, y - 5), "lb")  # off the path's line
            draw.text(spot, visual(label), font=small, fill=INK if good else QUIET, anchor=anchor)


def fitted_label(draw: ImageDraw.ImageDraw, label: str, size: int, width: float) -> tuple[str, Font]:
    """A tree node's label in the largest type from `size` down to 14 px that fits `width`, whole; cut with the
    mark (`MARK`) only when it fits in none."""
    face = font(size)
    for px in range(size, 13, -2):
        face = font(px)
        if draw.textlength(label, font=face) <= width:
            return label, face
    shown = fitting(draw, label, face, width)
    return (label if shown >= len(label) else label[: max(shown - 1, 1)] + MARK), face


def tree_record(race: RaceView) -> RoundRecord | None:
    """The newest round's record of the side whose tree the talk view shows (SAGE's, else a drafting side's)."""
    lanes = [lane for lane in race.lanes if lane.key == "sage"] or [each for each in race.lanes if each.drafts]
    return lanes[0].records[-1] if lanes and lanes[0].records else None


def headline_title(race: RaceView, title: str) -> str:
    """A slide's title in large type: the race's headline (its lead against the main rival, in the page's
    words), else the page's headline line (a race too short for one says why), else `title`."""
    found = race.headlines
    if found:
        lead = SHORT.get(found[0].lead, found[0].lead)
        return f"{lead}: {headline_words(found[0], race.wall_speedups.get(found[0].rival))}"
    return plain(headline_html(race)) or title


def rival_items(race: RaceView) -> list[str]:
    """The headline's other rivals in the page's short words (`rivals_html`: "vs SD-Chain: 1.24× faster
    (1.10–1.38)"), the one-pass lanes left to `one_pass_items` as on the page, and why an unclear one gives none."""
    found = race.headlines
    if not found or found[0].lead != "sage":
        return []
    main, *rest = found
    rest = [h for h in rest if (lane := race.lane(h.rival)) is None or not lane.draft]
    return [
        html.unescape(item)
        for item in re.findall(r"<span[^>]*>(.*?)</span>", rivals_html(main, rest, race.wall_speedups))
    ]


def one_pass_items(race: RaceView) -> list[str]:
    """Each method raced on both drafts: its one-pass lane's tokens/s over its own draft's, as the page's
    one-pass lines end ("SAGE 0.92×"), after a lead saying what the figure is."""
    items = []
    for lane in race.lanes:
        twin = race.twin(lane) if lane.draft else None
        if twin is not None and lane.figures and twin.figures and twin.figures.tokens_per_second > 0:
            ratio = lane.figures.tokens_per_second / twin.figures.tokens_per_second
            items.append(f"{SHORT.get(lane.method, lane.method)} {ratio:.2f}×")
    return [f"drafting in one forward, tokens/s against the pair's own draft: {items[0]}", *items[1:]] if items else []


def status_items(draw: ImageDraw.ImageDraw, race: RaceView, rounds: int, title: str) -> list[str]:
    """Where the slide is (its round) and the lossless badge's line (its fine print left to the page); the
    drafting lanes counted instead of named when naming them takes more than two lines."""
    step = max((len(lane.records) for lane in race.lanes), default=1) - 1
    where = f"{cut(title, 60)}: round {step} of {rounds - 1} (round 0 is the prefill)"
    badge = plain(re.sub(r"<small>.*?</small>", "", badge_html(race), flags=re.S))
    if len(item_lines(draw, [where, badge], font(STATUS_PX), SLIDE_TEXT_PX, 9)) > 2:
        drafting = [SHORT.get(lane.key, lane.key) for lane in race.lanes if lane.drafts]
        names = ", ".join(drafting[:-1]) + " and " + drafting[-1] if len(drafting) > 1 else "".join(drafting)
        badge = badge.replace(f"{names} outputs", f"the {len(drafting)} drafting lanes' outputs")
        badge = badge.replace(names, f"the {len(drafting)} drafting lanes")
    return [where, badge]


def item_lines(draw: ImageDraw.ImageDraw, items: Sequence[str], face: Font, width: float, most: int) -> list[str]:
    """`items` joined by " · " in at most `most` lines no wider than `width`, an item never split across lines
    unless it alone is wider than a line (then at its words); the items that do not fit are counted ("+3 more")."""
    lines: list[str] = []
    for index, item in enumerate(items):
        trial = f"{lines[-1]} · {item}" if lines else item
        if lines and draw.textlength(trial, font=face) <= width:
            lines[-1] = trial
            continue
        if len(lines) >= most:
            return more_said(draw, lines, len(items) - index, face, width)
        lines.extend(wrapped(draw, item, face, width))
    return lines if len(lines) <= most else more_said(draw, lines[:most], 1, face, width)


def more_said(draw: ImageDraw.ImageDraw, lines: list[str], left: int, face: Font, width: float) -> list[str]:
    """The last line ending in the count of the items left out, items taken off its end until the count fits."""
    last = lines[-1]
    while " · " in last and draw.textlength(f"{last} · +{left} more", font=face) > width:
        last, _ = last.rsplit(" · ", 1)
        left += 1
    return [*lines[:-1], f"{last} · +{left} more"]


def heading(draw: ImageDraw.ImageDraw, race: RaceView, rounds: int, title: str, check: Check = never) -> float:
    """The slide's top, one screen's headline: the main comparison in one sentence in large type (whole: the
    type is smaller before a word is lost), the other rivals and the one-pass lanes one short item each, the
    round and the lossless line; the y below it."""
    sentence = headline_title(race, title)
    for size in HEADLINE_PX:
        big = font(size)
        lines = wrapped(draw, sentence, big, SLIDE_TEXT_PX, check=check)
        if len(lines) <= 2:
            break
    y = 6.0
    for line in lines:
        draw_line(draw, (16, y), line, big, INK)
        y += size + 6
    small = font(STATUS_PX)
    blocks = [(rival_items(race), 2, INK), (one_pass_items(race), 1, INK)]
    blocks.append((status_items(draw, race, rounds, title), 2, QUIET))
    for items, most, colour in blocks:
        for line in item_lines(draw, items, small, SLIDE_TEXT_PX, most) if items else []:
            draw_line(draw, (16, y), line, small, colour)
            y += STATUS_PX + 5
        check()
    return y + 4


class Canvas:
    """An ImageDraw that keeps where each text went (`placed`: its words and its box as the font measures them,
    the same fonts the slide draws with, and its size), so that a test can check that no text is over another or
    outside the frame, and none is too small to read."""

    def __init__(self, draw: ImageDraw.ImageDraw, placed: list[Placed] | None = None) -> None:
        self.draw = draw
        self.placed: list[Placed] = placed if placed is not None else []

    def text(
        self, xy: tuple[float, float], text: str, font: Font | None = None, fill: Any = None, anchor: str | None = None
    ) -> None:
        self.placed.append((text, self.draw.textbbox(xy, text, font=font, anchor=anchor), getattr(font, "size", 0)))
        self.draw.text(xy, text, font=font, fill=fill, anchor=anchor)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.draw, name)


def slide(
    race: RaceView, rounds: int, title: str, check: Check = never, placed: list[Placed] | None = None
) -> Image.Image:
    """One frame: the race as it stood (its view, already cut at its round) in the talk view's layout, for any
    number of lanes (`draw_lanes`). `check` runs between its parts and within them (see the module's note): it
    raises to stop. `placed`, when given, gets every text's box (`Canvas`)."""
    picture = Image.new("RGB", GIF_SIZE, "white")
    draw = cast(ImageDraw.ImageDraw, Canvas(ImageDraw.Draw(picture), placed))
    top = heading(draw, race, rounds, title, check)
    draw_lanes(draw, race, (8, int(top), 1272, PANELS_TOP - 10), check)
    draw.line((8, PANELS_TOP - 6, 1272, PANELS_TOP - 6), fill=REJECTED, width=1)
    check()
    draw_rounds_panel(draw, race, rounds, (16, PANELS_TOP, 500, 712))
    check()
    draw_tree(draw, tree_record(race), race.token_texts, (520, PANELS_TOP, 1272, 712), check)
    check()
    return picture


def slide_palette() -> Image.Image:
    """One palette for every frame (white, the ink, the palette's colours and their antialiased blends):
    frames that share it are written as they are, with no per-frame RGBA copies kept while saving."""
    picture = Image.new("RGB", (64, 64), "white")
    draw = ImageDraw.Draw(picture)
    colours: list[str | tuple[int, ...]] = [INK, QUIET, ACCEPTED, REJECTED, *DOTS.values()]
    for index, colour in enumerate(colours):
        draw.ellipse((index * 5 % 60, index * 7 % 60, index * 5 % 60 + 12, index * 7 % 60 + 12), fill=colour)
        draw.text((2, index * 3 % 60), "Ag", font=font(12), fill=colour)
    return picture.convert("P", palette=Image.Palette.ADAPTIVE, colors=64)


def palette_frame(picture: Image.Image, palette: Image.Image) -> Image.Image:
    """A frame in the shared 64-colour palette (0.9 MB at 1280 x 720; the RGB picture is let go at once)."""
    return picture.quantize(palette=palette, dither=Image.Dither.NONE)


def write_gif(frames: Sequence[Image.Image], path: Path, durations: Sequence[int]) -> Path:
    """The palette frames into one looping GIF."""
    first, *rest = frames
    first.save(path, "GIF", save_all=True, append_images=rest, duration=list(durations), loop=0, optimize=False)
    return path
