"""Exports for slides: a race as one self-contained HTML file that replays offline, and as a GIF."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from app_records import synthetic_race
from gradio.utils import get_upload_folder

from app import export
from app.race import Lane, RaceData
from app.race_trace import load_race, save_race

ROOT = Path(__file__).resolve().parent.parent

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]  # fmt: skip


def test_the_html_holds_everything_it_shows(tmp_path):
    data = synthetic_race()
    page = export.save_html(data, tmp_path / "race.html").read_text(encoding="utf-8")
    rounds = max(len(lane.records) for lane in data.lanes)
    assert len(export.frames(data)) == rounds
    assert "Plotly" in page and "sage-frames" in page
    # nothing is fetched: no script or stylesheet from elsewhere, no URL but the paper's
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|@import", page)
    last = export.frame(data, rounds - 1)
    assert set(last["figures"]) == set(export.PANEL_ORDER)
    assert "Lossless" in last["verdict"] and "so far" not in last["verdict"]
    assert "so far" in export.frame(data, 1)["verdict"]  # the race had not ended after round 1


def test_an_empty_race_is_refused_in_a_sentence(tmp_path):
    data = synthetic_race()
    for lane in data.lanes:
        lane.records.clear()
    with pytest.raises(export.ExportError, match="no rounds"):
        export.save_html(data, tmp_path / "race.html")


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


def long_race(rounds: int, text: str = " w") -> RaceData:
    """A recorded race of two sides with `rounds` rounds, each bringing a drafted token and a bonus."""
    base = synthetic_race()
    lanes = []
    for lane in base.lanes:
        template = lane.records[1]
        records = [lane.records[0]] + [
            replace(
                template,
                round=i,
                new_token_texts=(text,) + (" x",) * (len(template.new_tokens) - 1),
                total_tokens=1 + len(template.new_tokens) * i,
                total_seconds=lane.records[0].total_seconds + template.round_seconds * i,
                finish_reason=None,
            )
            for i in range(1, rounds)
        ]
        header = replace(lane.header, max_new_tokens=records[-1].total_tokens)
        lanes.append(Lane(lane.method, header, records))
    return RaceData(lanes=lanes, token_texts=base.token_texts, replay=True)


def payload_bytes(data: RaceData) -> int:
    previous, total = None, 0
    for step in export.frame_steps(export.rounds_of(data), 1000):
        current = export.frame(data, step)
        total += len(export.script_json(export.patch(previous, current)))
        previous = current
    return total


def rebuilt(patches: list) -> list:
    """The player's `apply`, in Python: each frame rebuilt from the one before and its patch."""

    def apply(old, p):
        if "v" in p:
            return p["v"]
        if "a" in p:
            return old + p["a"]
        if "s" in p:
            head, tail, middle = p["s"]
            return old[:head] + middle + old[len(old) - tail :]
        if "l" in p:
            out = list(old)
            for index, q in p["l"].items():
                out[int(index)] = apply(old[int(index)], q)
            return out + p["t"]
        out = {k: v for k, v in old.items() if k not in p["r"]}
        out.update({k: apply(old.get(k), q) for k, q in p["d"].items()})
        return out

    state, shown = None, []
    for p in patches:
        state = apply(state, json.loads(json.dumps(p)))
        shown.append(state)
    return shown


def test_frames_carry_what_changed_and_rebuild_exactly():
    data = long_race(6)
    whole = export.frames(data)
    patches = [export.patch(a, b) for a, b in zip([None, *whole], whole, strict=False)]
    assert rebuilt(patches) == whole
    assert len(json.dumps(patches[-1])) < len(json.dumps(whole[-1])) / 4  # the last frame is mostly unchanged


def test_the_html_grows_with_the_race_not_its_square():
    short, long = payload_bytes(long_race(8)), payload_bytes(long_race(32))
    assert long < 5 * short, (short, long)  # whole frames: about 12 times


def test_a_long_race_is_sampled_to_its_budget_and_the_budget_said():
    steps = export.frame_steps(4096, 60)
    assert len(steps) == 60 and steps[0] == 0 and steps[-1] == 4095
    assert export.frame_steps(5, 60) == [0, 1, 2, 3, 4]
    sentence = export.Budget().sentence(4096)
    assert "60 of its 4096 rounds" in sentence and "180 s" in sentence and "40 MB" in sentence


