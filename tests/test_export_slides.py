"""Slides and the HTML replay's talk view of any number of lanes. The GIF's and the WebM's frames with 1, 5, 7
and 17 lanes (every method on both drafts) have no text over another, none outside the frame, no word broken, the
headline's sentence and the lossless line whole, and no text smaller than legible; measured on the boxes the
slide's own drawing recorded (`slides_gif.Canvas`: the fonts it draws with). The HTML replay at 1280 x 720 in
Chromium shows the headline, every lane's text and the badge on its first screen."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from app_records import large_race

from app import export, slides_gif
from app.race import RaceData
from app.view import race_view
from sage_testkit.layout import (
    CUT_TEXT_JS,
    FIGURE_TEXT_JS,
    LANE_TEXTS_JS,
    OFF_SCREEN_JS,
    SMALL_TEXT_JS,
    Placed,
    outside,
    overlapping,
)

ROOT = Path(__file__).resolve().parent.parent
#: The smallest type a slide may use (px at 1280 x 720): the tree's labels; every other text at least `READ_PX`.
SMALLEST_PX = 14
READ_PX = 16


def race_of(count: int, rounds: int = 12) -> RaceData:
    """A recorded race of the first `count` lanes of every method on both drafts."""
    data = large_race(4 * rounds)
    data.lanes = data.lanes[:count]
    data.replay = True
    return data


def drawn(data: RaceData, step: int | None = None) -> tuple[list[Placed], str]:
    """The texts placed on the slide of `step` (the last round when None), and the slide's headline sentence."""
    shown = export.for_showing(data)
    rounds = export.rounds_of(shown)
    view = race_view(export.race_at(shown, rounds - 1 if step is None else step))
    placed: list[Placed] = []
    slides_gif.slide(view, rounds, "SAGE race", placed=placed)
    return placed, slides_gif.headline_title(view, "SAGE race")


def test_the_checks_find_text_over_text_and_text_outside():
    """The checks can fail: two boxes that overlap, one that leaves the frame."""
    placed = [("a", (0, 0, 10, 10), 18), ("b", (5, 5, 15, 15), 18), ("c", (1275, 700, 1290, 719), 18)]
    assert overlapping(placed) == [("a", "b")]
    assert outside(placed, (1280, 720)) == [("c", (1275, 700, 1290, 719))]
    assert overlapping([("a", (0, 0, 10, 10), 18), ("b", (10, 0, 20, 10), 18)]) == []  # touching is not over


@pytest.mark.parametrize("count", [1, 5, 7, 17])
def test_a_slide_of_any_number_of_lanes_has_no_text_over_another_or_outside(count):
    data = race_of(count)
    for step in (1, None):
        placed, _ = drawn(data, step)
        assert overlapping(placed) == [], f"{count} lanes: texts over one another"
        assert outside(placed, slides_gif.GIF_SIZE) == [], f"{count} lanes: texts outside the frame"
        small = [(text, size) for text, _, size in placed if size < SMALLEST_PX]
        assert small == [], f"{count} lanes: type too small to read at 1280 x 720"
        words = [text for text, _, size in placed if size < READ_PX and text.strip()]
        assert len(words) <= sum(1 for text, _, _ in placed if text.strip()) // 2  # (only the tree's labels)


@pytest.mark.parametrize("count", [1, 5, 7, 17])
def test_every_lane_is_named_whole_and_no_word_is_broken(count):
    """A name wraps at its words; every line of a lane's text holds whole words of it ("squa" "re" in a narrow
    column did not)."""
    data = race_of(count)
    placed, _ = drawn(data)
    texts = [text for text, _, _ in placed]
    lines = " ".join(texts)
    for lane in data.lanes:
        name = slides_gif.SHORT.get(lane.key, lane.key)
        assert name in lines or " ".join(name.split()) in lines, name
    words = {word.strip(".,") for lane in data.lanes for word in lane.text.split()}
    ours = [text.split() for text in texts if text.split()]
    ours = [line for line in ours if 2 * sum(w.strip(".,") in words for w in line) >= len(line)]  # the lanes' lines
    assert ours  # (their text is drawn)
    pieces = [(word, " ".join(line)) for line in ours for word in line if word.strip(".,") not in words]
    assert pieces == []


@pytest.mark.parametrize("count", [5, 17])
def test_the_headline_sentence_and_the_lossless_line_are_whole(count):
    placed, sentence = drawn(race_of(count))
    texts = [text for text, _, _ in placed]
    assert " ".join(sentence.split()) in " ".join(" ".join(texts).split())  # every line of it drawn, none cut
    lossless = [text for text in texts if "Lossless" in text]
    assert lossless and lossless[-1].rstrip().endswith(("token for token", "plain decoding)")), lossless
    assert not any(text.endswith(slides_gif.MARK) for text in texts if "Lossless" in text or "vs " in text)


