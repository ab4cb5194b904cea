"""Hybrid linear attention (Qwen3.5): layers that carry a recurrent state (a causal depthwise
convolution over the last K inputs, then the gated delta rule) instead of a cache a mask can select from.

A tree verifies exactly through them: each node's state is its parent's state advanced by its token.
After the prefill (transformers' own forward) every forward of new tokens runs such a layer through
`tree_forward`: the projections per token; each node's convolution over the inputs along its own
ancestry (its ancestors among the scratch entries, then the layer's convolution state for the
positions before them); the recurrence one step per node exactly as transformers' one-token decoding
step (`torch_recurrent_gated_delta_rule`) runs it, level by level (all nodes of one depth in one
batched step from their parents' states); each node's output from its own state. A chain is the tree
whose levels hold one node each, and plain decoding the tree of one node, so every method runs the
same path.

The layers' committed states are never written during a round. Each scratch entry keeps what its
step needs (its convolution input, key, value, decay and beta: a layer's hidden width or two, about a
thirtieth of a recurrent state at transformers' default Qwen3.5 sizes); the states of the deepest level of the
last forward are kept, the others dropped as soon as their children have theirs. A commit gives each
layer the state of the last kept entry: kept if that entry was in the deepest level, else recomputed
along the kept path from the committed state with the same steps, and the convolution state the last
K inputs of the kept path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from transformers.activations import ACT2FN
from transformers.cache_utils import LinearAttentionCacheLayerMixin

SCRATCH = "sage_recurrent_scratch"  # the attribute of a run's cache that holds its `RecurrentScratch`


def is_linear(layer: Any) -> bool:
    return isinstance(layer, LinearAttentionCacheLayerMixin)


def crop_attention(cache: Any, tokens: int) -> None:
    """Drop the last `tokens` entries of the attention layers (the linear ones keep no entries)."""
    if tokens:
        for layer in cache.layers:
            if not is_linear(layer):
                layer.crop(-tokens)


@dataclass(frozen=True)
class Plan:
    """One forward of `count` new tokens after `first` scratch entries (host tensors).

    `windows[i]`: the K columns token i's convolution reads, numbered over the layer's convolution
    state (0..K-1), then every scratch entry (K + entry); `levels`: per depth inside this forward, the
    tokens (indices among the new ones) and, per token, its parent's slot among the level's sources
    (level 0: `sources`, the parents' entries, -1 for the committed state; deeper: the level above's
    tokens in order)."""

    first: int
    count: int
    windows: torch.Tensor
    levels: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    sources: tuple[int, ...]
    held_before: dict[int, int]  # entry -> row of the states kept from the previous forward
    on_device: dict[torch.device, Any] = field(default_factory=dict, compare=False)

    def moved(self, device: torch.device) -> tuple[torch.Tensor, tuple[tuple[torch.Tensor, torch.Tensor], ...]]:
        """The windows and levels on `device` (copied once per forward and device)."""
        if device not in self.on_device:
            levels = tuple((nodes.to(device), slots.to(device)) for nodes, slots in self.levels)
            self.on_device[device] = (self.windows.to(device), levels)
        return self.on_device[device]


@dataclass
class LayerScratch:
    """One linear-attention layer's record of the scratch entries: per entry its convolution input
    (E, conv), and its step's l2-normalised key (E, H, Dk), value (E, H, Dv), exp(g) and beta (E, H);
    `held`: the recurrent states of the entries in `RecurrentScratch.held` (rows in that order)."""

    inputs: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    decays: torch.Tensor
    betas: torch.Tensor
    held: torch.Tensor


@dataclass
class RecurrentScratch:
    """The scratch entries of one run's cache, for its linear-attention layers."""

    parents: list[int] = field(default_factory=list)  # each entry's parent entry (-1: the committed sequence)
    held: dict[int, int] = field(default_factory=dict)  # entry -> row in each layer's `held`
    layers: dict[int, LayerScratch] = field(default_factory=dict)
    plan: Plan | None = None

    def path(self, entry: int, longest: int | None = None) -> list[int]:
        """The entries from the committed sequence down to `entry` (only the last `longest` of them)."""
        path: list[int] = []
        while entry >= 0 and (longest is None or len(path) < longest):
            path.append(entry)
            entry = self.parents[entry]
        return path[::-1]


def scratch_of(cache: Any) -> RecurrentScratch:
    scratch = getattr(cache, SCRATCH, None)
    if scratch is None:
        scratch = RecurrentScratch()
        setattr(cache, SCRATCH, scratch)
    return scratch


