"""A one-pass draft (PARD, arXiv 2504.18583): what its config says of it.

A one-pass draft was trained to read `block_size - 1` copies of a mask token after the last real token
and to predict, at the last real token and at each mask, the token 1, 2, ..., `block_size` places
ahead, all in one forward. Its config says so under `ONE_PASS_KEY`, as `{"mask_token_id": M,
"block_size": K}` (`scripts/train_builtin_pair.py --one-pass K` writes it). Any model can be given
the key (a test's random draft with any token as its mask): it is the drafting, not the family, that
changes (`drafting.draft_block`).

A one-pass draft may also carry a conditional head (`conditional_head.py`: each depth conditioned on the token
drafted before it), saved beside its config and declared under the same key, `"conditional_head":
"conditional_head.safetensors"`; without it a level's children are the block's marginals, as before.

And it may read the target's own features (`target_features.py`: PARD-2's projection of some of the target's layers,
added to the embeddings of the tokens it reads), declared as `"target_features": {"layers": [...], "file":
"target_features.safetensors"}`; `without_features` is the same draft with them off.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeGuard, TypeVar, cast

from ..errors import ModelLoadError
from .conditional_head import ConditionalHead, load_head
from .target_features import FEATURES_KEY, TargetFeatures, features_problem, load_features

ONE_PASS_KEY = "one_pass_draft"
#: The key, inside `ONE_PASS_KEY`, naming the conditional head's file beside the config.
HEAD_KEY = "conditional_head"


class _Paired(Protocol):
    """What `without_features` reads of a `pair.ModelPair` (not imported: pair.py imports this module)."""

    @property
    def draft(self) -> Any: ...


Pair = TypeVar("Pair", bound=_Paired)
#: The deepest block a one-pass draft may declare (a round's tree is never deeper than its block).
MAX_BLOCK = 64


@dataclass(frozen=True)
class OnePass:
    """A one-pass draft's mask token and block length (depths 1 .. block_size from one forward), and its
    conditional head when it has one (each node's own next depth: `drafting.ConditionalOffers`), and the target's
    features it reads when it reads them (`target_features.py`)."""

    mask_token_id: int
    block_size: int
    head: ConditionalHead | None = None
    features: TargetFeatures | None = None


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
    head = _head_of(config, declared, name, input_rows, block)
    return OnePass(mask, block, head, _features_of(config, declared, name))


def _features_of(config: Any, declared: dict, name: str) -> TargetFeatures | None:
    """The target's features the declaration names (None: none named); a declaration or file that cannot be used
    is refused in one sentence (ModelLoadError)."""
    given = declared.get(FEATURES_KEY)
    if given is None:
        return None
    found: TargetFeatures | str | None = features_problem(given)
    if found is None:
        path = _beside_config(config, name, given["file"])
        width = int(getattr(getattr(config, "text_config", None) or config, "hidden_size", 0) or 0)
        found = load_features(path, given["layers"], width) if path is not None else None
        found = found or f"its file {given['file']} is not beside its config"
    if isinstance(found, str):
        raise ModelLoadError(
            f"the model {name!r} declares the target's features ({ONE_PASS_KEY}.{FEATURES_KEY} in its config) but "
            f"{found}: fix its config.json or remove the key"
        )
    return found


def reads_features(draft: Any) -> bool:
    """Whether a loaded draft (a `VLM`) is a one-pass draft that reads the target's features."""
    one_pass = getattr(draft, "one_pass", None)
    return isinstance(one_pass, OnePass) and one_pass.features is not None


def declares_features(folder: Path | str) -> bool:
    """Whether the model saved in `folder` declares itself a one-pass draft reading the target's features (its
    config.json read, the model not loaded; False where there is no such file)."""
    config = Path(folder) / "config.json"
    if not config.is_file():
        return False
    declared = json.loads(config.read_text(encoding="utf-8")).get(ONE_PASS_KEY)
    return isinstance(declared, dict) and declared.get(FEATURES_KEY) is not None


def without_features(pair: Pair) -> Pair:
    """The pair with its draft reading none of the target's features (the same weights, the same checkpoint: the
    lane with them off); the pair itself where its draft reads none."""
    one_pass = getattr(pair.draft, "one_pass", None)
    if not isinstance(one_pass, OnePass) or one_pass.features is None:
        return pair
    draft = copy.copy(pair.draft)
    draft.one_pass = replace(one_pass, features=None)
    return cast(Pair, replace(cast(Any, pair), draft=draft))


def _head_of(config: Any, declared: dict, name: str, input_rows: int, block: int) -> ConditionalHead | None:
    """The conditional head the declaration names (None: none named); one that cannot be used is refused in one
    sentence (ModelLoadError)."""
    file = declared.get(HEAD_KEY)
    if file is None:
        return None
    if isinstance(file, str) and file.endswith(".safetensors") and Path(file).name == file:
        path = _beside_config(config, name, file)
        head = load_head(path, input_rows, block) if path is not None else f"its file {file} is not beside its config"
    else:
        head = "it is not the name of a .safetensors file beside its config"
    if isinstance(head, str):
        raise ModelLoadError(
            f"the model {name!r} declares a conditional head ({ONE_PASS_KEY}.{HEAD_KEY} in its config) but {head}: "
            "fix its config.json or remove the key"
        )
    return head


def _beside_config(config: Any, name: str, file: str) -> Path | None:
    """Where `file` is beside the model's config: in its folder, or in the hub's cache of its repository."""
    source = str(getattr(config, "_name_or_path", "") or name)
    if Path(source).is_dir():
        path = Path(source) / file
        return path if path.is_file() else None
    from transformers.utils import cached_file

    try:
        found = cached_file(source, file, _raise_exceptions_for_missing_entries=False)
    except OSError:
        return None
    return Path(found) if found else None


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
