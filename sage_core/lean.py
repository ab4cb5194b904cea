"""The decode-time text forward without transformers' module machinery (part of the adapter).

A forward of the text decoder for a few new tokens after the cache (a draft level, a tree
verification, a plain decoding step) runs the same operations as transformers' own forward,
in the same order, on the same weights: the embedding, per layer RMSNorm, the q/k/v
projections (with their biases, and Qwen3's per-head q/k norms), RoPE, the cache update,
transformers' own attention function (sdpa or eager) with the tree's additive mask, the output
projection, RMSNorm and the gated MLP; then the final norm and the LM head. What it leaves out
is what costs time on a small model and nothing in the result: a dozen `nn.Module` calls per
layer with their hooks and keyword plumbing, the output dataclasses, the causal-mask builder
(the caller brings the tree mask) and the rotary module (the new tokens are text: all three
M-RoPE axes hold the same position, so the rotary angles are plain RoPE's, computed with the
model's own `inv_freq` and scaling, element by element as transformers does).

On the CPU it cuts the cost of a forward of the built-in pair: a one-token target step 10-12 ms
against 12-16 ms with transformers' forward in scripts/benchmark.py (tests/test_fastpath.py
checks that its logits equal transformers' forward bit for bit, family by family, and the
losslessness suite runs every method through it). A draft runs `fused`, the same mathematics
in fewer operations (about 2.1-2.2 ms a forward against 3.5 ms with transformers' forward):
its rounding may differ from transformers', which only a draft can afford. The prefill, with
its vision tower and DeepStack features, stays transformers' own.

`LeanText.of(model)` returns None, and the adapter keeps transformers' forward, for anything it
does not know to be safe: another decoder class, a RoPE type other than the default, sliding
windows, an attention implementation other than sdpa or eager, accelerate hooks (a model placed
or offloaded by a device map moves its weights in those hooks), or layers on several devices.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
import torch.nn.functional as F
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .errors import BackendError
from .lean_merged import MergedDraft

# The text decoders whose layers are Qwen2's or Qwen3's (LLaVA-OneVision's and InternVL's language model
# is Qwen2), or LLaMA's and Mistral's, the same operations (LLaVA 1.5 / NeXT / NeXT-Video, Mistral 3);
# tests/test_fastpath.py checks each family bit for bit.
KNOWN_DECODERS = (
    "Qwen2Model",
    "Qwen2VLTextModel",
    "Qwen2_5_VLTextModel",
    "Qwen3VLTextModel",
    "LlamaModel",
    "MistralModel",
)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' Qwen RMSNorm, the same operations in the same order."""
    dtype = x.dtype
    x = x.to(torch.float32)
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    return weight * x.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class _Layer:
    """One decoder layer's weights and settings, read once."""

    def __init__(self, layer: Any) -> None:
        attention, mlp = layer.self_attn, layer.mlp
        self.attention = attention  # transformers' attention functions read settings from it
        self.input_norm = (layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon)
        self.post_norm = (layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon)
        self.q = (attention.q_proj.weight, attention.q_proj.bias)
        self.k = (attention.k_proj.weight, attention.k_proj.bias)
        self.v = (attention.v_proj.weight, attention.v_proj.bias)
        self.o = (attention.o_proj.weight, attention.o_proj.bias)
        q_norm, k_norm = getattr(attention, "q_norm", None), getattr(attention, "k_norm", None)
        self.q_norm = None if q_norm is None else (q_norm.weight, q_norm.variance_epsilon)
        self.k_norm = None if k_norm is None else (k_norm.weight, k_norm.variance_epsilon)
        self.head_dim: int = attention.head_dim
        self.scaling: float = attention.scaling
        self.gate = (mlp.gate_proj.weight, mlp.gate_proj.bias)
        self.up = (mlp.up_proj.weight, mlp.up_proj.bias)
        self.down = (mlp.down_proj.weight, mlp.down_proj.bias)
        self.act = mlp.act_fn


#: The activation modules that compute `F.silu` (torch's, and transformers' `ACT2FN["silu"]`).
SILU_MODULES = ("SiLU", "SiLUActivation")

Weights = tuple[torch.Tensor, torch.Tensor | None]
Norm = tuple[torch.Tensor, float]


