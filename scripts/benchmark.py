"""Benchmark: our decoders and transformers' own, on the same inputs, in one process.

    PYTHONPATH=. python scripts/benchmark.py --repeats 3                 # the built-in pair on assets/examples
    PYTHONPATH=. python scripts/benchmark.py --json bench.json --markdown bench.md
    PYTHONPATH=. python scripts/benchmark.py --target Qwen/Qwen2.5-VL-7B-Instruct --draft Qwen/Qwen2.5-VL-3B-Instruct

Methods: ours (every method of the registry, sage_core/methods/__init__.py: `ar`, `chain`, `static`, `sage`,
`sage-cost`, `dynamic`, and the ablation lanes `sage-frozen` and `best-first`) and transformers' peers:
`generate` (`model.generate(do_sample=False)`, plain greedy) and `assisted`
(`generate(assistant_model=<the same draft>)`, transformers' assisted
generation with its default candidate schedule). Every method reads the same
prepared inputs (each processor runs once per example, the draft's not at all
when it is the target's; each run is charged the preparation it needs, as
measured once). Per example: one warm-up run per
method, then --repeats rounds in which the methods run in a rotated order
(interleaved, so slow drift of the machine hits all of them alike).

Printed and written (--json, --markdown): per method, the median over
examples of each example's median tokens/s, with the spread over examples
(min-max), end to end and decode only (the prefill and its first token left
out; for `assisted` the first target forward covers the prompt and the first
candidates, so its decode-only time starts after that forward), the speedup
over `generate` and over our `ar`, and whether the tokens equal `generate`'s.
Per round of our methods (one extra profiled run per example, forwards
timed): draft time, verify time, and the time outside model forwards. Before the
table, the verification cost curve of the pair on this device (sage_core/studies/costs.py:
the target's verify time for trees of 1 to 64 nodes against its one-token step, and
the draft's time per level; on the first example, medians after warm-up), and with
it the decode-only speedup of SAGE over each method that these costs predict from
the rounds of the profiled runs, beside the measured one.

`--backend plain` runs our methods on transformers' own cache and masks instead
of the fast path, `--backend fast-hf` the fast path with transformers' forward
instead of the lean one, `--backend compiled` the fast path with the draft's
forward through torch.compile (its compilation falls in the warm-up runs)
(sage_core/backends.py, sage_core/models/lean.py). Several backends, `--backend
fast,compiled`, run each of our methods on each, interleaved in the same
repeats (the second backend's named `sage@compiled`), and print each against
itself on the first backend (median and spread of the per-example ratio). `--long-prompt 500,1500` also runs
every example with its prompt padded by about that many text tokens, and
prints how the decode step grows with the context: per padding, the prompt
length, each method's median round (ms) and decode-only tokens/s. `--threads N`
sets torch's intra-op CPU threads for every method (on a machine whose cores
are busy with other work, fewer threads than cores avoid waiting on
descheduled ones).

Draft-side visual token pruning (SpecVLM): `--prune-ratios 0,0.8,0.9` runs each
of our draft methods at each ratio too, as `static+prune0.8` and so on, and
adds the draft's prefill time, tokens per target forward and the draft's
visual tokens. `--frames` and `--video-pixels` give a video more visual tokens
(the same processor setting for the target and the draft), e.g.

    PYTHONPATH=. python scripts/benchmark.py --kinds narrate --frames 16 --video-pixels 409600 \
        --methods ar,static,sage --prune-ratios 0,0.5,0.8,0.9

`--sweep` runs the budget sweep instead (sage_core/studies/sweep.py): τ, tokens per target forward and
decode-only speedup against the node budget (`--sweep-budgets`, default 4,8,12,16,24,32,48,64) for
SAGE, the dynamic tree and the same-budget best-first tree, with `sage-cost`'s and SMART's chosen budgets marked,
on the first `--sweep-examples` examples (default 3: with `--kinds describe,chart,narrate`, one of each),
`--sweep-repeats` timed runs each (default 1, after a warm-up); it prints the table and the cost curve, and
`--sweep-plot docs/sweep.html` draws them (Plotly; a .png beside it when chromium is there), e.g.

    PYTHONPATH=. python scripts/benchmark.py --sweep --kinds describe,chart,narrate --sweep-plot docs/sweep.html

`--temperatures 0,0.7,1.0` repeats all of it per temperature: 0 is greedy;
above 0 every method samples (ours: speculative sampling, exact in
distribution; `generate` and `assisted`: do_sample=True with the same
temperature, --top-p and --top-k-sampling), seeded per repeat. Sampled rows are
labelled with their temperature (`sage T=0.7`, `sage+prune0.8 T=0.7`); their
tokens differ by design, so "same tokens" reads n/a (sampled), and their
tokens/s is the median of each run's own rate. τ, the speedups and the
--long-prompt table are per temperature (methods compared at the same one).
It combines with --backend, --long-prompt, --prune-ratios and --frames.

`--features-off` races, beside each of our drafting methods whose draft reads the target's features (a one-pass
draft declaring `one_pass_draft.target_features`, as assets/builtin/one-pass-draft does, first or as
`--second-draft`), the same method with them off (`sage-cost/one-pass-draft, features off`: the same weights,
`sage_core.models.one_pass.without_features`), interleaved, and prints each lane over its twin per kind of
example and pooled (end to end, decode only, τ on and off); it is refused when no draft of the run reads them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, cast

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from sage_core import VLM, DecodeConfig, ModelPair, PreparedInputs, check_pair, decode, load_media, load_pair
from sage_core import prepare_inputs as prepare
from sage_core.config import BACKENDS, Backend, SamplingConfig
from sage_core.cost_curve import CostCurve
from sage_core.errors import SageError
from sage_core.media import DEFAULT_FRAMES
from sage_core.method_settings import SageConfig
from sage_core.methods import called, drafts, leads, method_names, method_spec, register, specs, unregister
from sage_core.methods.sage_cost import SageCostProposer
from sage_core.models.one_pass import reads_features, without_features
from sage_core.records import RoundRecord
from sage_core.studies.costs import measure_costs, predicted_speedups
from sage_core.studies.sweep import SWEEP_BUDGETS, sweep
from sage_core.threads import ThreadChoice, choose_threads
from sage_core.timing import synchronize

ROOT = Path(__file__).resolve().parent.parent

PEERS = ("generate", "assisted")
#: Our methods benchmarked unless --methods names others: every method of the registry, the ablation lanes
#: included (sage-cost must lead them too).
BENCHMARKED = tuple(spec.name for spec in specs())
PRUNED = "+prune"  # a method name with a ratio: "sage+prune0.9"
ON = "@"  # one of our methods on another backend than the first: "sage@compiled"
WITH = "/"  # one of our methods with --second-draft: "sage/one-pass-draft" (the draft's folder name)
FEATURES_OFF = ", features off"  # --features-off's twin of a lane whose draft reads the target's features
FILLER = "the picture. "  # --long-prompt pads with this text


GREEDY = SamplingConfig()


def method_config(method: str, max_new: int, backend: str = "fast", sampling: SamplingConfig = GREEDY) -> DecodeConfig:
    """`sage`, `sage+prune0.9` or `sage@compiled` -> its decode settings (greedy, or sampled as
    `sampling` says); `backend` unless the name gives another."""
    method, _, on = method.removesuffix(FEATURES_OFF).partition(ON)
    method = method.partition(WITH)[0]
    name, _, ratio = method.partition(PRUNED)
    prune = float(ratio) if ratio else 0.0
    return DecodeConfig(name, max_new, prune_ratio=prune, backend=cast(Backend, on or backend), sampling=sampling)


def label(method: str, temperature: float) -> str:
    """A method's name in the tables: plain when greedy, with its temperature when sampled."""
    return method if temperature == 0 else f"{method} T={temperature:g}"


