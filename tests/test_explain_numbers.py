"""Every number the explainer prints is recomputed here from the round's record (and the run's SAGE
settings) with the policy's own functions, never with `sage_core.studies.explain`: on finished races of every
method, on an image and a video, with the built-in draft and the hesitant one.

The explainer's HTML is reduced to its text (token texts shown as "w", so no digit comes from a token);
each number in it must be one the record accounts for, and the formulas' key lines are read back and
checked as equations."""

from __future__ import annotations

import functools
import html
import json
import math
import re
from pathlib import Path

import pytest

from app.explain_view import RERANK_LISTED, exact, explain_html
from app.models import HESITANT_DRAFT_DIR
from sage_core import DecodeConfig, decode, load_media, load_pair
from sage_core.method_settings import SageConfig
from sage_core.methods import method_spec
from sage_core.methods.budget import SageCostRecord
from sage_core.methods.builtin import METHODS
from sage_core.methods.smart import WEIGHED_LISTED, SmartRecord
from sage_core.models import BUILTIN_TARGET, ModelPair
from sage_core.policy import confidence, level_threshold, level_width, planned_depth, planned_width
from sage_core.records import RoundRecord
from sage_core.studies.explain import probability_places

EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"
SAGE = SageConfig(window=3)  # a short window, so that it closes within one answer
DRAFTS = {"builtin": "builtin", "hesitant": str(HESITANT_DRAFT_DIR)}
MEDIA = {"image": "describe_wide.png", "video": "colour_change.webm"}
#: Numbers the explainer's wording holds whatever the round ("W_1", "l ≥ 2", "0.5 + P_parent", "EAGLE-2").
WORDING = ("EAGLE-2", "EAGLE-1", "W_1", "l ≥ 2", "0.5 + P_parent", "1 − H", "1 − α", "l − 1", "25-node",
           "top-10")  # fmt: skip

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (BUILTIN_TARGET / "config.json").exists(), reason="built-in pair not trained"),
]


class EveryTokenIsW(dict):
    """Token texts: every token reads "w" (no digits in the text from the vocabulary)."""

    def get(self, key, default=None):
        return "w"


@functools.cache
def pair(draft: str) -> ModelPair:
    return load_pair("builtin", DRAFTS[draft], device="cpu", dtype="float32")


@functools.cache
def race(draft: str, medium: str) -> dict[str, tuple[RoundRecord, ...]]:
    """Every method's finished run of the example's own prompt."""
    example = next(e for e in json.loads((EXAMPLES / "examples.json").read_text()) if e["file"] == MEDIA[medium])
    media = load_media(EXAMPLES / example["file"])
    runs = {}
    for method in METHODS:
        run = decode(pair(draft), media, example["prompt"], DecodeConfig(method=method, max_new_tokens=80, sage=SAGE))
        run.run_to_end()
        runs[method] = tuple(run.records)
    return runs


