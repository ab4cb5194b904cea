"""A forward is one class and its registration: a toy forward defined here, and nowhere else, runs a
lossless decode through the library and the command line.

The toy computes the logits in two steps, transformers' text decoder and then the LM head, and counts
the new tokens it reads. Nothing outside this module names it: `register_forward` offers it to
`DecodeConfig(forward=...)`, `open_backend` and the CLI's `--forward`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from sage_core import DecodeConfig, decode
from sage_core.errors import ConfigError
from sage_core.models import ModelPair
from sage_core.models.forwards import TextModel, TreeBatch, register_forward, unregister_forward
from sage_testkit.pairs import greedy
from sage_testkit.seams import cli_token_ids, files_needing, generate_argv, lent, own_pair

TOKENS = 16
PROMPT = "Describe the picture."


@dataclass
class TwoStepForward:
    """transformers' text decoder, then the LM head: the logits transformers' forward computes."""

    name: str = "toy-two-step"
    exact: bool = True  # the same operations as transformers' forward, so a target may run it
    tokens_read: list[int] = field(default_factory=list)

    def __call__(self, vlm: TextModel, batch: TreeBatch, cache: object) -> torch.Tensor:
        self.tokens_read.append(int(batch.input_ids.shape[1]))
        decoder = vlm.model.model  # the text decoder with the vision tower (which new text tokens skip)
        hidden = decoder(
            input_ids=batch.input_ids,
            position_ids=batch.position_ids,
            attention_mask=batch.layer_masks,
            **{vlm.cache_keyword: cache},
            use_cache=True,
        ).last_hidden_state
        return vlm.model.get_output_embeddings()(hidden)


@pytest.fixture(scope="module")
def toy() -> Iterator[TwoStepForward]:
    forward = TwoStepForward()
    with lent(forward, register_forward, lambda: unregister_forward(forward.name)):
        yield forward


@pytest.fixture(scope="module")
def pair(tiny_root: Path) -> ModelPair:
    return own_pair(tiny_root, "qwen3_vl")


def test_the_toy_forward_needs_this_module_only(toy):
    assert files_needing("the toy forward", toy.name) == ["tests/test_forward_seam.py"]


@pytest.mark.parametrize(("method", "cache"), [("sage", None), ("static", "growing")])
def test_a_decode_on_the_toy_forward_equals_greedy_generate(toy, pair, image, method, cache):
    """Both models run it (it is exact), on either cache strategy, and the output is the target's own."""
    toy.tokens_read.clear()
    config = DecodeConfig(method, TOKENS, forward=toy.name, cache=cache)
    summary = decode(pair, image, PROMPT, config).run_to_end()
    assert list(summary.token_ids) == greedy(pair, image, PROMPT, TOKENS)
    assert len(toy.tokens_read) >= summary.rounds and max(toy.tokens_read) > 1  # verifications and levels


def test_the_cli_offers_the_toy_forward_and_refuses_an_unknown_one(toy, pair, tmp_path):
    from PIL import Image

    from sage_core import load_media

    picture = tmp_path / "picture.png"
    Image.new("RGB", (48, 48), (200, 40, 40)).save(picture)
    more = ["--max-new-tokens", str(TOKENS), "--forward", toy.name]
    argv = generate_argv(pair.target.name, pair.draft.name, picture, PROMPT, *more)
    assert cli_token_ids(argv) == greedy(pair, load_media(str(picture)), PROMPT, TOKENS)
    with pytest.raises(ConfigError, match="unknown forward 'nope'; choose one of transformers, lean, fused, compiled"):
        decode(pair, load_media(str(picture)), PROMPT, DecodeConfig("sage", TOKENS, forward="nope"))
