"""What one visitor's race holds, and peaks at, on a huge video: page races and a stepped race.

    PYTHONPATH=. python scripts/visitor_memory.py            # the built-in pair on the CPU; prints a table
    PYTHONPATH=. python scripts/visitor_memory.py --json out.json

A 6000 x 6000, 8-frame MJPG video (a few MB; 36 M pixels a frame, under the race's 40 M-pixel limit) is
raced three times through the running page's own streamed race (`/race_live`, pruning at the paper's
ratio), each time by a new visitor (a new session, so each keeps its own per-user state). After each
race the process's resident memory is read (after `gc.collect()` and `malloc_trim`, so freed memory is
not counted as held), and its peak during the race (VmHWM, reset through /proc/self/clear_refs before the race).
Then a stepped race on the same video is started, stepped once and dropped (`RaceStepper.drop`,
what the process's bound on stepped races does to the oldest): the memory its caches held is
read before and after. Goals: each race holds under 150 MB afterwards, one race peaks under
+3 GB, and a dropped stepped race's memory is given back.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

HELD_GOAL_MB = 150.0
PEAK_GOAL_MB = 3 * 1024.0


def kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def settled_mb() -> float:
    """Resident memory once garbage is collected and freed heap is handed back to the system."""
    gc.collect()
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return kib("VmRSS") / 1024


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def peak_mb() -> float:
    return kib("VmHWM") / 1024


def huge_video(path: Path, side: int = 6000, frames: int = 8) -> Path:
    """An MJPG clip of `frames` side x side frames: flat colours with a disc, so it compresses to a few MB."""
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 4.0, (side, side))
    for index in range(frames):
        frame = np.full((side, side, 3), (40 + 20 * index, 90, 160), dtype=np.uint8)
        cv2.circle(frame, (side // 4 + index * side // 16, side // 2), side // 8, (20, 200, 240), -1)
        writer.write(frame)
    writer.release()
    return path


def page_values(video: Any, prompt: str, tokens: int) -> list[Any]:
    from app.inputs import RACE_FIELDS, RaceForm
    from sage_core.methods import race_default

    form = RaceForm(
        video=video,
        prompt=prompt,
        pair="builtin",
        methods=list(race_default()),
        max_new_tokens=tokens,
        prune_choice="paper",
    )
    return [getattr(form, name) for name in RACE_FIELDS]


def page_races(url: str, video: Path, races: int, tokens: int) -> list[dict[str, float]]:
    from gradio_client import Client, handle_file

    rows = []
    before = settled_mb()
    for index in range(races):
        client = Client(url, verbose=False)  # a new visitor: a session of its own
        reset_peak()
        start = kib("VmRSS") / 1024
        outputs = client.submit(
            *page_values(handle_file(str(video)), "describe the video.", tokens), None, api_name="/race_live"
        ).result()
        if "Race finished" not in str(outputs[0]):
            raise RuntimeError(f"race {index + 1} did not finish: {outputs[0]}")
        peak = peak_mb() - start
        after = settled_mb()
        rows.append({"race": index + 1, "held_mb": after - before, "peak_over_start_mb": peak})
        before = after
    return rows


def stepped_race(video: Path, tokens: int) -> dict[str, float]:
    from app.race import RaceRequest, live_stepper
    from sage_core import load_media, load_pair
    from sage_core.methods import race_default

    pair = load_pair("builtin", "builtin", "cpu")
    media = load_media(video)
    before = settled_mb()
    stepper = live_stepper(pair, RaceRequest(media, "describe the video.", race_default(), tokens, prune_ratio=0.9))
    del media
    stepper.step()
    stepper.step()
    held = settled_mb()
    stepper.drop()
    dropped = settled_mb()
    return {"stepped_held_mb": held - before, "after_drop_mb": dropped - before}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=6000)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--races", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    from app.inputs import Limits
    from app.serving import running_app

    with tempfile.TemporaryDirectory() as folder:
        video = huge_video(Path(folder) / "huge.avi", args.side, args.frames)
        size_mb = video.stat().st_size / 2**20
        limits = Limits(max_upload_mb=50, max_video_seconds=60)
        with running_app("builtin", "builtin", limits=limits) as url:
            page_races(url, huge_video(Path(folder) / "small.avi", 64, 2), 1, 4)  # warm-up: load the pair
            rows = page_races(url, video, args.races, args.max_new_tokens)
        stepped = stepped_race(video, args.max_new_tokens)
    print(
        f"video: {args.side}x{args.side}, {args.frames} frames, MJPG, {size_mb:.1f} MB; built-in pair, CPU; "
        "pruning at the paper's ratio"
    )
    print("| page race | held afterwards MB | peak over its start MB |\n|---|---|---|")
    for row in rows:
        print(f"| {row['race']} | {row['held_mb']:+.0f} | {row['peak_over_start_mb']:+.0f} |")
    print(
        f"\nstepped race: held {stepped['stepped_held_mb']:+.0f} MB while stepping, "
        f"{stepped['after_drop_mb']:+.0f} MB after it was dropped"
    )
    ok = all(r["held_mb"] < HELD_GOAL_MB for r in rows) and max(r["peak_over_start_mb"] for r in rows) < PEAK_GOAL_MB
    ok = ok and stepped["after_drop_mb"] < HELD_GOAL_MB
    print(
        f"goals (each race holds < {HELD_GOAL_MB:.0f} MB, peaks < {PEAK_GOAL_MB:.0f} MB; a dropped stepped race "
        f"gives its memory back): {'met' if ok else 'NOT met'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"page_races": rows, "stepped": stepped}, indent=1), encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
