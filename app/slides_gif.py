"""A race as an animated GIF drawn from its records with PIL: no browser, nothing but the README's install.

The picture is the talk view's layout on one 16:9 slide (1280 x 720): the headline in large type on top (the
lead against its main rival, in the page's words), the round and the lossless verdict below it, each side's
text below (following its newest tokens; rounds counted as the page counts them), panel ① (tokens each
round brought, per side, with its legend) at the bottom left and the round's draft tree, whole, at the
bottom right. The same frames make the WebM video (`slides_video`). Text is 18 px or larger so a
slide can be read from the back of a room. Frames are drawn one at a time and turned into a palette
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
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont, features

from sage_core import RoundRecord

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
#: Rows of text a side's box shows, 26 px apart.
ROW_PX = 26
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


def lane_title(lane: LaneView) -> str:
    """A side's name and figures, counted as the page counts them: its decode rounds (the prefill is round
    0, not one of them), its tokens and its seconds."""
    rounds = sum(1 for r in lane.records if r.phase == "decode")
    tokens = sum(len(r.new_tokens) for r in lane.records)
    seconds = lane.records[-1].total_seconds if lane.records else 0.0
    return f"{SHORT.get(lane.key, lane.key)}: {rounds} rounds, {tokens} tokens, {seconds:.2f} s"


def draw_lanes(draw: ImageDraw.ImageDraw, race: RaceView, box: tuple[int, int, int, int], check: Check = never) -> None:
    """Each side's name, figures and text, the newest lines shown when the text is longer than its box
    (only the tail that fits is read and wrapped: `lane_tail`, `tail_lines`)."""
    left, top, right, bottom = box
    width = (right - left) / max(1, len(race.lanes))
    name_face, text_face = font(22), font(19)
    fits = max(1, (bottom - top - 40) // ROW_PX)
    for index, lane in enumerate(race.lanes):
        check()
        x = left + index * width
        colour = DOTS.get(lane.key, "#334155")
        draw.ellipse((x + 4, top + 8, x + 18, top + 22), fill=colour)
        draw.text((x + 26, top + 2), cut(lane_title(lane), 80), font=name_face, fill=INK)
        text = lane_tail(lane.records, (fits + 1) * LINE_CHARS)
        for row, line in enumerate(tail_lines(draw, text, text_face, width - 24, fits, check)):
            draw_line(draw, (x + 8, top + 36 + row * ROW_PX), line, text_face, INK)


def draw_rounds_panel(draw: ImageDraw.ImageDraw, race: RaceView, rounds: int, box: tuple[int, int, int, int]) -> None:
    """Panel ①: the tokens each round brought, one line a side, on axes sized for the whole race."""
    left, top, right, bottom = box
    draw.text((left, top), "① tokens each round brought", font=font(20), fill=INK)
    plot = (left + 40, top + 34, right - 8, bottom - 28)
    draw.rectangle(plot, outline=QUIET)
    most = max((len(r.new_tokens) for lane in race.lanes for r in lane.records), default=1) or 1
    draw.text((left, plot[1] - 4), str(most), font=font(18), fill=QUIET)
    draw.text((left + 8, plot[3] - 18), "0", font=font(18), fill=QUIET)
    draw.text((plot[0], plot[3] + 4), f"round 0 … {max(rounds - 1, 0)}", font=font(18), fill=QUIET)
    span = max(1, rounds - 1)
    for row, lane in enumerate(race.lanes):  # the legend, top right inside the plot: a line and the side's name
        name = SHORT.get(lane.key, lane.key)
        y = plot[1] + 6 + row * 22
        x = plot[2] - 12 - draw.textlength(name, font=font(18))
        draw.line((x - 34, y + 10, x - 8, y + 10), fill=DOTS.get(lane.key, "#334155"), width=3)
        draw.text((x, y), name, font=font(18), fill=INK)
    for lane in race.lanes:
        points = [
            (plot[0] + (plot[2] - plot[0]) * r.round / span, plot[3] - (plot[3] - plot[1]) * len(r.new_tokens) / most)
            for r in lane.records
        ]
        if len(points) > 1:
            draw.line(points, fill=DOTS.get(lane.key, "#334155"), width=3)
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
    face = font(max(12, min(20, int(dy * 0.7))))
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
        label = cut(texts.get(record.tree_tokens[node], str(record.tree_tokens[node])).strip() or "␣", 14)
        draw.ellipse((x - 5, y - 5, x + 5, y + 5), fill=ACCEPTED if good else REJECTED)
        draw.text((x + 8, y), visual(label), font=face, fill=INK if good else QUIET, anchor="lm")


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
        return f"{lead}: {headline_words(found[0])}"
    return plain(headline_html(race)) or title


def slide(race: RaceView, rounds: int, title: str, check: Check = never) -> Image.Image:
    """One frame: the race as it stood (its view, already cut at its round) in the talk view's layout.
    `check` runs between its parts and within them (see the module's note): it raises to stop."""
    picture = Image.new("RGB", GIF_SIZE, "white")
    draw = ImageDraw.Draw(picture)
    step = max((len(lane.records) for lane in race.lanes), default=1) - 1
    big = font(28)
    for row, line in enumerate(wrapped(draw, headline_title(race, title), big, 1248, most=2, check=check)):
        draw_line(draw, (16, 6 + row * 32), line, big, INK)
    check()
    where = f"{cut(title, 80)}: round {step} of {rounds - 1} (round 0 is the prefill) · {plain(badge_html(race))}"
    small = font(18)
    shown = fitting(draw, where, small, 1230)
    draw_line(draw, (16, 72), where if shown >= len(where) else where[:shown].rstrip() + MARK, small, QUIET)
    draw_lanes(draw, race, (8, 100, 1272, 390), check)
    draw.line((8, 396, 1272, 396), fill=REJECTED, width=1)
    check()
    draw_rounds_panel(draw, race, rounds, (16, 404, 500, 712))
    check()
    draw_tree(draw, tree_record(race), race.token_texts, (520, 404, 1272, 712), check)
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
