"""Exports bounded inside a frame: a hostile token (400,000 characters) neither hangs a frame nor
outlives its visitor or its budget; wrapping is linear and only the drawn tail is wrapped; RTL text is
drawn in its direction."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from PIL import Image, ImageChops, ImageDraw, ImageFont
from test_export import long_race

from app import export, slides_gif
from app.race import Lane, RaceData

HUGE = "x" * 400_000


class Measuring:
    """An ImageDraw that counts the characters it measures (the cost of wrapping)."""

    def __init__(self) -> None:
        self.draw = ImageDraw.Draw(Image.new("RGB", (8, 8)))
        self.chars = 0

    def textlength(self, text: str, font: object = None) -> float:
        self.chars += len(text)
        return self.draw.textlength(text, font=cast(Any, font))

    def __getattr__(self, name: str) -> object:
        return getattr(self.draw, name)


def close_like_gradio(job, patience: float = 10.0) -> None:
    """Gradio's `SyncToAsyncIterator.aclose`: close, retried while the generator is running."""
    start = time.monotonic()
    while True:
        try:
            job.close()
            return
        except ValueError as error:
            if "already executing" not in str(error) or time.monotonic() - start > patience:
                raise
            time.sleep(0.05)


def export_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "sage-export"]


def stopped_within(slots: export.ExportSlots, folder: Path, seconds: float) -> bool:
    """Whether the export's thread has stopped, its slot is free and no file is left, within `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if slots.held == {"small": {}, "large": {}} and not export_threads() and not list(folder.iterdir()):
            return True
        time.sleep(0.05)
    return False


def test_a_gif_of_a_400000_character_token_finishes_within_its_budget(tmp_path):
    data = long_race(4, text=HUGE)
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(export.save_gif(data, tmp_path / "race.gif", budget=export.Budget(frames=4, seconds=20)))
        except export.ExportError as error:
            outcome.append(error)

    started = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)  # (so that a hang fails the test, not the run)
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and outcome, "the export was still drawing 10 s past its 20 s budget"
    assert time.monotonic() - started < 25
    assert isinstance(outcome[0], Path) and outcome[0].is_file()  # it finished: each frame is fast now


def test_a_gif_of_a_400000_character_token_stops_within_seconds_of_the_visitor_leaving(tmp_path):
    slots = export.ExportSlots()
    job = export.export_job(long_race(6, text=HUGE), None, "gif", folder=tmp_path, slots=slots)
    assert "This GIF" in next(job)[1]
    next(job)  # frame 0 (the prefill); the token comes in round 1
    pulling = threading.Thread(target=lambda: next(job), daemon=True)  # Gradio pulls on a worker thread
    pulling.start()
    time.sleep(0.02)
    left = time.monotonic()
    close_like_gradio(job)  # the visitor left
    assert stopped_within(slots, tmp_path, 5.0), "the export outlived its visitor"
    assert time.monotonic() - left < 5.0


def endless_tree(draw, record, texts, box, check) -> None:
    """A frame part that never ends but runs the drawing's check (as the real parts do between lines)."""
    while True:
        check()
        time.sleep(0.005)


def test_a_frame_that_never_ends_stops_for_its_visitor_and_keeps_its_slot_till_then(tmp_path, monkeypatch):
    monkeypatch.setattr(slides_gif, "draw_tree", endless_tree)
    slots = export.ExportSlots(small=1, lease=0.0)  # a lease long past: only the thread's end frees it
    job = export.export_job(long_race(3), None, "gif", folder=tmp_path, slots=slots)
    next(job)  # the budget's sentence
    pulling = threading.Thread(target=lambda: next(job), daemon=True)
    pulling.start()
    time.sleep(0.5)  # frame 0 is being drawn, and never ends
    assert export_threads()
    with pytest.raises(export.ExportError, match="1 small exports are running"):
        slots.take("small")  # its lease is past, but its thread is running: the slot stays taken
    close_like_gradio(job)
    assert stopped_within(slots, tmp_path, 2 * export.HEARTBEAT_S + 3.0)
    slots.take("small")


def test_a_frame_that_never_ends_stops_at_its_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(slides_gif, "draw_tree", endless_tree)
    started = time.monotonic()
    with pytest.raises(export.ExportError, match=r"passed its 1 s budget after 0 of 3 frames"):
        export.save_gif(long_race(3), tmp_path / "race.gif", budget=export.Budget(seconds=1))
    assert time.monotonic() - started < 5 and not list(tmp_path.iterdir())


