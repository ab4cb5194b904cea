"""Draft-side visual token pruning (SpecVLM, arXiv 2508.16201; the other half of SAGE's setup).

The target reads every visual token; the draft reads only a share of them, so
its prefill and every draft step attend over a shorter cache. Which tokens the
draft keeps is decided by the target ("verifier-guided"): during the target's
prefill each visual token is scored by the attention it receives from the
text tokens that follow the last visual token (the question and the
assistant header), averaged over every head, those text queries and every
decoder layer (the model package computes this from one hook per layer, see
`VLM.prefill_scored`). Then, as SpecVLM's `inference.py` does:

1. stage I keeps the highest-scored tokens until they hold `attention_share`
   (SpecVLM: 0.4) of the visual tokens' total attention mass, at most the
   keep budget;
2. stage II fills the rest of the budget uniformly over the visual tokens
   stage I left out (evenly spaced in sequence order).

The keep budget is round(V * (1 - ratio)) of the V visual tokens, at least 1.
Pruning never changes what is output: the target still verifies every token.
"""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_ATTENTION_SHARE = 0.4
PAPER_RATIOS = {"image": 0.8, "video": 0.9}  # SAGE's experiments (SpecVLM's defaults)


def keep_budget(visual_tokens: int, ratio: float) -> int:
    """How many of `visual_tokens` the draft keeps at pruning `ratio` (0 keeps all; at least 1)."""
    if visual_tokens == 0 or ratio <= 0:
        return visual_tokens
    return max(1, min(visual_tokens, round(visual_tokens * (1.0 - ratio))))


def select_visual_tokens(
    scores: Sequence[float], ratio: float, attention_share: float = DEFAULT_ATTENTION_SHARE
) -> tuple[int, ...]:
    """The kept visual tokens (indices among the visual tokens, ascending) from the target's attention scores."""
    count = len(scores)
    budget = keep_budget(count, ratio)
    if budget >= count:
        return tuple(range(count))
    # Stage I: the most-attended tokens until they hold `attention_share` of the mass.
    order = sorted(range(count), key=lambda i: (-scores[i], i))
    target_mass = attention_share * sum(scores)
    kept: list[int] = []
    mass = 0.0
    for index in order:
        if len(kept) >= budget or mass >= target_mass:
            break
        kept.append(index)
        mass += scores[index]
    # Stage II: the rest of the budget, evenly spaced over the tokens stage I left out.
    chosen = set(kept)
    rest = [i for i in range(count) if i not in chosen]
    fill = budget - len(kept)
    kept.extend(rest[(2 * j + 1) * len(rest) // (2 * fill)] for j in range(fill))
    return tuple(sorted(kept))
