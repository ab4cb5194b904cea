"""Draft-side visual token pruning's model side (`sage_core/pruning.py` decides what to keep):
where the visual tokens sit, the attention each receives in the target's prefill (one forward
hook per layer), and the draft's prefill on the prompt without the pruned ones (one pre-hook at
the entry of its language model)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from ..errors import InputError

SCORE_CHUNK = 1 << 20  # elements of one scratch tensor of the pruning scores (4 MB in float32)
Prefill = Callable[[], tuple[Any, torch.Tensor]]  # the prefill to run with the hooks on
Rotary = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]  # (x, cos, sin) -> x with RoPE


def rotate_half_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE as the Qwen, LLaMA and Gemma attention modules apply it: the two halves of each head's first
    `cos.shape[-1]` dimensions rotated (all of them but for a partial rotary factor), the rest as it is."""
    width = cos.shape[-1]
    part, rest = x[..., :width], x[..., width:]
    half = width // 2
    return torch.cat((part * cos + torch.cat((-part[..., half:], part[..., :half]), dim=-1) * sin, rest), dim=-1)


def visual_positions(input_ids: torch.Tensor, token_ids: set[int]) -> torch.Tensor:
    """Where the image or video tokens sit in the prompt: (V,) sequence indices, ascending."""
    marks = torch.zeros_like(input_ids, dtype=torch.bool)
    for token in token_ids:
        marks |= input_ids == token
    return marks.nonzero().squeeze(1)


