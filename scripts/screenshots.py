"""Screenshots of the app for docs/ (and the README): the default view at 1440 x 900, the talk view at
1280 x 720 and a phone at 390 x 844, each after the landing replay has played (so every panel is drawn).

    PYTHONPATH=. python scripts/screenshots.py [--out docs] [--boxes]

`--boxes` prints where the key elements lie in each viewport (what tests/test_app_browser.py asserts).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from app.serving import running_app

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]  # fmt: skip
VIEWS = {
    "race.png": ((1440, 900), ""),
    "talk.png": ((1280, 720), "?view=talk"),
    "phone.png": ((390, 844), ""),
}
KEY = ("#start-race", "#image-input", "#lanes", "#verdict", "#panel-confidence", "#panel-tree", "#explain",
       "#figures-table")  # fmt: skip
BOXES_JS = """ids => Object.fromEntries(ids.map(id => {
  const e = document.querySelector(id); if (!e) return [id, null];
  const r = e.getBoundingClientRect(); return [id, [r.x, r.y, r.width, r.height].map(Math.round)];
}))"""


def landing_played(page) -> None:
    page.wait_for_function(
        "() => { const s = document.querySelector('#status'); "
        "return s && s.innerText.includes('finished') && document.querySelector('#panel-tree .main-svg'); }",
        timeout=240_000,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--boxes", action="store_true")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with running_app("builtin", "builtin") as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        for name, ((width, height), query) in VIEWS.items():
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(url + query, wait_until="load")
            landing_played(page)
            page.wait_for_timeout(1200)  # the talk view refits its panels
            args.out.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out / name))
            if args.boxes:
                boxes = page.evaluate(BOXES_JS, list(KEY))
                print(name, json.dumps(boxes), "scroll height", page.evaluate("document.body.scrollHeight"))
            page.close()
        browser.close()


if __name__ == "__main__":
    main()
