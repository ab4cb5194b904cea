"""Qwen3.5: Qwen3-VL's vision side and M-RoPE, a text model of linear-attention (gated delta rule) layers
between gated full-attention ones. The linear layers carry a recurrent state, a cache strategy of its own
(`caches.RecurrentState`); after the prefill they run `recurrent.tree_forward` (each tree node continues its
parent's state), so every method verifies exactly.
The text forward is transformers' (the lean forward does not know these layers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ModelLoadError
from .caches import CacheStrategy, RecurrentState
from .qwen import QwenVL
from .recurrent import install


@dataclass(frozen=True)
class Qwen3_5(QwenVL):
    def cache_strategy(self, chosen: CacheStrategy, config: Any) -> CacheStrategy:
        """The linear-attention layers' recurrent state over `chosen`'s cache (caches.py: `RecurrentState`)."""
        return RecurrentState(chosen, int(config.get_text_config().linear_conv_kernel_dim))

    def check_config(self, config: Any, name: str) -> None:
        layer_types = getattr(config.get_text_config(), "layer_types", None) or ()
        other = sorted(set(layer_types) - {"full_attention", "linear_attention"})
        if other:
            raise ModelLoadError(f"{name}: {', '.join(other)} layers are not supported")

    def prepare(self, model: Any) -> None:
        install(model, "Qwen3_5GatedDeltaNet")


QWEN3_5 = Qwen3_5("qwen3_5", "Qwen3_5ForConditionalGeneration")