def _attention_in(
    hidden: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    input_norm: Norm,
    q: Weights,
    k: Weights,
    v: Weights,
    q_norm: Norm | None,
    k_norm: Norm | None,
    head_dim: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The fused forward's layer up to the cache update: norm, projections, q/k norms, RoPE."""
    batch, count, width = hidden.shape
    x = F.rms_norm(hidden, (width,), *input_norm)
    shape = (batch, count, -1, head_dim)
    query = F.linear(x, *q).view(shape)
    key = F.linear(x, *k).view(shape)
    value = F.linear(x, *v).view(shape).transpose(1, 2)
    if q_norm is not None and k_norm is not None:
        query = F.rms_norm(query, (head_dim,), *q_norm)
        key = F.rms_norm(key, (head_dim,), *k_norm)
    query, key = query.transpose(1, 2), key.transpose(1, 2)
    return query * cos + rotate_half(query) * sin, key * cos + rotate_half(key) * sin, value


def _attention_out(
    hidden: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    scaling: float,
    o: Weights,
    post_norm: Norm,
    gate: Weights,
    up: Weights,
    down: Weights,
    act: Any,
) -> torch.Tensor:
    """The fused forward's layer after the cache update: attention (SDPA, grouped heads), the output
    projection, norm and gated MLP."""
    batch, count, width = hidden.shape
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling, enable_gqa=True)
    hidden = hidden + F.linear(out.transpose(1, 2).reshape(batch, count, -1), *o)
    x = F.rms_norm(hidden, (width,), *post_norm)
    return hidden + F.linear(act(F.linear(x, *gate)) * F.linear(x, *up), *down)


@functools.cache
def _compiled_halves() -> tuple[Any, Any]:
    """`_attention_in` and `_attention_out` through `torch.compile` (dynamic shapes), made once per
    process: compiled code is a cache of kernels, shared by every model and run (its guards
    recompile for other shapes and dtypes)."""
    return torch.compile(_attention_in, dynamic=True), torch.compile(_attention_out, dynamic=True)


