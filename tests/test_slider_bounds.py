"""The tree panel's slider and lane radio answer outside the queue (`Handlers.show_tree`, `show_lane`): for a
round at the trace check's bounds (4,096 nodes, every other column 4,097 entries, per-level columns 256, own
records as long), the answer (the tree panel and the explainer, as Gradio sends them) stays under 10 MB and
comes in seconds, however long its token texts (a forged trace's token may be a megabyte)."""

from __future__ import annotations

import json
import time
from dataclasses import fields, replace
from types import SimpleNamespace
from typing import Any

import gradio as gr
import pytest
from app_records import TEXTS, TOKENS, header, record

from app.handlers import Handlers, Settings
from app.inputs import Limits
from app.models import CustomModels
from app.page import Page
from app.panel_table import panel_table
from app.race import Lane, RaceData
from sage_core.methods.budget import SageCostRecord
from sage_core.methods.smart import SmartRecord
from sage_core.trace_check import MAX_COLUMN, MAX_TREE_DEPTH, MAX_TREE_NODES

NODES, LEVELS, COLUMN = MAX_TREE_NODES, MAX_TREE_DEPTH, MAX_COLUMN
#: The most an answer outside the queue may be (issue 68: a forged trace's slider answered 40-46 MB).
MOST_BYTES = 10 * 2**20
#: What "fast" means here: a race's round, on a shared 2-core CPU (the slider took 10-15 s, then 39 s with a
#: megabyte token text, before).
MOST_SECONDS = 10.0