def set_video_pixels(video_processor: Any, pixels: int) -> None:
    """Raise (or lower) a video processor's pixel cap, its `size.longest_edge` (a SizeDict or a dict)."""
    size = video_processor.size
    if dataclasses.is_dataclass(size) and not isinstance(size, type):
        video_processor.size = dataclasses.replace(size, longest_edge=pixels)
    else:
        video_processor.size = {**size, "longest_edge": pixels}


def on_backends(methods: Sequence[str], backends: Sequence[str]) -> list[str]:
    """The methods as given (on the first backend), then each of ours again on every other backend."""
    return list(methods) + [f"{m}{ON}{backend}" for backend in backends[1:] for m in methods if m not in PEERS]


def with_second_draft(methods: Sequence[str], tag: str) -> list[str]:
    """The methods as given, then each of ours that drafts again with the second draft (`tag`: its name)."""
    return list(methods) + [f"{m}{WITH}{tag}" for m in methods if m not in PEERS and drafts(m.partition(ON)[0])]


def second_drafted(method: str) -> bool:
    """Whether a lane runs with --second-draft's draft."""
    return WITH in method


def features_off(method: str) -> bool:
    """Whether a lane runs --features-off's twin: its draft with the target's features off."""
    return method.endswith(FEATURES_OFF)


def with_features_off(methods: Sequence[str], reading: dict[bool, bool]) -> list[str]:
    """The methods as given, then each of ours that drafts with a draft reading the target's features (`reading`:
    under False the first draft's, under True --second-draft's) again with them off."""
    twins = [
        m + FEATURES_OFF
        for m in methods
        if m not in PEERS and drafts(method_config(m, 1).method) and reading.get(second_drafted(m), False)
    ]
    return list(methods) + twins


Pairs = dict[tuple[bool, bool], ModelPair]  # under (second draft?, features off?)


def lane_pair(pairs: Pairs, method: str) -> ModelPair:
    """The pair a lane runs: the first draft's or --second-draft's, with the target's features off or not."""
    return pairs[(second_drafted(method), features_off(method))]


def with_pruning(methods: Sequence[str], ratios: Sequence[float]) -> list[str]:
    """Each of our draft methods at each nonzero ratio, after the methods as given (ratio 0 = as given)."""
    out = list(methods) if 0 in ratios else [m for m in methods if m in PEERS or not drafts(m)]
    for ratio in (r for r in ratios if r > 0):
        out += [f"{m}{PRUNED}{ratio:g}" for m in methods if drafts(m)]
    return out


@dataclass(frozen=True)
class Run:
    """One timed run of one method on one example."""

    example: str
    method: str
    repeat: int
    tokens: tuple[int, ...]
    seconds: float  # end to end, the preparation charged included
    decode_seconds: float  # after the prefill (and its first token)
    mean_accepted: float | None = None  # tau, our speculative methods
    tokens_per_forward: float | None = None
    draft_prefill_seconds: float | None = None  # the draft's prefill (after pruning, when pruned)
    draft_prompt_tokens: int | None = None
    pad_tokens: int = 0  # --long-prompt padding asked for (0: the example's own prompt)
    prompt_tokens: int = 0
    temperature: float = 0.0  # 0: greedy


@dataclass(frozen=True)
class Rounds:
    """Per decode round of one of our methods (medians over an example's rounds), in milliseconds."""

    example: str
    method: str
    rounds: int
    draft_ms: float
    verify_ms: float
    step_ms: float
    outside_forwards_ms: float  # step time not spent inside a model forward
    nodes: float = 0.0  # tree nodes verified per round (median)
    draft_forwards: float = 0.0  # draft forwards per round (median; a one-pass draft: 1)
    pad_tokens: int = 0
    prompt_tokens: int = 0
    temperature: float = 0.0
    # The round's decomposition (`DECOMPOSITION`): the draft's forwards' model time, the drafting around them
    # (top-k, entropy, the tree's rule), the target's verify forward's model time, the verification around it
    # (masks, positions, cache moves, the acceptance walk) and the rest of the round (commits, the record).
    draft_model_ms: float = 0.0
    drafting_loop_ms: float = 0.0
    verify_model_ms: float = 0.0
    verify_loop_ms: float = 0.0
    rest_ms: float = 0.0


#: The entropy ablation's lane (--sage-cost-fixed-depth): sage-cost with its depth cap held, not set by D(α).
FIXED_DEPTH = "sage-cost-fixed"


def register_fixed_depth(depth: int) -> None:
    """Register the lane `sage-cost-fixed` for this process: sage-cost with every round's depth cap at `depth`
    (everything else sage-cost's), so the benchmark weighs what D(α) adds at the same depth on average."""
    SageCostProposer(SageConfig(), fixed_depth=depth)  # the depth's check, before anything registers
    base = next(spec for spec in specs() if spec.name == "sage-cost")
    register(
        dataclasses.replace(
            base,
            name=FIXED_DEPTH,
            label=f"sage-cost, depth {depth} every round (no entropy; ablation)",
            short="sage-cost-fixed",
            ablation=True,
            lead_name="",  # (compared with, not leading)
            chooses_budget=False,  # (not in the budget sweep)
            called="sage-cost at a fixed depth (no entropy)",
            proposer=lambda settings, config: SageCostProposer(config.sage, fixed_depth=depth),
        )
    )


# -- running the methods --------------------------------------------------------


def run_ours(
    pair: ModelPair,
    prepared: PreparedInputs,
    method: str,
    max_new: int,
    example: str,
    repeat: int,
    backend: str = "fast",
    sampling: SamplingConfig = GREEDY,
) -> Run:
    config = method_config(method, max_new, backend, sampling)
    run = decode(pair, prepared.media, prepared.prompt, config, prepared)
    s = run.run_to_end()
    drafting = drafts(config.method)
    return Run(
        example,
        method,
        repeat,
        s.token_ids,
        s.seconds,
        s.decode_seconds,
        s.mean_accepted if drafting else None,
        s.tokens_per_forward,
        run.records[0].draft_seconds if drafting else None,
        run.header.draft_prompt_tokens,
        temperature=sampling.temperature,
    )