def test_seventeen_lanes_are_a_table_and_the_legend_stays_in_its_panel():
    placed, _ = drawn(race_of(17))
    names = [slides_gif.SHORT.get(lane.key, lane.key) for lane in race_of(17).lanes]
    boxes = {text: box for text, box, _ in placed}
    rows = [boxes[name] for name in names if name in boxes]
    assert len(rows) == 17  # every lane named on one line
    assert any("dashed: the one-pass draft" in text for text, _, _ in placed)  # the colours said, not 17 entries
    assert all(box[3] <= slides_gif.PANELS_TOP for box in rows)  # above the panels


def test_every_slide_of_the_shipped_recording_is_laid_out_clean():
    """The landing's recorded race, every round: its tree's labels fit their level whole, above the path."""
    from app.landing import LANDING_TRACE
    from app.race_trace import load_race

    data = load_race(LANDING_TRACE)
    data.replay = True
    for step in range(export.rounds_of(data)):
        placed, _ = drawn(data, step)
        assert overlapping(placed) == [] and outside(placed, slides_gif.GIF_SIZE) == [], step
        assert not any(text.endswith(slides_gif.MARK) for text, _, _ in placed), step  # no word cut
        assert min(size for _, _, size in placed) >= SMALLEST_PX


@pytest.mark.parametrize("kind", ["gif", "webm"])
def test_the_exported_frames_of_seventeen_lanes_are_laid_out_clean(kind, tmp_path, monkeypatch):
    """Every frame the GIF and the WebM export draws, checked as drawn (the slide's boxes recorded)."""
    frames: list[list[Placed]] = []
    real = slides_gif.slide

    def recorded(race, rounds, title, check=slides_gif.never, placed=None):
        frames.append([])
        return real(race, rounds, title, check, frames[-1])

    monkeypatch.setattr(slides_gif, "slide", recorded)
    save = export.save_gif if kind == "gif" else export.save_webm
    save(race_of(17), tmp_path / f"race.{kind}", budget=export.Budget(frames=3))
    assert len(frames) == 3
    for placed in frames:
        assert overlapping(placed) == [] and outside(placed, slides_gif.GIF_SIZE) == []


def test_a_webm_that_plays_is_written_without_a_warning(tmp_path):
    """OpenCV printed "not supported" for a WebM it wrote and that plays: the export prints no such line."""
    import cv2

    trace = tmp_path / "race.jsonl"
    from app.race_trace import save_race

    save_race(race_of(2, rounds=3), trace)
    code = "from app.export import main; import sys; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(trace), "--webm", str(tmp_path / "race.webm")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "SAGE_THREADS": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert "not supported" not in done.stderr + done.stdout
    capture = cv2.VideoCapture(str(tmp_path / "race.webm"))
    try:
        codec = int(capture.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little")
        assert codec == b"VP90" and capture.grab()  # VP9, and it plays
    finally:
        capture.release()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def with_confidence(data: RaceData) -> RaceData:
    """The race with SAGE's rounds given an entropy, an α and a planned tree, so that panel ① draws its three
    plots (the synthetic race has none)."""
    sage = data.lane("sage")
    assert sage is not None
    sage.records = [
        replace(
            r,
            entropy=0.2 + 0.3 * (i % 4),
            alpha=0.95 - 0.1 * (i % 4),
            depth_max=8,
            planned_depth=8 - i % 4,
            planned_width=1 + i % 3,
        )
        if r.phase == "decode"
        else r
        for i, r in enumerate(sage.records)
    ]
    return data


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
@pytest.mark.parametrize("count", [2, 5, 17])
def test_the_html_talk_view_shows_the_headline_every_lanes_answer_and_the_badge_on_one_screen(count, tmp_path):
    """At 1280 x 720: the headline, the badge and every lane's text (its newest line) on the first screen, no text
    cut by overflow (no sliced line), no tick labels over one another, no SVG text outside its figure, no type
    under 12 px; with 5 and 17 lanes the lanes' texts were below the fold."""
    playwright = pytest.importorskip("playwright.sync_api")
    data = with_confidence(race_of(count))
    path = export.save_html(data, tmp_path / "race.html", budget=export.Budget(frames=3))
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(path.as_uri() + "?still", wait_until="load")
        page.evaluate("window.sageShow(1e9)")
        page.wait_for_function("() => document.querySelectorAll('#talk .main-svg').length >= 2")
        page.wait_for_timeout(500)  # (a fitted panel widens its axis once to hold its labels)
        found = {
            "cut": page.evaluate(CUT_TEXT_JS, "#talk"),
            "figures": page.evaluate(FIGURE_TEXT_JS, "body"),
            "lanes": page.evaluate(LANE_TEXTS_JS),
            "off screen": page.evaluate(OFF_SCREEN_JS, ["#verdict .sage-headline", "#verdict .sage-badge"]),
            "small": page.evaluate(SMALL_TEXT_JS, ["#talk", 12]),
        }
        shown = page.locator("#lanes .sage-col").count()
        browser.close()
    assert shown == count
    assert found == {"cut": [], "figures": [], "lanes": [], "off screen": [], "small": []}
