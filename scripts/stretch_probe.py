"""Where the draft hesitates along an answer: SAGE's premise measured token by token and on a chain's rounds.

    PYTHONPATH=. python scripts/stretch_probe.py                       # the shipped pair, 60 long answers
    PYTHONPATH=. python scripts/stretch_probe.py --kinds row --n 40    # the row pictures alone
    PYTHONPATH=. python scripts/stretch_probe.py --dir /work/world-ckpt/pair --decode sage,chain,static

For each fresh example (seed never used in training; ``--kinds`` in turn) the target answers greedily
(batched ``generate``); the draft is then teacher-forced on that answer, and at every answer position
its top-k (k = SAGE's candidates, 10) entropy and α = 1 - H / log k are read (the quantities SAGE's
policy reads at a round's root). Printed per kind, then over all kinds; every correlation three ways:
**per answer** (the mean of each answer's own figure, with a 95 % interval over answers: the figure
that says whether the draft's state *within* an answer carries over), **centred** (each answer's mean
taken out, then pooled: within-answer variation only), and **pooled** (every pair together: the gaps
*between* answers, rows hard throughout and descriptions easy throughout, inflate it):

* **lag-1 autocorrelation of the draft's per-token entropy** along the answers (pairs within an
  answer): does hesitation come in stretches?
* **a 5-token chain's rounds, simulated exactly for greedy decoding**: each round starts after the
  last committed token, the chain is the draft's greedy continuation, the accepted length is the
  run of draft tokens equal to the target's; corr(α at the round's root, accepted length), where α
  does not choose the tree (no confound), and the chain's τ.
* with ``--decode``: the methods decoded for real (``sage_core.decode``, float32, greedy), τ with a
  95 % interval over prompts, SAGE's own rounds' corr(α, accepted length) and lag-1 autocorrelation
  of the round entropy (the three ways), and whether every method's tokens equal plain decoding's.

Counts, not times (scripts/benchmark.py measures speed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch

from sage_core.method_settings import SageConfig
from sage_core.policy import confidence
from sage_core.studies.premise import across_answers, lag_pairs
from sage_core.studies.stats import interval
from sage_world.quality import example_media, generate_answers, teacher_forced_feed
from sage_world.scenes import LONG_KINDS, ROW_KIND, make_examples

ROOT = Path(__file__).resolve().parents[1]

CHAIN = 5


def token_series(target, draft, processor, example, answer: list[int], k: int) -> dict:
    """The draft's top-k entropy, α and greedy agreement at every answer position (teacher-forced)."""
    n, feed = teacher_forced_feed(processor, example, answer)
    t_pred = target(**feed).logits[0, n - 1 : -1].argmax(-1)
    logits = draft(**feed).logits[0, n - 1 : -1].float()
    probs = logits.softmax(-1)
    top = probs.topk(k, -1).values.tolist()
    entropy, alpha = zip(*(confidence(p) for p in top), strict=True)
    return {"entropy": list(entropy), "alpha": list(alpha), "match": (logits.argmax(-1) == t_pred).tolist()}


def chain_rounds(series: dict, depth: int = CHAIN) -> list[tuple[float, int]]:
    """(α at the root, accepted length) of each round of greedy chain speculation with ``depth`` draft
    tokens. Position 0 is the prefill's token; a round starting at position s drafts s, s+1, ...;
    the target's token after the accepted run (the bonus) is committed too."""
    match, alpha = series["match"], series["alpha"]
    rounds, start = [], 1
    while start < len(match):
        run = 0
        while run < depth and start + run < len(match) and match[start + run]:
            run += 1
        rounds.append((alpha[start], run))
        start += run + 1
    return rounds


def summarise(name: str, rows: list[dict]) -> dict:
    entropies = [r["series"]["entropy"][1:] for r in rows]  # position 0 is the prefill's token
    lag = across_answers(lag_pairs(entropies))
    corr = across_answers([([a for a, _ in r["chain"]], [float(n) for _, n in r["chain"]]) for r in rows])
    rounds = [n for r in rows for _, n in r["chain"]]
    tau = statistics.fmean(rounds) if rounds else float("nan")
    flat = [h for e in entropies for h in e]
    out = {
        "answers": len(rows),
        "tokens": len(flat),
        "entropy_mean": statistics.fmean(flat) if flat else float("nan"),
        "entropy_lag1": asdict(lag),
        "chain_rounds": len(rounds),
        "chain_alpha_accept": asdict(corr),
        "chain_tau": tau,
        "facts_right": sum(r["right"] for r in rows) / max(sum(r["facts"] for r in rows), 1),
    }
    print(
        f"{name}: {len(rows)} answers, {len(flat)} tokens, target facts {out['facts_right']:.3f}\n"
        f"  entropy lag-1, token by token: {lag.words()}\n"
        f"  chain-{CHAIN} ({len(rounds)} rounds, τ {tau:.2f}): corr(α, accepted) {corr.words()}"
    )
    return out


