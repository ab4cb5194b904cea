"""GPU check: the fast path's costs at real model sizes, with random weights and no downloads.

    python scripts/gpu_check.py --out gpu_check/          # one H200, meant to take under 8 minutes (not yet run)

Builds a Qwen2.5-VL-7B-shaped target and a 3B-shaped draft from the real
config class (random weights, bfloat16, on one CUDA device) and measures,
with CUDA events (median of --repeats):
- the target's verify cost against tree size (1, 8, 16, 32, 64 nodes) at 1k,
  4k and 16k tokens of context (the adapter's `extend` + `commit`, mask built
  on the device);
- the draft's cost per tree level (1, 4, 10 nodes) at the same contexts, with
  its fused forward as the "fast" backend runs it and through torch.compile as
  the "compiled" backend runs it (and the compilation's own time, once);
- plain decoding through the adapter (prefill, then one `extend`/`commit`
  per token), with the lean text forward (sage_core/lean.py) and with
  transformers' forward, against `model.generate(do_sample=False)`, 128 new
  tokens at 1k;
- the cost curve the app and the benchmark show (sage_core/costs.py): the target's verify time
  for trees of 1, 2, 4, ... 64 nodes and the draft's time per level of as many nodes, on the
  fast backend, synchronised, after warm-up, medians ("cost_curve" in results.json);
- the peak GPU memory of each phase;
- issue 9's memory case (scripts/memory_check.py): a tiny pair with Qwen's
  151,936-token vocabulary, SAGE on a short and a 1,970-token prompt, the
  allocator's peak and the median decode step of each.
Writes results.json and results.md to --out. Text-only prompts (random token
ids): the vision tower does not change what is measured here.

`--smoke` runs the same steps on tiny models, short contexts and few tokens, on
any device (the CPU without CUDA): a check that the script runs end to end
(tests/test_benchmark_script.py runs it), whose figures mean nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import runpy
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent

from sage_core.backends import open_backend  # noqa: E402
from sage_core.costs import CostCurve, curve_on_prefilled  # noqa: E402
from sage_core.models import VLM, KVState  # noqa: E402

VISION = {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16}
SHAPES: dict[str, dict[str, Any]] = {
    "qwen2.5-vl-7b": {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
                      "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064},
    "qwen2.5-vl-3b": {"hidden_size": 2048, "num_hidden_layers": 36, "num_attention_heads": 16,
                      "num_key_value_heads": 2, "intermediate_size": 11008, "vocab_size": 151936,
                      "tie_word_embeddings": True},
}  # fmt: skip
CONTEXTS = (1024, 4096, 16384)
SMOKE_SIZES = {"tiny-target": "small", "tiny-draft": "smaller"}  # --smoke: the tests' tiny configs
SMOKE_CONTEXTS = (64, 160)
TREE_SIZES = (1, 8, 16, 32, 64)
LEVEL_WIDTHS = (1, 4, 10)


def build(shape: str, device: torch.device) -> VLM:
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    if shape in SMOKE_SIZES:  # --smoke: the tests' tiny Qwen2.5-VL config
        from sage_core.tiny_models import build_config

        config: Any = build_config("qwen2_5_vl", SMOKE_SIZES[shape])
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    else:
        text = {**SHAPES[shape], "max_position_embeddings": 32768, "rope_theta": 1000000.0}
        config = Qwen2_5_VLConfig(text_config=text, vision_config={**VISION, "out_hidden_size": text["hidden_size"]})
        dtype = torch.bfloat16
    with torch.device(device):
        model = Qwen2_5_VLForConditionalGeneration._from_config(config, dtype=dtype)
    model.eval()
    return VLM(shape, model, None, device)


def timed(fn: Callable[[], Any], repeats: int) -> float:
    """Median milliseconds of `fn` over `repeats` runs (CUDA events; the clock on a CPU), after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        if not torch.cuda.is_available():
            start_s = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start_s) * 1000)
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def prompt(length: int, vocab: int, device: torch.device) -> dict[str, torch.Tensor]:
    low, high = min(100, vocab // 4), vocab - min(1000, vocab // 4)
    ids = torch.randint(low, high, (1, length), generator=torch.Generator().manual_seed(length)).to(device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def token_base(vlm: VLM) -> int:
    """Where the made-up tree tokens start: inside any vocabulary."""
    return min(1000, vlm.vocab_size // 2)


def tree_parents(size: int) -> list[int]:
    """A bushy tree of `size` nodes under the root (entry 0): node i's parent is (i - 1) // 4."""
    return [-1] + [(i - 1) // 4 for i in range(1, size + 1)]


def verify_cost(vlm: VLM, state: KVState, size: int, repeats: int) -> float:
    parents = tree_parents(size)
    depth: list[int] = []
    for parent in parents:
        depth.append(0 if parent < 0 else depth[parent] + 1)
    tokens = [token_base(vlm) + i for i in range(size + 1)]
    positions = [state.committed + d for d in depth]

    def once() -> None:
        logits = vlm.extend(state, tokens, positions, parents=parents)
        logits.argmax(dim=-1).tolist()
        vlm.commit(state, [])

    return timed(once, repeats)


def level_cost(vlm: VLM, state: KVState, width: int, repeats: int, compiled: bool = False) -> float:
    """A draft level as the decode loop runs it: the lean forward's fused variant (lean.py),
    through torch.compile when `compiled` (the "compiled" backend)."""

    def once() -> None:
        tokens, positions = [token_base(vlm)] * width, [state.committed] * width
        logits = vlm.extend(state, tokens, positions, parents=[-1] * width, fused=True, compiled=compiled)
        logits.float().softmax(-1).topk(10).values.tolist()
        vlm.commit(state, [])

    return timed(once, repeats)


def plain_decoding(vlm: VLM, inputs: dict[str, torch.Tensor], new_tokens: int, lean: bool = True) -> float:
    def ours() -> None:
        state, logits = vlm.prefill(inputs, reserve=new_tokens + 8)
        token = int(logits.argmax())
        for _ in range(new_tokens - 1):
            token = int(vlm.extend(state, [token], [state.committed], parents=[-1], lean=lean)[0].argmax())
            vlm.commit(state, [0])

    return timed(ours, 3)


def generate_decoding(vlm: VLM, inputs: dict[str, torch.Tensor], new_tokens: int) -> float:
    def theirs() -> None:
        with torch.inference_mode():
            vlm.model.generate(**inputs, do_sample=False, max_new_tokens=new_tokens, min_new_tokens=new_tokens)

    return timed(theirs, 3)


def cost_curve(target: VLM, draft: VLM, context: int, device: torch.device, repeats: int) -> dict[str, Any]:
    """sage_core.costs' curve on the fast backend after a text prompt of `context` tokens."""
    target_state, logits = target.prefill(prompt(context, target.vocab_size, device), reserve=256)
    fast_draft = open_backend(draft, "fast", draft=True)
    draft_state, _ = fast_draft.prefill(prompt(context, draft.vocab_size, device), reserve=256)
    dtype = str(target.dtype).removeprefix("torch.")
    curve = curve_on_prefilled(target, target_state, fast_draft, draft_state, root=int(logits.argmax()),
                               vocab=min(target.vocab_size, draft.vocab_size), device=device, dtype=dtype,
                               backend="fast", repeats=repeats)  # fmt: skip
    return dataclasses.asdict(curve)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_check")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--smoke", action="store_true", help="tiny models, any device: does the script run?")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        print("error: needs a CUDA GPU (--smoke runs the steps on tiny models, on the CPU too)", file=sys.stderr)
        return 2
    device = torch.device("cuda" if cuda else "cpu")
    shapes = tuple(SMOKE_SIZES) if args.smoke else ("qwen2.5-vl-7b", "qwen2.5-vl-3b")
    contexts = SMOKE_CONTEXTS if args.smoke else CONTEXTS
    tree_sizes, widths = (TREE_SIZES[:2], LEVEL_WIDTHS[:2]) if args.smoke else (TREE_SIZES, LEVEL_WIDTHS)
    new_tokens = min(args.new_tokens, 8) if args.smoke else args.new_tokens
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    results: dict[str, Any] = {"device": name, "dtype": "bfloat16" if cuda else "float32", "smoke": args.smoke,
                               "rows": []}  # fmt: skip

    def record(**row: Any) -> None:
        row["peak_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if cuda else None
        results["rows"].append(row)
        print(json.dumps(row), flush=True)

    def reset_peak() -> None:
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)

    target, draft = build(shapes[0], device), build(shapes[1], device)
    compiled = draft.lean is not None and draft.lean.compilable
    for context in contexts:
        for vlm, sizes, cost in ((target, tree_sizes, verify_cost), (draft, widths, level_cost)):
            reset_peak()
            state, _ = vlm.prefill(prompt(context, vlm.vocab_size, device), reserve=256)
            for size in sizes:
                ms = cost(vlm, state, size, args.repeats)
                kind = "verify" if vlm is target else "draft_level"
                record(model=vlm.name, kind=kind, context=context, nodes=size, ms=round(ms, 3))
                if vlm is draft and compiled:
                    if "draft_compile_s" not in results:  # the first compiled forward compiles
                        first = time.perf_counter()
                        level_cost(vlm, state, size, 1, compiled=True)
                        results["draft_compile_s"] = round(time.perf_counter() - first, 1)
                    ms = level_cost(vlm, state, size, args.repeats, compiled=True)
                    record(model=vlm.name, kind="draft_level_compiled", context=context, nodes=size, ms=round(ms, 3))
            del state
            if cuda:
                torch.cuda.empty_cache()
    results["cost_curve"] = cost_curve(target, draft, contexts[0], device, args.repeats)
    print("\n".join(CostCurve(**results["cost_curve"]).lines()), flush=True)
    inputs = prompt(contexts[0], target.vocab_size, device)
    reset_peak()
    ours = plain_decoding(target, inputs, new_tokens)
    record(model=target.name, kind="plain_ours", context=contexts[0], nodes=1, ms=round(ours, 1))
    ours_hf = plain_decoding(target, inputs, new_tokens, lean=False)
    record(
        model=target.name, kind="plain_ours_transformers_forward", context=contexts[0], nodes=1, ms=round(ours_hf, 1)
    )
    theirs = generate_decoding(target, inputs, new_tokens)
    record(model=target.name, kind="plain_generate", context=contexts[0], nodes=1, ms=round(theirs, 1))
    # Issue 9's memory case (scripts/memory_check.py): Qwen's vocabulary, 34 vs 1,970 prompt tokens.
    memory = runpy.run_path(str(ROOT / "scripts" / "memory_check.py"), run_name="memory_check")
    pads, max_new = ([0, 40], 4) if args.smoke else ([0, 1940], 32)
    with tempfile.TemporaryDirectory() as folder:
        small_target, small_draft = memory["build_pair"](Path(folder))
        results["memory_check"] = memory["measure"](small_target, small_draft, device.type, pads, max_new, "sage")
    print(memory["report"](results["memory_check"]), flush=True)
    results["seconds"] = round(time.perf_counter() - started, 1)
    (out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    lines = ["| model | kind | context | nodes | ms | peak GiB |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['model']} | {r['kind']} | {r['context']} | {r['nodes']} | {r['ms']} | {r['peak_gib']} |"
              for r in results["rows"]]  # fmt: skip
    if "draft_compile_s" in results:
        lines += ["", f"The draft's first compiled forward (compilation included): {results['draft_compile_s']} s"]
    lines += [
        "",
        "Peak memory against prompt length (scripts/memory_check.py):",
        "",
        memory["report"](results["memory_check"]),
    ]
    lines += ["", "Cost curve (sage_core/costs.py, fast backend):", "", *CostCurve(**results["cost_curve"]).lines()]
    (out / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"done in {results['seconds']} s; wrote {out}/results.json and results.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
