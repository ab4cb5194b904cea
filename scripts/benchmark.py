"""Side-by-side benchmark: every method on the same prompts, in one process.

    python scripts/benchmark.py                      # the built-in pair on assets/examples
    python scripts/benchmark.py --target Qwen/Qwen2.5-VL-7B-Instruct --draft Qwen/Qwen2.5-VL-3B-Instruct

For each example and method: one warm-up run, then --repeats timed runs
(device-synchronised wall time). Prints the median tokens/s, tau (accepted
draft tokens per round, bonus excluded), tokens per target forward, and the
speedup over plain decoding (ratio of medians), end to end and decode only.
Also checks that every method's tokens equal plain decoding's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sage_core import METHODS, DecodeConfig, decode, load_media, load_pair  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="builtin")
    parser.add_argument("--draft", default="builtin")
    parser.add_argument("--examples", default=str(ROOT / "assets" / "examples" / "examples.json"))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    args = parser.parse_args()

    pair = load_pair(args.target, args.draft, args.device, args.dtype)
    examples = json.loads(Path(args.examples).read_text())
    base = Path(args.examples).parent
    methods = args.methods.split(",")
    print(f"target {args.target}  draft {args.draft}  device {pair.device}  dtype {pair.target.dtype}")
    print(f"{'example':<22}{'method':<8}{'tok/s':>8}{'tau':>7}{'tok/fwd':>9}{'speedup':>9}{'decode x':>10}  same")
    totals: dict[str, list[float]] = {m: [] for m in methods}
    for example in examples:
        media = load_media(base / example["file"])
        medians: dict[str, tuple[float, float]] = {}
        reference: tuple[int, ...] | None = None
        for method in methods:
            config = DecodeConfig(method=method, max_new_tokens=args.max_new_tokens)
            decode(pair, media, example["prompt"], config).run_to_end()  # warm-up
            runs = [decode(pair, media, example["prompt"], config).run_to_end() for _ in range(args.repeats)]
            speed = statistics.median(r.tokens_per_second for r in runs)
            decode_speed = statistics.median(r.decode_tokens_per_second for r in runs)
            medians[method] = (speed, decode_speed)
            if method == "ar" or reference is None:
                reference = reference or runs[0].token_ids
            same = runs[0].token_ids == reference
            ar = medians.get("ar")
            ratio = speed / ar[0] if ar else float("nan")
            decode_ratio = decode_speed / ar[1] if ar and ar[1] else float("nan")
            totals[method].append(ratio)
            print(
                f"{example['file'][:21]:<22}{method:<8}{speed:>8.1f}{runs[0].mean_accepted:>7.2f}"
                f"{runs[0].tokens_per_forward:>9.2f}{ratio:>8.2f}x{decode_ratio:>9.2f}x  {'yes' if same else 'NO'}"
            )
    print("median speedup over plain decoding (end to end):")
    for method in methods:
        if totals[method]:
            print(f"  {method:<8}{statistics.median(totals[method]):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
