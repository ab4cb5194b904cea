"""The paper's comparison on a model pair: τ for every drafting method on fresh long answers.

    python scripts/tau_study.py                  # the built-in pair, 120 fresh long-answer prompts
    python scripts/tau_study.py --n 300 --json tau.json
    python scripts/tau_study.py --draft assets/builtin/hesitant-draft   # another draft
    python scripts/tau_study.py --shipped     # the shipped long examples (assets/examples) instead
    python scripts/tau_study.py --kinds describe,chart,narrate,row   # with run 8's rows to read

For each prompt (fresh scenes from a seed never used in training: detailed image descriptions,
chart descriptions and narrated videos, in turn) every method decodes greedily to the end.
Every drafting method of the registry runs (SD-Chain, SD-Tree, SAGE, EAGLE-2's dynamic tree and the ablation
lanes sage-frozen and best-first; --methods takes any registry names). Per method it prints, with 95% intervals
over prompts (mean ± 1.96·sd/√n of the per-prompt means): τ (the paper's accepted draft tokens per round, bonus
excluded), tokens per target forward (τ + 1 on full rounds) and the tree nodes each round verifies; then each
method's Δτ against SAGE, paired per prompt, with its interval; each method's acceptance histogram (how often
0, 1, 2, … draft tokens were accepted); and the calibration picture (sage_core/studies/premise.py): corr(α, accepted
length) pooled over the rounds of a lane whose trees α does not choose (the chain when it runs) and over
SAGE's, α binned against the mean accepted length with counts, SAGE's mean α (sage-frozen's default holds the
built-in pair's), and the lag-1 autocorrelation of the draft's entropy token by token along the answers and
round by round. It also prints the
spread of the draft's entropy within each SAGE answer (max − min over its rounds, nats) and
checks that every method's tokens equal plain decoding's (lossless). And the paper's premise
on SAGE's own rounds (sage_core/studies/premise.py), per kind and over all kinds: the correlation of α with the
accepted length and the lag-1 autocorrelation of the round entropy, each per answer (mean, 95% interval),
centred per answer, and pooled (labelled: the gaps between answers inflate it); and SAGE's planned
root width W(α) over all its rounds (median).

These are counts, not times: see scripts/benchmark.py for speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # threads that wait do not spin on a shared CPU

import torch

from sage_core import DecodeConfig, decode, load_media, load_pair
from sage_core.method_settings import FrozenSageConfig
from sage_core.methods import drafting_methods, method_spec, short_name
from sage_core.studies.premise import acceptance_histogram, across_answers, calibration_of, lag_pairs, round_alpha
from sage_core.studies.stats import interval
from sage_world.quality import example_media
from sage_world.scenes import LONG_KINDS, ROW_KIND, make_examples

ROOT = Path(__file__).resolve().parent.parent


def premise_lines(answers: list[tuple[str, list]]) -> dict:
    """The paper's premise on SAGE's own rounds, per kind then over all kinds, three ways each
    (sage_core.studies.premise.AcrossAnswers: per answer with its interval, centred, pooled labelled so):
    corr(α, accepted length) and the lag-1 autocorrelation of the round entropy. `answers`: (kind, the SAGE
    answer's decode rounds with α and entropy)."""
    out: dict = {}
    kinds = list(dict.fromkeys(kind for kind, _ in answers))
    for kind in [*kinds, "all kinds"] if len(kinds) > 1 else kinds:
        chosen = [rounds for k, rounds in answers if kind in (k, "all kinds")]
        accept = across_answers([([r.alpha for r in rs], [float(r.accepted_length) for r in rs]) for rs in chosen])
        lag = across_answers(lag_pairs([[r.entropy for r in rs] for rs in chosen]))
        print(f"premise, {kind}: corr(alpha, accepted length) {accept.words()}")
        print(f"premise, {kind}: lag-1 autocorr(round entropy) {lag.words()}")
        out[kind] = {"alpha_accept": asdict(accept), "entropy_lag1": asdict(lag)}
    return out


def delta_lines(per_prompt: dict[str, dict[str, list[float]]]) -> dict:
    """Each method's τ minus SAGE's, paired per prompt: the mean difference and its 95% interval."""
    out: dict = {}
    if "sage" not in per_prompt:
        return out
    for method, values in per_prompt.items():
        if method == "sage":
            continue
        deltas = [t - s for t, s in zip(values["tau"], per_prompt["sage"]["tau"], strict=True)]
        mean, half = interval(deltas)
        nodes = statistics.fmean(values["nodes"]) - statistics.fmean(per_prompt["sage"]["nodes"])
        print(
            f"Δτ {short_name(method)} − SAGE: {mean:+.2f} ± {half:.2f} (paired over {len(deltas)} prompts; "
            f"{nodes:+.1f} nodes per round)"
        )
        out[method] = {"mean": mean, "half_width": half, "nodes_per_round": nodes}
    return out


def histogram_lines(lanes: dict[str, list]) -> dict:
    """Per method: how often 0, 1, 2, … draft tokens were accepted, over every round of every answer."""
    out = {}
    for method, records in lanes.items():
        counts = acceptance_histogram(records)
        total = sum(counts) or 1
        shares = " ".join(f"{n}:{100 * c / total:.0f}%" for n, c in enumerate(counts))
        print(f"accepted per round, {short_name(method)}: {shares} ({sum(counts)} rounds)")
        out[method] = list(counts)
    return out


def calibration_lines(lanes: dict[str, list]) -> dict:
    """The calibration picture over every answer pooled (sage_core.studies.premise.calibration_of)."""
    picture = calibration_of(lanes)
    shown = ["–" if v is None else f"{v:+.2f}" for v in (picture.alpha_accept, picture.sage_alpha_accept)]
    where = short_name(picture.lane) if picture.lane else "no lane whose trees α does not choose"
    print(
        f"corr(α, accepted length) pooled: {shown[0]} on {where}'s {picture.rounds} rounds (α does not choose "
        f"the tree there), {shown[1]} on SAGE's {picture.sage_rounds} rounds (α also set the depth)"
    )
    bins = ", ".join(
        f"[{b.low:g}, {b.high:g}{']' if b.high == 1 else ')'}: {b.mean_accepted:.2f} (n={b.rounds})"
        for b in picture.bins
        if b.mean_accepted is not None
    )
    print(f"α against mean accepted length, on {where}'s rounds: {bins}")
    lags = ["–" if v is None else f"{v:+.2f}" for v in (picture.token_lag1, picture.round_lag1)]
    print(
        f"lag-1 autocorr of the draft's entropy: per token {lags[0]} ({picture.tokens} pairs along the answers), "
        f"per round {lags[1]}"
    )
    sage_alphas = [a for r in lanes.get("sage", []) if r.phase == "decode" and (a := round_alpha(r)) is not None]
    if sage_alphas:
        print(
            f"SAGE's mean α: {statistics.fmean(sage_alphas):.3f} over {len(sage_alphas)} rounds "
            f"(sage-frozen defaults to {FrozenSageConfig.alpha:g}; --frozen-alpha sets it)"
        )
    return {
        "lane": picture.lane,
        "rounds": picture.rounds,
        "alpha_accept": picture.alpha_accept,
        "sage_alpha_accept": picture.sage_alpha_accept,
        "token_entropy_lag1": picture.token_lag1,
        "tokens": picture.tokens,
        "round_entropy_lag1": picture.round_lag1,
        "bins": [[b.low, b.high, b.rounds, b.mean_accepted] for b in picture.bins],
        "sage_mean_alpha": statistics.fmean(sage_alphas) if sage_alphas else None,
    }


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, tuple[str, ...], list[str], FrozenSageConfig]:
    """The command line, and from it the fresh prompts' kinds, the methods raced and sage-frozen's settings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="builtin")
    parser.add_argument("--draft", default="builtin")
    parser.add_argument("--n", type=int, default=120, help="fresh long-answer prompts")
    parser.add_argument("--seed", type=int, default=31337)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--methods", default=",".join(drafting_methods()), help="methods to compare (registry names)")
    parser.add_argument(
        "--frozen-alpha",
        type=float,
        default=FrozenSageConfig.alpha,
        help="the α sage-frozen holds (default: SAGE's tree size on the built-in pair)",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--shipped", action="store_true", help="the shipped long examples, not fresh scenes")
    parser.add_argument("--kinds", default=",".join(LONG_KINDS), help="the fresh prompts' kinds, in turn")
    args = parser.parse_args(argv)
    kinds = tuple(args.kinds.split(","))
    if not set(kinds) <= {*LONG_KINDS, ROW_KIND}:
        parser.error(f"--kinds: choose from {', '.join((*LONG_KINDS, ROW_KIND))}")
    try:
        return args, kinds, [method_spec(m).name for m in args.methods.split(",")], FrozenSageConfig(args.frozen_alpha)
    except ValueError as error:
        parser.error(str(error))


@dataclass
class Tally:
    """What the race measured, answer after answer: per method its τ, tokens per forward and tree nodes per answer
    and its records; SAGE's entropy spreads, planned widths and rounds with α and entropy (with each answer's kind);
    the answers that differed from plain decoding's."""

    methods: list[str]
    per_prompt: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    lanes: dict[str, list] = field(default_factory=dict)
    spreads: list[float] = field(default_factory=list)
    widths: list[int] = field(default_factory=list)
    premises: list[tuple[str, list]] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.per_prompt = {m: {"tau": [], "tpf": [], "nodes": []} for m in self.methods}
        self.lanes = {m: [] for m in self.methods}

    def add(self, method: str, kind: str, run, summary, lossless: bool, where: str) -> None:
        rounds = [r for r in run.records if r.phase == "decode"]
        self.lanes[method] += run.records
        self.per_prompt[method]["tau"].append(summary.mean_accepted)
        self.per_prompt[method]["tpf"].append(summary.tokens_per_forward)
        self.per_prompt[method]["nodes"].append(statistics.fmean(len(r.tree_tokens) for r in rounds) if rounds else 0.0)
        if not lossless:
            self.mismatches.append(where)
        if method == "sage":
            self.widths += [r.planned_width for r in rounds if r.planned_width is not None]
            entropies = [r.entropy for r in rounds if r.entropy is not None]
            if len(entropies) >= 2:
                self.spreads.append(max(entropies) - min(entropies))
            self.premises.append((kind, [r for r in rounds if r.alpha is not None and r.entropy is not None]))


