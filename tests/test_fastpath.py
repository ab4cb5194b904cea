"""The fast path's promises, each checked against the plain way of doing it:
the prefill computes one position's logits, the tree mask built on the device
from parent indices equals the mask written out from ancestor lists, and a
commit that moves rows leaves the cache as step-by-step decoding would."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch
from conftest import FAMILIES, tiny_folder

from sage_core.adapter import VLM


@functools.cache
def _vlm(root: str, family: str, kind: str) -> VLM:
    return VLM.load(tiny_folder(Path(root), family, kind), device="cpu", dtype="float32")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", ["target", "unrelated"])
def test_prefill_computes_only_the_last_position_logits(tiny_root, image, family, kind):
    vlm = _vlm(str(tiny_root), family, kind)
    shapes: list[tuple[int, ...]] = []
    hook = vlm.model.get_output_embeddings().register_forward_hook(lambda m, i, out: shapes.append(tuple(out.shape)))
    try:
        inputs = vlm.prepare(image, "Describe the picture.")
        state, logits = vlm.prefill(inputs)
    finally:
        hook.remove()
    assert shapes == [(1, 1, vlm.vocab_size)]
    assert logits.shape == (vlm.vocab_size,)
    with torch.no_grad():
        full = vlm.model(**inputs).logits[0, -1]
    assert (logits - full).abs().max().item() < 1e-4
    assert state.committed == inputs["input_ids"].shape[1]
