"""A small draft's forward with its projections merged: fewer operations per draft level.

On a CPU a small draft's forward is a hundred tensor operations of a few microseconds each, not
arithmetic; SAGE drafts a level per forward, so each operation saved is saved on every level.
`MergedDraft` computes the same mathematics as `LeanText.fused` in about half the operations:

- the q, k and v projections are one matrix product, with the input norm's weight folded into
  their columns (RMSNorm's weight scales each input feature: (x_n * w) W^T = x_n (W * w)^T);
  the gate and up projections likewise, with the post-attention norm's weight;
- Qwen3's per-head q and k norms run as one norm over all heads of both, their weights stacked;
- RoPE runs once over the query and key heads together, as `x * cos + roll(x) * sin` with the
  sine's first half negated (`rotate_half(x) * sin` written without its concatenation);
- the residual additions are fused into the output and down projections (`addmm`), and the
  hidden states stay 2D (N, width), so no linear reshapes its input.

Its rounding is not transformers' own, which only a draft can afford: the target checks every
token it proposes (tests/test_fastpath.py checks it against transformers' forward to rounding).
The merged matrices are a copy of the draft's weights, so only a draft whose copy stays under
`MERGED_LIMIT_BYTES` is merged (the built-in pair's is under 2 MB); a larger draft runs
`LeanText.fused`, where a GPU's kernel launches are the cost, not a CPU's operations.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from .lean_weights import LayerWeights, TextWeights
from .target_features import with_addition

#: The most bytes a draft's merged copies may take (the q/k/v and gate/up matrices of every layer).
MERGED_LIMIT_BYTES = 64 * 2**20


class _MergedLayer(NamedTuple):
    qkv: torch.Tensor  # (width, Q + K + V): transposed, the input norm's weight folded in
    qkv_bias: torch.Tensor | None
    qk_width: int  # Q + K: the query and key columns come first
    qk_norm: torch.Tensor | None  # (query heads + key heads, head_dim): the q and k norms' weights
    qk_eps: float
    input_eps: float
    post_eps: float
    o: torch.Tensor  # (Q, width): a transposed view
    o_bias: torch.Tensor | None
    gate_up: torch.Tensor  # (width, 2 I): transposed, the post-attention norm's weight folded in
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor  # (I, width): a transposed view
    down_bias: torch.Tensor | None
    act: Any
    query_heads: int
    head_dim: int
    scaling: float


def _normalized(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm without its weight and without its factor sqrt(width), which the weights after it hold:
    x / sqrt(sum(x^2) + width * eps), in fewer operations than `F.rms_norm` (in float32, as
    transformers' RMSNorm computes, whatever the draft's dtype: a half-precision sum of squares overflows)."""
    if x.dtype != torch.float32:
        wide = x.float()
        return (wide * (wide * wide).sum(-1, keepdim=True).add_(x.shape[-1] * eps).rsqrt_()).to(x.dtype)
    return x * (x * x).sum(-1, keepdim=True).add_(x.shape[-1] * eps).rsqrt_()