def parents_of(shape: str) -> tuple[int, ...]:
    """4,096 parents: "wide" 16 children a node breadth first; "deep" a chain 256 levels deep with the rest
    hung off it; "flat" every node a child of the root."""
    if shape == "wide":
        return tuple(-1 if i < 16 else (i - 16) // 16 for i in range(NODES))
    if shape == "deep":
        return tuple(range(-1, LEVELS - 1)) + tuple((i % LEVELS) - 1 for i in range(NODES - LEVELS))
    return (-1,) * NODES


def own_record(method: str) -> SageCostRecord | None:
    budgets = dict(
        budget_nodes=tuple(range(1, COLUMN + 1)),
        budget_depths=(1,) * COLUMN,
        budget_expected=(0.5,) * COLUMN,
        budget_rates=(0.5,) * COLUMN,
        budget_chosen=1,
    )
    if method == "sage-cost":
        return SageCostRecord(**budgets)
    if method == "smart":
        weighed = dict(node_ratios=(0.5,) * NODES, node_speedups=(1.5,) * NODES)
        return SmartRecord(**budgets, **weighed, cut_ratios=(0.5,) * COLUMN, cut_speedups=(1.5,) * COLUMN)
    return None


def maximal_round(method: str, shape: str) -> object:
    """Round 1 of `method` at every bound the trace check sets, its tree's first node accepted."""
    rules = ("cost",) if method == "smart" else ("width", "threshold", "budget")
    return replace(
        record(method, 1, 1, 1, 0.2, 0.7),
        tree_tokens=tuple(1000 + i for i in range(NODES)),
        tree_parents=parents_of(shape),
        tree_draft_probs=(0.5,) * NODES,
        entropy=0.5,
        alpha=0.5,
        depth_max=10,
        planned_depth=10,
        planned_width=10,
        accepted_nodes=(0,),
        accepted_tokens=(1000,),
        bonus_token=TOKENS[2],
        new_tokens=(1000, TOKENS[2]),
        new_token_texts=("a", TEXTS[2]),
        tried_nodes=(*range(NODES), 0),
        accept_probs=(0.5,) * COLUMN,
        root_top_tokens=tuple(6000 + i for i in range(COLUMN)),
        root_top_probs=(1 / COLUMN,) * COLUMN,
        level_thresholds=(0.1,) * LEVELS,
        cut_by_width=(3,) * LEVELS,
        cut_by_threshold=(3,) * LEVELS,
        cut_by_budget=(3,) * LEVELS,
        offer_parents=tuple(range(-1, NODES)),
        offer_widths=(16,) * COLUMN,
        cut_parents=tuple((i % NODES) - 1 for i in range(COLUMN)),
        cut_tokens=tuple(12000 + i for i in range(COLUMN)),
        cut_probs=(0.01,) * COLUMN,
        cut_rules=tuple(rules[i % len(rules)] for i in range(COLUMN)),
        target_choices=(1000,) * COLUMN,
        path_entropies=(0.5,) * COLUMN,
        draft_forwards=NODES,
        own=own_record(method),
    )


def maximal_race(method: str, shape: str, word: str) -> RaceData:
    """A race whose `method` lane's round 1 is at the bounds, every token's text `word`."""
    lane = Lane(method, header(method), [record(method, 0, 0, 0, 0.5, 0.5), maximal_round(method, shape)])
    other = Lane("static", header("static"), [record("static", 0, 0, 0, 0.5, 0.5)])
    texts = {token: word for token in range(1000, 12000 + COLUMN)} | dict(zip(TOKENS, TEXTS, strict=True))
    return RaceData(lanes=[lane, other], token_texts=texts)


def handlers() -> Handlers:
    names = [f.name for f in fields(Page)] + [panel.attribute for panel in panel_table()]
    settings = Settings(Limits(), [], "builtin", CustomModels(), [], text_interval=0.0, figure_interval=0.0)
    page: Any = SimpleNamespace(**{name: name for name in names})  # every component stood in by its name
    return Handlers(page, settings)


def sent_bytes(update: dict) -> int:
    """The answer's size as Gradio sends it: the tree's Plotly JSON (`gr.Plot`'s value) and the explainer,
    as JSON text."""
    figure = next(value for key, value in update.items() if key not in ("explain", "tree_round", "status"))
    plot = gr.Plot().postprocess(figure)
    sent = [plot.model_dump() if plot is not None else None, update["explain"]]
    return len(json.dumps(sent, ensure_ascii=False).encode("utf-8"))


@pytest.mark.parametrize(
    ("method", "shape", "word"),
    [
        ("sage", "flat", "\x01" * 256),  # control characters: JSON's longest escapes, twice (the figure's text)
        ("sage-cost", "deep", "<" * 256),  # HTML's escapes
        ("smart", "wide", "😀" * 256),
        ("sage", "flat", "y" * 1_000_000),  # one megabyte a token: a label reads its first characters only
    ],
)
def test_the_sliders_answer_at_the_trace_checks_bounds_is_small_and_fast(method, shape, word) -> None:
    data = maximal_race(method, shape, word)
    answering = handlers()
    started = time.perf_counter()
    moved = answering.show_tree(data, method, 1)  # the round slider
    size = sent_bytes(moved)
    seconds = time.perf_counter() - started
    print(f"\n{method}, {shape} tree, {len(word):,}-character texts: {size / 2**20:.2f} MB in {seconds:.2f} s")
    assert size <= MOST_BYTES and seconds <= MOST_SECONDS, (size, seconds)
    assert "Round 1" in moved["explain"]
    picked = answering.show_lane(data, method)  # the lane radio: the same panel at the lane's latest round
    assert sent_bytes(picked) <= MOST_BYTES


def test_the_maximal_round_is_within_the_trace_checks_bounds() -> None:
    """Its columns are at the bounds, not past them: one entry more in any is refused (the check's own tests),
    and these lengths are the check's."""
    round_ = maximal_round("smart", "deep")
    assert len(round_.tree_tokens) == NODES and round_.tree.depth == LEVELS
    assert len(round_.cut_tokens) == len(round_.root_top_tokens) == COLUMN == NODES + 1
    assert len(round_.level_thresholds) == LEVELS and len(round_.own.budget_nodes) == COLUMN
