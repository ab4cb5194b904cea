"""A one-pass draft's conditional head: each depth of the block conditioned on the token drafted before it.

A one-pass draft (PARD, `one_pass.py`) gives, from one forward, the *marginal* distribution at every depth
1 .. K: depth d does not know which token was drafted at d - 1, so its top-1 is right less often than
depth 1's and siblings share the same children. The field's 2026 fix (DSpark, arXiv 2607.05147; Domino,
2605.29707; TreeFlash, 2606.03819) is a head far smaller than the draft that reads depth d's logits and the
token drafted at d - 1 and gives that node's own next-depth distribution:

    logits'_d = logits_d + W_out · tanh(W_logits · log_softmax(logits_d) + W_prev · E[prev] + b_d) + b_out

with E a small embedding table of the previous token and b_d a bias per depth. W_out starts at zero, so an
untrained head changes nothing. Tens of thousands of parameters for a 391-token vocabulary; its calls cost
a few small matrix products a level, not a draft forward (`drafting.ConditionalOffers`).

Saved beside the draft as safetensors (`TENSORS`) and declared by the draft's config
(`"one_pass_draft": {..., "conditional_head": "conditional_head.safetensors"}`: `one_pass.one_pass_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

#: The head's tensors by name, each with its shape in terms of the vocabulary V, the embedding width E, the
#: hidden width H and the deepest depth K.
TENSORS = {
    "embed": ("V", "E"),
    "w_prev": ("E", "H"),
    "w_logits": ("V", "H"),
    "depth_bias": ("K", "H"),
    "w_out": ("H", "V"),
    "b_out": ("V",),
}


@dataclass(frozen=True, eq=False)
class ConditionalHead:
    """The head's weights (float32; `TENSORS`); compared by identity."""

    embed: torch.Tensor  # [V, E] the previous token's embedding
    w_prev: torch.Tensor  # [E, H]
    w_logits: torch.Tensor  # [V, H] reads depth d's log-probabilities
    depth_bias: torch.Tensor  # [K, H] depth d's bias at row d - 1
    w_out: torch.Tensor  # [H, V] the correction added to depth d's logits
    b_out: torch.Tensor  # [V]
    _placed: dict[torch.device, ConditionalHead] = field(default_factory=dict, init=False, repr=False)

    @property
    def vocab(self) -> int:
        return int(self.embed.shape[0])

    @property
    def depths(self) -> int:
        """The deepest depth the head has a bias for."""
        return int(self.depth_bias.shape[0])

    @property
    def parameters(self) -> int:
        return sum(t.numel() for t in self.tensors().values())

    def tensors(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name) for name in TENSORS}

    def on(self, device: torch.device) -> ConditionalHead:
        """The head's weights on `device` (moved once, then kept)."""
        if self.embed.device == device:
            return self
        if device not in self._placed:
            self._placed[device] = ConditionalHead(**{k: v.to(device) for k, v in self.tensors().items()})
        return self._placed[device]

    def apply(self, logits: torch.Tensor, prev: torch.Tensor, depth: int | torch.Tensor) -> torch.Tensor:
        """Each row's own depth-`depth` logits: `logits` [n, V'] or [1, V'] (depth d's row of the block for
        each node, or one row for all of them; V' at least the head's V, columns past V pass unchanged), `prev`
        [n] the token drafted at d - 1 before each, `depth` d (1-based; an int, or [n] per row). Float32 [n, V'],
        on the logits' device."""
        head = self.on(logits.device)
        scores = logits.float()
        vocab = head.vocab
        known = scores[:, :vocab]
        index = (depth if isinstance(depth, torch.Tensor) else torch.tensor(depth)).to(logits.device) - 1
        hidden = torch.tanh(
            F.log_softmax(known, dim=-1) @ head.w_logits
            + head.embed[prev.to(logits.device)] @ head.w_prev
            + head.depth_bias[index]
        )
        corrected = known + hidden @ head.w_out + head.b_out
        if scores.shape[-1] == vocab:
            return corrected
        return torch.cat((corrected, scores[:, vocab:].expand(corrected.shape[0], -1)), dim=-1)

    def save(self, path: Path | str) -> None:
        from safetensors.torch import save_file

        save_file({k: v.detach().float().contiguous().cpu() for k, v in self.tensors().items()}, str(path))


def new_head(vocab: int, depths: int, embed: int = 32, hidden: int = 64, seed: int = 0) -> ConditionalHead:
    """A freshly initialised head (W_out zero: it changes nothing until trained)."""
    generator = torch.Generator().manual_seed(seed)

    def normal(*shape: int, scale: float) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * scale

    return ConditionalHead(
        embed=normal(vocab, embed, scale=1.0),
        w_prev=normal(embed, hidden, scale=embed**-0.5),
        w_logits=normal(vocab, hidden, scale=0.2 * vocab**-0.5),
        depth_bias=torch.zeros(depths, hidden),
        w_out=torch.zeros(hidden, vocab),
        b_out=torch.zeros(vocab),
    )


def head_problem(tensors: dict[str, torch.Tensor], vocab: int, depths: int) -> str | None:
    """What is wrong with a saved head's tensors for a draft of `vocab` tokens and a block of `depths` (None:
    nothing): a missing tensor, a shape the others contradict, a table for another vocabulary or too few depths."""
    missing = sorted(set(TENSORS) - set(tensors))
    if missing:
        return f"it lacks the tensors {', '.join(missing)}"
    sizes: dict[str, int] = {}
    for name, dims in TENSORS.items():
        tensor = tensors[name]
        if tensor.dim() != len(dims) or not tensor.is_floating_point():
            return f"its {name} is not a {len(dims)}-d float tensor"
        for letter, size in zip(dims, tensor.shape, strict=True):
            if sizes.setdefault(letter, int(size)) != size:
                return f"its {name} is {tuple(tensor.shape)}, which the other tensors contradict"
    if sizes["V"] != vocab:
        return f"it is for {sizes['V']} tokens, not the draft's {vocab}"
    if sizes["K"] < depths:
        return f"it has biases for {sizes['K']} depths, fewer than the block's {depths}"
    return None


def load_head(path: Path, vocab: int, depths: int) -> ConditionalHead | str:
    """The head saved at `path`, or what is wrong with it (one clause)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
    except (OSError, SafetensorError) as error:
        return f"its file {path.name} cannot be read ({type(error).__name__})"
    problem = head_problem(tensors, vocab, depths)
    if problem is not None:
        return problem
    return ConditionalHead(**{name: tensors[name].float() for name in TENSORS})
