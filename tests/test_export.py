"""Exports for slides: a race as one self-contained HTML file that replays offline, and as a GIF."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from app_records import synthetic_race

from app import export
from app.race_trace import load_race

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]  # fmt: skip


def test_the_html_holds_everything_it_shows():
    data = synthetic_race()
    page = export.html_export(data)
    rounds = max(len(lane.records) for lane in data.lanes)
    assert len(export.frames(data)) == rounds
    assert "Plotly" in page and "sage-frames" in page
    # nothing is fetched: no script or stylesheet from elsewhere, no URL but the paper's
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|@import", page)
    last = export.frame(data, rounds - 1)
    assert set(last["figures"]) == set(export.PANEL_ORDER)
    assert "Lossless" in last["verdict"] and "so far" not in last["verdict"]
    assert "so far" in export.frame(data, 1)["verdict"]  # the race had not ended after round 1


def test_an_empty_race_is_refused_in_a_sentence():
    data = synthetic_race()
    for lane in data.lanes:
        lane.records.clear()
    with pytest.raises(export.ExportError, match="no rounds"):
        export.html_export(data)


def test_the_cli_writes_the_html_and_says_what_is_wrong(tmp_path, capsys):
    from app.landing import LANDING_TRACE

    out = tmp_path / "race.html"
    assert export.main([str(LANDING_TRACE), "--html", str(out)]) == 0
    assert out.stat().st_size > 1_000_000  # Plotly's bundle is inside
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert export.main([str(bad), "--html", str(tmp_path / "x.html")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_the_exported_race_replays_offline_in_chromium_to_the_end(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    from app.landing import LANDING_TRACE

    data = load_race(LANDING_TRACE)
    data.replay = True
    path = export.save_html(data, tmp_path / "race.html")
    texts = [lane.text for lane in data.lanes]
    requests: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
        context.route("**/*", lambda route: (requests.append(route.request.url), route.continue_()))
        page = context.new_page()
        page.goto(path.as_uri() + "?still", wait_until="load")  # (without ?still it plays on opening)
        assert page.evaluate("document.body.dataset.frame") == "0"
        page.select_option("#speed", "4")
        page.click("#play")
        page.wait_for_function("() => document.body.dataset.done === '1'", timeout=60_000)
        drawn = {name: page.locator(f"#panel-{name} .main-svg").count() for name in export.PANEL_ORDER}
        assert all(count >= 1 for count in drawn.values()), drawn
        shown = [page.locator("#lanes .sage-col .sage-text").nth(i).inner_text() for i in range(len(texts))]
        assert [" ".join(t.split()) for t in shown] == [" ".join(t.split()) for t in texts]
        assert "Lossless" in page.locator("#verdict").inner_text()
        assert "Round" in page.locator("#explain").inner_text()
        browser.close()
    assert all(url.startswith("file:") for url in requests), requests


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_the_gif_has_a_frame_a_round(tmp_path):
    pytest.importorskip("playwright.sync_api")
    from PIL import Image

    data = synthetic_race()
    html_path = export.save_html(data, tmp_path / "race.html")
    gif = export.save_gif(html_path, tmp_path / "race.gif", size=(800, 600))
    with Image.open(gif) as image:
        assert image.n_frames == len(export.frames(data)) and image.size == (800, 600)


def test_the_pages_export_button_writes_the_race_on_screen(tmp_path):
    update, status = export.slides_file(synthetic_race(), folder=tmp_path)
    assert update["visible"] is True and update["value"].endswith(".html")
    assert "sage-frames" in (tmp_path / update["value"].split("/")[-1]).read_text()
    assert "replays offline" in status
    update, status = export.slides_file(None, folder=tmp_path)
    assert update["visible"] is False and "Nothing to export yet" in status


def test_the_pages_gif_button_films_the_race_on_screen_or_says_why_not(tmp_path, monkeypatch):
    filmed: list[str] = []

    def film(html_path, gif_path, size=export.GIF_SIZE):
        assert "sage-frames" in Path(html_path).read_text()  # the same replay the HTML export writes
        filmed.append(str(gif_path))
        Path(gif_path).write_bytes(b"GIF89a")
        return Path(gif_path)

    monkeypatch.setattr(export, "save_gif", film)
    update, status = export.gif_file(synthetic_race(), folder=tmp_path)
    assert update["visible"] is True and update["value"] == filmed[0] and update["value"].endswith(".gif")
    assert "animated GIF" in status and list(tmp_path.glob("*.html")) == []  # (the page it filmed is gone)

    def no_browser(html_path, gif_path, size=export.GIF_SIZE):
        raise export.ExportError("a GIF needs a Chromium browser (Error)")

    monkeypatch.setattr(export, "save_gif", no_browser)
    update, status = export.gif_file(synthetic_race(), folder=tmp_path)
    assert update["visible"] is False and "needs a Chromium browser" in status
    update, status = export.gif_file(None, folder=tmp_path)
    assert update["visible"] is False and "Nothing to export yet" in status
