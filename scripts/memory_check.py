"""Peak memory and decode-step time against prompt length, with each family's real vocabulary.

    PYTHONPATH=. python scripts/memory_check.py                  # CPU: peak RSS, in a fresh process per case
    PYTHONPATH=. python scripts/memory_check.py --device cuda    # CUDA: torch.cuda.max_memory_allocated
    PYTHONPATH=. python scripts/memory_check.py --family gemma3  # one family of a new kind (or --family all)

(From the checkout: the tiny models come from the test support, sage_testkit/, which is not installed.)

Issue 9's case: with a model of Qwen's vocabulary (151,936 rows) and a 1,970-token prompt,
one SAGE run once peaked 2.2 GB above the same run on a 34-token prompt (the prefill computed
every position's logits). Here a tiny pair of the family (sage_testkit/tiny_models.py) padded to
its real vocabulary decodes a short and a long prompt (text padding up to --long-tokens) with
SAGE (the chain for a family that refuses trees); each case runs in its own process after a
warm-up, the peak is measured around the run only (on the CPU: VmHWM reset through
/proc/self/clear_refs, read from /proc/self/status; on CUDA: the allocator's peak). Goal: the
long prompt's peak within 600 MB of the short one's, and a decode step that costs the same at
both lengths (within noise; medians of the rounds). The families (`FAMILY_VOCABS`): Qwen2.5-VL
(the first case), and one of each new kind: sliding windows (Gemma 3, 262,208 rows), hybrid
linear attention (Qwen3.5, 248,320) and mixture of experts (Qwen3-VL-MoE, 151,936); and Gemma 4
(262,144), whose pruning scores (`--prune-ratio`) carry the text after the image through its shared-KV
layers (a long question once made a (question, vocabulary) logits matrix there).

The peak includes the caches' own growth (the KV rows of the longer prompt, counted separately
in the `cache_mb` column: every distinct buffer the two caches hold after a prefill of that
prompt); the goal is on the whole peak, so it holds the cache and everything else together.
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
# The published vocabularies (embedding and lm_head rows; transformers' config defaults, which
# follow google/gemma-3-4b-it, Qwen/Qwen3.5-27B and Qwen/Qwen3-VL-30B-A3B-Instruct)
FAMILY_VOCABS = {"qwen2_5_vl": QWEN_VOCAB, "gemma3": 262_208, "qwen3_5": 248_320, "qwen3_vl_moe": 151_936}
OTHER_VOCABS = {"gemma4": 262_144}  # google/gemma-4-e2b-it: its shared-KV layers' pruning scores (--prune-ratio)
PEAK_GOAL_MB = 600.0
FILLER = "the quick brown fox jumps over the lazy dog. "


def build_pair(folder: Path, family: str = "qwen2_5_vl", vocab: int | None = None) -> tuple[str, str]:
    """A tiny target and draft of `family` whose embeddings and lm_heads have `vocab` rows (default:
    the family's published vocabulary, `FAMILY_VOCABS`)."""
    from sage_testkit.tiny_models import build_config, build_tiny_vlm

    padding = (vocab or {**FAMILY_VOCABS, **OTHER_VOCABS}[family]) - build_config(family).get_text_config().vocab_size
    target = build_tiny_vlm(family, folder / f"{family}-target", seed=0, size="small", vocab_padding=padding)
    draft = build_tiny_vlm(family, folder / f"{family}-draft", seed=0, size="small", vocab_padding=padding)
    return str(target), str(draft)


def runnable_method(pair: Any, method: str) -> str:
    """`method`, or the chain where the pair refuses it (a family whose layers cannot verify a tree)."""
    from sage_core.errors import InputError
    from sage_core.models.pair import check_method

    try:
        check_method(pair, method)
    except InputError:
        return "chain"
    return method


def cache_mb(cache: Any) -> float:
    """Every distinct buffer a cache holds (keys, values, recurrent states, spare rows), in MB."""
    import torch

    storages: dict[int, int] = {}
    for layer in cache.layers:
        for value in vars(layer).values():
            tensors = value if isinstance(value, (list, tuple)) else (value,)
            for tensor in tensors:
                if isinstance(tensor, torch.Tensor):
                    storage = tensor.untyped_storage()
                    storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values()) / 2**20


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


def run_case(
    target: str, draft: str, device: str, pad: int, max_new: int, method: str, prune_ratio: float = 0.0
) -> dict[str, Any]:
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
    method = runnable_method(pair, method)
    config = DecodeConfig(method, max_new, prune_ratio=prune_ratio)
    decode(pair, image, "Describe the picture.", DecodeConfig(method, 4)).run_to_end()
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
    prompt_tokens = run.header.prompt_tokens
    del run
    # the caches' size at this prompt (after the peak was read): one more prefill of each model
    inputs = pair.target.prepare(image, prompt)
    cache = cache_mb(pair.target.prefill(inputs, config.max_new_tokens)[0].cache)
    cache += cache_mb(pair.draft.prefill(inputs, config.max_new_tokens)[0].cache)
    return {
        "family": pair.target.family,
        "pad_tokens": pad,
        "prompt_tokens": prompt_tokens,
        "vocab_size": pair.target.vocab_size,
        "method": method + (f"+prune{prune_ratio:g}" if prune_ratio else ""),
        "new_tokens": len(summary.token_ids),
        "peak_mb": peak / 2**20,
        "peak_over_start_mb": (peak - before) / 2**20,
        "cache_mb": cache,
        "median_step_ms": 1000 * statistics.median(steps) if steps else None,
        "rounds": len(steps),
        "measure": "cuda max_memory_allocated" if cuda else "peak RSS (VmHWM)",
    }