def text_of(page: str) -> str:
    page = re.sub(r"<style>.*?</style>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def numbers_in(text: str) -> list[str]:
    for phrase in WORDING:
        text = text.replace(phrase, " ")
    return re.findall(r"\d+(?:\.\d+)?", text)


def cumulative(record: RoundRecord) -> list[float]:
    parents, probs = record.tree_parents, record.tree_draft_probs
    out: list[float] = []
    for node, parent in enumerate(parents):
        out.append(probs[node] * (1.0 if parent == -1 else out[parent]))
    return out


def depths(record: RoundRecord) -> list[int]:
    out: list[int] = []
    for parent in record.tree_parents:
        out.append(1 if parent == -1 else out[parent] + 1)
    return out


def accounted(record: RoundRecord, config: SageConfig) -> set[str]:
    """Every number the record and the settings account for, formatted as the explainer formats it."""
    ok = {str(record.round), str(len(record.accepted_tokens)), str(config.candidates)}
    tree_depths, cum = depths(record), cumulative(record)
    ok |= {str(d) for d in tree_depths}
    probs = record.root_top_probs
    places = probability_places(probs)  # the top-k printed with enough digits to recompute H from them
    ok |= {f"{p:.{places}f}" for p in probs} | {str(len(probs))}
    # the level table: every kept node's draft probability and its parent's, by node index
    ok |= {f"{p:.3f}" for p in record.tree_draft_probs} | {str(n) for n in range(len(record.tree_tokens))}
    spec = method_spec(record.method)
    if spec.template is not None:
        ok.add(str(len(spec.template)))
    # The α the round's tree was shaped from: measured from the root's entropy, or (sage-frozen) the one held.
    alphas = [confidence(probs)[1]] if probs else []
    if record.alpha is not None and spec.alpha_free:
        alphas.append(record.alpha)
    if record.alpha is not None and probs:
        entropy = confidence(probs)[0]
        ok |= {f"{entropy:.3f}", f"{math.log(len(probs)):.3f}", f"{sum(probs):.{places}f}"}  # (Σp: renormalising)
        ok |= {f"{alpha:.3f}" for alpha in alphas} | {f"{1 - alpha:.3f}" for alpha in alphas}
        if record.planned_depth is None:
            ok.add("25")  # SAGE's first round: the static tree
    if record.alpha is not None and record.planned_depth is not None and record.depth_max is not None:
        ok |= {str(config.depth_min), str(record.depth_max), str(config.width_min), str(config.width_max)}
        for alpha in alphas:
            ok |= {
                exact(
                    config.depth_min + alpha * (record.depth_max - config.depth_min),
                    planned_depth(alpha, config.depth_min, record.depth_max),
                ),
                str(planned_depth(alpha, config.depth_min, record.depth_max)),
                exact(
                    config.width_min + (1 - alpha) * (config.width_max - config.width_min),
                    planned_width(alpha, config.width_min, config.width_max),
                ),
                str(planned_width(alpha, config.width_min, config.width_max)),
            }
    ok |= _levels(record, config, tree_depths)
    if record.planned_depth is not None and tree_depths:  # why a tree stops short of D(α): its best node and θ
        ok |= {f"{max(c for c, d in zip(cum, tree_depths, strict=True) if d == level):.4f}" for level in tree_depths}
        thresholds = range(1, record.planned_depth + 2)
        ok.add(str(max(tree_depths) + 1))  # the level not drafted
        ok |= {f"{level_threshold(level, record.planned_depth, config.threshold_base):.4f}" for level in thresholds}
    ok |= {f"{p:.2f}" for p in record.cut_probs}
    if method_spec(record.method).explainer == "rerank":
        levels = range(1, len(record.level_thresholds) + 1)
        ok |= {str(len(record.tree_tokens)), str(len(record.tree_tokens) + sum(record.cut_by_budget))}
        ok |= {f"{min(cum):.4f}"} | {str(level) for level in levels}
        ok |= {str(sum(1 for d in tree_depths if d == level)) for level in levels}
        ok |= {f"{c:.4f}" for c in cum} | {str(len(cum) - RERANK_LISTED)}
        ok |= {str(d) for d in record.cut_by_budget}
    ok |= _own_numbers(record)
    ok |= {str(parent) for parent in record.cut_parents} | {f"{p:.3f}" for p in record.cut_probs}
    # the round's draft forwards: the root's and one a level (a one-pass draft: one for its whole block)
    if record.draft_forwards is not None:
        ok |= {str(record.draft_forwards), str(record.draft_forwards - 1)}
    reached = {-1, *record.accepted_nodes}
    ok.add(str(sum(1 for parent in record.tree_parents if parent not in reached)))
    ok.add(str(len(record.accepted_tokens) - min(len(record.accepted_tokens), len(record.new_tokens))))
    if record.window_mean is not None:
        ok |= {
            f"{record.window_mean:.2f}",
            f"{config.lower_below:g}",
            f"{config.raise_above:g}",
            str(record.depth_max),
            str(record.next_depth_max),
        }
    return ok


def _own_numbers(record: RoundRecord) -> set[str]:
    """The numbers of the round's own record (its method's): sage-cost's budgets weighed, their depths, expected
    accepted lengths and tokens per second (SMART's record keeps its growth in the same columns); SMART's nodes
    expanded and candidates refused, each p/ΔC against the tree's speedup S."""
    ok: set[str] = set()
    own = record.own
    if isinstance(own, SageCostRecord):
        ok |= {str(v) for v in (*own.budget_nodes, *own.budget_depths)}
        ok |= {f"{e:.2f}" for e in own.budget_expected} | {f"{r:.0f}" for r in own.budget_rates}
    if isinstance(own, SmartRecord):
        weighed = (*own.node_ratios, *own.node_speedups, *own.cut_ratios, *own.cut_speedups)
        ok |= {f"{v:.2f}" for v in weighed} | {str(n) for n in range(len(own.node_ratios))}
        ok.add(str(len(own.node_ratios) - min(len(own.node_ratios), WEIGHED_LISTED)))
    return ok


def _levels(record: RoundRecord, config: SageConfig, tree_depths: list[int]) -> set[str]:
    if not record.level_thresholds or method_spec(record.method).explainer == "rerank" or record.planned_depth is None:
        return set()
    ok = {f"{config.threshold_base:g}", str(config.node_budget)}
    width = record.planned_width or 0
    level_of = {-1: 1} | {n: d + 1 for n, d in enumerate(tree_depths)}
    for index in range(len(record.level_thresholds)):
        level = index + 1
        ok |= {str(level), f"{level_threshold(level, record.planned_depth, config.threshold_base):.4f}"}
        ok |= {str(sum(1 for d in tree_depths if d == level))}
        ok |= {
            str(v[index])
            for v in (record.cut_by_width, record.cut_by_threshold, record.cut_by_budget)
            if index < len(v)
        }
        parents = [
            (n, w) for n, w in zip(record.offer_parents, record.offer_widths, strict=True) if level_of[n] == level
        ]
        ok.add(str(len(parents)))
        for node, used in parents:
            p = 1.0 if node == -1 else record.tree_draft_probs[node]
            raw = float(width) if level == 1 else width * (0.5 + p) / level
            ok |= {exact(raw, level_width(width, level, p)), str(level_width(width, level, p))}
            assert used == level_width(width, level, p)
    return ok


FORMULAS = {
    "alpha": r"α = 1 − H / log (\d+) = 1 − ([\d.]+) / ([\d.]+) = ([\d.]+)",
    "depth": r"D\(α\) = D_min \+ α·\(D_max − D_min\) = (\d+) \+ ([\d.]+)·\((\d+) − (\d+)\) = ([\d.]+) → (\d+)",
    "width": r"W\(α\) = W_min \+ \(1 − α\)·\(W_max − W_min\) = (\d+) \+ ([\d.]+)·\((\d+) − (\d+)\) = ([\d.]+) → (\d+)",
}


def check_formulas(text: str, record: RoundRecord, config: SageConfig) -> None:
    """The printed equations hold as printed (to their printed precision: a factor printed to 3 decimals,
    times a difference, then rounded to 2), and match the record."""
    if m := re.search(FORMULAS["alpha"], text):
        k, h, log_k, alpha = int(m[1]), float(m[2]), float(m[3]), float(m[4])
        assert k == len(record.root_top_probs) and log_k == pytest.approx(math.log(k), abs=5e-4)
        assert alpha == pytest.approx(1 - h / log_k, abs=2e-3)
        # the α measured from the root (sage-frozen measures it and holds another, its record's)
        measured = confidence(record.root_top_probs)[1] if method_spec(record.method).alpha_free else record.alpha
        assert alpha == pytest.approx(measured, abs=5e-4)
    if m := re.search(FORMULAS["depth"], text):
        d_min, a, d_max, d_min2, raw, depth = int(m[1]), float(m[2]), int(m[3]), int(m[4]), float(m[5]), int(m[6])
        assert d_min == d_min2 == config.depth_min and d_max == record.depth_max
        assert raw == pytest.approx(d_min + a * (d_max - d_min), abs=5e-4 * (d_max - d_min) + 5.1e-3)
        assert depth == math.floor(raw + 0.5) == record.planned_depth
    if m := re.search(FORMULAS["width"], text):
        w_min, b, w_max, w_min2, raw, width = int(m[1]), float(m[2]), int(m[3]), int(m[4]), float(m[5]), int(m[6])
        assert w_min == w_min2 == config.width_min and w_max == config.width_max
        assert raw == pytest.approx(w_min + b * (w_max - w_min), abs=5e-4 * (w_max - w_min) + 5.1e-3)
        assert width == max(1, math.floor(raw + 0.5)) == record.planned_width
    if record.level_thresholds and record.method == "sage":
        # the root's width is W(α) itself, as printed
        root = re.search(r"root: ([\d.]+)→(\d+)", text)
        assert (
            root is not None
            and float(root[1]) == pytest.approx(record.planned_width)
            and int(root[2]) == (record.planned_width)
        )


@pytest.mark.parametrize("medium", sorted(MEDIA))
@pytest.mark.parametrize("draft", sorted(DRAFTS))
def test_every_number_the_explainer_prints_is_recomputed_from_the_record(draft, medium):
    runs = race(draft, medium)
    kinds = set()
    for method, records in runs.items():
        assert records[-1].finish_reason is not None, f"{method}: the race did not finish"
        for record in (r for r in records if r.phase == "decode"):
            page = explain_html(list(records), record.round, EveryTokenIsW(), method, SAGE)
            text = " ".join(text_of(page).split())
            nodes = [int(n) for n in re.findall(r"#(\d+)", text)]  # node references: nodes of this tree
            assert all(n < len(record.tree_tokens) for n in nodes), (method, record.round, nodes)
            text = re.sub(r"#\d+", "#", text)
            expected = accounted(record, SAGE)
            unexplained = [n for n in numbers_in(text) if n not in expected]
            assert unexplained == [], (method, record.round, unexplained, text)
            check_formulas(text, record, SAGE)
            # the round's outcome: the bonus only when it reached the output
            emitted_bonus = len(record.new_tokens) > min(len(record.accepted_tokens), len(record.new_tokens))
            assert ("+ bonus" in text) == emitted_bonus, (method, record.round, text)
            if not emitted_bonus:
                assert f"The output ended here ({record.finish_reason}): no bonus token." in text
            kinds.add(method)
    assert kinds == set(METHODS)


def test_every_figure_of_the_race_account_is_recomputed_from_the_records():
    """sage_core.studies.account on a finished race of every method: each side's τ, depth cap, full-depth rounds, mean
    depth, nodes and their cost on a (linear) curve, prefill, median round and α, recomputed here; the page's
    and `/race`'s lines carry the same figures."""
    from sage_core.cost_curve import COST_SIZES, CostCurve
    from sage_core.studies.account import race_account

    runs = race("builtin", "image")
    curve = CostCurve("cpu", "float32", "fast", COST_SIZES, 2.0, tuple(2.5 + 0.25 * n for n in COST_SIZES), (0.5,) * 7)
    account = race_account(runs, curve, frozen_alpha=0.89)
    for method, records in runs.items():
        rounds = [r for r in records if r.phase == "decode"]
        side = account.side(method)
        assert side is not None and side.rounds == len(rounds)
        assert side.tau == pytest.approx(sum(len(r.accepted_tokens) for r in rounds) / len(rounds))
        tree_depths = [max(depths(r), default=0) for r in rounds]
        assert side.depth_cap == max(tree_depths) and side.mean_depth == pytest.approx(sum(tree_depths) / len(rounds))
        full = sum(1 for r, d in zip(rounds, tree_depths, strict=True) if r.tree_tokens and len(r.accepted_tokens) == d)
        assert side.full_depth_rounds == full
        nodes = [len(r.tree_tokens) for r in rounds]
        assert side.nodes_per_round == pytest.approx(sum(nodes) / len(rounds))
        cost = [2.0 if n == 0 else 2.5 + 0.25 * n for n in nodes]
        assert side.verify_ms_per_round == pytest.approx(sum(cost) / len(cost))
        assert side.prefill_ms == pytest.approx(1000 * records[0].round_seconds)
        ordered = sorted(r.round_seconds for r in rounds)
        middle = len(ordered) // 2
        median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
        assert side.median_round_ms == pytest.approx(1000 * median)
        alphas = [r.alpha for r in rounds if r.alpha is not None and r.tree_tokens]
        if alphas:
            assert side.alpha_mean == pytest.approx(sum(alphas) / len(alphas))
            assert side.alpha_range == (min(alphas), max(alphas))
        else:
            assert side.alpha_mean is None
        line = next(x for x in account.lines() if x.startswith(f"{method}:"))
        if side.depth_cap == 0:  # plain decoding, said as what it is (not "trees up to 0 deep")
            assert "one token per target forward" in line and "0 deep" not in line, line
            assert ("plain decoding: no draft" in line) == (method == "ar"), line
        else:
            assert f"τ {side.tau:.2f} over {len(rounds)} rounds" in line
            assert f"full depth accepted in {full} of {len(rounds)} rounds" in line
            assert f"{1000 * median / (side.tau + 1):.1f} ms a token" in line
    sage, frozen = account.side("sage"), account.side("sage-frozen")
    assert account.reacting_delta_tau == pytest.approx(sage.tau - frozen.tau)
    assert f"Δτ {sage.tau - frozen.tau:+.2f}" in account.lines()[-1] and "held at 0.89" in account.lines()[-1]
    # the one-sentence why (the finished status, the talk view, the explainer, /race) quotes the same figures
    static = account.side("static")
    assert account.rival() == static
    why = account.why()
    assert why.startswith(f"Why: SAGE's trees went up to {sage.depth_cap} deep ({sage.mean_depth:.1f} on average)")
    assert f"against SD-Tree's {static.depth_cap}" in why
    assert f"accepted its full depth in {static.full_depth_rounds} of its {static.rounds} rounds" in why
    assert f"τ {sage.tau:.2f} against {static.tau:.2f}" in why
    assert f"{sage.nodes_per_round:.1f} nodes verified a round against {static.nodes_per_round:.1f}" in why
    assert f"bought Δτ {sage.tau - frozen.tau:+.2f} against α held at 0.89" in why
    # what decides the race after the prefill, true whichever side won: each side's time per token
    assert f"{sage.ms_per_token:.1f} ms a token against {static.ms_per_token:.1f}" in why
    cheaper = sage.ms_per_token < static.ms_per_token
    assert ("cheaper per token" in why or "about the same" in why) if cheaper else ("cheaper per token" not in why)
    against_plain = race_account({m: runs[m] for m in ("sage", "ar")}, curve).why()
    plain = account.side("ar")
    assert against_plain.startswith("Why: Plain AR made one token per target forward (no draft)"), against_plain
    assert f"{sage.ms_per_token:.1f} ms a token against {plain.ms_per_token:.1f}" in against_plain
    alone = race_account({m: runs[m] for m in ("sage", "chain")}, curve)
    assert "measured only beside SAGE, α frozen" in alone.why() and "against SD-Chain's" in alone.why()
    assert race_account({"sage": runs["sage"]}, curve).why() == ""


def test_a_rounded_number_is_printed_so_rounding_the_print_gives_it():
    """ "1.50 → 1" would contradict round-half-up: a value just under a half is printed with the decimals it
    takes (explain_view.exact), and rounding the printed number half up gives the printed result."""
    import random

    from app.explain_view import exact
    from sage_core.policy import round_half_up

    assert exact(2.345, 2) == "2.35" and exact(1.499995, 1) != "1.50"
    draw = random.Random(7)
    for raw in [1.499995, 2.4999991, 3.5, 0.994, *(draw.uniform(0, 9) for _ in range(2000))]:
        printed = exact(raw, round_half_up(raw))
        assert round_half_up(float(printed)) == round_half_up(raw), (raw, printed)


def test_a_student_recomputes_h_from_the_printed_probabilities_and_reads_every_nodes_p():
    """On the landing recording, H printed with 3 decimals could not be recomputed from the top-k printed with 3
    (0.025 against the printed 0.038): every round's printed top-k now recomputes the printed H, and the level
    table prints each kept node's draft probability and its parent's."""
    from app.race_trace import load_race
    from app.view import race_view
    from sage_core.policy import topk_entropy

    race = race_view(load_race(str(EXAMPLES.parent / "landing" / "race.jsonl")))
    lane = race.lane("sage")
    assert lane is not None
    checked = 0
    for record in lane.records:
        if record.phase != "decode" or not record.root_top_probs or record.alpha is None:
            continue
        html = explain_html(lane.records, record.round, race.token_texts, "sage", SageConfig())
        table = html[html.index("after the root</h4>") : html.index("</table>", html.index("after the root</h4>"))]
        printed = [float(p) for p in re.findall(r"<td class='f'>([\d.]+)</td></tr>", table)]
        said = re.search(r"= ([\d.]+) nats", html)
        assert said and len(printed) == len(record.root_top_probs)
        assert f"{topk_entropy(printed):.3f}" == said.group(1), (record.round, printed, said.group(1))
        kept = [n for n, d in enumerate(depths(record)) if d == 2][:6] if "Level by level" in html else []
        for node in kept:
            parent = record.tree_parents[node]
            assert (
                f"#{node} {record.tree_draft_probs[node]:.3f} ← #{parent} {record.tree_draft_probs[parent]:.3f}" in html
            )
        checked += bool(kept)
    assert checked > 0
