"""Peak memory and decode-step time against prompt length, with Qwen's real vocabulary.

    python scripts/memory_check.py                      # CPU: peak RSS, in a fresh process per case
    python scripts/memory_check.py --device cuda        # CUDA: torch.cuda.max_memory_allocated

Issue 9's case: with a model of Qwen's vocabulary (151,936 rows) and a 1,970-token prompt,
one SAGE run once peaked 2.2 GB above the same run on a 34-token prompt (the prefill computed
every position's logits). Here a tiny Qwen2.5-VL pair (sage_core/tiny_models.py) padded to that
vocabulary decodes a short and a long prompt (text padding up to --long-tokens) with SAGE;
each case runs in its own process after a warm-up, the peak is measured around the run only
(on the CPU: VmHWM reset through /proc/self/clear_refs, read from /proc/self/status; on CUDA:
the allocator's peak). Goal: the long prompt's peak within 600 MB of the short one's, and a
decode step that costs the same at both lengths (within noise; medians of the rounds).
Prints a table; --json writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

QWEN_VOCAB = 151_936
PEAK_GOAL_MB = 600.0
FILLER = "the quick brown fox jumps over the lazy dog. "


def build_pair(folder: Path) -> tuple[str, str]:
    """A tiny Qwen2.5-VL target and draft whose embeddings and lm_heads have Qwen's 151,936 rows."""
    from sage_core.tiny_models import build_config, build_tiny_vlm

    padding = QWEN_VOCAB - build_config("qwen2_5_vl").get_text_config().vocab_size
    target = build_tiny_vlm("qwen2_5_vl", folder / "target", seed=0, size="small", vocab_padding=padding)
    draft = build_tiny_vlm("qwen2_5_vl", folder / "draft", seed=0, size="small", vocab_padding=padding)
    return str(target), str(draft)


def padded_prompt(tokenizer: Any, prompt: str, tokens: int) -> str:
    """`prompt` after enough filler text to add about `tokens` tokens (0: the prompt as it is)."""
    if tokens <= 0:
        return prompt
    unit = len(tokenizer(FILLER)["input_ids"])
    return FILLER * max(1, round(tokens / unit)) + prompt


def vm_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def run_case(target: str, draft: str, device: str, pad: int, max_new: int, method: str) -> dict[str, Any]:
    """One case in this process: warm up on the short prompt, then measure the run at `pad`."""
    import numpy as np
    import torch
    from PIL import Image

    from sage_core import DecodeConfig, decode, load_pair
    from sage_core.media import image_media

    torch.set_num_threads(1)
    pair = load_pair(target, draft, device, "float32" if device == "cpu" else "bfloat16")
    image = image_media(Image.fromarray((np.random.RandomState(0).rand(56, 56, 3) * 255).astype("uint8")), "x.png")
    prompt = padded_prompt(pair.target.tokenizer, "Describe the picture.", pad)
    config = DecodeConfig(method, max_new)  # type: ignore[arg-type]
    decode(pair, image, "Describe the picture.", DecodeConfig(method, 4)).run_to_end()  # type: ignore[arg-type]
    cuda = pair.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS (VmHWM) to the current RSS
        before = vm_kib("VmRSS") * 1024
    run = decode(pair, image, prompt, config)
    summary = run.run_to_end()
    peak = torch.cuda.max_memory_allocated() if cuda else vm_kib("VmHWM") * 1024
    steps = [r.round_seconds for r in run.records if r.phase == "decode"]
    return {
        "pad_tokens": pad,
        "prompt_tokens": run.header.prompt_tokens,
        "vocab_size": pair.target.vocab_size,
        "method": method,
        "new_tokens": len(summary.token_ids),
        "peak_mb": peak / 2**20,
        "peak_over_start_mb": (peak - before) / 2**20,
        "median_step_ms": 1000 * statistics.median(steps) if steps else None,
        "rounds": len(steps),
        "measure": "cuda max_memory_allocated" if cuda else "peak RSS (VmHWM)",
    }


def measure(target: str, draft: str, device: str, pads: list[int], max_new: int, method: str) -> list[dict[str, Any]]:
    """Each case in a fresh process, so one case's peak cannot hide another's."""
    rows = []
    for pad in pads:
        command = [sys.executable, __file__, "--case", str(pad), "--target", target, "--draft", draft,
                   "--device", device, "--max-new-tokens", str(max_new), "--method", method]  # fmt: skip
        out = subprocess.run(command, check=True, capture_output=True, text=True, env={**os.environ})
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    short = rows[0]
    lines = [
        f"| prompt tokens | vocab | method | peak ({short['measure']}) MB | over the short prompt MB | "
        "median decode step ms | rounds |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        step = f"{row['median_step_ms']:.1f}" if row["median_step_ms"] is not None else ""
        lines.append(
            f"| {row['prompt_tokens']} | {row['vocab_size']} | {row['method']} | {row['peak_over_start_mb']:.0f} | "
            f"{row['peak_over_start_mb'] - short['peak_over_start_mb']:+.0f} | {step} | {row['rounds']} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--long-tokens", type=int, default=1940, help="filler tokens of the long prompt")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--method", default="sage")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--draft", help=argparse.SUPPRESS)
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)  # internal: one case, JSON on stdout
    args = parser.parse_args()
    if args.case is not None:
        print(json.dumps(run_case(args.target, args.draft, args.device, args.case, args.max_new_tokens, args.method)))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        target, draft = build_pair(Path(folder))
        rows = measure(target, draft, args.device, [0, args.long_tokens], args.max_new_tokens, args.method)
    print(report(rows))
    grew = rows[1]["peak_over_start_mb"] - rows[0]["peak_over_start_mb"]
    print(f"\npeak grew {grew:.0f} MB from {rows[0]['prompt_tokens']} to {rows[1]['prompt_tokens']} prompt tokens "
          f"(goal: within {PEAK_GOAL_MB:.0f} MB)")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0 if grew <= PEAK_GOAL_MB else 1


if __name__ == "__main__":
    sys.exit(main())
