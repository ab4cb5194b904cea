"""Shared fixtures. The helpers behind them live in the test-support package (sage_testkit/, not
installed): tiny random models of every family saved to folders (each built once a session), the
built-in pair, the test image and video, the target's greedy answer, and a model-free toy pair.

The project's real loading path (`VLM.load` -> `from_pretrained` and `AutoProcessor.from_pretrained`)
runs on the tiny folders, offline. A test module imports from sage_testkit, never from another test
module or from this file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from sage_core.media import Media
from sage_core.models import ModelPair
from sage_testkit import pairs, toy

torch.set_num_threads(1)  # tiny models: threads only add overhead
# ... and the app, the CLI and the scripts the tests run (in this process or a child) take this count as asked
# rather than timing each pair's thread counts (tests/test_threads.py times them with the variable unset).
os.environ.setdefault("SAGE_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny")


@pytest.fixture(scope="session")
def tiny_pair(tiny_root: Path) -> Callable[..., ModelPair]:
    """`tiny_pair(family, draft_kind="noised")`: the float32 CPU pair of that family, loaded once."""

    def load(family: str, draft_kind: str = "noised") -> ModelPair:
        return pairs.tiny_pair(str(tiny_root), family, draft_kind)

    return load


@pytest.fixture(scope="session")
def builtin_pair() -> ModelPair:
    """The project's trained pair (assets/builtin), float32 on the CPU."""
    return pairs.builtin_pair()


@pytest.fixture(scope="session")
def greedy() -> Callable[[ModelPair, Media, str, int], list[int]]:
    """`greedy(pair, media, prompt, max_new_tokens)`: the target's own `generate(do_sample=False)`."""
    return pairs.greedy


@pytest.fixture
def toy_pair() -> ModelPair:
    """A model-free pair (sage_testkit/toy.py): the draft agrees with the target often, not always."""
    return toy.toy_pair()


@pytest.fixture(scope="session")
def image() -> Media:
    return pairs.image_and_video()["image"]


@pytest.fixture(scope="session")
def video() -> Media:
    return pairs.image_and_video()["video"]