def test_an_export_past_its_time_stops_naming_the_bound(tmp_path):
    ticks = iter(range(0, 10_000, 100))
    spend = export.Spend(export.Budget(seconds=250), clock=lambda: float(next(ticks)))
    spend.check(0, 5)
    spend.check(1, 5)
    with pytest.raises(export.ExportError, match="250 s budget after 2 of 5 frames"):
        spend.check(2, 5)
    with pytest.raises(export.ExportError, match=r"0\.001 MB budget"):
        export.save_html(long_race(3), tmp_path / "x.html", budget=export.Budget(megabytes=0.001))
    assert not (tmp_path / "x.html").exists()  # no partial file


def test_embedded_json_cannot_close_or_comment_out_a_script():
    text = export.script_json({"t": "<!--<script></script>&\u2028\u2029"})
    assert not set(text) & set("<>&\u2028\u2029")
    assert json.loads(text) == {"t": "<!--<script></script>&\u2028\u2029"}


def test_the_cli_says_in_a_line_when_it_cannot_write(tmp_path, capsys):
    trace = save_race(long_race(3), tmp_path / "race.jsonl")
    for out in (tmp_path / "missing" / "x.html", tmp_path):
        assert export.main([str(trace), "--html", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: cannot write") and "Traceback" not in err
    assert export.main([str(trace), "--gif", str(tmp_path / "missing" / "x.gif")]) == 2
    assert capsys.readouterr().err.startswith("error: cannot write")
    assert export.main([str(trace), "--webm", str(tmp_path / "missing" / "x.webm")]) == 2
    assert capsys.readouterr().err.startswith("error: cannot write")


def test_a_failed_export_leaves_what_was_at_its_path_untouched(tmp_path, capsys):
    """`--gif DIR/kept` (no `.gif`) failed in a traceback and unlinked what was at DIR/kept; `--webm DIR/video`
    blamed the server's VP9 encoder; `--html` at a device node deleted it (as root). A name without its kind's
    ending, and anything but a regular file, is refused in one line before anything is written."""
    trace = save_race(long_race(3), tmp_path / "race.jsonl")
    kept = tmp_path / "kept"
    kept.write_text("mine")
    for flag, name, ending in (("--gif", "kept", ".gif"), ("--webm", "video", ".webm"), ("--html", "page", ".html")):
        target = tmp_path / name
        existed = target.exists()
        assert export.main([str(trace), flag, str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: cannot write {target}") and ending in err, err
        assert "Traceback" not in err and "VP9" not in err
        assert target.exists() == existed
    assert kept.read_text() == "mine"
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    assert export.main([str(trace), "--html", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err and fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "pipe.html", "race.jsonl"]  # nothing left behind


def test_a_full_disk_is_one_line_and_the_old_file_stays(tmp_path, capsys, monkeypatch):
    """A full disk (ENOSPC) ended the HTML export in a traceback: now one `error:` line naming the cause, the
    file that was at the path untouched, and the export's own temporary file gone."""
    from app import slides_gif

    trace = save_race(long_race(3), tmp_path / "race.jsonl")

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    class FullFile(io.StringIO):
        write = full  # type: ignore[assignment]  # a file whose every write fails as a full disk's does

    monkeypatch.setattr(export.player, "open_for_writing", lambda path: FullFile())
    monkeypatch.setattr(slides_gif, "write_gif", full)
    for flag, name in (("--html", "old.html"), ("--gif", "old.gif")):
        (tmp_path / name).write_text("the slides of last week")
        assert export.main([str(trace), flag, str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert err == f"error: cannot write {tmp_path / name}: No space left on device\n"
        assert (tmp_path / name).read_text() == "the slides of last week"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.gif", "old.html", "race.jsonl"]


def test_an_export_replaces_its_file_only_when_done(tmp_path):
    target = tmp_path / "race.html"
    target.write_text("old")
    writer = export.write_html(long_race(4), target)
    next(writer)
    assert target.read_text() == "old" and len(list(tmp_path.iterdir())) == 2  # written beside it
    writer.close()  # stopped: the old file stays, the new one goes
    assert target.read_text() == "old" and list(tmp_path.iterdir()) == [target]
    export.save_html(long_race(4), target)
    assert "sage-frames" in target.read_text(encoding="utf-8") and list(tmp_path.iterdir()) == [target]


def test_the_gif_needs_no_browser_and_is_16_by_9(tmp_path):
    """`python -m app.export TRACE --gif OUT` with playwright not importable and no Chromium on PATH."""
    from PIL import Image

    trace = save_race(long_race(10), tmp_path / "race.jsonl")
    gif = tmp_path / "race.gif"
    code = "import sys; sys.modules['playwright'] = None; from app.export import main; sys.exit(main(sys.argv[1:]))"
    env = {"PATH": str(tmp_path), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    command = [sys.executable, "-c", code, str(trace), "--gif", str(gif)]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("This GIF draws") < done.stdout.index("wrote")  # the budget, said before
    with Image.open(gif) as image:
        width, height = image.size
        assert abs(width / height - 16 / 9) < 0.01 and image.n_frames >= 8


def test_a_gif_of_a_long_race_holds_at_most_its_frames(tmp_path):
    from PIL import Image

    gif = export.save_gif(long_race(30), tmp_path / "race.gif", budget=export.Budget(frames=9))
    with Image.open(gif) as image:
        assert image.n_frames == 9 and image.size == export.GIF_SIZE


def test_an_export_whose_visitor_left_stops_and_leaves_nothing(tmp_path, monkeypatch):
    drawn: list[int] = []
    real = export.player.frame
    monkeypatch.setattr(export.player, "frame", lambda data, step: (drawn.append(step), real(data, step))[1])
    slots = export.ExportSlots()
    job = export.export_job(long_race(12), None, "html", folder=tmp_path, slots=slots)
    assert "This HTML replay draws all 12 rounds" in next(job)[1]
    while "frame 2 of 12…" not in next(job)[1]:  # two frames drawn (a busy machine's heartbeats between)
        pass
    job.close()  # the visitor left: Gradio stops pulling and closes it
    assert drawn == [0, 1] and list(tmp_path.iterdir()) == []
    assert slots.held == {"small": {}, "large": {}}  # its slot given back


def test_small_exports_never_wait_behind_large_ones_and_nobody_queues():
    slots = export.ExportSlots(small=1, large=1, lease=10)
    slots.take("large", clock=lambda: 0.0)
    small = slots.take("small", clock=lambda: 0.0)  # a large export running does not hold up a small one
    with pytest.raises(export.ExportError, match="1 large exports are running"):
        slots.take("large", clock=lambda: 1.0)
    slots.give_back("small", small)
    slots.take("small", clock=lambda: 1.0)
    slots.take("large", clock=lambda: 11.0)  # a slot never given back is free once its lease is past


def test_exports_run_outside_the_races_group(monkeypatch):
    from app import ui

    demo = ui.build_demo()
    exports = [f for f in demo.fns.values() if getattr(f.fn, "__name__", "") in ("slides_file", "gif_file")]
    races = [f for f in demo.fns.values() if f.concurrency_id == "race"]
    assert len(exports) == 2 and races
    assert all(f.concurrency_id == "sage-export" and f.concurrency_limit is None for f in exports)


def test_a_visitor_keeps_one_export_file_of_each_kind_removed_with_their_session(tmp_path):
    *_, (update, status, kept) = export.export_job(synthetic_race(), [], "html", folder=tmp_path)
    assert "replays offline" in status
    assert update["visible"] is True and kept == [update["value"]] and Path(kept[0]).is_file()
    first = kept[0]
    *_, (update, _status, again) = export.export_job(synthetic_race(), kept, "html", folder=tmp_path)
    assert again is kept and len(kept) == 1 and not Path(first).exists()  # the previous HTML went
    export.forget_export(kept, folder=tmp_path)  # the session ended (the state's delete_callback)
    assert list(tmp_path.iterdir()) == []
    export.forget_export([str(ROOT / "README.md")], folder=tmp_path)  # nothing outside the folder is touched
    assert (ROOT / "README.md").exists()
    assert export.EXPORT_DIR.parent == Path(get_upload_folder())  # served by Gradio without a second copy


def test_exports_started_at_once_are_all_removed_when_the_visitor_leaves(tmp_path):
    """An HTML and a GIF export started together: the session kept only the last one's name, so the other stayed
    until Gradio's hourly sweep. Both read the session's one list (the state's value, shared by its events)."""
    kept: list[str] = []
    html = export.export_job(synthetic_race(), kept, "html", folder=tmp_path)
    gif = export.export_job(synthetic_race(), kept, "gif", folder=tmp_path)
    next(html), next(gif)  # both started before either finished
    *_, (_, _, after_gif) = gif
    *_, (_, _, after_html) = html
    assert after_gif is kept and after_html is kept and sorted(Path(p).suffix for p in kept) == [".gif", ".html"]
    assert sorted(tmp_path.iterdir()) == sorted(Path(p) for p in kept)
    export.forget_export(kept, folder=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_page_keeps_its_export_files_in_a_list_removed_with_the_session():
    from app import ui

    demo = ui.build_demo()
    exports = [f for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "slides_file"]
    kept = exports[0].inputs[1]
    assert kept.value == [] and kept.delete_callback is export.forget_export


def test_the_pages_buttons_say_why_not(tmp_path):
    *_, (update, status, kept) = export.export_job(None, "old", "html", folder=tmp_path)
    assert update["visible"] is False and "Nothing to export yet" in status and kept == "old"
    slots = export.ExportSlots(small=0)
    *_, (update, status, _) = export.export_job(synthetic_race(), None, "gif", folder=tmp_path, slots=slots)
    assert update["visible"] is False and "try again in a few seconds" in status


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_a_script_breaking_token_text_still_plays_to_the_end(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    data = long_race(4, text="<!--<script>")
    path = export.save_html(data, tmp_path / "race.html")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(path.as_uri() + "?still", wait_until="load")
        page.evaluate("window.sageShow(1e9)")
        assert page.evaluate("document.body.dataset.done") == "1"
        assert "<!--<script>" in page.locator("#lanes").inner_text()
        # the talk layout: the texts, panel ① and the tree on the one 1280 x 720 screen
        for box in ("#lanes", "#panel-confidence", "#panel-tree"):
            where = page.locator(box).bounding_box()
            assert where and where["y"] + where["height"] <= 722 and where["height"] > 40, (box, where)
        browser.close()


def test_the_gif_and_the_video_are_16_9_titled_with_the_headline_and_count_rounds_as_the_page(tmp_path):
    """The GIF carried the headline as a small grey run-on line cut mid-sentence, counted 9 / 12 rounds where the
    page said 8 / 11, and there was no video: the GIF and the WebM (made without a browser) are 1280 x 720,
    titled with the headline in large type, and count rounds as the page does."""
    import cv2
    from PIL import Image

    from app import slides_gif
    from app.render import headline_words
    from app.view import race_view

    data = long_race(12)
    view = race_view(data)
    assert view.headlines, "a race of 11 decode rounds a side has a headline"
    title = slides_gif.headline_title(view, "SAGE race")
    main = view.headlines[0]
    assert title == f"SAGE: {headline_words(main, view.wall_speedups.get(main.rival))}"  # the page's sentence
    for lane in data.lanes:
        figures = view.lane(lane.method).figures
        assert figures is not None and f": {figures.rounds} rounds, " in slides_gif.lane_title(lane)
        assert figures.rounds == len(lane.records) - 1  # the prefill is round 0, not a round the page counts
    gif = export.save_gif(data, tmp_path / "race.gif")
    with Image.open(gif) as picture:
        assert picture.size == (1280, 720) and picture.n_frames == len(export.frame_steps(12, slides_gif.GIF_FRAMES))
    assert export.main([str(save_race(data, tmp_path / "race.jsonl")), "--webm", str(tmp_path / "race.webm")]) == 0
    capture = cv2.VideoCapture(str(tmp_path / "race.webm"))
    try:
        size = (int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)))
        frames = 0
        while capture.grab():
            frames += 1
    finally:
        capture.release()
    assert size == (1280, 720) and frames == len(export.frame_steps(12, slides_gif.GIF_FRAMES)) + 2  # the end held


def test_a_video_export_from_the_page_says_what_it_saved(tmp_path):
    *_, (update, status, kept) = export.export_job(synthetic_race(), None, "webm", folder=tmp_path)
    assert update["visible"] is True and kept[0].endswith(".webm") and Path(kept[0]).stat().st_size > 1000
    assert "WebM video (VP9, 1280 × 720)" in status


def test_an_export_of_a_live_race_reads_as_a_recording():
    """A file replays what was measured: its headline's noise is the recording's, never "this machine now"."""
    from app.view import race_view

    live = synthetic_race()
    assert not live.replay and not race_view(live).headlines[0].recorded
    shown = race_view(export.race_at(export.for_showing(live), 2))
    assert shown.replay and shown.headlines and all(h.recorded for h in shown.headlines)
