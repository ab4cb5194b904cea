"""transformers' entry point: `target.generate(..., assistant_model=draft, custom_generate=<this repository>,
trust_remote_code=True)` runs SAGE from custom_generate/generate.py and returns what plain greedy
`generate()` returns, token for token (float32, every family, image and video)."""

from __future__ import annotations

import functools
import importlib.metadata
from pathlib import Path

import pytest
import torch
from conftest import FAMILIES, tiny_folder

from sage_core import load_pair
from sage_core.media import Media
from sage_core.models import ModelPair

ROOT = Path(__file__).resolve().parent.parent
MAX_NEW = 24


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    """transformers checks custom_generate/requirements.txt against the installed distributions."""
    try:
        importlib.metadata.version("sage-demo")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("the package is not installed: `pip install -e .` (requirements-dev.txt does it)")


@functools.cache
def _pair(root: str, family: str, draft_kind: str) -> ModelPair:
    folder = Path(root)
    return load_pair(tiny_folder(folder, family, "target"), tiny_folder(folder, family, draft_kind), "cpu", "float32")


def through_entry(pair: ModelPair, inputs: dict, **settings: object) -> torch.Tensor:
    settings = {"do_sample": False, "max_new_tokens": MAX_NEW, **settings}
    with torch.no_grad():
        return pair.target.model.generate(
            **inputs, assistant_model=pair.draft.model, custom_generate=str(ROOT), trust_remote_code=True, **settings
        )


def plain(pair: ModelPair, inputs: dict) -> torch.Tensor:
    with torch.no_grad():
        return pair.target.model.generate(**inputs, do_sample=False, max_new_tokens=MAX_NEW)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", ["image", "video"])
def test_entry_point_equals_plain_greedy_generate(tiny_root, image: Media, video: Media, family: str, kind: str):
    pair = _pair(str(tiny_root), family, "noised")
    inputs = pair.target.prepare(image if kind == "image" else video, "Describe the picture.")
    expected = plain(pair, inputs)
    for method in ("sage", "static"):
        got = through_entry(pair, inputs, method=method)
        assert isinstance(got, torch.Tensor) and got.dtype == expected.dtype
        assert got.tolist() == expected.tolist(), (family, kind, method)


def test_entry_point_runs_sage_and_takes_its_settings(tiny_root, image: Media):
    """With the target itself as draft every drafted token is accepted: far fewer target forwards than
    tokens, which plain decoding cannot do; SAGE's settings arrive (a bad one is refused by SAGE's checks)."""
    pair = _pair(str(tiny_root), "qwen2_5_vl", "copy")
    inputs = pair.target.prepare(image, "Describe the picture.")
    expected = plain(pair, inputs)
    forwards = [0]
    hook = pair.target.model.register_forward_pre_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    try:
        got = through_entry(pair, inputs, sage_depth_max=6, sage_width_max=4, return_dict_in_generate=True)
    finally:
        hook.remove()
    assert got.sequences.tolist() == expected.tolist()
    new = expected.shape[1] - inputs["input_ids"].shape[1]
    assert 1 <= forwards[0] <= new // 2, (forwards[0], new)
    with pytest.raises(ValueError, match="depth_min <= depth_max"):
        through_entry(pair, inputs, sage_depth_max=2)
    with pytest.raises(ValueError, match="unknown SAGE setting 'sage_depth'"):
        through_entry(pair, inputs, sage_depth=6)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"do_sample": True}, "do_sample=False"),
        ({"num_beams": 2}, "num_beams=2"),
        ({"repetition_penalty": 1.2}, "repetition_penalty=1.2"),
        ({"method": "beam"}, "unknown method 'beam'"),
    ],
)
def test_entry_point_refuses_what_would_not_be_greedy(tiny_root, image: Media, settings: dict, message: str):
    pair = _pair(str(tiny_root), "qwen2_vl", "noised")
    inputs = pair.target.prepare(image, "Describe the picture.")
    with pytest.raises(ValueError, match=message):
        through_entry(pair, inputs, **settings)