class LeanText:
    """The text decoder's forward for new tokens after the cache (see the module docstring)."""

    def __init__(self, model: Any) -> None:
        text = model.model.language_model
        config = text.config
        self.embedding = text.embed_tokens.weight
        self.layers = [_Layer(layer) for layer in text.layers]
        self.norm = (text.norm.weight, text.norm.variance_epsilon)
        head = model.get_output_embeddings()
        self.head = (head.weight, head.bias)
        self.inv_freq: torch.Tensor = text.rotary_emb.inv_freq
        self.attention_scaling: float = text.rotary_emb.attention_scaling
        family = sys.modules[type(text.layers[0].self_attn).__module__]
        self.attend = ALL_ATTENTION_FUNCTIONS.get_interface(config._attn_implementation, family.eager_attention_forward)
        # the fused forward's rotary table: cos and sin of every position below its length
        self._rotary: tuple[torch.Tensor, torch.Tensor] | None = None
        # a small draft's forward with merged projections (lean_merged.py), made at its first fused forward
        self._merged: MergedDraft | bool | None = False

    @classmethod
    def of(cls, model: Any) -> LeanText | None:
        """The lean forward for `model`, or None where transformers' forward must run."""
        text = getattr(getattr(model, "model", None), "language_model", None)
        if text is None or type(text).__name__ not in KNOWN_DECODERS:
            return None
        config = text.config
        if getattr(config, "_attn_implementation", None) not in ("sdpa", "eager"):
            return None
        rotary = getattr(text, "rotary_emb", None)
        if rotary is None or getattr(rotary, "rope_type", None) != "default":
            return None
        if any(hasattr(module, "_hf_hook") for module in model.modules()):
            return None
        if len({p.device for p in text.parameters()} | {model.get_output_embeddings().weight.device}) != 1:
            return None
        for layer in text.layers:
            attention = layer.self_attn
            if getattr(attention, "sliding_window", None) is not None:
                return None
            mlp = layer.mlp
            linears = (
                attention.q_proj,
                attention.k_proj,
                attention.v_proj,
                attention.o_proj,
                *(mlp.gate_proj, mlp.up_proj, mlp.down_proj),
            )
            if any(type(linear) is not torch.nn.Linear for linear in linears):
                return None
        if type(model.get_output_embeddings()) is not torch.nn.Linear:
            return None
        return cls(model)

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        cache: Any,
        *,
        fused_up_to: int | None = None,
        compiled: bool = False,
    ) -> torch.Tensor:
        """Logits (1, N, vocab) of N new tokens: ids and positions (1, N), the additive mask
        (1, 1, N, cache + N) or None (a single token seeing everything), `cache` updated in place.

        `fused_up_to`: run the draft's fused forward instead (`fused`, `compiled` or not), for
        positions below it."""
        if fused_up_to is not None:
            return self.fused(input_ids, position_ids, attention_mask, cache, fused_up_to, compiled=compiled)
        hidden = F.embedding(input_ids, self.embedding)
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=hidden.device, dtype=torch.float)
        cos = (freqs.cos() * self.attention_scaling).to(hidden.dtype)
        sin = (freqs.sin() * self.attention_scaling).to(hidden.dtype)
        cos, sin = torch.cat((cos, cos), dim=-1)[:, None], torch.cat((sin, sin), dim=-1)[:, None]  # (1, 1, N, D)
        batch, count = input_ids.shape
        for index, layer in enumerate(self.layers):
            residual = hidden
            x = rms_norm(hidden, *layer.input_norm)
            shape = (batch, count, -1, layer.head_dim)
            query = F.linear(x, *layer.q).view(shape)
            key = F.linear(x, *layer.k).view(shape)
            if layer.q_norm is not None and layer.k_norm is not None:
                query, key = rms_norm(query, *layer.q_norm), rms_norm(key, *layer.k_norm)
            query, key = query.transpose(1, 2), key.transpose(1, 2)
            value = F.linear(x, *layer.v).view(shape).transpose(1, 2)
            query = (query * cos) + (rotate_half(query) * sin)
            key = (key * cos) + (rotate_half(key) * sin)
            key, value = cache.update(key, value, index)
            out, _ = self.attend(layer.attention, query, key, value, attention_mask, dropout=0.0, scaling=layer.scaling)
            hidden = residual + F.linear(out.reshape(batch, count, -1).contiguous(), *layer.o)
            residual = hidden
            x = rms_norm(hidden, *layer.post_norm)
            hidden = residual + F.linear(layer.act(F.linear(x, *layer.gate)) * F.linear(x, *layer.up), *layer.down)
        return F.linear(rms_norm(hidden, *self.norm), *self.head)

    def fused(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        cache: Any,
        positions_below: int,
        *,
        compiled: bool = False,
    ) -> torch.Tensor:
        """The draft's forward: the same mathematics in fewer operations, so its last bits may differ.

        Torch's fused RMSNorm, the rotary angles read from a table, and SDPA with grouped-query
        heads (no `repeat_kv`, whatever attention the model was loaded with). A draft can afford
        rounding that is not transformers' own: it only proposes, and the target checks every
        token it proposes, so the output stays the target's. A target cannot: its forward is
        `forward`'s, bit for bit.
        `positions_below`: more than the largest position id (the table grows to hold it).
        `compiled`: each layer's two halves (before and after the cache update) run through
        `torch.compile` (dynamic shapes; the cache update stays eager, so a growing cache does
        not recompile), where the MLP's activation is SiLU (`LeanText.compilable`). Uncompiled, a
        small draft runs its merged forward instead (`MergedDraft`, lean_merged.py).
        """
        merged = self.merged() if not compiled else None
        if merged is not None:
            return merged.forward(input_ids, position_ids, attention_mask, cache, positions_below)
        before, after = _compiled_halves() if compiled else (_attention_in, _attention_out)
        hidden = F.embedding(input_ids, self.embedding)
        cos_table, sin_table = self._rotary_table(positions_below, hidden)
        cos, sin = cos_table[position_ids][:, None], sin_table[position_ids][:, None]  # (1, 1, N, D)
        try:
            for index, layer in enumerate(self.layers):
                query, key, value = before(
                    hidden,
                    cos,
                    sin,
                    layer.input_norm,
                    layer.q,
                    layer.k,
                    layer.v,
                    layer.q_norm,
                    layer.k_norm,
                    layer.head_dim,
                )
                key, value = cache.update(key, value, index)
                act = F.silu if compiled else layer.act
                hidden = after(
                    hidden, query, key, value, attention_mask, layer.scaling, layer.o, layer.post_norm,
                    layer.gate, layer.up, layer.down, act,
                )  # fmt: skip
        except torch._dynamo.exc.BackendCompilerFailed as error:  # e.g. no working C++ compiler
            inner = getattr(error, "inner_exception", None) or error
            reason = f"{type(inner).__name__}: {(str(inner).strip().splitlines() or [''])[0][:300]}"
            raise BackendError(
                f"torch.compile cannot build the draft's forward here ({reason}); use the fast backend"
            ) from error
        width = hidden.shape[-1]
        return F.linear(F.rms_norm(hidden, (width,), *self.norm), *self.head)

    def merged(self) -> MergedDraft | None:
        """The merged forward of a small draft (made once; None for a large one or where it does not apply)."""
        if self._merged is False:
            self._merged = MergedDraft.of(self)
        return self._merged if isinstance(self._merged, MergedDraft) else None

    @property
    def compilable(self) -> bool:
        """Whether `fused(compiled=True)` computes the same function: every layer's MLP uses SiLU."""
        return all(type(layer.act).__name__ in SILU_MODULES for layer in self.layers)

    def _rotary_table(self, positions_below: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (P, D) of positions 0..P-1, P >= `positions_below`, on `like`'s device and dtype."""
        table = self._rotary
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
            table = self._rotary = (cos.to(like.dtype), sin.to(like.dtype))
        return table