def measure(
    target: str, draft: str, device: str, pads: list[int], max_new: int, method: str, prune_ratio: float = 0.0
) -> list[dict[str, Any]]:
    """Each case in a fresh process, so one case's peak cannot hide another's."""
    rows = []
    for pad in pads:
        command = [
            sys.executable,
            __file__,
            "--case",
            str(pad),
            "--target",
            target,
            "--draft",
            draft,
            "--device",
            device,
            "--max-new-tokens",
            str(max_new),
            "--method",
            method,
            "--prune-ratio",
            str(prune_ratio),
        ]
        # the checkout's sage_core, whatever an installed one points at
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        out = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def repeated(
    target: str, draft: str, device: str, pads: list[int], max_new: int, method: str, repeats: int, prune_ratio: float
) -> list[dict[str, Any]]:
    """`measure` `repeats` times, the lengths interleaved (a loaded machine slows both alike); per length
    the highest peak and the median of the runs' median decode steps."""
    runs = [measure(target, draft, device, pads, max_new, method, prune_ratio) for _ in range(repeats)]
    rows = []
    for cases in zip(*runs, strict=True):
        steps = [c["median_step_ms"] for c in cases if c["median_step_ms"] is not None]
        worst = max(cases, key=lambda c: c["peak_over_start_mb"])
        rows.append({**worst, "median_step_ms": statistics.median(steps) if steps else None, "repeats": repeats})
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    """A table of the cases; each row compared with the first (shortest) case of its family."""
    first = rows[0]
    lines = [
        f"| family | prompt tokens | vocab | method | peak ({first['measure']}) MB | over the short prompt MB | "
        "caches MB | median decode step ms | rounds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    shortest: dict[str, dict[str, Any]] = {}
    for row in rows:
        family = row.get("family", "qwen2_5_vl")
        short = shortest.setdefault(family, row)
        step = f"{row['median_step_ms']:.1f}" if row["median_step_ms"] is not None else ""
        cache = f"{row['cache_mb']:.1f}" if "cache_mb" in row else ""
        lines.append(
            f"| {family} | {row['prompt_tokens']} | {row['vocab_size']} | {row['method']} | "
            f"{row['peak_over_start_mb']:.0f} | {row['peak_over_start_mb'] - short['peak_over_start_mb']:+.0f} | "
            f"{cache} | {step} | {row['rounds']} |"
        )
    return "\n".join(lines)


def growth(rows: list[dict[str, Any]]) -> float:
    """How much more the long prompt's run peaked than the short one's (MB; rows: short, long)."""
    return float(rows[1]["peak_over_start_mb"] - rows[0]["peak_over_start_mb"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--family",
        default="qwen2_5_vl",
        choices=[*FAMILY_VOCABS, *OTHER_VOCABS, "all"],
        help="the pair's family (its published vocabulary); all: each in turn",
    )
    parser.add_argument("--long-tokens", type=int, default=1940, help="filler tokens of the long prompt")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--method", default="sage")
    parser.add_argument("--prune-ratio", type=float, default=0.0, help="the draft's visual token pruning")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each case (fresh processes, interleaved)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--draft", help=argparse.SUPPRESS)
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)  # internal: one case, JSON on stdout
    args = parser.parse_args()
    if args.case is not None:
        case = (args.target, args.draft, args.device, args.case, args.max_new_tokens, args.method, args.prune_ratio)
        print(json.dumps(run_case(*case)))
        return 0
    families = list(FAMILY_VOCABS) if args.family == "all" else [args.family]
    rows: list[dict[str, Any]] = []
    failed = []
    for family in families:
        with tempfile.TemporaryDirectory() as folder:
            target, draft = build_pair(Path(folder), family)
            pads = [0, args.long_tokens]
            settings = (args.max_new_tokens, args.method, max(1, args.repeats), args.prune_ratio)
            pair_rows = repeated(target, draft, args.device, pads, *settings)
        rows += pair_rows
        if growth(pair_rows) > PEAK_GOAL_MB:
            failed.append(family)
    print(report(rows))
    for short, long in zip(rows[::2], rows[1::2], strict=True):
        steps = (short["median_step_ms"], long["median_step_ms"])
        ratio = f"; decode step {steps[1] / steps[0]:.2f}x the short prompt's" if all(steps) else ""
        print(
            f"{short['family']}: peak grew {long['peak_over_start_mb'] - short['peak_over_start_mb']:.0f} MB "
            f"from {short['prompt_tokens']} to {long['prompt_tokens']} prompt tokens "
            f"(goal: within {PEAK_GOAL_MB:.0f} MB){ratio}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