def plan_forward(cache: Any, scratch_entries: int, parents: Sequence[int], kernel: int) -> None:
    """Before a forward of new tokens: what its linear-attention layers read (`Plan`)."""
    scratch = scratch_of(cache)
    assert len(scratch.parents) == scratch_entries, "the recurrent scratch follows the cache's"
    first, count = scratch_entries, len(parents)
    depth: list[int] = []
    windows: list[list[int]] = []
    for i, parent in enumerate(parents):
        assert -1 <= parent < first + i, "a parent comes before its child"
        depth.append(depth[parent - first] + 1 if parent >= first else 0)
        scratch.parents.append(parent)
        ancestry = scratch.path(first + i, kernel)
        columns = [kernel + entry for entry in ancestry]
        windows.append(list(range(len(columns), kernel)) + columns)  # the state's last columns, then the path
    sources = tuple(sorted({p for p, d in zip(parents, depth, strict=True) if d == 0}))
    levels = []
    previous: list[int] = []
    for level in range(max(depth) + 1 if depth else 0):
        nodes = [i for i in range(count) if depth[i] == level]
        if level == 0:
            slots = [sources.index(parents[i]) for i in nodes]
        else:
            slots = [previous.index(parents[i] - first) for i in nodes]
        levels.append((torch.tensor(nodes, dtype=torch.long), torch.tensor(slots, dtype=torch.long)))
        previous = nodes
    held_before = scratch.held
    scratch.held = {first + node: row for row, node in enumerate(previous)}
    window_tensor = torch.tensor(windows, dtype=torch.long).reshape(count, kernel)
    scratch.plan = Plan(first, count, window_tensor, tuple(levels), sources, held_before)


def advance(
    state: torch.Tensor, key: torch.Tensor, value: torch.Tensor, decay: torch.Tensor, beta: torch.Tensor
) -> torch.Tensor:
    """One step of the gated delta rule for a batch of nodes, as `torch_recurrent_gated_delta_rule` runs a
    token: state (n, H, Dk, Dv), key (n, H, Dk), value (n, H, Dv), decay = exp(g) and beta (n, H)."""
    state = state * decay[..., None, None]
    memory = (state * key.unsqueeze(-1)).sum(dim=-2)
    delta = (value - memory) * beta.unsqueeze(-1)
    return state + key.unsqueeze(-1) * delta.unsqueeze(-2)


