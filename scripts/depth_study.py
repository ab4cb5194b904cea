"""Which signal should set the depth: an equal-budget study of depth rules, on a one-pass and a sequential draft.

    PYTHONPATH=. python scripts/depth_study.py                      # the built-in pair: sure draft and one-pass draft
    PYTHONPATH=. python scripts/depth_study.py --n 40 --budgets 2,3,4,6 --markdown docs/depth-study.md
    PYTHONPATH=. python scripts/depth_study.py --drafts assets/builtin/hesitant-draft,assets/builtin/one-pass-draft

For fresh prompts of each kind (describe, chart, narrate, rows; seeds never used in training) the target's
greedy answer is decoded once; then each draft's top-k at depths 1 .. K is recorded at every round start
(sage_core/studies/depth_rules.py: a one-pass draft's block, a sequential draft teacher-forced). Chains are
simulated under each depth rule (fixed depth, SAGE's root entropy, entropy per depth, the top-1/top-2 margin,
the product of top-1 probabilities, and the cost curve's best depth), each rule's knob swept, and the rules are
read at the same mean node count a round (`--budgets`): τ (accepted draft tokens a round), its gain over the
fixed depth with a 95 % bootstrap interval over answers, and the speedup the pair's cost curve models
(measured here first, or assets/builtin/cost_curve.json with --recorded-costs; a model of the time, not a
measurement of it: scripts/benchmark.py measures). Per kind and pooled. Then, per draft, how often depth d's
top token is the target's (marginal) and how often a chain accepts at least d tokens, on the same fresh
scenes, on hand-drawn ones and on questions in held-out wordings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # threads that wait do not spin on a shared CPU


from sage_core import load_pair
from sage_core.cost_curve import CostCurve
from sage_core.models.loading import BUILTIN_ONE_PASS_DRAFT
from sage_core.studies.costs import measure_costs
from sage_core.studies.depth_rules import RULES, Answer, Comparison, Costs, compare, draft_signals, reach, target_answer
from sage_core.threads import choose_threads
from sage_core.trace_check import recorded_cost_curve
from sage_world.quality import example_media
from sage_world.scenes import HAND_DRAWN, LONG_KINDS, ROW_KIND, make_examples
from sage_world.wording import held_out_examples

ROOT = Path(__file__).resolve().parent.parent
KINDS = (*LONG_KINDS, ROW_KIND)
SHOWN_DEPTHS = 10


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="builtin")
    parser.add_argument("--drafts", default=f"builtin,{BUILTIN_ONE_PASS_DRAFT}", help="drafts to study, by comma")
    parser.add_argument("--n", type=int, default=24, help="fresh prompts per kind")
    parser.add_argument("--held-out", type=int, default=24, help="hand-drawn scenes and held-out wordings, each")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--seed", type=int, default=424242)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--depths", type=int, default=16, help="the deepest chain (a one-pass draft: its block)")
    parser.add_argument("--budgets", default="2,3,4,6", help="mean nodes a round to compare the rules at")
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--threads", type=int, help="CPU threads (default: chosen for the pair: sage_core.threads)")
    parser.add_argument(
        "--recorded-costs", action="store_true", help="the pair's recorded cost curve, not one measured here"
    )
    parser.add_argument("--markdown", help="write the tables here")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    kinds = tuple(args.kinds.split(","))
    if not set(kinds) <= set(KINDS):
        parser.error(f"--kinds: choose from {', '.join(KINDS)}")
    if args.n < 2 or args.held_out < 0 or args.depths < 1:
        parser.error("--n must be at least 2, --held-out at least 0 and --depths at least 1")
    try:
        args.budget_list = [float(b) for b in args.budgets.split(",")]
    except ValueError:
        parser.error(f"--budgets takes numbers, e.g. 2,3,4,6, not {args.budgets!r}")
    args.kind_list = kinds
    return args


def prompts(args: argparse.Namespace) -> dict[str, list]:
    """The study's prompts per group: each kind's fresh scenes; the held-out ones apart (acceptance only)."""
    fresh = make_examples(args.seed, args.n * len(args.kind_list), kinds=args.kind_list)
    groups: dict[str, list] = {kind: [e for e in fresh if e.kind == kind] for kind in args.kind_list}
    if args.held_out:
        groups["hand-drawn (held out)"] = make_examples(
            args.seed + 1, args.held_out, kinds=("describe",), style=HAND_DRAWN
        )
        groups["held-out wordings"] = held_out_examples(args.seed + 2, args.held_out)
    return groups


def recorded_curve(path: Path) -> CostCurve:
    """A cost curve saved as JSON (its fields as `CostCurve`'s; lists read as tuples)."""
    curve = recorded_cost_curve(json.loads(path.read_text(encoding="utf-8")))
    if curve is None:
        raise SystemExit(f"{path} is not a cost curve")
    return curve


def rule_table(comparisons: list[Comparison]) -> list[str]:
    rules = [*RULES, "cost"]
    head = "| group | answers | nodes/round | " + " | ".join(f"τ {r}" for r in rules) + " |"
    lines = [head, "|" + "---|" * (3 + len(rules))]
    for c in comparisons:
        cells = []
        for r in rules:
            if r not in c.tau:
                cells.append("—")
                continue
            gain = c.gain.get(r)
            shown = f"{c.tau[r]:.2f}"
            if gain is not None and r != "fixed":
                shown += f" ({gain[0]:+.2f} [{gain[1]:+.2f}, {gain[2]:+.2f}])"
            shown += f" · {c.speedup[r]:.2f}×"
            cells.append(shown)
        lines.append(f"| {c.group} | {c.answers} | {c.budget:g} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    started = time.perf_counter()
    drafts = args.drafts.split(",")
    pairs = {draft: load_pair(args.target, draft, "cpu", "float32") for draft in drafts}
    first = pairs[drafts[0]]
    print(f"threads: {choose_threads(first, args.threads).describe()}", file=sys.stderr)
    groups = prompts(args)
    answers: dict[str, dict[str, list[Answer]]] = {d: {} for d in drafts}
    for group, examples in groups.items():
        for example in examples:
            media = example_media(example)
            tokens = target_answer(first, media, example.question, args.max_new_tokens)
            for draft, pair in pairs.items():
                rounds = draft_signals(pair, media, example.question, tokens, args.depths)
                answers[draft].setdefault(group, []).append(Answer(group, tokens, rounds))
    if args.recorded_costs:
        curve = recorded_curve(ROOT / "assets" / "builtin" / "cost_curve.json")
    else:
        example = groups[args.kind_list[0]][0]
        curve = measure_costs(first, example_media(example), example.question, "fast")
    given = sys.argv[1:] if argv is None else argv
    out: dict = {"seed": args.seed, "n": args.n, "budgets": args.budget_list, "drafts": {}}
    text = [
        f"# Which signal sets the depth (`PYTHONPATH=. python scripts/depth_study.py {' '.join(given)}`)",
        "",
        f"{sum(len(v) for v in groups.values())} answers (seed {args.seed}), {time.perf_counter() - started:.0f} s "
        f"to record; cost curve: {curve.label()}, one-token step {curve.one_token_ms:.2f} ms.",
    ]
    for draft, pair in pairs.items():
        block = pair.draft.one_pass.block_size if pair.draft.one_pass is not None else 0
        costs = Costs(curve, block)
        studied = {g: a for g, a in answers[draft].items() if g in args.kind_list}
        every = [a for g in args.kind_list for a in studied[g]]
        comparisons = [
            c
            for budget in args.budget_list
            for group, chosen in [*studied.items(), ("pooled", every)]
            if (c := compare(chosen, costs, budget, group, args.resamples)) is not None
        ]
        kind = f"one-pass, block {block}" if block else "sequential (teacher-forced signals)"
        text += ["", f"## {draft} ({kind})", "", *rule_table(comparisons), ""]
        text.append("Acceptance per depth d (d = 1 ..): top-1 right at d / a chain accepts at least d")
        reaches = {}
        for group, chosen in answers[draft].items():
            right, chain = reach(chosen, SHOWN_DEPTHS)
            reaches[group] = {"right": right, "chain": chain}
            text.append(
                f"- {group}: "
                + " ".join(f"{r:.2f}/{c:.2f}" for r, c in zip(right, chain, strict=True) if r == r)  # r == r: not NaN
            )
        out["drafts"][draft] = {"block": block, "comparisons": [asdict(c) for c in comparisons], "reach": reaches}
    report = "\n".join(text)
    print(report)
    if args.markdown:
        Path(args.markdown).write_text(report + "\n", encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out


if __name__ == "__main__":
    main()
