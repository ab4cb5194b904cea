"""Speculative sampling stays exact in distribution on the families with new kinds of layers: sliding
windows (Gemma 3), experts (Qwen3-VL-MoE) and hybrid linear attention (Qwen3.5, a tree method and the chain).

The method of test_sampling.py: the target's exact sampling distribution of the first tokens,
enumerated from full forwards of the whole sequence (no cache), against the counts of many decode runs
with seeds 0..N-1, by a chi-square test at ALPHA. The runs go through `SequenceOracle` (each distinct
sequence computed once by the real model's tree forward, through the hybrid model's linear-attention
layers too)."""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import pytest
from conftest import tiny_folder
from sequence_oracle import SequenceOracle
from test_sampling import ALPHA, DECODE_SETTINGS, PROMPT, chi_square_p_value, target_sampling_distribution

from sage_core import DecodeConfig, SageConfig, decode, load_pair
from sage_core.config import SamplingConfig
from sage_core.media import Media
from sage_core.models import ModelPair
from sage_core.prepared import prepare_inputs

Tokens = tuple[int, ...]
STEPS = 3


@functools.cache
def _pair(root: str, family: str) -> ModelPair:
    return load_pair(
        tiny_folder(Path(root), family, "target"), tiny_folder(Path(root), family, "noised"), "cpu", "float32"
    )


def exact_distribution(pair: ModelPair, media: Media) -> dict[Tokens, float]:
    exact = target_sampling_distribution(pair, media, STEPS)
    assert sum(exact.values()) == pytest.approx(1.0)
    return exact


# (family, method, runs): a tree method on each, and the chain on Qwen3.5 (its verifier differs)
CASES = [
    ("gemma3", "sage", 1_000),
    ("qwen3_vl_moe", "static", 1_000),
    ("qwen3_5", "sage", 1_000),
    ("qwen3_5", "chain", 1_000),
]


@pytest.mark.parametrize(("family", "method", "runs"), CASES)
def test_new_layer_kinds_sample_exactly_as_the_target(tiny_root, image, family, method, runs):
    pair = _pair(str(tiny_root), family)
    pair = ModelPair(SequenceOracle(pair.target), SequenceOracle(pair.draft))
    prepared = prepare_inputs(pair, image, PROMPT)
    counts: Counter[Tokens] = Counter()
    for seed in range(runs):
        config = DecodeConfig(
            method, STEPS, SageConfig(static_first_round=False), sampling=SamplingConfig(**DECODE_SETTINGS, seed=seed)
        )
        counts[decode(pair, prepared.media, PROMPT, config, prepared).run_to_end().token_ids] += 1
    assert chi_square_p_value(counts, exact_distribution(_pair(str(tiny_root), family), image)) > ALPHA
