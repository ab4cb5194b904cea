"""Speculative sampling stays exact in distribution on the families with new kinds of layers: sliding
windows (Gemma 3), experts (Qwen3-VL-MoE) and hybrid linear attention (Qwen3.5, a tree method and the chain).

The method of test_sampling.py: the target's exact sampling distribution of the first tokens,
enumerated from full forwards of the whole sequence (no cache), against the counts of many decode runs
with seeds 0..N-1, by a chi-square test at ALPHA. The runs go through `SequenceOracle` (each distinct
sequence computed once by the real model's tree forward, through the hybrid model's linear-attention
layers too)."""

from __future__ import annotations

from collections import Counter

import pytest
from sequence_oracle import SequenceOracle

from sage_core import DecodeConfig, SageConfig, decode
from sage_core.config import SamplingConfig
from sage_core.media import Media
from sage_core.models import ModelPair
from sage_core.prepared import prepare_inputs
from sage_testkit.pairs import tiny_pair
from sage_testkit.references import (
    ALPHA,
    DECODE_SETTINGS,
    SAMPLING_PROMPT,
    Tokens,
    chi_square_p_value,
    target_sampling_distribution,
)

PROMPT = SAMPLING_PROMPT
STEPS = 3


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
    pair = tiny_pair(str(tiny_root), family, "noised")
    pair = ModelPair(SequenceOracle(pair.target), SequenceOracle(pair.draft))
    prepared = prepare_inputs(pair, image, PROMPT)
    counts: Counter[Tokens] = Counter()
    for seed in range(runs):
        config = DecodeConfig(
            method, STEPS, SageConfig(static_first_round=False), sampling=SamplingConfig(**DECODE_SETTINGS, seed=seed)
        )
        counts[decode(pair, prepared.media, PROMPT, config, prepared).run_to_end().token_ids] += 1
    assert chi_square_p_value(counts, exact_distribution(tiny_pair(str(tiny_root), family, "noised"), image)) > ALPHA