def scored_prefill(
    language_model: Any, visual: torch.Tensor, device: torch.device, prefill: Prefill, rotary: Rotary = rotate_half_rope
) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """`prefill`, plus each visual token's score: the attention it receives from the text after
    the last visual token, averaged over heads, those queries and every decoder layer; (V,) float32.

    Each layer's attention module gets a forward hook that recomputes the text tokens' queries
    (a few rows) from the module's own input and reads the keys it just cached, so the
    prefill itself runs with its usual (sdpa or flash) attention, never eager.
    """
    if visual.numel() == 0:
        raise InputError("visual token pruning needs an image or video in the prompt")
    first_query = int(visual[-1]) + 1
    layers = language_model.layers
    total = torch.zeros(visual.numel(), dtype=torch.float32, device=device)
    owner = threading.get_ident()

    def score(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        if threading.get_ident() != owner:  # another thread's forward of a shared model
            return
        hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        cache: Any = kwargs["cache"] if "cache" in kwargs else kwargs["past_key_values"]
        keys = cached_keys(cache, module)  # [kv heads, S, d], RoPE applied
        # the trailing text's rows: the last ones (Gemma 4's shared-KV layers see only those: `Family.scored_rows`)
        count = keys.shape[1] - first_query
        received = text_to_visual_attention(
            module,
            hidden[0, hidden.shape[1] - count :],
            kwargs["position_embeddings"],
            keys,
            visual.to(keys.device),
            rotary,
        )
        total.add_(received.to(total.device))

    # every attention layer (a hybrid model's linear-attention layers have none to score)
    attention = [layer.self_attn for layer in layers if hasattr(layer, "self_attn")]
    hooks = [module.register_forward_hook(score, with_kwargs=True) for module in attention]
    try:
        state, logits = prefill()
    finally:
        for hook in hooks:
            hook.remove()
    return state, logits, (total / len(attention)).cpu()


@contextlib.contextmanager
def last_logits_only(head: Any) -> Iterator[None]:
    """While on, the lm_head `head` (None: nothing to do) reads only the last row it is given, in this
    thread's forwards: a prefill that carries more rows (`logits_to_keep`) makes one row of logits, not
    a (rows, vocabulary) matrix (the trailing text of a long question times 262,144 rows is gigabytes)."""
    if head is None:
        yield
        return
    owner = threading.get_ident()

    def last(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        return (args[0][:, -1:], *args[1:]) if threading.get_ident() == owner else None

    hook = head.register_forward_pre_hook(last)
    try:
        yield
    finally:
        hook.remove()


def cached_keys(cache: Any, module: Any) -> torch.Tensor:
    """The keys an attention layer attends to: its own cache layer's, or for a layer that shares another's
    (Gemma 4's last layers: an empty cache layer on transformers 5.24, none at all on 5.17) those of the last
    earlier layer of its kind that keeps its own."""
    index = module.layer_idx
    layer_types = getattr(module.config, "layer_types", None)
    own = cache.layers[index] if index < len(cache.layers) else None
    if getattr(own, "keys", None) is None and layer_types is not None:
        index = max(
            i
            for i in range(min(index, len(cache.layers)))
            if layer_types[i] == layer_types[module.layer_idx] and cache.layers[i].keys is not None
        )
    return cache.layers[index].keys[0]


def pruned_prefill(
    language_model: Any, visual: torch.Tensor, length: int, kept_visual: Sequence[int], prefill: Prefill
) -> tuple[Any, torch.Tensor, int]:
    """`prefill` on the prompt without the visual tokens not in `kept_visual` (indices among them);
    returns the state, the logits and the number of entries the cache now holds.

    The model embeds its own image or video as usual; a hook at the entry of its language model
    keeps only the text and the kept visual rows, each with its original position (all three
    M-RoPE axes for the Qwen families, the 1-D index else).
    """
    keep = torch.ones(length, dtype=torch.bool, device=visual.device)
    keep[visual] = False
    kept_index = torch.tensor(list(kept_visual), dtype=torch.long, device=visual.device)
    keep[visual[kept_index]] = True
    rows = keep.nonzero().squeeze(1)  # (P,): the sequence indices the draft reads
    owner = threading.get_ident()

    def prune(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if threading.get_ident() != owner:
            return args, kwargs
        embeds = kwargs["inputs_embeds"]
        kwargs["inputs_embeds"] = embeds[:, rows.to(embeds.device)]
        positions = kwargs.get("position_ids")
        if positions is None:  # 1-D positions: the sequence index
            positions = torch.arange(length, device=embeds.device).unsqueeze(0)
        kwargs["position_ids"] = positions[..., rows.to(positions.device)]  # (..., B, P) on every axis
        mask = kwargs.get("attention_mask")
        if isinstance(mask, dict):  # one mask per layer type, made before the language model (Gemma 3)
            kwargs["attention_mask"] = {kind: kept_rows(m, rows, length) for kind, m in mask.items()}
        elif isinstance(mask, torch.Tensor):
            kwargs["attention_mask"] = kept_rows(mask, rows, length)
        if kwargs.get("per_layer_inputs") is not None:  # Gemma 4's per-layer embeddings: (B, L, layers, d)
            kwargs["per_layer_inputs"] = kwargs["per_layer_inputs"][:, rows.to(kwargs["per_layer_inputs"].device)]
        if kwargs.get("visual_pos_masks") is not None:  # Qwen3-VL's deepstack features
            kwargs["visual_pos_masks"] = kwargs["visual_pos_masks"][:, rows.to(kwargs["visual_pos_masks"].device)]
            kwargs["deepstack_visual_embeds"] = [e[kept_index.to(e.device)] for e in kwargs["deepstack_visual_embeds"]]
        return args, kwargs

    hook = language_model.register_forward_pre_hook(prune, with_kwargs=True)
    try:
        state, logits = prefill()
    finally:
        hook.remove()
    return state, logits, int(rows.numel())


def kept_rows(mask: torch.Tensor | None, rows: torch.Tensor, length: int) -> torch.Tensor | None:
    """A prompt's mask cut to the kept rows: (B, L) -> (B, P); (B, H, L, L) -> (B, H, P, P)."""
    if mask is None or mask.shape[-1] != length:
        return mask
    rows = rows.to(mask.device)
    if mask.dim() == 2:
        return mask[:, rows]
    return mask[:, :, rows][..., rows]


def text_to_visual_attention(
    module: Any,
    hidden: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor],
    keys: torch.Tensor,
    visual: torch.Tensor,
    rotary: Rotary = rotate_half_rope,
) -> torch.Tensor:
    """The attention the visual keys receive from trailing text queries in one layer, mean over heads and queries.

    `hidden`: (T, hidden) the attention module's input for the last T prompt tokens, `position_embeddings`
    the module's cos/sin whose last T rows are theirs; `keys`: (KV heads, S, d), the layer's cached keys of
    the whole prompt; `visual`: (V,) key indices. The queries are made as the
    module makes them (projection, the Qwen3 per-head norm, RoPE with the module's own cos/sin, applied by
    the family's `rotary`), and each
    attends causally over all S keys. Returns (V,) float32.
    """
    count, seq = hidden.shape[0], keys.shape[1]
    head_dim = keys.shape[-1]
    query = module.q_proj(hidden).view(count, -1, head_dim)  # [T, H, d]
    heads = int(getattr(module.config, "num_attention_heads", query.shape[1]))
    if query.shape[1] == 2 * heads:  # a gated query (Qwen3.5): each head's query, then its gate
        query = query.view(count, heads, 2 * head_dim)[..., :head_dim]
    if hasattr(module, "q_norm"):
        query = module.q_norm(query)
    cos, sin = (t[0, t.shape[1] - count :].unsqueeze(1).to(query.dtype) for t in position_embeddings)  # [T, 1, d]
    query = rotary(query, cos, sin)
    query = query.transpose(0, 1).float()  # [H, T, d]
    keys = keys.float().repeat_interleave(heads // keys.shape[0], dim=0)  # [H, S, d]
    # causal: the text query at sequence index seq - count + t sees keys up to that index (and, in a
    # sliding-window layer, no key `sliding_window` or more behind it)
    query_index = (seq - count + torch.arange(count, device=keys.device))[:, None]
    key_index = torch.arange(seq, device=keys.device)
    future = key_index > query_index  # (T, S) bool; no (T, S) integer difference is made
    window = getattr(module, "sliding_window", None)
    if window is not None:
        future |= key_index <= query_index - int(window)
    received = torch.zeros(visual.numel(), dtype=torch.float32, device=keys.device)
    # bounded scratch for long prompts and long questions: chunks of heads, and of queries when one head's
    # (T, S) scores alone pass the bound (SCORE_CHUNK elements per tensor)
    step = max(1, SCORE_CHUNK // max(1, count * seq))  # heads per chunk
    rows = max(1, SCORE_CHUNK // max(1, seq))  # queries per chunk
    for start in range(0, heads, step):
        for first in range(0, count, rows):
            part = query[start : start + step, first : first + rows]
            scores = part @ keys[start : start + step].transpose(1, 2) * module.scaling
            blocked = future[first : first + rows]
            probs = torch.softmax(scores.masked_fill_(blocked, float("-inf")), dim=-1)  # [h, t, S]
            received += probs[..., visual].sum(dim=(0, 1))
    return received / (heads * count)