def race(pair, prompts: list, methods: list[str], frozen: FrozenSageConfig, max_new_tokens: int) -> Tally:
    """Every method on every prompt, each answer checked against plain decoding's."""
    tally = Tally(methods)
    for index, (media, question, kind) in enumerate(prompts):
        reference = decode(pair, media, question, DecodeConfig("ar", max_new_tokens)).run_to_end()
        for method in methods:
            config = DecodeConfig(method, max_new_tokens).with_settings({"sage-frozen": frozen})
            run = decode(pair, media, question, config)
            summary = run.run_to_end()
            tally.add(method, kind, run, summary, summary.token_ids == reference.token_ids, f"{index}:{method}")
    return tally


def report(tally: Tally, figures: dict) -> dict:
    """Print the race's figures per method, SAGE's entropy spread and widths, the studies' lines and whether every
    answer was lossless; ``figures`` with them added."""
    print(f"{'method':<20}{'tau (95% CI)':>18}{'tokens/forward':>20}{'nodes/round':>14}")
    for method in tally.methods:
        tau, tpf, nodes = (interval(tally.per_prompt[method][k]) for k in ("tau", "tpf", "nodes"))
        figures["methods"][method] = {"tau": tau, "tokens_per_forward": tpf, "nodes_per_round": nodes[0]}
        print(
            f"{short_name(method):<20}{tau[0]:>10.2f} ± {tau[1]:<5.2f}{tpf[0]:>12.2f} ± {tpf[1]:<5.2f}{nodes[0]:>12.1f}"
        )
    spreads, widths = tally.spreads, tally.widths
    if spreads:
        wide = sum(s >= 1.5 for s in spreads)
        print(
            f"draft entropy spread within SAGE answers: median {statistics.median(spreads):.2f} nats; "
            f"{wide} of {len(spreads)} answers span >= 1.5 nats"
        )
        figures.update(entropy_spread_median=statistics.median(spreads), spans_1_5=wide, answers=len(spreads))
        figures["spreads"] = spreads
    if widths:
        print(f"SAGE's planned root width W(alpha): median {statistics.median(widths):g} over {len(widths)} rounds")
        figures["planned_width_median"] = statistics.median(widths)
    figures["delta_vs_sage"] = delta_lines(tally.per_prompt)
    figures["acceptance_histogram"] = histogram_lines(tally.lanes)
    figures["calibration"] = calibration_lines(tally.lanes)
    figures["premise"] = premise_lines(tally.premises)
    print(f"lossless (every method's tokens == plain decoding's): {tally.mismatches or 'yes'}")
    figures["lossless"] = not tally.mismatches
    return figures


