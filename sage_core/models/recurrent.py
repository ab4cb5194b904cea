"""Hybrid linear attention (Qwen3.5): layers that carry a recurrent state instead of a cache a mask can
select from.

A chain of new tokens runs through those layers in order in one forward, as the model's own decoding
would run them one by one, so a chain verifies exactly; a tree cannot (its siblings would run through
the recurrence one after the other), and tree methods are refused for such models. The state cannot
be cut back either: before the first scratch entry of a round the states are copied, and a commit
that keeps fewer entries than it has puts the copy back and runs the kept tokens again (one forward)."""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import LinearAttentionCacheLayerMixin

from ..errors import InputError

#: the methods a model with recurrent layers can run exactly
CHAIN_METHODS = ("ar", "chain")

States = list[tuple[dict[int, torch.Tensor | None], dict[int, torch.Tensor | None]]]


def is_linear(layer: Any) -> bool:
    return isinstance(layer, LinearAttentionCacheLayerMixin)


def snapshot(cache: Any) -> States:
    """A copy of every linear-attention layer's conv and recurrent states."""
    return [
        (
            {i: None if s is None else s.clone() for i, s in layer.conv_states.items()},
            {i: None if s is None else s.clone() for i, s in layer.recurrent_states.items()},
        )
        for layer in cache.layers
        if is_linear(layer)
    ]


def restore(cache: Any, saved: States) -> None:
    """Put the copied states back (`snapshot`)."""
    for layer, (conv, recurrent) in zip([layer for layer in cache.layers if is_linear(layer)], saved, strict=True):
        layer.conv_states = dict(conv)
        layer.recurrent_states = dict(recurrent)


def crop_attention(cache: Any, tokens: int) -> None:
    """Drop the last `tokens` entries of the attention layers (the linear ones keep no entries)."""
    if tokens:
        for layer in cache.layers:
            if not is_linear(layer):
                layer.crop(-tokens)


def check_chain(parents: Any, scratch: int, name: str) -> None:
    """Refuse a tree: each new token must continue the entry just before it."""
    if any(parent != scratch + i - 1 for i, parent in enumerate(parents)):
        raise InputError(tree_refusal(name))


def tree_refusal(name: str) -> str:
    return (
        f"{name} has linear-attention layers, which cannot verify a tree of tokens exactly; "
        "use the chain method or plain decoding (ar)"
    )