def test_an_export_whose_page_stops_asking_stops_by_itself(tmp_path, monkeypatch):
    monkeypatch.setattr(export.jobs, "PATIENCE_S", 0.2)
    slots = export.ExportSlots()
    job = export.export_job(long_race(5), None, "html", folder=tmp_path, slots=slots)
    next(job), next(job)  # a frame drawn; then the generator is neither pulled nor closed
    assert stopped_within(slots, tmp_path, 3.0)
    job.close()


@pytest.mark.parametrize("letter", ["x", "字"])  # a long CJK answer is one long word
def test_wrapping_is_linear_in_the_text_and_loses_nothing(letter):
    face = slides_gif.font(19)
    measured = []
    for length in (10_000, 40_000):
        draw: Any = Measuring()
        lines = slides_gif.wrapped(draw, letter * length, face, 600)
        assert "".join(lines) == letter * length
        assert all(draw.draw.textlength(line, font=face) <= 600 for line in lines[:50])
        measured.append(draw.chars)
    assert measured[1] < 4.5 * measured[0], measured  # four times the text, four times the work
    assert measured[1] < 60 * 40_000  # (quadratic: about 3,000 times the text)


def test_only_the_drawn_tail_is_wrapped_and_a_huge_token_is_cut_with_a_mark():
    base = long_race(2)
    record = base.lanes[0].records[-1]
    many = replace(record, new_token_texts=tuple(f" w{i:05d}" * 14 for i in range(4_000)))  # 400,000 chars
    lanes = [Lane(base.lanes[0].method, base.lanes[0].header, [record, many])]
    draw: Any = Measuring()
    slides_gif.draw_lanes(draw, RaceData(lanes=lanes), (8, 100, 1272, 390))
    assert draw.chars < 100_000, draw.chars  # the whole text wrapped measures millions
    tail = slides_gif.lane_tail([replace(record, new_token_texts=("a", HUGE, "b"))], 1_000)
    assert tail.endswith("x" * (slides_gif.TOKEN_CHARS - 1) + slides_gif.MARK + "b")
    assert slides_gif.cut(HUGE) == "x" * (slides_gif.TOKEN_CHARS - 1) + "…"


def test_the_html_of_a_400000_character_token_is_bounded_and_marks_the_cut(tmp_path):
    started = time.monotonic()
    page = export.save_html(long_race(4, text=HUGE), tmp_path / "race.html").read_text(encoding="utf-8")
    assert time.monotonic() - started < 30
    assert "x" * (slides_gif.TOKEN_CHARS - 1) + slides_gif.MARK in page
    assert "x" * slides_gif.TOKEN_CHARS not in page
    assert len(page) < 6_000_000  # Plotly's bundle and the frames (each huge token: 3.2 MB uncut)


def test_a_deep_draft_tree_is_laid_out_without_recursion():
    record = long_race(2).lanes[0].records[-1]
    chain = replace(record, tree_parents=(-1, *range(4_999)), tree_tokens=(1,) * 5_000)
    depth, row = slides_gif.tree_layout(chain)
    assert depth[-1] == 5_000 and set(row) == {0}


@pytest.mark.skipif(not slides_gif.RAQM, reason="Pillow has no raqm here")
def test_rtl_text_is_drawn_right_to_left_with_raqm():
    face = slides_gif.font(24)
    basic = ImageFont.truetype(cast(Any, face).path, 24, layout_engine=ImageFont.Layout.BASIC)

    def drawn(text: str, how) -> Image.Image:
        picture = Image.new("L", (240, 40), 0)
        how(ImageDraw.Draw(picture), text)
        return picture

    def unlike(a: Image.Image, b: Image.Image) -> int:
        return sum(cast(Any, ImageChops.difference(a, b).getdata()))

    ours = drawn("שלום", lambda d, t: slides_gif.draw_line(d, (4, 4), t, face, 255))
    right_to_left = drawn("םולש", lambda d, t: d.text((4, 4), t, font=basic, fill=255))  # reversed by hand
    left_to_right = drawn("שלום", lambda d, t: d.text((4, 4), t, font=basic, fill=255))
    # the same letters, in the reversed order (the engines place them a pixel apart: 24,000 vs 77,000 here)
    assert unlike(ours, right_to_left) < unlike(ours, left_to_right) / 2


def test_rtl_runs_are_reversed_where_pillow_has_no_raqm(monkeypatch):
    monkeypatch.setattr(slides_gif, "RAQM", False)
    assert slides_gif.visual("abc שלום עולם 12 def") == "abc םלוע םולש 12 def"
    assert slides_gif.visual("plain text") == "plain text"
