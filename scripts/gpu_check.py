"""GPU check: what SAGE's fast path costs at real model sizes, and what that predicts, in one fail-safe command.

    PYTHONPATH=. python scripts/gpu_check.py --out gpu_check                 # one GPU; --budget-seconds 480 by default
    PYTHONPATH=. python scripts/gpu_check.py --smoke --out /tmp/smoke        # every section on tiny models, any device

Runs from a plain checkout (it puts the repository on the import path itself; nothing to install)
with random weights and no downloads. The sections run in order of value, each one's figures
written to DIR as soon as it ends (results.jsonl: one JSON object a line; results.md: a table per
section, growing), so a later failure or a kill loses nothing already measured:

- smoke: first, on a GPU, every section below on tiny models (smoke.jsonl / smoke.md); if it
  fails the run stops there, before the real sizes cost minutes;
- versions: Python, torch, transformers, the device;
- verify: a 7B-shaped target's verify cost against tree size at 1k, 4k and 16k tokens of
  context, bushy trees of 1-64 nodes and the chain, the 25-node static tree and a SAGE-shaped
  tree (depth 8, 11 nodes); its one-token step; the weights' memory;
- verify_72b: the same for a 72B-shaped target (it does not fit one GPU: timed with 4 and with 8
  of its 80 layers, extrapolated linearly in the layer count), the paper's target size;
- draft: 0.5B- and 3B-shaped drafts' cost per level (1-64 nodes, the fast backend's fused
  forward) at the same contexts, and the first one's compiled forward (and its compile time);
- tau: the built-in pair's τ and tree shapes for every drafting method on fresh long answers
  (each run checked against plain decoding);
- predict: a predicted decode-only speedup per method for each target/draft shape and context
  (7B with 0.5B and 3B drafts; 72B with the 7B as draft, its verify curve as the draft's cost),
  from the measured costs and τ from the built-in pair (this run) and the paper's tables
  (labelled), with the draft's milliseconds per committed token (sage_core/studies/predict.py);
- bf16: losslessness in bfloat16 at real width (hidden 3,584) with a copy-of-target and a noised
  draft: every method against `generate(do_sample=False)`, identical or the first divergence and
  the target's logit margin there;
- plain: plain decoding through the library (lean and transformers' forward) against `generate()`;
- race: the built-in pair's race (every method, eager and compiled backends), tokens/s and × plain;
- budget_sweep: the node-budget sweep and sage-cost's choices, where this checkout has them;
- memory: issue 9's memory case (scripts/memory_check.py, in its own processes).

`--budget-seconds` (default 480): a section whose estimate does not fit in what is left is
skipped, and the results say so; sections that loop over contexts or shapes stop early the same
way. The exit status is 1 if any section failed (its error is in errors.log), else 0.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A plain checkout, no install needed: run from any folder (`python scripts/gpu_check.py`), it puts the repository
# on the import path itself (from the repository, `PYTHONPATH=. python scripts/gpu_check.py` has it there already).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from scripts import gpu_figures as figures

DEFAULT_BUDGET_S = 480.0


class Results:
    """Where figures go as they come: one JSON line per row and per section end, and a markdown table per section."""

    def __init__(self, out: Path, stem: str) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.jsonl, self.markdown, self.errors = out / f"{stem}.jsonl", out / f"{stem}.md", out / "errors.log"
        self.jsonl.write_text("", encoding="utf-8")
        self.markdown.write_text(f"# scripts/gpu_check.py ({stem})\n", encoding="utf-8")
        self.rows: list[dict[str, Any]] = []

    def row(self, section: str, **fields: Any) -> None:
        row = {"section": section, **fields}
        self.rows.append(row)
        with self.jsonl.open("a", encoding="utf-8") as file:
            file.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)

    def end(self, section: str, status: str, seconds: float, note: str = "") -> None:
        """The section's end (ran, skipped, failed) as a JSON line, and its table in the markdown."""
        end = {"section": section, "status": status, "seconds": round(seconds, 1), "note": note}
        with self.jsonl.open("a", encoding="utf-8") as file:
            file.write(json.dumps({"end": end}) + "\n")
        print(f"== {section}: {status} in {seconds:.1f} s {note}", flush=True)
        rows = [r for r in self.rows if r["section"] == section]
        lines = ["", f"## {section}: {status} ({seconds:.1f} s){' — ' + note if note else ''}", ""]
        if rows:
            columns = list(dict.fromkeys(k for r in rows for k in r if k != "section"))
            lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            lines += ["| " + " | ".join(_cell(r.get(c)) for c in columns) + " |" for r in rows]
        with self.markdown.open("a", encoding="utf-8") as file:
            file.write("\n".join(lines) + "\n")

    def error(self, section: str, text: str) -> None:
        with self.errors.open("a", encoding="utf-8") as file:
            file.write(f"--- {section}\n{text}\n")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "/")