class FirstCall(LogitsProcessor):
    """Notes when generate first scores a token: the end of its first target forward."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.at: float | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.at is None:
            synchronize(self.device)
            self.at = time.perf_counter()
        return scores


def run_peer(
    pair: ModelPair,
    prepared: PreparedInputs,
    method: str,
    max_new: int,
    example: str,
    repeat: int,
    backend: str = "",
    sampling: SamplingConfig = GREEDY,
) -> Run:
    inputs = dict(prepared.target)
    prompt_length = int(inputs["input_ids"].shape[1])
    first = FirstCall(pair.device)
    extra: dict[str, Any] = {"assistant_model": pair.draft.model} if method == "assisted" else {}
    if sampling.greedy:
        extra["do_sample"] = False
    else:
        torch.manual_seed(sampling.seed or 0)
        extra.update(do_sample=True, temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p)
    synchronize(pair.device)
    start = time.perf_counter()
    with torch.inference_mode():
        output = pair.target.model.generate(
            **inputs, max_new_tokens=max_new, logits_processor=LogitsProcessorList([first]), **extra
        )
    synchronize(pair.device)
    end = time.perf_counter()
    tokens = tuple(output[0, prompt_length:].tolist())
    seconds = prepared.target_seconds + end - start
    return Run(example, method, repeat, tokens, seconds, end - (first.at or start), temperature=sampling.temperature)


@contextmanager
def forward_timer(models: Sequence[Any], devices: Sequence[torch.device]) -> Iterator[list[float]]:
    """Time every forward of `models` (synchronised on a GPU): yields a one-item list of seconds so far."""
    total = [0.0]
    originals = [model.forward for model in models]

    def timed(forward: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for device in devices:
                synchronize(device)
            start = time.perf_counter()
            out = forward(*args, **kwargs)
            for device in devices:
                synchronize(device)
            total[0] += time.perf_counter() - start
            return out

        return wrapper

    own = [model.__dict__.get("forward") for model in models]  # accelerate's hooks set an instance forward
    for model, original in zip(models, originals, strict=True):
        model.forward = timed(original)
    try:
        yield total
    finally:
        for model, saved in zip(models, own, strict=True):
            if saved is None:
                del model.forward
            else:
                model.forward = saved


def profile_rounds(
    pair: ModelPair,
    prepared: PreparedInputs,
    method: str,
    max_new: int,
    example: str,
    backend: str = "fast",
    sampling: SamplingConfig = GREEDY,
    keep: list[RoundRecord] | None = None,
) -> Rounds:
    """One run with every forward timed: the median round's parts (its records appended to `keep`)."""
    config = method_config(method, max_new, backend, sampling)
    drafted = drafts(config.method) and pair.draft.model is not pair.target.model
    target_parts = [part for part in (pair.target.model, pair.target.lean) if part is not None]  # either may run
    draft_parts = [part for part in (pair.draft.model, pair.draft.lean) if part is not None] if drafted else []
    run = decode(pair, prepared.media, prepared.prompt, config, prepared)
    draft, verify, step, outside, nodes, forwards_run = [], [], [], [], [], []
    parts: dict[str, list[float]] = {name: [] for name in DECOMPOSITION}
    with forward_timer(target_parts, pair.devices) as target, forward_timer(draft_parts, pair.devices) as drafting:
        for record in run:
            in_target, in_draft = target[0], drafting[0]  # the timers are read after the step: its forwards are in
            target[0] = drafting[0] = 0.0
            if record.phase == "decode":
                draft.append(record.draft_seconds)
                verify.append(record.verify_seconds)
                step.append(record.round_seconds)
                outside.append(record.round_seconds - in_target - in_draft)
                nodes.append(float(len(record.tree_tokens)))
                forwards_run.append(float(record.draft_forwards or 0))
                for name, seconds in zip(DECOMPOSITION, decomposed(record, in_draft, in_target), strict=True):
                    parts[name].append(seconds)
    if keep is not None:
        keep.extend(run.records)
    return Rounds(
        example,
        method,
        len(step),
        _ms(draft),
        _ms(verify),
        _ms(step),
        _ms(outside),
        statistics.median(nodes) if nodes else 0.0,
        statistics.median(forwards_run) if forwards_run else 0.0,
        temperature=sampling.temperature,
        draft_model_ms=_ms(parts["draft_model_ms"]),
        drafting_loop_ms=_ms(parts["drafting_loop_ms"]),
        verify_model_ms=_ms(parts["verify_model_ms"]),
        verify_loop_ms=_ms(parts["verify_loop_ms"]),
        rest_ms=_ms(parts["rest_ms"]),
    )


#: A decode round's parts (`Rounds`), in the order `decomposition_lines` prints them, and how it names them.
DECOMPOSITION = {
    "draft_model_ms": "draft forwards (model)",
    "drafting_loop_ms": "drafting around them",
    "verify_model_ms": "verify forward (model)",
    "verify_loop_ms": "verifying around it",
    "rest_ms": "rest of the round",
}


def decomposed(record: RoundRecord, in_draft: float, in_target: float) -> tuple[float, ...]:
    """A round's seconds by `DECOMPOSITION`: the forwards' model time as the timers saw it, the loop's around
    each (its part's recorded time less its forwards, never below 0) and the rest of the round."""
    rest = record.round_seconds - record.draft_seconds - record.verify_seconds
    return (
        in_draft,
        max(0.0, record.draft_seconds - in_draft),
        in_target,
        max(0.0, record.verify_seconds - in_target),
        max(0.0, rest),
    )


def decomposition_lines(rows: Sequence[dict[str, Any]], curve: CostCurve | None) -> str:
    """Where a decode round's time goes, per method (medians over examples of each example's median round),
    and the verification of one node against the one-token step with the model's own share of it."""
    shown = [row for row in rows if "verify_model_ms" in row]
    if not shown:
        return ""
    head = " | ".join(DECOMPOSITION.values())
    lines = [
        "\n\nWhere a decode round goes (ms, median round):\n",
        f"| method | {head} | round | the loop's share |",
        "|" + "---|" * (len(DECOMPOSITION) + 3),
    ]
    for row in shown:
        cells = " | ".join(f"{row[name]:.2f}" for name in DECOMPOSITION)
        loop = row["drafting_loop_ms"] + row["verify_loop_ms"] + row["rest_ms"]
        share = loop / row["step_ms"] if row["step_ms"] else 0.0
        lines.append(f"| {row['method']} | {cells} | {row['step_ms']:.2f} | {share:.0%} |")
    if curve is not None:
        ratio = curve.verify_at(1) / curve.one_token_ms
        lines.append(
            f"\nVerifying one node costs {ratio:.2f} one-token steps ({curve.verify_at(1):.2f} against "
            f"{curve.one_token_ms:.2f} ms; goal 1.15): it is a forward over 2 tokens (the root and the node) "
            "against 1."
        )
    return "\n".join(lines)


