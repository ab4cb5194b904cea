"""A cache strategy is one class and its registration: a toy strategy defined here, and nowhere else, runs a
lossless decode through the library and the command line.

The toy keeps transformers' own `DynamicCache` and commits by rebuilding every layer from the committed
rows and the kept ones (`index_select`), whatever was kept, and counts its commits. Nothing outside this
module names it: `register_cache_strategy` offers it to `DecodeConfig(cache=...)`, `open_backend` and the
CLI's `--cache`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import DynamicCache

from sage_core import DecodeConfig, decode
from sage_core.errors import ConfigError
from sage_core.models import KVState, ModelPair
from sage_core.models.caches import clear_scratch, register_cache_strategy, unregister_cache_strategy
from sage_testkit.pairs import greedy
from sage_testkit.seams import cli_token_ids, files_needing, generate_argv, lent, own_pair

TOKENS = 16
PROMPT = "Describe the picture."


@dataclass
class RebuiltEveryCommit:
    """transformers' `DynamicCache`; a commit rebuilds every layer from the committed and the kept rows."""

    name: str = "toy-rebuilt"
    commits: list[int] = field(default_factory=list)  # the kept entries of each commit

    def new_cache(self, config: Any, reserve: int, windows_by_mask: bool) -> DynamicCache:
        return DynamicCache(config=config)

    def before_forward(self, state: KVState, parents: Sequence[int]) -> None:
        pass

    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        self.commits.append(len(keep))
        for layer in state.cache.layers:
            rows: Any = layer
            device = rows.keys.device
            kept = torch.tensor(list(keep), dtype=torch.long, device=device) + state.committed
            index = torch.cat([torch.arange(state.committed, device=device), kept])
            rows.keys, rows.values = rows.keys.index_select(-2, index), rows.values.index_select(-2, index)
        state.committed += len(keep)
        clear_scratch(state)


@pytest.fixture(scope="module")
def toy() -> Iterator[RebuiltEveryCommit]:
    strategy = RebuiltEveryCommit()
    with lent(strategy, register_cache_strategy, lambda: unregister_cache_strategy(strategy.name)):
        yield strategy


@pytest.fixture(scope="module")
def pair(tiny_root: Path) -> ModelPair:
    return own_pair(tiny_root, "qwen3_vl")


def test_the_toy_cache_strategy_needs_this_module_only(toy):
    assert files_needing("the toy cache strategy", toy.name) == ["tests/test_cache_seam.py"]


@pytest.mark.parametrize(("method", "forward"), [("sage", None), ("chain", "transformers"), ("ar", None)])
def test_a_decode_on_the_toy_cache_strategy_equals_greedy_generate(toy, pair, image, method, forward):
    """Both models' caches are the toy's, with the preset's forwards or transformers'; every round commits
    through it, and the output is the target's own."""
    toy.commits.clear()
    config = DecodeConfig(method, TOKENS, cache=toy.name, forward=forward)
    summary = decode(pair, image, PROMPT, config).run_to_end()
    assert list(summary.token_ids) == greedy(pair, image, PROMPT, TOKENS)
    assert len(toy.commits) >= summary.rounds - 1 and sum(toy.commits) >= len(summary.token_ids) - 1


def test_the_cli_offers_the_toy_cache_strategy_and_refuses_an_unknown_one(toy, pair, tmp_path):
    from PIL import Image

    from sage_core import load_media

    picture = tmp_path / "picture.png"
    Image.new("RGB", (48, 48), (40, 200, 40)).save(picture)
    more = ["--max-new-tokens", str(TOKENS), "--cache", toy.name]
    argv = generate_argv(pair.target.name, pair.draft.name, picture, PROMPT, *more)
    assert cli_token_ids(argv) == greedy(pair, load_media(str(picture)), PROMPT, TOKENS)
    with pytest.raises(ConfigError, match="unknown cache strategy 'nope'; choose one of in-place, growing"):
        decode(pair, load_media(str(picture)), PROMPT, DecodeConfig("sage", TOKENS, cache="nope"))
