"""Speculative sampling over a draft tree, exact in distribution.

The target's distribution. The settings (`config.SamplingConfig`) become the
warpers transformers' `generate(do_sample=True, temperature=T, top_k=K,
top_p=P)` applies, built by its own classes, in its order and on its
conditions: temperature (when T != 1), top-k (when K != 0), top-p (when
P < 1). A softmax of the warped float32 logits is the distribution p the
target samples its next token from; the test suite checks it against
`generate`'s scores.

The rule, at each node of the walk from the root (p = the target's
distribution after that node, c_1..c_m its children in the tree's order):

    r <- p
    for c in c_1..c_m:
        accept c with probability r(c) / sum(r)     (the normalised residual)
        accepted: continue the walk at c
        rejected: r(c) <- 0                         (remove c from the residual)
    every child rejected: the bonus token ~ r / sum(r)
    no children (a leaf, or the empty tree): the bonus token ~ p

Where it comes from. The speculative sampling rule (Leviathan et al. 2023,
"Fast Inference from Transformers via Speculative Decoding"; Chen et al.
2023, "Accelerating Large Language Model Decoding with Speculative
Sampling") accepts a candidate x drawn from a proposal q with probability
min(1, p(x) / q(x)) and, on rejection, samples from the residual
norm(max(0, p - q)). SpecInfer's multi-step speculative sampling (Miao et
al. 2023, "SpecInfer") applies it to a node's children one after the
other, the residual of each rejection becoming the target distribution for
the next child; Recursive Speculative Decoding (Jeon et al. 2024) does the
same for candidates drawn without replacement. Our trees do not sample
their children: they take the draft's top-k, a deterministic function of
the committed tokens. A deterministic candidate c is the proposal q = δ_c
(all mass on c), for which the rule gives acceptance min(1, r(c) / 1) = r(c)
(r normalised) and the residual norm(max(0, r - δ_c)) = r with c removed,
renormalised: the rule above. (Using the draft's q(c) in the ratio instead,
as if c had been sampled from q, would not be exact for top-k candidates.)

Why it is exact. At one node the rule is the chain rule of drawing x ~ p
and looking it up among the children: P(c_1 accepted) = p(c_1); once c_1 is
rejected the token is distributed as p without c_1, renormalised, which is
r; and so on, and when all are rejected the token is distributed as p
restricted to the other tokens, the final residual. So the token leaving
each node is distributed as p; when it is a child the walk goes on at that
child, whose row of the verify forward is the target's distribution given
the longer prefix. The draft's probabilities never enter; the tree depends
only on the committed tokens and earlier randomness, and every tried child
uses a fresh uniform, so by induction over the nodes and rounds the output
is distributed as the target's own sampling, token for token. A tree whose
children cover p's whole support never reaches the residual bonus (the last
child in the support has r(c) / sum(r) = 1).

The draft. Its logits go through the same warpers before its top-k, so its
candidates are its most likely tokens under the same settings, and SAGE's
confidence alpha is the normalised entropy of the top-k of this tempered
(warped) draft distribution, the distribution the draft would sample from.
Truncated tokens have probability 0 there; such candidates are rejected
whenever the target also truncates them.

Randomness: one `torch.Generator` on the CPU per run, seeded; each
verification draws N + 1 uniforms (N nodes), one for each child the walk
may try and one for the bonus token (inverse CDF in float64 over the float32
probabilities, as `generate`'s multinomial reads float32 ones).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from .config import SamplingConfig
from .trees import ROOT, Tree
from .verify import GreedyVerifier, Verdict, Verifier

_NO_INPUT_IDS = torch.empty((0, 0), dtype=torch.long)  # these warpers read only the scores


class Warper:
    """Logits -> the warped logits `generate(do_sample=True, ...)` samples from (rows are independent)."""

    def __init__(self, config: SamplingConfig) -> None:
        if config.greedy:
            raise ValueError("temperature 0 is greedy decoding: there is nothing to warp")
        processors = LogitsProcessorList()
        # generate's order and conditions (GenerationMixin._get_logits_processor, transformers 5.24).
        if config.temperature != 1.0:
            processors.append(TemperatureLogitsWarper(config.temperature))
        if config.top_k != 0:
            processors.append(TopKLogitsWarper(top_k=config.top_k, min_tokens_to_keep=1))
        if config.top_p < 1.0:
            processors.append(TopPLogitsWarper(top_p=config.top_p, min_tokens_to_keep=1))
        self.processors = processors

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        scores = logits.float().reshape(-1, logits.shape[-1])
        for processor in self.processors:  # as LogitsProcessorList does, without its per-call signature checks
            scores = processor(_NO_INPUT_IDS, scores)
        return scores


class SamplingVerifier:
    """Rejection sampling over the tree (the rule in the module docstring)."""

    def __init__(self, config: SamplingConfig, seed: int) -> None:
        self.warp = Warper(config)
        self.generator = torch.Generator().manual_seed(seed)

    def verify(self, tree: Tree, target_logits: torch.Tensor) -> Verdict:
        if target_logits.shape[0] != len(tree) + 1:
            raise ValueError("need target logits for the root and one row per node")
        probs = torch.softmax(self.warp(target_logits), dim=-1)  # (1 + N, V), float32 as in generate
        # Node i's row is its parent's (entry parent + 1), its column its token.
        where = torch.tensor([[parent + 1 for parent in tree.parents], tree.tokens], dtype=torch.long)
        where = where.to(probs.device)
        # One device-to-host copy: each node's probability under its parent, then each row's total.
        packed = torch.cat((probs[where[0], where[1]].double(), probs.sum(dim=-1, dtype=torch.float64))).tolist()
        # Enough uniforms for every child the walk may try, and the bonus.
        uniforms = iter(torch.rand(len(tree) + 1, generator=self.generator, dtype=torch.float64).tolist())
        node_probs, totals = packed[: len(tree)], packed[len(tree) :]
        children: dict[int, list[int]] = {}
        for index, parent in enumerate(tree.parents):
            children.setdefault(parent, []).append(index)
        accepted: list[int] = []
        tried: list[int] = []
        accept_probs: list[float] = []
        current = ROOT
        while True:
            left = totals[current + 1]  # the residual's mass, sum(r)
            removed: list[int] = []
            for child in children.get(current, ()):
                mass = 0.0 if tree.tokens[child] in removed else node_probs[child]
                accept = self.acceptance(mass, left)
                tried.append(child)
                accept_probs.append(accept)
                if next(uniforms) < accept:
                    accepted.append(child)
                    current = child
                    break
                removed.append(tree.tokens[child])
                left -= mass
            else:
                row = probs[current + 1].double().cpu()
                bonus = _sample(self.residual(row, removed), next(uniforms), fallback=row)
                return Verdict(
                    tuple(accepted), tuple(tree.tokens[n] for n in accepted), bonus, tuple(tried), tuple(accept_probs)
                )

    def acceptance(self, mass: float, left: float) -> float:
        """A child's acceptance probability: its residual mass r(c) over the residual's, sum(r)."""
        return min(1.0, mass / left) if left > 0 else 0.0

    def residual(self, row: torch.Tensor, rejected: Sequence[int]) -> torch.Tensor:
        """The target's distribution at a node with its rejected children removed (unnormalised)."""
        row = row.clone()
        row[list(rejected)] = 0.0
        return row