def main(argv: list[str] | None = None) -> dict:
    args, kinds, methods, frozen = parse(argv)
    torch.set_num_threads(args.threads)
    pair = load_pair(args.target, args.draft, "cpu", "float32")
    if args.shipped:
        prompts = shipped_long_examples()
    else:
        scenes = make_examples(args.seed, args.n, kinds=kinds)
        prompts = [(example_media(scene), scene.question, scene.kind) for scene in scenes]
    args.n = len(prompts)
    started = time.perf_counter()
    tally = race(pair, prompts, methods, frozen, args.max_new_tokens)
    elapsed = time.perf_counter() - started
    what = (
        "shipped long examples" if args.shipped else f"fresh long-answer prompts (seed {args.seed}: {', '.join(kinds)})"
    )
    print(f"{args.n} {what}, greedy, {elapsed:.0f} s")
    figures = report(tally, {"n": args.n, "seed": args.seed, "methods": {}})
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def shipped_long_examples() -> list:
    """(media, prompt) of the shipped examples with long answers, loaded from their files as the app does."""
    examples = json.loads((ROOT / "assets" / "examples" / "examples.json").read_text())
    return [
        (load_media(ROOT / "assets" / "examples" / e["file"]), e["prompt"], e["kind"])
        for e in examples
        if e["kind"] in LONG_KINDS
    ]


if __name__ == "__main__":
    main()
