"""The built-in pair (assets/builtin): it loads through the real path, answers
well, its draft is right often but not always, SAGE is lossless on it and
beats the static tree on the shipped examples."""

from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path

import pytest
import torch

from sage_core import DecodeConfig, decode, load_media, load_pair
from sage_core.adapter import BUILTIN_TARGET, ModelPair
from sage_core.builtin.quality import evaluate
from sage_core.builtin.scenes import make_examples

EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"
pytestmark = pytest.mark.skipif(not (BUILTIN_TARGET / "config.json").exists(), reason="built-in pair not trained")


@functools.cache
def pair() -> ModelPair:
    return load_pair("builtin", "builtin", device="cpu", dtype="float32")


def examples() -> list[dict]:
    return json.loads((EXAMPLES / "examples.json").read_text())


def test_pair_is_small_and_shares_a_tokenizer():
    target, draft = pair().target, pair().draft
    target_params = sum(p.numel() for p in target.model.parameters())
    draft_params = sum(p.numel() for p in draft.model.parameters())
    print(f"\ntarget {target_params / 1e6:.2f} M parameters, draft {draft_params / 1e6:.2f} M")
    assert target_params >= 4 * draft_params
    assert type(target.processor).__name__ == "Qwen2VLProcessor"
    size = sum(f.stat().st_size for f in (EXAMPLES.parent / "builtin").rglob("*") if f.is_file())
    assert size <= 30 * 2**20


@functools.cache
def fresh_scene_accuracy() -> tuple[float, float]:
    """Target and draft accuracy on 60 fresh scenes (a seed not used in training).

    The full check (300 scenes, per kind, agreement) is scripts/check_builtin_pair.py.
    """
    scenes = make_examples(seed=424242, n=60)
    target = evaluate(pair().target.model, pair().target.processor, scenes)["accuracy"]
    draft = evaluate(pair().draft.model, pair().draft.processor, scenes)["accuracy"]
    print(f"\naccuracy on 60 fresh scenes: target {target:.3f}, draft {draft:.3f}")
    return target, draft


def test_target_is_well_above_chance_and_the_draft_is_worse():
    target, draft = fresh_scene_accuracy()
    assert target >= 0.45  # measured: 0.683 on these 60 scenes, 0.697 on the 300 of the full check
    assert draft < target


@pytest.mark.xfail(
    strict=True,
    reason="issue 3 is open: the shipped target answers 69.7% of 300 fresh scenes, short of the 90% goal",
)
def test_target_reaches_ninety_percent():
    target, _ = fresh_scene_accuracy()
    assert target >= 0.9


@pytest.mark.parametrize("example", examples(), ids=lambda e: e["file"])
def test_every_method_is_lossless_on_the_examples(example):
    media = load_media(EXAMPLES / example["file"])
    inputs = pair().target.prepare(media, example["prompt"])
    with torch.no_grad():
        output = pair().target.model.generate(**inputs, do_sample=False, max_new_tokens=48)
    expected = output[0, inputs["input_ids"].shape[1] :].tolist()
    for method in ("ar", "chain", "static", "sage"):
        summary = decode(pair(), media, example["prompt"], DecodeConfig(method, 48)).run_to_end()
        assert list(summary.token_ids) == expected, (example["file"], method)


def test_sage_accepts_more_than_the_static_tree_and_entropy_varies():
    accepted: dict[str, list[int]] = {"static": [], "sage": []}
    spreads = []
    for example in examples():
        if example["kind"] == "video":
            continue
        media = load_media(EXAMPLES / example["file"])
        for method in accepted:
            run = decode(pair(), media, example["prompt"], DecodeConfig(method, 64))
            run.run_to_end()
            steps = [r for r in run.records if r.phase == "decode" and r.finish_reason is None]
            accepted[method].extend(r.accepted_length for r in steps)
            if method == "sage":
                entropies = [r.entropy for r in run.records if r.entropy is not None]
                if len(entropies) >= 2:
                    spreads.append(max(entropies) - min(entropies))
    tau = {m: statistics.fmean(v) for m, v in accepted.items()}
    print(f"\nmean accepted length (tau) on the examples: SAGE {tau['sage']:.2f}, static {tau['static']:.2f}")
    print(f"entropy range within SAGE answers (nats): {[round(s, 2) for s in spreads]}")
    assert tau["sage"] >= 2.0
    assert tau["sage"] >= tau["static"]
    assert spreads and max(spreads) > 0.5