def replay(start: torch.Tensor, record: LayerScratch, path: Sequence[int]) -> torch.Tensor:
    """The recurrent state after `path` (scratch entries), from `start` (1, H, Dk, Dv)."""
    state = start
    for e in path:
        state = advance(
            state, record.keys[e : e + 1], record.values[e : e + 1], record.decays[e : e + 1], record.betas[e : e + 1]
        )
    return state


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """transformers' `l2norm` of the gated delta rule."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def tree_forward(module: Any, hidden_states: torch.Tensor, cache: Any, scratch: RecurrentScratch) -> torch.Tensor:
    """A gated delta net layer (transformers' `Qwen3_5GatedDeltaNet`) over the new tokens of `scratch.plan`,
    each continuing its parent's state; the layer's committed states are read, never written."""
    plan = scratch.plan
    assert plan is not None and hidden_states.shape[:2] == (1, plan.count)
    index, layer = module.layer_idx, cache.layers[module.layer_idx]
    count, heads, key_dim, value_dim = plan.count, module.num_v_heads, module.head_k_dim, module.head_v_dim
    inputs = module.in_proj_qkv(hidden_states)[0]  # (N, conv)
    z = module.in_proj_z(hidden_states).reshape(count, heads, value_dim)
    b, a = module.in_proj_b(hidden_states)[0], module.in_proj_a(hidden_states)[0]
    windows, levels = plan.moved(inputs.device)
    record = scratch.layers.get(index)
    conv_state = layer.conv_states[0][0]  # (conv, K)
    earlier = [] if record is None else [record.inputs.T]
    pool = torch.cat([conv_state, *earlier, inputs.T], dim=1)
    weight = module.conv1d.weight
    mixed = F.conv1d(
        pool[:, windows].transpose(0, 1).to(weight.dtype), weight, module.conv1d.bias, groups=pool.shape[0]
    )
    mixed = ACT2FN[module.activation](mixed).to(hidden_states.dtype)[..., 0]  # (N, conv)
    query, key, value = torch.split(mixed, [module.key_dim, module.key_dim, module.value_dim], dim=-1)
    query = query.reshape(count, -1, key_dim)
    key = key.reshape(count, -1, key_dim)
    value = value.reshape(count, heads, value_dim)
    beta = b.sigmoid()
    g = -module.A_log.float().exp() * F.softplus(a.float() + module.dt_bias)
    if query.shape[1] != heads:  # each query/key head serves consecutive value heads
        query = query.repeat_interleave(heads // query.shape[1], dim=1)
        key = key.repeat_interleave(heads // key.shape[1], dim=1)
    query, key, value, beta, decay = (x.to(torch.float32) for x in (query, key, value, beta, g))
    key = l2norm(key)
    query = l2norm(query) / (key_dim**0.5)
    decay = decay.exp()
    committed = layer.recurrent_states[0]  # (1, H, Dk, Dv)
    sources = [source_state(committed, record, scratch, plan, entry) for entry in plan.sources]
    states = torch.cat(sources) if sources else committed[:0]
    output = torch.empty((count, heads, value_dim), dtype=torch.float32, device=value.device)
    for nodes, slots in levels:
        states = advance(states.index_select(0, slots), key[nodes], value[nodes], decay[nodes], beta[nodes])
        output[nodes] = (states * query[nodes].unsqueeze(-1)).sum(dim=-2)
    keep_record(scratch, index, record, Steps(inputs, key, value, decay, beta), states)
    output = module.norm(output.to(hidden_states.dtype).reshape(-1, value_dim), z.reshape(-1, value_dim))
    return module.out_proj(output.reshape(1, count, -1))


def source_state(
    committed: torch.Tensor, record: LayerScratch | None, scratch: RecurrentScratch, plan: Plan, entry: int
) -> torch.Tensor:
    """The state a level-0 node continues: the committed one, a kept one, or one recomputed along its path."""
    if entry < 0:
        return committed
    assert record is not None
    if entry in plan.held_before:
        row = plan.held_before[entry]
        return record.held[row : row + 1]
    return replay(committed, record, scratch.path(entry))


@dataclass(frozen=True)
class Steps:
    """The new entries' step inputs in one layer: convolution inputs (N, conv), l2-normalised keys
    (N, H, Dk), values (N, H, Dv), exp(g) and beta (N, H)."""

    inputs: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    decays: torch.Tensor
    betas: torch.Tensor


def keep_record(
    scratch: RecurrentScratch, index: int, record: LayerScratch | None, steps: Steps, deepest: torch.Tensor
) -> None:
    """Append the new entries' step inputs to the layer's record and keep the deepest level's states."""
    parts = [steps.inputs, steps.keys, steps.values, steps.decays, steps.betas]
    if record is not None:
        old = [record.inputs, record.keys, record.values, record.decays, record.betas]
        parts = [torch.cat([before, after]) for before, after in zip(old, parts, strict=True)]
    inputs, keys, values, decays, betas = parts
    scratch.layers[index] = LayerScratch(inputs, keys, values, decays, betas, held=deepest)


def install(model: Any, layer_class: str) -> None:
    """Run every `layer_class` module of `model` through `tree_forward` in a forward whose cache carries a
    plan (`plan_forward`), and through its own forward otherwise (the prefill, `generate`)."""
    for module in model.modules():
        if type(module).__name__ == layer_class and not getattr(module, "sage_tree_forward", False):
            # under accelerate's hook (a device map) the hook calls `_old_forward`: replace that one, so that
            # the hook still moves the inputs and loads offloaded weights first
            name = "_old_forward" if hasattr(module, "_hf_hook") and hasattr(module, "_old_forward") else "forward"
            setattr(module, name, _either_forward(module, getattr(module, name)))
            module.sage_tree_forward = True


def _either_forward(module: Any, own: Any) -> Any:
    def forward(hidden_states: torch.Tensor, attention_mask: Any = None, **kwargs: Any) -> Any:
        cache = kwargs.get("cache", kwargs.get("cache_params"))  # the name in transformers 5.24 / 5.17
        scratch = getattr(cache, SCRATCH, None)
        if scratch is None or scratch.plan is None:
            return own(hidden_states, attention_mask=attention_mask, **kwargs)
        # the convolution's weight is read directly, not through its forward: fire its accelerate hook (an
        # offloaded weight is loaded) as transformers' own forward does (`force_accelerate_hooks`)
        hook = getattr(module.conv1d, "_hf_hook", None)
        if hook is not None:
            hook.pre_forward(module.conv1d)
        try:
            return tree_forward(module, hidden_states, cache, scratch)
        finally:
            if hook is not None:
                hook.post_forward(module.conv1d, ())

    return forward


def commit_states(cache: Any, keep: Sequence[int]) -> None:
    """Give each linear-attention layer the states after the kept entries (a path from the committed
    sequence), and forget the scratch."""
    scratch = scratch_of(cache)
    setattr(cache, SCRATCH, None)
    if not keep:
        return
    assert scratch.path(keep[-1]) == list(keep), "the kept entries form a path from the committed sequence"
    for index, record in scratch.layers.items():
        layer = cache.layers[index]
        if keep[-1] in scratch.held:
            row = scratch.held[keep[-1]]
            state = record.held[row : row + 1]
        else:
            state = replay(layer.recurrent_states[0], record, keep)
        layer.recurrent_states[0].copy_(state)
        conv = layer.conv_states[0]
        kept = record.inputs[list(keep)].T.unsqueeze(0).to(conv.dtype)
        conv.copy_(torch.cat([conv, kept], dim=-1)[..., -conv.shape[-1] :])
