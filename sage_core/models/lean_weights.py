"""What the lean forwards read from a loaded text decoder (`lean.py`, `lean_merged.py`): each layer's
weights and settings, read once, its two halves' weights as frozen records (what the fused forward's
halves take, compiled or not), the decoder's own weights, and the rotary table of the fused forwards.

Both forwards import this module and neither imports the other's internals: `lean.py` makes a
`MergedDraft` (`lean_merged.py`) from the `TextWeights` it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

Weights = tuple[torch.Tensor, torch.Tensor | None]
Norm = tuple[torch.Tensor, float]

#: The activation modules that compute `F.silu` (torch's, and transformers' `ACT2FN["silu"]`).
SILU_MODULES = ("SiLU", "SiLUActivation")


@dataclass(frozen=True)
class AttentionIn:
    """A layer's weights up to the cache update: the input norm, the q/k/v projections, the q/k norms."""

    input_norm: Norm
    q: Weights
    k: Weights
    v: Weights
    q_norm: Norm | None
    k_norm: Norm | None
    head_dim: int


@dataclass(frozen=True)
class AttentionOut:
    """A layer's weights after the cache update: the attention's scale, the output projection, the
    post-attention norm and the gated MLP."""

    scaling: float
    o: Weights
    post_norm: Norm
    gate: Weights
    up: Weights
    down: Weights


class LayerWeights:
    """One decoder layer's weights and settings, read once."""

    def __init__(self, layer: Any) -> None:
        attention, mlp = layer.self_attn, layer.mlp
        self.attention = attention  # transformers' attention functions read settings from it
        self.input_norm: Norm = (layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon)
        self.post_norm: Norm = (layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon)
        self.q: Weights = (attention.q_proj.weight, attention.q_proj.bias)
        self.k: Weights = (attention.k_proj.weight, attention.k_proj.bias)
        self.v: Weights = (attention.v_proj.weight, attention.v_proj.bias)
        self.o: Weights = (attention.o_proj.weight, attention.o_proj.bias)
        q_norm, k_norm = getattr(attention, "q_norm", None), getattr(attention, "k_norm", None)
        self.q_norm: Norm | None = None if q_norm is None else (q_norm.weight, q_norm.variance_epsilon)
        self.k_norm: Norm | None = None if k_norm is None else (k_norm.weight, k_norm.variance_epsilon)
        self.head_dim: int = attention.head_dim
        self.scaling: float = attention.scaling
        self.gate: Weights = (mlp.gate_proj.weight, mlp.gate_proj.bias)
        self.up: Weights = (mlp.up_proj.weight, mlp.up_proj.bias)
        self.down: Weights = (mlp.down_proj.weight, mlp.down_proj.bias)
        self.act = mlp.act_fn
        self.before = AttentionIn(self.input_norm, self.q, self.k, self.v, self.q_norm, self.k_norm, self.head_dim)
        self.after = AttentionOut(self.scaling, self.o, self.post_norm, self.gate, self.up, self.down)

    @property
    def silu(self) -> bool:
        """Whether the MLP's activation computes `F.silu`."""
        return type(self.act).__name__ in SILU_MODULES


class RotaryTable:
    """cos and sin of every position below a length (the fused forwards read their angles from it),
    made with the model's own `inv_freq` and scaling, grown when a position passes it."""

    def __init__(self, inv_freq: torch.Tensor, attention_scaling: float) -> None:
        self.inv_freq = inv_freq
        self.attention_scaling = attention_scaling
        self._table: tuple[torch.Tensor, torch.Tensor] | None = None

    def below(self, positions_below: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (P, D) of positions 0..P-1, P >= `positions_below`, on `like`'s device and dtype."""
        table = self._table
        if (
            table is None
            or table[0].shape[0] < positions_below
            or (table[0].device, table[0].dtype) != (like.device, like.dtype)
        ):
            length = max(1024, 1 << max(positions_below - 1, 1).bit_length())
            inv_freq = self.inv_freq.to(device=like.device, dtype=torch.float)
            freqs = torch.arange(length, device=like.device, dtype=torch.float)[:, None] * inv_freq
            angles = torch.cat((freqs, freqs), dim=-1)
            cos, sin = angles.cos() * self.attention_scaling, angles.sin() * self.attention_scaling
            table = self._table = (cos.to(like.dtype), sin.to(like.dtype))
        return table


@dataclass(frozen=True)
class TextWeights:
    """The text decoder's weights the lean forwards read: the embedding, the layers, the final norm, the
    LM head and the rotary table."""

    embedding: torch.Tensor
    layers: list[LayerWeights]
    norm: Norm
    head: Weights
    rotary: RotaryTable

    @classmethod
    def of(cls, model: Any) -> TextWeights:
        text = model.model.language_model
        head = model.get_output_embeddings()
        rotary = RotaryTable(text.rotary_emb.inv_freq, text.rotary_emb.attention_scaling)
        layers = [LayerWeights(layer) for layer in text.layers]
        norm = (text.norm.weight, text.norm.variance_epsilon)
        return cls(text.embed_tokens.weight, layers, norm, (head.weight, head.bias), rotary)