def _side_by_side(
    weights: list[tuple[torch.Tensor, torch.Tensor | None]], norm: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The projections' weights as one transposed matrix with the norm's weight (and its sqrt(width),
    `_normalized`) folded in, and their biases."""
    matrix = (torch.cat([weight for weight, _ in weights]) * (norm * norm.shape[-1] ** 0.5)).t().contiguous()
    if all(bias is None for _, bias in weights):
        return matrix, None
    biases = [weight.new_zeros(weight.shape[0]) if bias is None else bias for weight, bias in weights]
    return matrix, torch.cat(biases)


def _merge(layer: LayerWeights) -> _MergedLayer | None:
    """One layer merged, or None where the q and k norms differ in epsilon (they run as one)."""
    qk_norm, qk_eps = None, 0.0
    if layer.q_norm is not None and layer.k_norm is not None:
        if layer.q_norm[1] != layer.k_norm[1]:
            return None
        heads = layer.q[0].shape[0] // layer.head_dim, layer.k[0].shape[0] // layer.head_dim
        stacked = torch.cat((layer.q_norm[0].expand(heads[0], -1), layer.k_norm[0].expand(heads[1], -1)))
        qk_norm = stacked * layer.head_dim**0.5  # `_normalized` leaves the factor sqrt(head_dim) to the weight
        qk_eps = layer.q_norm[1]
    elif layer.q_norm is not None or layer.k_norm is not None:
        return None
    qkv, qkv_bias = _side_by_side([layer.q, layer.k, layer.v], layer.input_norm[0])
    gate_up, gate_up_bias = _side_by_side([layer.gate, layer.up], layer.post_norm[0])
    return _MergedLayer(
        qkv,
        qkv_bias,
        layer.q[0].shape[0] + layer.k[0].shape[0],
        qk_norm,
        qk_eps,
        layer.input_norm[1],
        layer.post_norm[1],
        layer.o[0].t(),
        layer.o[1],
        gate_up,
        gate_up_bias,
        layer.down[0].t(),
        layer.down[1],
        F.silu if layer.silu else layer.act,
        layer.q[0].shape[0] // layer.head_dim,
        layer.head_dim,
        layer.scaling,
    )


def _product(x: torch.Tensor, matrix: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.mm(x, matrix) if bias is None else torch.addmm(bias, x, matrix)


def _layer_forward(
    hidden: torch.Tensor,
    layer: _MergedLayer,
    cos: torch.Tensor,
    sin: torch.Tensor,
    mask: torch.Tensor | None,
    cache: Any,
    index: int,
) -> torch.Tensor:
    """One decoder layer on the hidden states (N, width); `sin` has its first half negated."""
    count = hidden.shape[0]
    qkv = _product(_normalized(hidden, layer.input_eps), layer.qkv, layer.qkv_bias)
    qk = qkv[:, : layer.qk_width].view(count, -1, layer.head_dim)  # (N, query + key heads, head_dim)
    if layer.qk_norm is not None:
        qk = _normalized(qk, layer.qk_eps) * layer.qk_norm
    qk = torch.addcmul(qk * cos, qk.roll(layer.head_dim // 2, -1), sin).transpose(0, 1)[None]
    value = qkv[:, layer.qk_width :].view(count, -1, layer.head_dim).transpose(0, 1)[None]
    key, value = cache.update(qk[:, layer.query_heads :], value, index)
    out = F.scaled_dot_product_attention(
        qk[:, : layer.query_heads], key, value, attn_mask=mask, scale=layer.scaling, enable_gqa=True
    )
    hidden = torch.addmm(hidden, out[0].transpose(0, 1).reshape(count, -1), layer.o)
    if layer.o_bias is not None:
        hidden = hidden + layer.o_bias
    gate_up = _product(_normalized(hidden, layer.post_eps), layer.gate_up, layer.gate_up_bias)
    inner = gate_up.shape[-1] // 2
    hidden = torch.addmm(hidden, layer.act(gate_up[:, :inner]) * gate_up[:, inner:], layer.down)
    return hidden if layer.down_bias is None else hidden + layer.down_bias


class MergedDraft:
    """A small draft's text forward with merged projections (see the module docstring)."""

    def __init__(self, text: TextWeights, layers: list[_MergedLayer]) -> None:
        self.text = text
        self.layers = layers
        head_dim = layers[0].head_dim
        # RoPE's rotate_half as a roll: the sine's first half negated
        self._sign = torch.cat((-torch.ones(head_dim // 2), torch.ones(head_dim - head_dim // 2)))

    @classmethod
    def of(cls, text: TextWeights) -> MergedDraft | None:
        """The merged forward of a lean text decoder's weights, or None when its copy would be too large."""
        copied = sum(
            weight.numel() * weight.element_size()
            for layer in text.layers
            for weight, _ in (layer.q, layer.k, layer.v, layer.gate, layer.up)
        )
        if copied > MERGED_LIMIT_BYTES:
            return None
        layers = [_merge(layer) for layer in text.layers]
        if any(layer is None for layer in layers):
            return None
        return cls(text, [layer for layer in layers if layer is not None])

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        cache: Any,
        positions_below: int,
    ) -> torch.Tensor:
        """Logits (1, N, vocab) of N new tokens, as `LeanText.fused` takes and returns them."""
        hidden = with_addition(F.embedding(input_ids[0], self.text.embedding))  # a draft's target features, if any
        cos_table, sin_table = self.text.rotary.below(positions_below, hidden)
        positions = position_ids[0]
        sign = self._sign
        if (sign.device, sign.dtype) != (hidden.device, hidden.dtype):
            sign = self._sign = sign.to(hidden)
        cos, sin = cos_table[positions][:, None], (sin_table[positions] * sign)[:, None]  # (N, 1, head_dim)
        for index, layer in enumerate(self.layers):
            hidden = _layer_forward(hidden, layer, cos, sin, attention_mask, cache, index)
        norm, eps = self.text.norm
        return F.linear(F.rms_norm(hidden, (hidden.shape[-1],), norm, eps), *self.text.head)[None]
