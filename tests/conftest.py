"""Shared fixtures: tiny random models of every family, saved to folders (each built once a session).

The project's real loading path (`VLM.load` -> `from_pretrained` and
`AutoProcessor.from_pretrained`) runs on them, offline.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from sage_core.media import Media, image_media
from sage_core.tiny_models import ALL_FAMILIES, EXTRA_FAMILIES, FAMILIES, build_tiny_vlm, model_class

torch.set_num_threads(1)  # tiny models: threads only add overhead

# How the draft relates to the target.
DRAFT_KINDS = ("copy", "noised", "unrelated")


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny")


_BUILT: dict[tuple[str, str], str] = {}


def tiny_folder(root: Path, family: str, kind: str) -> str:
    """Build (once per session) the target or a draft of `family`."""
    key = (family, kind)
    if key not in _BUILT:
        folder = root / f"{family}-{kind}"
        if kind in ("target", "copy"):
            build_tiny_vlm(family, folder, seed=0, size="small")
        elif kind == "unrelated":
            build_tiny_vlm(family, folder, seed=1, size="smaller")
        elif kind == "padded":
            build_tiny_vlm(family, folder, seed=1, size="smaller", vocab_padding=5)
        elif kind == "noised":
            build_tiny_vlm(family, folder, seed=0, size="small")
            model = model_class(family).from_pretrained(folder, dtype=torch.float32)
            generator = torch.Generator().manual_seed(7)
            with torch.no_grad():
                for param in model.parameters():
                    param.add_(torch.randn(param.shape, generator=generator) * param.std() * NOISE)
            model.save_pretrained(folder)
        else:
            raise ValueError(kind)
        _BUILT[key] = str(folder)
    return _BUILT[key]


NOISE = 0.1


@functools.cache
def image_and_video() -> dict[str, Media]:
    """The test image and video, made once (the fixtures below hand out the same objects)."""
    pixels = (np.random.RandomState(0).rand(56, 56, 3) * 255).astype("uint8")
    frames = (np.random.RandomState(1).rand(8, 56, 56, 3) * 255).astype("uint8")
    return {
        "image": image_media(Image.fromarray(pixels), "noise.png"),
        "video": Media(
            kind="video",
            name="noise.mp4",
            frames=frames,
            fps=4.0,
            total_frames=16,
            frame_indices=tuple(range(0, 16, 2)),
        ),
    }


@pytest.fixture(scope="session")
def image() -> Media:
    return image_and_video()["image"]


@pytest.fixture(scope="session")
def video() -> Media:
    return image_and_video()["video"]


__all__ = ["ALL_FAMILIES", "DRAFT_KINDS", "EXTRA_FAMILIES", "FAMILIES", "tiny_folder"]