@dataclass
class Budget:
    """Seconds the run may take from `started`; sections ask what is left."""

    seconds: float
    started: float = field(default_factory=time.perf_counter)

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.started)


def run_sections(
    names: list[str], context: figures.Context, results: Results, budget: Budget, fail_in: str | None = None
) -> list[str]:
    """Each section in turn, its figures written as it goes; returns the names of those that failed."""
    failed = []
    for name in names:
        section = figures.SECTIONS[name]
        estimate = section.estimate_s(context)
        if estimate > budget.left():
            note = f"skipped: needs about {estimate:.0f} s, {max(budget.left(), 0):.0f} s left of the budget"
            results.end(name, "skipped", 0.0, note)
            continue
        started = time.perf_counter()
        try:
            if name == fail_in:
                raise RuntimeError(f"failure injected in {name} (--fail-in)")
            note = section.run(context, functools.partial(results.row, name), budget.left) or ""
            results.end(name, "ran", time.perf_counter() - started, note)
        except Exception as error:  # one section's failure must not cost the others' figures
            results.error(name, traceback.format_exc())
            last = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
            results.end(name, "failed", time.perf_counter() - started, f"{type(error).__name__}: {last[:300]}")
            failed.append(name)
        finally:
            context.release()
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", default="gpu_check")
    parser.add_argument("--budget-seconds", type=float, default=DEFAULT_BUDGET_S)
    parser.add_argument("--repeats", type=int, default=10, help="timed runs per figure (the median is kept)")
    parser.add_argument("--smoke", action="store_true", help="every section on tiny models, any device")
    parser.add_argument("--sections", default=",".join(figures.SECTIONS), help="which sections, in this order")
    parser.add_argument("--fail-in", help="raise in this section (a test that the others' figures survive)")
    args = parser.parse_args(argv)
    names = [n for n in args.sections.split(",") if n]
    unknown = [n for n in names if n not in figures.SECTIONS]
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {list(figures.SECTIONS)}")
    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        print("error: needs a CUDA GPU (--smoke runs every section on tiny models, on the CPU too)", file=sys.stderr)
        return 2
    out, budget = Path(args.out), Budget(args.budget_seconds)
    device = torch.device("cuda" if cuda else "cpu")
    if not args.smoke:  # a cheap pass over every section first: a broken step costs seconds, not the budget
        smoke = figures.Context(device, smoke=True, repeats=2, compile=False)
        failed = run_sections([n for n in names if n != "memory"], smoke, Results(out, "smoke"), budget, args.fail_in)
        if failed:
            print(f"the smoke pass failed in {failed} (see {out}/errors.log); the real sizes were not run", flush=True)
            return 1
    context = figures.Context(device, smoke=args.smoke, repeats=max(1, args.repeats), compile=True)
    results = Results(out, "results")
    failed = run_sections(names, context, results, budget, args.fail_in)
    spent = time.perf_counter() - budget.started
    print(f"done in {spent:.0f} s; figures in {results.jsonl} and {results.markdown}; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
