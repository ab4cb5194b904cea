"""The decode-time text forward without transformers' module machinery (`forwards.py`'s "lean" and "fused").

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

`LeanText.of(model)` returns None, and the lean forwards fall back to transformers' forward, for anything it
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

from ..errors import BackendError
from .lean_merged import MergedDraft
from .lean_weights import AttentionIn, AttentionOut, TextWeights
from .target_features import record_layer, with_addition

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


def _attention_in(
    hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, weights: AttentionIn
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The fused forward's layer up to the cache update: norm, projections, q/k norms, RoPE."""
    batch, count, width = hidden.shape
    head_dim = weights.head_dim
    x = F.rms_norm(hidden, (width,), *weights.input_norm)
    shape = (batch, count, -1, head_dim)
    query = F.linear(x, *weights.q).view(shape)
    key = F.linear(x, *weights.k).view(shape)
    value = F.linear(x, *weights.v).view(shape).transpose(1, 2)
    if weights.q_norm is not None and weights.k_norm is not None:
        query = F.rms_norm(query, (head_dim,), *weights.q_norm)
        key = F.rms_norm(key, (head_dim,), *weights.k_norm)
    query, key = query.transpose(1, 2), key.transpose(1, 2)
    return query * cos + rotate_half(query) * sin, key * cos + rotate_half(key) * sin, value


def _attention_out(
    hidden: torch.Tensor,
    attended: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    mask: torch.Tensor | None,
    weights: AttentionOut,
    act: Any,
) -> torch.Tensor:
    """The fused forward's layer after the cache update: attention (SDPA, grouped heads) of the
    `attended` query, keys and values, the output projection, norm and gated MLP."""
    batch, count, width = hidden.shape
    query, key, value = attended
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=weights.scaling, enable_gqa=True)
    hidden = hidden + F.linear(out.transpose(1, 2).reshape(batch, count, -1), *weights.o)
    x = F.rms_norm(hidden, (width,), *weights.post_norm)
    return hidden + F.linear(act(F.linear(x, *weights.gate)) * F.linear(x, *weights.up), *weights.down)


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
        self.weights = TextWeights.of(model)
        self.embedding = self.weights.embedding
        self.layers = self.weights.layers
        self.norm = self.weights.norm
        self.head = self.weights.head
        self.inv_freq: torch.Tensor = text.rotary_emb.inv_freq
        self.attention_scaling: float = text.rotary_emb.attention_scaling
        family = sys.modules[type(text.layers[0].self_attn).__module__]
        implementation = text.config._attn_implementation
        self.attend = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, family.eager_attention_forward)
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
        hidden = with_addition(F.embedding(input_ids, self.embedding))  # a draft's target features, if any
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
            record_layer(index, hidden)  # the target's features, where a recording asks (target_features.py)
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
        hidden = with_addition(F.embedding(input_ids, self.embedding))  # a draft's target features, if any
        cos_table, sin_table = self.weights.rotary.below(positions_below, hidden)
        cos, sin = cos_table[position_ids][:, None], sin_table[position_ids][:, None]  # (1, 1, N, D)
        try:
            for index, layer in enumerate(self.layers):
                query, key, value = before(hidden, cos, sin, layer.before)
                key, value = cache.update(key, value, index)
                act = F.silu if compiled else layer.act
                hidden = after(hidden, (query, key, value), attention_mask, layer.after, act)
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
            self._merged = MergedDraft.of(self.weights)
        return self._merged if isinstance(self._merged, MergedDraft) else None

    @property
    def compilable(self) -> bool:
        """Whether `fused(compiled=True)` computes the same function: every layer's MLP uses SiLU."""
        return all(layer.silu for layer in self.layers)