def _ms(seconds: Sequence[float]) -> float:
    return 1000 * statistics.median(seconds) if seconds else 0.0


# -- figures ------------------------------------------------------------------


def spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"


def summarize(
    runs: Sequence[Run], rounds: Sequence[Rounds], methods: Sequence[str], temperatures: Sequence[float] = (0.0,)
) -> list[dict[str, Any]]:
    """One row per method and temperature; speedups compare methods at the same temperature."""
    rows = []
    for temperature in temperatures:
        at = [r for r in runs if r.temperature == temperature]
        rows += summarize_at(at, [r for r in rounds if r.temperature == temperature], methods, temperature)
    return rows


def rate(runs: Sequence[Run], field: str) -> float:
    """Tokens/s of one method on one example: its tokens over the median time, or, when the runs made
    different numbers of tokens (sampling), the median of each run's own rate."""
    counts = [len(r.tokens) if field == "e2e" else len(r.tokens) - 1 for r in runs]
    seconds = [r.seconds if field == "e2e" else r.decode_seconds for r in runs]
    if len(set(counts)) == 1:
        return counts[0] / statistics.median(seconds)
    return statistics.median(c / s for c, s in zip(counts, seconds, strict=True))


def summarize_at(
    runs: Sequence[Run], rounds: Sequence[Rounds], methods: Sequence[str], temperature: float
) -> list[dict[str, Any]]:
    """The rows of one temperature (`runs` and `rounds` all at it)."""
    examples = list(dict.fromkeys(r.example for r in runs))

    def per_example(method: str, field: str) -> dict[str, float]:
        return {e: rate([r for r in runs if r.example == e and r.method == method], field) for e in examples}

    rows = []
    speeds = {(m, f): per_example(m, f) for m in methods for f in ("e2e", "decode")}
    for method in methods:
        mine = [r for r in runs if r.method == method]
        row: dict[str, Any] = {"method": label(method, temperature), "temperature": temperature}
        for field in ("e2e", "decode"):
            row[f"tokens_per_s_{field}"] = list(speeds[(method, field)].values())
            for base in ("generate", "assisted", *method_names()):  # (a registered lane: --sage-cost-fixed-depth's)
                if base in methods:
                    ratios = [speeds[(method, field)][e] / speeds[(base, field)][e] for e in examples]
                    row[f"x_{base}_{field}"] = ratios
        reference = {r.example: r.tokens for r in runs if r.method == "generate"}
        same = all(r.tokens == reference.get(r.example, r.tokens) for r in mine)
        row["same_as_generate"] = same if temperature == 0 else None  # sampled runs differ by design
        taus = [r.mean_accepted for r in mine if r.mean_accepted is not None]
        row["tau"] = statistics.median(taus) if taus else None
        per_forward = [r.tokens_per_forward for r in mine if r.tokens_per_forward is not None]
        row["tokens_per_forward"] = statistics.median(per_forward) if per_forward else None
        prefills = [r.draft_prefill_seconds for r in mine if r.draft_prefill_seconds is not None]
        row["draft_prefill_ms"] = 1000 * statistics.median(prefills) if prefills else None
        lengths = [r.draft_prompt_tokens for r in mine if r.draft_prompt_tokens is not None]
        row["draft_prompt_tokens"] = statistics.median(lengths) if lengths else None
        mine_rounds = [r for r in rounds if r.method == method]
        if mine_rounds:
            for key in (
                "draft_ms",
                "verify_ms",
                "step_ms",
                "outside_forwards_ms",
                "nodes",
                "draft_forwards",
                *DECOMPOSITION,
            ):
                row[key] = statistics.median(getattr(r, key) for r in mine_rounds)
        rows.append(row)
    return rows


ASSISTED_CALLED = "transformers' assisted generation"


def compared_with(lead: str) -> list[tuple[str, str]]:
    """What a lead (the registry's `leads`: SAGE, sage-cost) is compared with under the table (the row's
    ``x_<base>_*`` ratios), and how a sentence names each: assisted generation, then every drafting method in
    column order but itself and the leads after it (SAGE is not compared with sage-cost; sage-cost is with SAGE)."""
    later = leads()[leads().index(lead) + 1 :]
    return [("assisted", ASSISTED_CALLED)] + [
        (spec.name, called(spec.name))
        for spec in specs()
        if spec.drafts and spec.name != lead and spec.name not in later
    ]


def sage_lines(rows: Sequence[dict[str, Any]]) -> str:
    """SAGE and sage-cost against the other methods that ran: the median over examples (with its spread) of the
    per-example ratio of tokens per second, end to end and decode only; then each method's efficiency."""
    lines = ""
    for lead in leads():
        lead_name = method_spec(lead).lead_name
        for row in (row for row in rows if row["method"].split()[0] == lead):
            at = "" if row["temperature"] == 0 else f" at temperature {row['temperature']:g} (both sampling)"
            for base, name in compared_with(lead):
                if f"x_{base}_e2e" in row:
                    lines += (
                        f"\n\n{lead_name} over {name}{at}: {spread(row[f'x_{base}_e2e'])} end to end, "
                        f"{spread(row[f'x_{base}_decode'])} decode only."
                    )
    return lines + efficiency_lines(rows) + drafting_lines(rows)


def per_example_ratio(row: dict[str, Any], base: dict[str, Any], field: str) -> list[float]:
    """A row's tokens per second over another's, example by example (both list the examples in one order)."""
    key = f"tokens_per_s_{field}"
    return [a / b for a, b in zip(row[key], base[key], strict=True)]


def second_draft_lines(rows: Sequence[dict[str, Any]]) -> str:
    """With --second-draft: each method with the second draft over itself with the first, and the best lane of
    each draft (by its median speedup over plain decoding) against the other's, per example; greedy rows."""
    greedy = {row["method"]: row for row in rows if row["temperature"] == 0}
    seconds = [name for name in greedy if second_drafted(name)]
    if not seconds:
        return ""
    lines = "\n\nThe second draft against the first (median of the per-example ratios [min–max]; end to end / decode):"
    for name in seconds:
        first = greedy.get(name.partition(WITH)[0])
        if first is not None:
            ratios = [per_example_ratio(greedy[name], first, f) for f in ("e2e", "decode")]
            lines += f"\n  {name} over {first['method']}: {spread(ratios[0])} / {spread(ratios[1])}"
    ranked = [row for row in greedy.values() if "x_ar_e2e" in row and row.get("tau") is not None]
    best_second = max((r for r in ranked if second_drafted(r["method"])), key=_median_speedup, default=None)
    best_first = max((r for r in ranked if not second_drafted(r["method"])), key=_median_speedup, default=None)
    if best_second is not None and best_first is not None:
        ratios = [per_example_ratio(best_second, best_first, f) for f in ("e2e", "decode")]
        lines += (
            f"\n  the best with the second draft ({best_second['method']}) over the best with the first "
            f"({best_first['method']}): {spread(ratios[0])} end to end, {spread(ratios[1])} decode only"
        )
    return lines


