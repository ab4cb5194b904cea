"""A one-pass draft (PARD, arXiv 2504.18583): what its config says of it.

A one-pass draft was trained to read `block_size - 1` copies of a mask token after the last real token
and to predict, at the last real token and at each mask, the token 1, 2, ..., `block_size` places
ahead, all in one forward. Its config says so under `ONE_PASS_KEY`, as `{"mask_token_id": M,
"block_size": K}` (`scripts/train_builtin_pair.py --one-pass K` writes it). Any model can be given
the key (a test's random draft with any token as its mask): it is the drafting, not the family, that
changes (`drafting.draft_block`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

from ..errors import ModelLoadError

ONE_PASS_KEY = "one_pass_draft"
#: The deepest block a one-pass draft may declare (a round's tree is never deeper than its block).
MAX_BLOCK = 64


@dataclass(frozen=True)
class OnePass:
    """A one-pass draft's mask token and block length (depths 1 .. block_size from one forward)."""

    mask_token_id: int
    block_size: int


def one_pass_of(config: Any, name: str, input_rows: int) -> OnePass | None:
    """The one-pass settings a model's config declares (None: a sequential draft); a malformed
    declaration is refused in one sentence (ModelLoadError)."""
    declared = getattr(config, ONE_PASS_KEY, None)
    if declared is None:
        return None
    mask = declared.get("mask_token_id") if isinstance(declared, dict) else None
    block = declared.get("block_size") if isinstance(declared, dict) else None
    if not (_whole(mask) and _whole(block) and 0 <= mask < input_rows and 2 <= block <= MAX_BLOCK):
        raise ModelLoadError(
            f"the model {name!r} declares itself a one-pass draft ({ONE_PASS_KEY} in its config) but not as "
            f"{{'mask_token_id': a token id below {input_rows}, 'block_size': a whole number from 2 to "
            f"{MAX_BLOCK}}}: fix its config.json or remove the key"
        )
    return OnePass(mask, block)


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
