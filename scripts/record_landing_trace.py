"""Record the race the app shows on landing (assets/landing/race.jsonl and its picture).

A live race of the built-in pair on a shipped long example, recorded with the app's own race
code and trace writer (`app.race.race_steps`, `app.race_trace.save_race`), after a warm-up, on this
machine. The page shows it, labelled as a recording, with its picture and prompt in the inputs,
until the visitor starts a race. Re-run it whenever the built-in pair or the decoding changes:

    PYTHONPATH=. python scripts/record_landing_trace.py [--example describe_five.png] [--draft builtin]
        [--methods sage,static] [--out assets/landing/race.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from app.handlers import last
from app.landing import LANDING_PICTURE, LANDING_TRACE
from app.models import LoadedPair, warm_up
from app.race import RaceRequest, race_steps
from app.race_trace import save_race
from sage_core import load_media, load_pair
from sage_core.threads import choose_threads

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--example", default="describe_five.png", help="a file of assets/examples")
    ap.add_argument("--draft", default="builtin", help="'builtin' or a draft folder (shown as its folder name)")
    ap.add_argument("--methods", default="sage,static")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--out", default=str(LANDING_TRACE))
    args = ap.parse_args(argv)
    examples = json.loads((ROOT / "assets" / "examples" / "examples.json").read_text())
    example = next(e for e in examples if e["file"] == args.example)
    pair = load_pair("builtin", args.draft, device="cpu", dtype="float32")
    if args.draft != "builtin":
        pair.draft.name = f"builtin-{Path(args.draft).name.removesuffix('-draft')}"
    print(f"threads: {choose_threads(pair).describe()}")
    costs = warm_up(pair)
    media = load_media(ROOT / "assets" / "examples" / args.example)
    request = RaceRequest(media, example["prompt"], tuple(args.methods.split(",")), args.max_new_tokens)
    steps = race_steps(pair, request, LoadedPair(pair).token_texts, source="a recorded race", costs=costs)
    data = last(steps)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_race(data, out)
    shutil.copyfile(ROOT / "assets" / "examples" / args.example, out.with_name(LANDING_PICTURE.name))
    sizes = ", ".join(f"{lane.method} {len(lane.records) - 1} rounds" for lane in data.lanes)
    print(f"wrote {out} ({out.stat().st_size / 1e3:.0f} kB): {sizes}; {data.lanes[0].text!r}")
    return out


if __name__ == "__main__":
    main()
