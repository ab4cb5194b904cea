"""A run's acceptance figures in the shape serving engines report them, read off its round records.

vLLM's per-request speculative decoding stats are the convention (`SpecDecodingStats`): `num_drafts` (rounds
that verified a draft), `num_draft_tokens` (tokens proposed: a tree's nodes), `num_accepted_tokens`,
`num_accepted_tokens_per_pos` (how many drafts had their token at position k accepted; for a tree, position
k is depth k of the accepted path), the mean acceptance length (1 + accepted per draft: the bonus token
counts, as vLLM counts it) and the draft acceptance rate (accepted over proposed). SGLang's names for the
same run stand beside them: `spec_verify_ct` (verification forwards) and `spec_accept_length` (tokens per
verification forward). Added here: the histogram of accepted lengths and the draft forwards, which a
one-pass draft makes one a round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..records import RoundRecord


@dataclass(frozen=True)
class AcceptanceStats:
    """A run's acceptance figures (module docstring): counts over its decode rounds, the prefill excluded."""

    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    num_accepted_tokens_per_pos: tuple[int, ...]
    accepted_length_histogram: tuple[int, ...]  # rounds that accepted 0, 1, 2, … draft tokens
    draft_forwards: int
    spec_verify_ct: int  # decode rounds: one target forward each
    new_tokens: int  # tokens the decode rounds appended (accepted plus bonus, cut at the end)

    @property
    def mean_acceptance_length(self) -> float:
        """1 + accepted tokens per draft (vLLM's figure; 1.0 for plain decoding, which drafts nothing)."""
        return 1.0 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else 1.0

    @property
    def draft_acceptance_rate(self) -> float:
        """Accepted over proposed draft tokens (0.0 when nothing was proposed)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def acceptance_rate_per_pos(self) -> tuple[float, ...]:
        """Per position k: the share of drafts whose token at position k was accepted (vLLM's per-position
        rate; it can only fall with k)."""
        return tuple(n / self.num_drafts for n in self.num_accepted_tokens_per_pos) if self.num_drafts else ()

    @property
    def spec_accept_length(self) -> float:
        """Tokens per verification forward over the decode rounds (SGLang's figure)."""
        return self.new_tokens / self.spec_verify_ct if self.spec_verify_ct else 0.0

    @property
    def draft_forwards_per_round(self) -> float:
        return self.draft_forwards / self.spec_verify_ct if self.spec_verify_ct else 0.0

    def as_dict(self) -> dict[str, Any]:
        """For `--json`, `/race`, MCP and a trace's summary: the counts, then the derived figures (rounded)."""
        return {
            "num_drafts": self.num_drafts,
            "num_draft_tokens": self.num_draft_tokens,
            "num_accepted_tokens": self.num_accepted_tokens,
            "num_accepted_tokens_per_pos": list(self.num_accepted_tokens_per_pos),
            "mean_acceptance_length": round(self.mean_acceptance_length, 4),
            "draft_acceptance_rate": round(self.draft_acceptance_rate, 4),
            "acceptance_rate_per_pos": [round(r, 4) for r in self.acceptance_rate_per_pos],
            "accepted_length_histogram": list(self.accepted_length_histogram),
            "draft_forwards": self.draft_forwards,
            "draft_forwards_per_round": round(self.draft_forwards_per_round, 4),
            "spec_verify_ct": self.spec_verify_ct,
            "spec_accept_length": round(self.spec_accept_length, 4),
        }


def acceptance_stats(records: Sequence[RoundRecord]) -> AcceptanceStats:
    """The acceptance figures of a run's records (module docstring). A round drafted when its tree had a
    node; a round with an empty tree (plain decoding, or a tree that ended at the root) is verified but not a
    draft, as vLLM counts a step with nothing proposed."""
    rounds = [r for r in records if r.phase == "decode"]
    drafted = [r for r in rounds if r.tree_tokens]
    lengths = [len(r.accepted_tokens) for r in drafted]
    deepest = max(lengths, default=0)
    per_pos = tuple(sum(1 for n in lengths if n > k) for k in range(deepest))
    histogram = tuple(lengths.count(n) for n in range(deepest + 1)) if drafted else ()
    return AcceptanceStats(
        num_drafts=len(drafted),
        num_draft_tokens=sum(len(r.tree_tokens) for r in drafted),
        num_accepted_tokens=sum(lengths),
        num_accepted_tokens_per_pos=per_pos,
        accepted_length_histogram=histogram,
        draft_forwards=sum(r.draft_forwards or 0 for r in rounds),
        spec_verify_ct=len(rounds),
        new_tokens=sum(len(r.new_tokens) for r in rounds),
    )