def _sample(weights: torch.Tensor, uniform: float, fallback: torch.Tensor) -> int:
    """The token with probability weights / sum(weights) that the uniform picks (inverse CDF).

    An empty residual happens only by rounding (children covering the whole
    support, the last one rejected with probability ~1e-16); then `fallback`.
    """
    cdf = weights.cumsum(dim=0)
    total = float(cdf[-1])
    if not total > 0:
        weights = fallback
        cdf = weights.cumsum(dim=0)
        total = float(cdf[-1])
    index = int(torch.searchsorted(cdf, torch.tensor([uniform * total], dtype=torch.float64), right=True))
    if index >= len(weights):  # uniform * total rounded up to total: the last token with any weight
        index = int(weights.nonzero()[-1])
    return index


def resolve_seed(config: SamplingConfig) -> int | None:
    """The run's seed: the configured one, a fresh one when sampling without one, None when greedy."""
    if config.greedy:
        return None
    return config.seed if config.seed is not None else secrets.randbits(63)


def make_verifier(config: SamplingConfig, seed: int | None) -> Verifier:
    """Greedy for temperature 0, rejection sampling (seeded) otherwise."""
    if config.greedy:
        return GreedyVerifier()
    if seed is None:
        raise ValueError("sampling needs a seed (see resolve_seed)")
    return SamplingVerifier(config, seed)
