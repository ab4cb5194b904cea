"""A race as an animated GIF drawn from its records with PIL: no browser, nothing but the README's install.

The picture is the talk view's layout on one 16:9 slide (1280 x 720): the title and the verdict on top,
each side's text below (following its newest tokens), panel ① (tokens each round brought, per side) at
the bottom left and the round's draft tree, whole, at the bottom right. Text is 18 px or larger so a
slide can be read from the back of a room. Frames are drawn one at a time and turned into a palette
image at once (a 1280 x 720 palette frame is 0.9 MB), and a long race is sampled to at most
`GIF_FRAMES` rounds, so the memory an export holds is bounded whatever the race's length.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from sage_core import RoundRecord
from sage_core.methods import drafts

from .palette import ACCEPTED, REJECTED
from .race import RaceData
from .render import DOTS, SHORT, badge_html, headline_html

GIF_SIZE = (1280, 720)
#: The most frames one GIF draws (a longer race is sampled evenly, its first and last rounds kept).
GIF_FRAMES = 48
INK = (15, 23, 42)
QUIET = (100, 116, 139)
FONT_FILES = ("DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "Arial.ttf")
Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


def font(size: int) -> Font:
    """A scalable font of `size` px: DejaVu Sans where the system has it, else Pillow's own."""
    for name in FONT_FILES:
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default(size=size)


def plain(fragment: str) -> str:
    """An HTML fragment's words (the page's headline and badge, drawn here as text)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def wrapped(draw: ImageDraw.ImageDraw, text: str, face: Font, width: float) -> list[str]:
    """`text` in lines no wider than `width` (a word longer than a line is cut, never lost)."""
    lines: list[str] = []
    line = ""
    for word in text.replace("\n", " ").split(" "):
        trial = f"{line} {word}" if line else word
        if draw.textlength(trial, font=face) <= width:
            line = trial
            continue
        if line:
            lines.append(line)
        while draw.textlength(word, font=face) > width and len(word) > 1:
            cut = max(1, int(len(word) * width / max(1.0, draw.textlength(word, font=face))))
            lines.append(word[:cut])
            word = word[cut:]
        line = word
    return [*lines, line] if line else lines


def draw_lanes(draw: ImageDraw.ImageDraw, data: RaceData, box: tuple[int, int, int, int]) -> None:
    """Each side's name, figures and text, the newest lines shown when the text is longer than its box."""
    left, top, right, bottom = box
    width = (right - left) / max(1, len(data.lanes))
    name_face, text_face = font(22), font(19)
    for index, lane in enumerate(data.lanes):
        x = left + index * width
        colour = DOTS.get(lane.method, "#334155")
        draw.ellipse((x + 4, top + 8, x + 18, top + 22), fill=colour)
        tokens = sum(len(r.new_tokens) for r in lane.records)
        seconds = lane.records[-1].total_seconds if lane.records else 0.0
        title = f"{SHORT.get(lane.method, lane.method)}: {len(lane.records)} rounds, {tokens} tokens, {seconds:.2f} s"
        draw.text((x + 26, top + 2), title, font=name_face, fill=INK)
        text = "".join(t for r in lane.records for t in r.new_token_texts)
        lines = wrapped(draw, text, text_face, width - 24)
        fits = max(1, (bottom - top - 40) // 26)
        for row, line in enumerate(lines[-fits:]):
            draw.text((x + 8, top + 36 + row * 26), line, font=text_face, fill=INK)


def draw_rounds_panel(draw: ImageDraw.ImageDraw, data: RaceData, rounds: int, box: tuple[int, int, int, int]) -> None:
    """Panel ①: the tokens each round brought, one line a side, on axes sized for the whole race."""
    left, top, right, bottom = box
    draw.text((left, top), "① tokens each round brought", font=font(20), fill=INK)
    plot = (left + 40, top + 34, right - 8, bottom - 28)
    draw.rectangle(plot, outline=QUIET)
    most = max((len(r.new_tokens) for lane in data.lanes for r in lane.records), default=1) or 1
    draw.text((left, plot[1] - 4), str(most), font=font(18), fill=QUIET)
    draw.text((left + 8, plot[3] - 18), "0", font=font(18), fill=QUIET)
    draw.text((plot[0], plot[3] + 4), f"round 0 … {max(rounds - 1, 0)}", font=font(18), fill=QUIET)
    span = max(1, rounds - 1)
    for lane in data.lanes:
        points = [
            (plot[0] + (plot[2] - plot[0]) * r.round / span, plot[3] - (plot[3] - plot[1]) * len(r.new_tokens) / most)
            for r in lane.records
        ]
        if len(points) > 1:
            draw.line(points, fill=DOTS.get(lane.method, "#334155"), width=3)
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

    def place(node: int) -> None:
        nonlocal next_row
        kids = children.get(node, [])
        for kid in kids:
            place(kid)
        if kids:
            row[node] = row[kids[0]]
        else:
            row[node], next_row = next_row, next_row + 1

    for top in children.get(-1, []):
        place(top)
    return depth, row


def draw_tree(draw: ImageDraw.ImageDraw, record: RoundRecord | None, texts: dict[int, str], box: tuple) -> None:
    """The round's draft tree, whole: every node scaled into the box, the accepted path in green."""
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
        start = root if parent < 0 else where[parent]
        good = node in accepted
        draw.line((start, where[node]), fill=ACCEPTED if good else REJECTED, width=4 if good else 2)
    for node, (x, y) in enumerate(where):
        good = node in accepted
        label = texts.get(record.tree_tokens[node], str(record.tree_tokens[node])).strip() or "␣"
        draw.ellipse((x - 5, y - 5, x + 5, y + 5), fill=ACCEPTED if good else REJECTED)
        draw.text((x + 8, y), label[:14], font=face, fill=INK if good else QUIET, anchor="lm")


def tree_record(data: RaceData) -> RoundRecord | None:
    """The newest round's record of the side whose tree the talk view shows (SAGE's, else a drafting side's)."""
    lanes = [lane for lane in data.lanes if lane.method == "sage"] or [
        each for each in data.lanes if drafts(each.method)
    ]
    return lanes[0].records[-1] if lanes and lanes[0].records else None


def slide(data: RaceData, rounds: int, title: str) -> Image.Image:
    """One frame: the race as it stood (`data`, already cut at its round) in the talk view's layout."""
    picture = Image.new("RGB", GIF_SIZE, "white")
    draw = ImageDraw.Draw(picture)
    step = max((len(lane.records) for lane in data.lanes), default=1) - 1
    draw.text((16, 10), f"{title}: round {step} of {rounds - 1}", font=font(26), fill=INK)
    verdict = wrapped(draw, plain(badge_html(data)) + " " + plain(headline_html(data)), font(19), 1248)
    for row, line in enumerate(verdict[:2]):
        draw.text((16, 48 + row * 24), line, font=font(19), fill=QUIET)
    draw_lanes(draw, data, (8, 100, 1272, 390))
    draw.line((8, 396, 1272, 396), fill=REJECTED, width=1)
    draw_rounds_panel(draw, data, rounds, (16, 404, 500, 712))
    draw_tree(draw, tree_record(data), data.token_texts, (520, 404, 1272, 712))
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
    first.save(path, save_all=True, append_images=rest, duration=list(durations), loop=0, optimize=False)
    return path