def features_off_lines(runs: Sequence[Run], plan: Plan) -> str:
    """With --features-off: each lane with the target's features on over its twin with them off (greedy runs), per
    kind of example and, with several kinds, pooled: the median of the per-example ratios of tokens per second
    [min–max], end to end and decode only, and τ with them on and off (the median over the group's timed runs)."""
    greedy = [r for r in runs if r.temperature == 0]
    twins = [m for m in plan.methods if features_off(m)]
    if not twins or not greedy:
        return ""
    kinds = {example_name(e, pad): e.get("kind") or "no kind" for e in plan.examples for pad in plan.pads}
    groups = {kind: [e for e, k in kinds.items() if k == kind] for kind in dict.fromkeys(kinds.values())}
    if len(groups) > 1:
        groups["all kinds"] = list(kinds)
    lines = (
        "\n\nEach lane with the target's features on over its twin with them off (median of the per-example "
        "ratios [min–max]; end to end / decode only; τ on / off):"
    )
    for off in twins:
        on = off.removesuffix(FEATURES_OFF)
        for group, examples in groups.items():
            lines += f"\n  {on}, {group} ({len(examples)} example{'s' * (len(examples) != 1)}): "
            lines += on_over_off([r for r in greedy if r.example in examples], on, off)
    return lines


def on_over_off(runs: Sequence[Run], on: str, off: str) -> str:
    """One lane over another on the same examples: the per-example ratios of tokens per second (end to end /
    decode only), then each lane's median τ."""
    examples = list(dict.fromkeys(r.example for r in runs))

    def lane(method: str, example: str) -> list[Run]:
        return [r for r in runs if r.method == method and r.example == example]

    def ratios(field: str) -> str:
        return spread([rate(lane(on, e), field) / rate(lane(off, e), field) for e in examples])

    def tau(method: str) -> str:
        taus = [r.mean_accepted for r in runs if r.method == method and r.mean_accepted is not None]
        return f"{statistics.median(taus):.2f}" if taus else "n/a"

    return f"{ratios('e2e')} / {ratios('decode')}; τ {tau(on)} / {tau(off)}"


def _median_speedup(row: dict[str, Any]) -> float:
    return statistics.median(row["x_ar_e2e"])


def planned_depth_line(records: Sequence[RoundRecord]) -> str:
    """sage-cost's mean D(α) over its profiled rounds (--sage-cost-fixed-depth holds the depth near it), and how
    often a round's tree reached it; empty when sage-cost did not run."""
    rounds = [r for r in records if r.phase == "decode" and r.planned_depth is not None]
    if not rounds:
        return ""
    mean = statistics.fmean(r.planned_depth or 0 for r in rounds)
    reached = sum(r.depth >= (r.planned_depth or 0) for r in rounds)
    return (
        f"\n\nsage-cost's mean D(α): {mean:.1f} over {len(rounds)} rounds (--sage-cost-fixed-depth holds the depth "
        f"near it); {reached} of those trees reached it."
    )


def drafting_lines(rows: Sequence[dict[str, Any]]) -> str:
    """Each drafting method's draft time per round beside SAGE's, with the nodes each verifies a round (the
    same-budget baseline, best-first, should cost what its tree must: at most 1.3× SAGE's at its node count)."""
    sage = next((row for row in rows if row["method"] == "sage" and row.get("draft_ms")), None)
    if sage is None:
        return ""
    out = [
        f"{row['method']} {row['draft_ms']:.1f} ms for {row['nodes']:.0f} nodes "
        f"({row['draft_ms'] / sage['draft_ms']:.2f}× SAGE's)"
        for row in rows
        if row.get("draft_ms") and row.get("nodes") and row["method"] != "sage"
    ]
    head = f"\n\nDrafting per round (median; SAGE {sage['draft_ms']:.1f} ms for {sage['nodes']:.0f} nodes): "
    return head + (", ".join(out) + "." if out else "n/a.")


def efficiency_lines(rows: Sequence[dict[str, Any]]) -> str:
    """Each drafting method's efficiency: its speedup over plain decoding (`ar`, median of the per-example
    ratios) divided by its tokens per target forward, end to end and decode only."""
    drafting = [row for row in rows if "x_ar_e2e" in row and row.get("tokens_per_forward") and row.get("tau")]
    out = [
        f"{row['method']} {statistics.median(row['x_ar_e2e']) / row['tokens_per_forward']:.2f} / "
        f"{statistics.median(row['x_ar_decode']) / row['tokens_per_forward']:.2f}"
        for row in drafting
    ]
    return "\n\nEfficiency (speedup over plain decoding ÷ tokens per target forward; end to end / decode only): " + (
        ", ".join(out) + "." if out else "n/a."
    )


def cost_lines(curve: CostCurve | None, records: dict[str, list[RoundRecord]], rows: Sequence[dict[str, Any]]) -> str:
    """The measured cost curve, and the decode-only speedups of SAGE and sage-cost it predicts (from the profiled
    runs' rounds of every example) beside the measured ones (median of the per-example ratios)."""
    if curve is None:
        return ""
    lines = curve.lines()
    for lead in leads():
        lead_name = method_spec(lead).lead_name
        predicted = predicted_speedups(curve, records, lead) if lead in records else {}
        mine = next((row for row in rows if row["method"] == lead), {})
        for method, value in predicted.items():
            measured = mine.get(f"x_{method}_decode")
            shown = f", measured {statistics.median(measured):.2f}×" if measured else ""
            lines.append(f"{lead_name} over {method}, decode only: {value:.2f}× predicted by these costs{shown}")
    return "\n".join(lines) + "\n\n"


def backend_lines(rows: Sequence[dict[str, Any]], backends: Sequence[str]) -> str:
    """Each of our methods on every other backend against itself on the first: the median over examples
    (with its spread) of the per-example ratio of tokens per second, end to end and decode only."""
    by_label = {row["method"]: row for row in rows}
    lines = ""
    for row in rows:
        name, _, temperature = row["method"].partition(" ")  # "sage@compiled T=0.7"
        method, _, on = name.partition(ON)
        base = by_label.get(f"{method} {temperature}".strip()) if on else None
        if base is None:
            continue
        ratios = {
            field: [a / b for a, b in zip(row[f"tokens_per_s_{field}"], base[f"tokens_per_s_{field}"], strict=True)]
            for field in ("e2e", "decode")
        }
        lines += (
            f"\n\n{row['method']} against {base['method']} on {backends[0]}: {spread(ratios['e2e'])} end to end, "
            f"{spread(ratios['decode'])} decode only."
        )
    return lines


