"""Tree attention: the target's logits for every node in one tree forward equal
step-by-step decoding along that node's path (every family, sdpa and
eager), and negative controls show the check catches a wrong mask or wrong
positions."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sage_core.models import VLM
from sage_testkit.pairs import tiny_folder
from sage_testkit.references import ROOT_TOKEN, TREE, path_logits, tree_logits
from sage_testkit.tiny_models import ALL_FAMILIES

TOLERANCE = 1e-4


def load(root: Path, family: str, attention: str) -> VLM:
    vlm = VLM.load(tiny_folder(root, family, "target"), device="cpu", dtype="float32")
    vlm.model.set_attn_implementation(attention)
    return vlm


def max_error(vlm: VLM, inputs: dict, logits: torch.Tensor) -> float:
    worst = (logits[0] - path_logits(vlm, inputs, [ROOT_TOKEN])).abs().max().item()
    for node in range(len(TREE)):
        path = [ROOT_TOKEN, *(TREE.tokens[i] for i in TREE.path_to(node))]
        worst = max(worst, (logits[node + 1] - path_logits(vlm, inputs, path)).abs().max().item())
    return worst


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_tree_forward_equals_step_by_step(tiny_root, image, family, attention):
    vlm = load(tiny_root, family, attention)
    inputs = vlm.prepare(image, "Describe the picture.")
    state, _ = vlm.prefill(inputs)
    assert max_error(vlm, inputs, tree_logits(vlm, state, TREE)) < TOLERANCE


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_negative_controls_are_caught(tiny_root, image, family):
    vlm = load(tiny_root, family, "eager")
    inputs = vlm.prepare(image, "Describe the picture.")
    # A causal mask over the flattened tree lets siblings see each other.
    state, _ = vlm.prefill(inputs)
    causal = list(range(-1, len(TREE)))  # each entry the parent of the next: a causal mask
    assert max_error(vlm, inputs, tree_logits(vlm, state, TREE, parents=causal)) > 100 * TOLERANCE
    # Sequential positions instead of prefix + depth.
    state, _ = vlm.prefill(inputs)
    flat_depths = tuple(range(1, len(TREE) + 1))
    assert max_error(vlm, inputs, tree_logits(vlm, state, TREE, depths=flat_depths)) > 100 * TOLERANCE
    if vlm.uses_rope_deltas:
        # Forgetting the M-RoPE delta of the Qwen families.
        state, _ = vlm.prefill(inputs)
        assert state.position_offset != 0
        state.position_offset = 0
        assert max_error(vlm, inputs, tree_logits(vlm, state, TREE)) > 100 * TOLERANCE


def test_commit_keeps_only_the_accepted_path(tiny_root, image):
    """After compaction, decoding continues exactly as plain decoding along the path."""
    vlm = load(tiny_root, "qwen2_5_vl", "sdpa")
    inputs = vlm.prepare(image, "Describe the picture.")
    state, _ = vlm.prefill(inputs)
    prompt_length = state.committed
    tree_logits(vlm, state, TREE)
    vlm.commit(state, [0, 1 + 1, 1 + 4])  # root, node 1, node 4 (not a prefix of the scratch)
    assert state.committed == prompt_length + 3 and state.scratch == 0
    assert state.cache.get_seq_length() == state.committed
    after = vlm.extend(state, [46], [state.committed], parents=[-1])[0]
    expected = path_logits(vlm, inputs, [ROOT_TOKEN, 41, 44, 46])
    assert (after - expected).abs().max().item() < TOLERANCE


@pytest.mark.parametrize("family", ["gemma3", "gemma4"])
def test_sliding_windows_are_kept_by_the_tree_mask(tiny_root, image, monkeypatch, family):
    """Gemma 3's and 4's sliding-window layers (Gemma 4's last layers reading the first layers' cache):
    the prompt is several windows long, each node sees only the entries inside its window (the equality
    above); with the window left out of the mask the check fails."""
    from sage_testkit.tiny_models import GEMMA3_WINDOW

    vlm = load(tiny_root, family, "eager")
    inputs = vlm.prepare(image, "Describe the picture.")
    assert inputs["input_ids"].shape[1] > 4 * GEMMA3_WINDOW
    assert vlm.spec.windows_by_mask
    state, _ = vlm.prefill(inputs)
    assert max_error(vlm, inputs, tree_logits(vlm, state, TREE)) < TOLERANCE
    monkeypatch.setattr(type(vlm.spec), "layer_masks", lambda self, config, mask, queries, keys: mask)
    state, _ = vlm.prefill(inputs)
    assert max_error(vlm, inputs, tree_logits(vlm, state, TREE)) > 100 * TOLERANCE
