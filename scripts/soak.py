"""Memory per race on a running app: small races alternating the raw API and the page's streamed race.

    PYTHONPATH=. python scripts/soak.py                      # 100 races after 10 warm-up races, the built-in pair, CPU
    PYTHONPATH=. python scripts/soak.py --races 6 --warm-up 2

The app is launched in this process (`app.serving.running_app`, as the tests launch it), so its
resident memory is this process's. Races alternate `/race` (the Python clients' dict) and
`/race_live` (the page's streamed race), every method ticked, a new visitor (session) each time,
as a crowd of visitors would. After each race the resident memory is read once garbage is
collected and freed heap handed back (`gc.collect()` + `malloc_trim`), and a least-squares line
over the races after warm-up gives the growth per race (robust to the noise of one reading).
Goal: at most 0.3 MB per race.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "assets" / "examples" / "chart.png"
GOAL_MB_PER_RACE = 0.3


def settled_mb() -> float:
    """Resident memory once garbage is collected and freed heap is handed back to the system."""
    gc.collect()
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("VmRSS not in /proc/self/status")


def slope(values: list[float]) -> float:
    """The least-squares growth per step of `values` (0 for fewer than two)."""
    count = len(values)
    if count < 2:
        return 0.0
    mean_x, mean_y = (count - 1) / 2, sum(values) / count
    spread = sum((x - mean_x) ** 2 for x in range(count))
    return sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values)) / spread


def one_race(url: str, index: int, tokens: int) -> None:
    """One small race by a new visitor: `/race` on odd indices, the page's `/race_live` on even ones."""
    from gradio_client import Client, handle_file

    from app.inputs import RACE_FIELDS, RaceForm
    from sage_core.methods import method_names

    form = RaceForm(
        image=handle_file(str(EXAMPLE)),
        prompt="describe the chart.",
        pair="builtin",
        methods=list(method_names()),
        max_new_tokens=tokens,
    )
    values = [getattr(form, name) for name in RACE_FIELDS]
    client = Client(url, verbose=False)
    if index % 2:
        answer = client.predict(*values, api_name="/race")
        if not isinstance(answer, dict) or "error" in answer:
            raise RuntimeError(f"race {index + 1} failed: {answer}")
    else:
        outputs = client.submit(*values, None, api_name="/race_live").result()
        if "Race finished" not in str(outputs[0]):
            raise RuntimeError(f"race {index + 1} did not finish: {str(outputs[0])[:300]}")
    client.close()


def soak(races: int, warm_up: int, tokens: int) -> dict[str, float]:
    """Run `warm_up` then `races` races on a fresh app; the memory figures."""
    from app.serving import running_app

    started = time.monotonic()
    with running_app("builtin", "builtin") as url:
        for index in range(warm_up):
            one_race(url, index, tokens)
        readings = [settled_mb()]
        for index in range(warm_up, warm_up + races):
            one_race(url, index, tokens)
            readings.append(settled_mb())
    return {
        "before_mb": readings[0],
        "after_mb": readings[-1],
        "per_race_mb": slope(readings),
        "seconds": time.monotonic() - started,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--races", type=int, default=100)
    parser.add_argument("--warm-up", type=int, default=10)
    parser.add_argument("--max-new-tokens", type=int, default=6)
    args = parser.parse_args()
    figures = soak(args.races, args.warm_up, args.max_new_tokens)
    print(
        f"soak: {args.races} races after {args.warm_up} warm-up, alternating /race and /race_live, every "
        f"method, {args.max_new_tokens} new tokens, built-in pair, CPU, {figures['seconds']:.0f} s"
    )
    print(f"RSS before: {figures['before_mb']:.1f} MB")
    print(f"RSS after: {figures['after_mb']:.1f} MB")
    print(f"per race (least-squares slope after warm-up): {figures['per_race_mb']:+.3f} MB")
    ok = figures["per_race_mb"] <= GOAL_MB_PER_RACE
    print(f"goal (at most {GOAL_MB_PER_RACE} MB per race): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