def decode_study(target_dir: str, draft_dir: str, examples, methods: list[str], max_new: int) -> dict:
    from sage_core import DecodeConfig, decode, load_pair
    from sage_core.methods import method_spec

    pair = load_pair(target_dir, draft_dir, "cpu", "float32")
    taus: dict[str, list[float]] = {m: [] for m in methods}
    sage_rounds: list[list] = []
    mismatches = []
    for index, example in enumerate(examples):
        media = example_media(example)
        reference = decode(pair, media, example.question, DecodeConfig("ar", max_new)).run_to_end()
        for method in methods:
            run = decode(pair, media, example.question, DecodeConfig(method_spec(method).name, max_new))
            summary = run.run_to_end()
            taus[method].append(summary.mean_accepted)
            if summary.token_ids != reference.token_ids:
                mismatches.append(f"{index}:{method}")
            if method == "sage":
                sage_rounds.append([r for r in run.records if r.phase == "decode" and r.alpha is not None])
    out: dict = {"methods": {}, "lossless": not mismatches, "mismatches": mismatches}
    for method in methods:
        mean, half = interval(taus[method])
        out["methods"][method] = {"tau": mean, "half_width": half}
        print(f"  decode {method:<10} τ {mean:.2f} ± {half:.2f}")
    if sage_rounds:
        accept = across_answers([([r.alpha for r in rs], [float(r.accepted_length) for r in rs]) for rs in sage_rounds])
        lag = across_answers(lag_pairs([[r.entropy for r in rs] for rs in sage_rounds]))
        out["sage_alpha_accept"], out["sage_round_entropy_lag1"] = asdict(accept), asdict(lag)
        rounds = sum(len(rs) for rs in sage_rounds)
        print(
            f"  SAGE's own {rounds} rounds: corr(α, accepted) {accept.words()}; "
            f"lag-1 autocorr(round entropy) {lag.words()}"
        )
    print(f"  lossless: {mismatches or 'yes'}")
    return out


def main(argv: list[str] | None = None) -> dict:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from sage_world.scenes import fact_score

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=str(ROOT / "assets" / "builtin"))
    ap.add_argument("--draft-dir", help="the draft's folder (default DIR/draft)")
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--seed", type=int, default=31337)
    ap.add_argument("--kinds", default=",".join((*LONG_KINDS, ROW_KIND)))
    ap.add_argument("--decode", default="", help="also decode for real with these methods (e.g. sage,chain,static)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    d = Path(args.dir)
    draft_dir = args.draft_dir or str(d / "draft")
    processor = AutoProcessor.from_pretrained(d / "target")
    target = AutoModelForImageTextToText.from_pretrained(d / "target").eval()
    draft = AutoModelForImageTextToText.from_pretrained(draft_dir).eval()
    k = SageConfig().candidates
    kinds = tuple(args.kinds.split(","))
    examples = make_examples(args.seed, args.n, kinds=kinds)
    started = time.perf_counter()
    texts, answers = generate_answers(target, processor, examples, args.max_new_tokens)
    rows = []
    for e, text, ans in zip(examples, texts, answers, strict=True):
        series = token_series(target, draft, processor, e, ans, k)
        right, facts = fact_score(e, text)
        rows.append({"kind": e.kind, "series": series, "chain": chain_rounds(series), "right": right, "facts": facts})
    print(f"{args.n} fresh examples (seed {args.seed}: {', '.join(kinds)}), draft {draft_dir}, top-{k} entropy")
    figures: dict = {"n": args.n, "seed": args.seed, "kinds": {}}
    for kind in kinds:
        figures["kinds"][kind] = summarise(kind, [r for r in rows if r["kind"] == kind])
    figures["all kinds"] = summarise("all kinds", rows)
    if args.decode:
        figures["decode"] = decode_study(
            str(d / "target"), draft_dir, examples, args.decode.split(","), args.max_new_tokens
        )
    print(f"took {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return figures


if __name__ == "__main__":
    main()
