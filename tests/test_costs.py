"""The verification cost curve: measured on a tiny pair, and the rates it predicts worked by hand."""

from __future__ import annotations

import math

import pytest

from sage_core import load_pair
from sage_core.cost_curve import COST_SIZES, CostCurve
from sage_core.methods.run_costs import measured_tree
from sage_core.studies.costs import measure_costs, predicted_speedups
from sage_testkit.pairs import tiny_folder
from sage_testkit.references import chain_record

CURVE = CostCurve("cpu", "float32", "fast", (1, 2, 4), 1.0, (1.2, 1.4, 2.2), (0.5, 0.6, 1.0))


def test_the_curve_interpolates_and_extends_by_hand():
    assert CURVE.verify_at(0) == 1.0  # plain decoding's one-token step
    assert CURVE.verify_at(1) == 1.2
    assert CURVE.verify_at(3) == pytest.approx(1.8)  # halfway from 1.4 to 2.2
    assert CURVE.verify_at(6) == pytest.approx(3.0)  # past 4: the slope of the last two points, 0.4 per node
    assert CURVE.draft_at(0) == 0.5


def test_a_round_costs_its_feed_its_levels_and_its_verification():
    chain = chain_record(1, 0.5, 0.5, 3)  # a chain of 3 nodes: feed + 2 levels of 1 node + verify 3 nodes
    assert CURVE.round_ms(chain) == pytest.approx(0.5 + 0.5 + 0.5 + 1.8)
    # Two such rounds of 4 new tokens each: 8 tokens in 2 * 3.3 ms.
    assert CURVE.predicted_rate([chain_record(0, None, None, 0), chain, chain]) == pytest.approx(1000 * 8 / 6.6)
    plain = chain_record(1, None, None, 0)  # the empty tree: one token per one-token step
    assert CURVE.predicted_rate([plain]) == pytest.approx(1000.0)
    speedups = predicted_speedups(CURVE, {"sage": [chain], "ar": [plain]}, "sage")
    assert speedups == {"ar": pytest.approx((1000 * 4 / 3.3) / 1000.0)}


def test_measured_trees_are_trees_of_the_asked_size():
    for nodes in COST_SIZES:
        tree = measured_tree(nodes, 5)
        assert len(tree) == nodes and tree.root_width == min(nodes, 4)


def test_the_curve_is_measured_on_the_device(tiny_root, image):
    pair = load_pair(
        tiny_folder(tiny_root, "qwen2_5_vl", "target"), tiny_folder(tiny_root, "qwen2_5_vl", "noised"), "cpu", "float32"
    )
    curve = measure_costs(pair, image, "Describe the picture.", repeats=2, warmup=1)
    assert curve.sizes == COST_SIZES and (curve.device, curve.dtype) == ("cpu", "float32")
    values = (curve.one_token_ms, *curve.verify_ms, *curve.draft_level_ms)
    assert all(math.isfinite(v) and v > 0 for v in values)
    assert len(curve.lines()) == 1 + len(COST_SIZES)
    with pytest.raises(ValueError, match="node counts >= 1"):
        measure_costs(pair, image, "Describe the picture.", sizes=(0, 4))