def padded(tokenizer: Any, prompt: str, tokens: int) -> str:
    """`prompt` after enough filler text to add about `tokens` tokens."""
    if tokens <= 0:
        return prompt
    unit = len(tokenizer(FILLER)["input_ids"])
    return FILLER * max(1, round(tokens / unit)) + prompt


def context_table(
    runs: Sequence[Run], rounds: Sequence[Rounds], methods: Sequence[str], temperatures: Sequence[float] = (0.0,)
) -> str:
    """Per --long-prompt padding: prompt tokens, and each method's (at each temperature) median round and
    decode-only tokens/s."""
    pads = sorted({r.pad_tokens for r in runs})
    ours = [(m, t) for t in temperatures for m in methods if m not in PEERS]
    every = [(m, t) for t in temperatures for m in methods]
    head = ["padding", "prompt tokens"] + [f"{label(m, t)} ms/round" for m, t in ours]
    head += [f"{label(m, t)} tok/s decode" for m, t in every]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for pad in pads:
        mine = [r for r in runs if r.pad_tokens == pad]
        cells = [str(pad), f"{statistics.median(r.prompt_tokens for r in mine):.0f}"]
        for method, t in ours:
            steps = [r.step_ms for r in rounds if r.pad_tokens == pad and r.method == method and r.temperature == t]
            cells.append(f"{statistics.median(steps):.1f}" if steps else "")
        for method, t in every:
            speeds = [
                (len(r.tokens) - 1) / r.decode_seconds
                for r in mine
                if r.method == method and r.temperature == t and r.decode_seconds
            ]
            cells.append(f"{statistics.median(speeds):.1f}" if speeds else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    has = lambda key: any(key in row for row in rows)  # noqa: E731
    head = ["method", "tok/s end to end", "tok/s decode only"]
    head += [
        h
        for h, key in (
            ("× generate (e2e)", "x_generate_e2e"),
            ("× generate (decode)", "x_generate_decode"),
            ("× ar (e2e)", "x_ar_e2e"),
            ("× ar (decode)", "x_ar_decode"),
        )
        if has(key)
    ]
    head += [
        "τ",
        "tokens/forward",
        "draft prompt",
        "draft prefill ms",
        "draft ms/round",
        "draft forwards/round",
        "verify ms/round",
        "outside forwards ms/round",
        "same tokens",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["method"], spread(row["tokens_per_s_e2e"]), spread(row["tokens_per_s_decode"])]
        for key in ("x_generate_e2e", "x_generate_decode", "x_ar_e2e", "x_ar_decode"):
            if has(key):
                cells.append(spread(row[key]) if key in row else "")
        cells.append(f"{row['tau']:.2f}" if row.get("tau") is not None else "")
        cells.append(f"{row['tokens_per_forward']:.2f}" if row.get("tokens_per_forward") else "")
        cells.append(f"{row['draft_prompt_tokens']:.0f}" if row.get("draft_prompt_tokens") is not None else "")
        cells.append(f"{row['draft_prefill_ms']:.1f}" if row.get("draft_prefill_ms") is not None else "")
        if "step_ms" in row:
            share = row["outside_forwards_ms"] / row["step_ms"] if row["step_ms"] else 0.0
            cells += [
                f"{row['draft_ms']:.1f}",
                f"{row.get('draft_forwards', 0):.0f}",
                f"{row['verify_ms']:.1f}",
                f"{row['outside_forwards_ms']:.2f} ({share:.0%})",
            ]
        else:
            cells += ["", "", "", ""]
        same = row["same_as_generate"]
        cells.append("n/a (sampled)" if same is None else "yes" if same else "NO")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- the budget sweep ----------------------------------------------------------


def spread_kinds(examples: Sequence[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """`count` examples, taking the kinds in turn (one of each kind before a second of any)."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for example in examples:
        by_kind.setdefault(example.get("kind", ""), []).append(example)
    turns = [e for rank in range(len(examples)) for group in by_kind.values() for e in group[rank : rank + 1]]
    return turns[:count]


def budget_sweep(args: argparse.Namespace, pair: ModelPair, examples: Sequence[dict[str, Any]], base: Path) -> int:
    """--sweep: the sweep's table and the cost curve (printed), and its figure (--sweep-plot)."""
    budgets = [int(b) for b in args.sweep_budgets.split(",")]
    cases = []
    for example in examples:
        media = load_media(base / example["file"], frames=args.frames)
        cases.append((example["file"], prepare(pair, media, example["prompt"])))
    curve = measure_costs(pair, cases[0][1].media, cases[0][1].prompt, args.backend)
    print(
        f"target {args.target}  draft {args.draft}  device {pair.device}  dtype {pair.target.dtype}  "
        f"threads {torch.get_num_threads()}",
        file=sys.stderr,
    )
    result = sweep(
        pair,
        cases,
        budgets,
        max_new_tokens=args.max_new_tokens,
        repeats=args.sweep_repeats,
        backend=args.backend,
        progress=lambda line: print(line, file=sys.stderr),
    )
    print(
        f"\nThe budget sweep: {len(cases)} examples ({', '.join(name for name, _ in cases)}), "
        f"{args.sweep_repeats} timed repeat(s) after a warm-up, decode-only speedup = median over examples\n"
    )
    print("\n".join(curve.lines()) + "\n")
    print("\n".join(result.lines()))
    if args.sweep_plot:
        write_sweep_plot(result, curve, Path(args.sweep_plot), f"{args.target} / {args.draft}")
    return 0


def write_sweep_plot(result: Any, curve: CostCurve, path: Path, pair_name: str) -> None:
    """The sweep's figure as HTML (Plotly from its CDN) and, when chromium is there, a PNG beside it."""
    import shutil
    import tempfile

    from sage_core.studies.sweep_figure import sweep_figure

    fig = sweep_figure(result, curve, f"The budget sweep, {pair_name}, on {curve.device} ({curve.dtype})")
    fig.write_html(path, include_plotlyjs="cdn")
    browser = shutil.which("chromium")
    if browser is None:
        return
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as p:
        page_file = Path(scratch) / "sweep.html"
        fig.write_html(page_file, include_plotlyjs=True)
        chromium = p.chromium.launch(executable_path=browser, args=["--no-sandbox", "--disable-gpu"])
        page = chromium.new_page(viewport={"width": int(fig.layout.width) + 40, "height": 440})
        page.goto(page_file.as_uri())
        page.wait_for_timeout(1500)
        page.screenshot(path=str(path.with_suffix(".png")), full_page=True)
        chromium.close()


# -- main ---------------------------------------------------------------------


def add_pair_arguments(parser: argparse.ArgumentParser) -> None:
    """The pair's arguments: the target, the draft, --second-draft and --features-off."""
    parser.add_argument("--target", default="builtin")
    parser.add_argument("--draft", default="builtin")
    parser.add_argument(
        "--second-draft",
        help="also run each of our drafting methods with this draft (e.g. assets/builtin/one-pass-draft), "
        "interleaved, as METHOD/NAME (NAME: the draft's folder name)",
    )
    parser.add_argument(
        "--features-off",
        action="store_true",
        help="also run each of our drafting methods whose draft reads the target's features (a one-pass draft's "
        "one_pass_draft.target_features) with them off, interleaved, as 'METHOD, features off', and print the "
        "lane with them on over its twin per kind of example and pooled",
    )


def parse_args() -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_pair_arguments(parser)
    parser.add_argument("--examples", default=str(ROOT / "assets" / "examples" / "examples.json"))
    parser.add_argument("--methods", default=",".join((*BENCHMARKED, *PEERS)))
    parser.add_argument(
        "--kinds", help="only the examples of these kinds, e.g. describe,chart,narrate (the long answers)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument(
        "--prune-ratios", default="0", help="draft-side visual token pruning ratios to run, e.g. 0,0.8,0.9"
    )
    parser.add_argument("--frames", type=int, default=DEFAULT_FRAMES, help="frames sampled from a video")
    parser.add_argument(
        "--video-pixels", type=int, help="the video processors' pixel cap (longest_edge), for more visual tokens"
    )
    parser.add_argument("--temperatures", default="0", help="e.g. 0,0.7,1.0 (0 = greedy; above: sampled)")
    parser.add_argument("--top-p", type=float, default=1.0, help="when sampling (default 1: off)")
    parser.add_argument("--top-k-sampling", type=int, default=50, help="when sampling (default 50 as generate)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--sage-cost-fixed-depth",
        type=int,
        help="also race sage-cost with every round's depth cap held at N instead of D(α) (the entropy ablation: "
        "N near sage-cost's mean D(α), which a run without it prints), as the lane sage-cost-fixed",
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument(
        "--threads",
        type=int,
        help="torch's intra-op CPU threads (default: SAGE_THREADS and the like, else chosen for the pair by "
        "timing its one-token step: sage_core.threads); every method uses them",
    )
    parser.add_argument(
        "--backend",
        default="fast",
        help=f"how our methods run the models: {', '.join(BACKENDS)}; several (fast,compiled) run each of our "
        "methods on each, interleaved (the others as sage@compiled)",
    )
    parser.add_argument(
        "--long-prompt", default="", help="also run each example with about N[,N...] text tokens of padding"
    )
    parser.add_argument("--sweep", action="store_true", help="run the budget sweep instead (module docstring)")
    parser.add_argument("--sweep-budgets", default=",".join(str(b) for b in SWEEP_BUDGETS))
    parser.add_argument("--sweep-examples", type=int, default=3, help="the sweep's examples: the first N chosen")
    parser.add_argument("--sweep-repeats", type=int, default=1, help="timed runs per setting and example")
    parser.add_argument("--sweep-plot", help="write the sweep's figure here (.html; a .png beside it if it can)")
    parser.add_argument("--json", help="write every run and the summary here")
    parser.add_argument("--markdown", help="write the summary table here")
    args = parser.parse_args()
    return parser, args


@dataclass(frozen=True)
class Plan:
    """What the command line asks for, checked: the methods (on their backends, pruned), the sampling
    settings per temperature, the examples and the prompt paddings."""

    methods: list[str]
    backends: list[Backend]
    settings: dict[float, SamplingConfig]
    examples: list[dict[str, Any]]
    base: Path  # the examples' folder
    pads: list[int]

    @property
    def temperatures(self) -> list[float]:
        return list(self.settings)


def plan_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Plan:
    """The checked plan; parser.error (exit 2 with one sentence) on a bad argument."""
    methods, backends = methods_of(parser, args)
    try:
        temperatures = list(dict.fromkeys(float(t) for t in args.temperatures.split(",")))
        settings = {t: SamplingConfig(t, args.top_p, args.top_k_sampling) for t in temperatures}
    except ValueError as error:
        parser.error(f"--temperatures, --top-p, --top-k-sampling: {error}")
    examples = json.loads(Path(args.examples).read_text())
    if args.kinds:
        kinds = set(args.kinds.split(","))
        examples = [e for e in examples if e.get("kind") in kinds]
        if not examples:
            parser.error(f"no example of the kinds {args.kinds!r} in {args.examples}")
    try:
        pads = [0] + [int(n) for n in args.long_prompt.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--long-prompt takes token counts, e.g. 500,1500, not {args.long_prompt!r}")
    return Plan(methods, backends, settings, examples, Path(args.examples).parent, pads)


def methods_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[list[str], list[Backend]]:
    """--methods with --prune-ratios and --backend applied (and --sage-cost-fixed-depth's lane), and the
    backends."""
    methods = args.methods.split(",")
    if args.sage_cost_fixed_depth is not None:
        try:
            register_fixed_depth(args.sage_cost_fixed_depth)
        except ValueError as error:
            parser.error(f"--sage-cost-fixed-depth: {error}")
        methods.append(FIXED_DEPTH)
    unknown = set(methods) - {*method_names(), *PEERS}
    if unknown:
        parser.error(f"unknown methods: {', '.join(sorted(unknown))}")
    try:
        ratios = [float(r) for r in args.prune_ratios.split(",")]
        for ratio in ratios:
            DecodeConfig("sage", prune_ratio=ratio)
    except ValueError as error:
        parser.error(f"--prune-ratios: {error}")
    methods = with_pruning(methods, ratios)
    backends = list(dict.fromkeys(args.backend.split(",")))
    if set(backends) - set(BACKENDS):
        parser.error(f"--backend: choose from {', '.join(BACKENDS)}, not {args.backend!r}")
    methods = on_backends(methods, backends)
    if args.second_draft:
        methods = with_second_draft(methods, draft_tag(args.second_draft))
    return methods, cast(list[Backend], backends)  # each checked against BACKENDS


def example_name(example: dict[str, Any], pad: int) -> str:
    """An example's name in the runs: its file, and its --long-prompt padding when padded."""
    return example["file"] + (f"+{pad}tok" if pad else "")


def draft_tag(draft: str) -> str:
    """A second draft's name in the lanes: its folder's (or hub id's) last part."""
    return Path(str(draft).rstrip("/")).name or str(draft)


@dataclass
class Measured:
    """What the runs measured: every timed run, every profiled run's rounds, the records kept for the
    cost lines, and the cost curve (measured once, before the first drafting method runs)."""

    runs: list[Run] = dataclasses.field(default_factory=list)
    rounds: list[Rounds] = dataclasses.field(default_factory=list)
    profiled_records: dict[str, list] = dataclasses.field(default_factory=dict)
    curve: CostCurve | None = None
    threads: ThreadChoice | None = None  # the CPU threads every run ran on, and how they were chosen


def main() -> int:
    try:
        return run_main()
    finally:  # the ablation's lane is this run's alone (the benchmark also runs inside the tests' process)
        if FIXED_DEPTH in method_names():
            unregister(FIXED_DEPTH)


def load_pairs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Pairs:
    """The pair, and the target with --second-draft's draft (the same target object: its weights are loaded once),
    each with the target's features off too (the same draft, not loaded again): under (second?, off?)."""
    pair = load_pair(args.target, args.draft, args.device, args.dtype)
    pairs = {(False, False): pair, (False, True): without_features(pair)}
    if args.second_draft:
        try:
            second = check_pair(pair.target, VLM.load(args.second_draft, "draft", args.device, args.dtype))
        except SageError as error:
            parser.error(f"--second-draft: {error}")
        pairs |= {(True, False): second, (True, True): without_features(second)}
    return pairs


def features_off_plan(parser: argparse.ArgumentParser, plan: Plan, pairs: Pairs) -> Plan:
    """With --features-off: the plan with each drafting lane whose draft reads the target's features raced again
    with them off; refused in one sentence when no draft of the run reads them."""
    reading = {second: reads_features(pair.draft) for (second, off), pair in pairs.items() if not off}
    if not any(reading.values()):
        parser.error(
            "--features-off: no draft of this run reads the target's features (one_pass_draft.target_features in "
            "its config), so there are none to turn off"
        )
    return replace(plan, methods=with_features_off(plan.methods, reading))


def run_main() -> int:
    parser, args = parse_args()
    plan = plan_of(parser, args)
    pairs = load_pairs(parser, args)
    pair = pairs[(False, False)]
    if args.features_off:
        plan = features_off_plan(parser, plan, pairs)
    if args.video_pixels:
        for model in (pair.target, pair.draft):
            set_video_pixels(model.processor.video_processor, args.video_pixels)
    try:
        threads = choose_threads(pair, args.threads)
    except SageError as error:
        parser.error(str(error))
    if args.sweep:
        return budget_sweep(args, pair, spread_kinds(plan.examples, args.sweep_examples), plan.base)
    print(
        f"target {args.target}  draft {args.draft}  device {pair.device}  dtype {pair.target.dtype}  "
        f"threads {threads.describe()}  "
        f"backend {args.backend}",
        file=sys.stderr,
    )
    measured = Measured(threads=threads)
    for example, pad in ((e, p) for e in plan.examples for p in plan.pads):
        name = example_name(example, pad)
        media = load_media(plan.base / example["file"], frames=args.frames)
        try:
            prepared = prepare(pair, media, padded(pair.target.tokenizer, example["prompt"], pad))
        except SageError as error:
            parser.error(f"{name}: {error}")
        if measured.curve is None and any(drafts(m) for m in plan.methods):
            measured.curve = measure_costs(pair, media, prepared.prompt, plan.backends[0])
        bench_example(args, plan, pairs, prepared, name, pad, measured)
        print(f"  {name}: done", file=sys.stderr)
    return write_reports(args, plan, pair, measured)


def bench_example(
    args: argparse.Namespace,
    plan: Plan,
    pairs: Pairs,
    prepared: PreparedInputs,
    name: str,
    pad: int,
    measured: Measured,
) -> None:
    """One example (with `pad` tokens of padding): every method at every temperature, a warm-up and then
    `--repeats` timed runs in rotating order, then one profiled run of each of our methods (`pairs`: the
    pair, and the target with --second-draft's draft, each with the target's features off too: `lane_pair`; the
    prepared inputs serve both drafts when their processors are alike, else each run prepares its draft's)."""
    base_backend, methods = plan.backends[0], plan.methods
    prompt_tokens = int(prepared.target["input_ids"].shape[1])

    def one(method: str, repeat: int, temperature: float) -> Run:
        runner = run_peer if method in PEERS else run_ours
        sampling = replace(plan.settings[temperature], seed=None if temperature == 0 else repeat + 1)
        pair = lane_pair(pairs, method)
        run = runner(pair, prepared, method, args.max_new_tokens, name, repeat, base_backend, sampling)
        return replace(run, pad_tokens=pad, prompt_tokens=prompt_tokens)

    for temperature in plan.temperatures:
        for method in methods:
            one(method, -1, temperature)  # warm-up
        for repeat in range(args.repeats):
            shift = repeat % len(methods)
            for method in methods[shift:] + methods[:shift]:
                measured.runs.append(one(method, repeat, temperature))
        for method in methods:
            if method not in PEERS:
                sampling = replace(plan.settings[temperature], seed=None if temperature == 0 else 0)
                keep = measured.profiled_records.setdefault(method, []) if temperature == 0 and pad == 0 else None
                pair = lane_pair(pairs, method)
                profiled = profile_rounds(
                    pair, prepared, method, args.max_new_tokens, name, base_backend, sampling, keep
                )
                measured.rounds.append(replace(profiled, pad_tokens=pad, prompt_tokens=prompt_tokens))


def write_reports(args: argparse.Namespace, plan: Plan, pair: ModelPair, measured: Measured) -> int:
    """The summary table (printed; --markdown, --json); exit status 1 if any output differed from generate's."""
    runs, rounds, curve, temperatures = measured.runs, measured.rounds, measured.curve, plan.temperatures
    rows = summarize(runs, rounds, plan.methods, temperatures)
    table = cost_lines(curve, measured.profiled_records, rows) + markdown(rows)
    table += sage_lines(rows)
    table += second_draft_lines(rows)
    table += features_off_lines(runs, plan)
    table += planned_depth_line(measured.profiled_records.get("sage-cost", ()))
    table += backend_lines(rows, plan.backends)
    table += decomposition_lines(rows, curve)
    print(f"\n{len(plan.examples)} examples, {args.repeats} repeats, median over examples [min–max]\n")
    if len(plan.pads) > 1:
        table += "\n\nStep time against context (--long-prompt), median over examples:\n\n"
        table += context_table(runs, rounds, plan.methods, temperatures)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n", encoding="utf-8")
    if args.json:
        report = {
            "cost_curve": asdict(curve) if curve is not None else None,
            "target": args.target,
            "draft": args.draft,
            "device": str(pair.device),
            "dtype": str(pair.target.dtype),
            "max_new_tokens": args.max_new_tokens,
            "repeats": args.repeats,
            "backend": args.backend,
            "temperatures": temperatures,
            "top_p": args.top_p,
            "top_k_sampling": args.top_k_sampling,
            "threads": torch.get_num_threads(),
            "thread_choice": measured.threads.as_dict() if measured.threads is not None else None,
            "summary": rows,
            "runs": [asdict(r) for r in runs],
            "rounds": [asdict(r) for r in rounds],
        }
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0 if all(row["same_as_generate"] is not False for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
