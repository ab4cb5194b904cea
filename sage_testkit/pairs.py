"""Tiny pairs for the tests: a target and its drafts of any family saved to folders (each built once a
process), the test image and video, the built-in pair, and the target's greedy answer to compare with.

The project's real loading path (`load_pair` -> `from_pretrained` and `AutoProcessor.from_pretrained`)
runs on the folders, offline. tests/conftest.py hands these out as fixtures (`tiny_pair`, `builtin_pair`,
`greedy`, `image`, `video`); the functions are here for the test modules that need them at import time
(parametrisation) and for the scripts.
"""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from sage_core import DecodeConfig, decode, load_pair
from sage_core.media import Media, image_media
from sage_core.methods.builtin import METHODS
from sage_core.models import ModelPair
from sage_core.models.one_pass import ONE_PASS_KEY
from sage_core.models.target_features import FEATURES_FILE, FEATURES_KEY, TargetFeatures, decoder_layers, hidden_width
from sage_core.records import RunHeader

from .tiny_models import build_tiny_vlm, model_class

#: How a draft relates to its target: the same weights, the same with noise, or other weights of a
#: smaller size (and "padded": a smaller draft whose vocabulary has 5 rows more).
DRAFT_KINDS = ("copy", "noised", "unrelated")
NOISE = 0.1  # the "noised" draft: each weight plus this share of its tensor's spread in Gaussian noise
DRAFT_METHODS = tuple(m for m in METHODS if m != "ar")
PROMPTS = ("Describe the picture.", "What colour is it?")
#: The "one-pass" draft: the noised one declared a one-pass draft; any token serves as its mask (a random
#: model was never trained with one: the loop's positions and cache are what the tests check).
ONE_PASS_MASK, ONE_PASS_BLOCK = 97, 6
ADDED_NEW = 12  # new tokens per run on the families added to the first four (the suite's time budget)

_BUILT: dict[tuple[str, str, str], str] = {}


def tiny_folder(root: Path, family: str, kind: str) -> str:
    """Build (once per process and root) the target ("target") or a draft (a `DRAFT_KINDS`, "padded" or
    "one-pass")
    of `family` under `root`; its folder."""
    key = (str(root), family, kind)
    if key not in _BUILT:
        folder = root / f"{family}-{kind}"
        if kind in ("target", "copy"):
            build_tiny_vlm(family, folder, seed=0, size="small")
        elif kind == "unrelated":
            build_tiny_vlm(family, folder, seed=1, size="smaller")
        elif kind == "padded":
            build_tiny_vlm(family, folder, seed=1, size="smaller", vocab_padding=5)
        elif kind == "noised":
            _build_noised(family, folder)
        elif kind == "one-pass":
            _build_noised(family, folder)
            declare_one_pass(folder, ONE_PASS_MASK, ONE_PASS_BLOCK)
        else:
            raise ValueError(f"unknown draft kind {kind!r}; expected target, padded, one-pass or one of {DRAFT_KINDS}")
        _BUILT[key] = str(folder)
    return _BUILT[key]


def layer_count(tiny_root: Path, family: str) -> int:
    """The family's tiny target's text layers."""
    pair = tiny_pair(str(tiny_root), family, "one-pass")
    return len(decoder_layers(pair.target.spec.language_model(pair.target.model)))


def features_draft(
    tiny_root: Path,
    where: Path,
    family: str,
    declared: object = None,
    weight: torch.Tensor | None = None,
    scale: float = 5.0,
) -> str:
    """A copy of the family's tiny one-pass draft declaring the target's first and last layers' features, with
    a random projection (or `weight`) saved beside it; `declared` replaces the declaration."""
    folder = where / f"{family}-features"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(tiny_folder(tiny_root, family, "one-pass"), folder)
    pair = tiny_pair(str(tiny_root), family, "one-pass")
    layers = [0, layer_count(tiny_root, family) - 1]
    width, target_width = hidden_width(pair.draft.model), hidden_width(pair.target.model)
    if weight is None:
        weight = torch.randn(width, len(layers) * target_width, generator=torch.Generator().manual_seed(3)) * scale
    TargetFeatures(tuple(layers), weight).save(folder / FEATURES_FILE)
    config = json.loads((folder / "config.json").read_text())
    config[ONE_PASS_KEY][FEATURES_KEY] = {"layers": layers, "file": FEATURES_FILE} if declared is None else declared
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def declare_one_pass(folder: Path, mask_token_id: int, block_size: int) -> None:
    """Declare the saved model in `folder` a one-pass draft (models/one_pass.py) with this mask and block."""
    config_file = folder / "config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config[ONE_PASS_KEY] = {"mask_token_id": mask_token_id, "block_size": block_size}
    config_file.write_text(json.dumps(config, indent=2), encoding="utf-8")


def _build_noised(family: str, folder: Path) -> None:
    build_tiny_vlm(family, folder, seed=0, size="small")
    model = model_class(family).from_pretrained(folder, dtype=torch.float32)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * param.std() * NOISE)
    model.save_pretrained(folder)


@functools.cache
def tiny_pair(root: str, family: str, draft_kind: str) -> ModelPair:
    """The float32 CPU pair of `family`'s target and a draft of `draft_kind`, loaded once a process."""
    return load_pair(
        tiny_folder(Path(root), family, "target"), tiny_folder(Path(root), family, draft_kind), "cpu", "float32"
    )


def disk_offloaded_pair(root: Path, family: str, cpu_memory: str, offload_folder: Path) -> ModelPair:
    """`family`'s float32 tiny target placed by accelerate (`device_map="auto"`) with `cpu_memory` on the CPU and
    the rest on disk under `offload_folder`, with its noised draft on the CPU: loaded afresh."""
    target, draft = tiny_folder(root, family, "target"), tiny_folder(root, family, "noised")
    return load_pair(
        target,
        draft,
        "cpu",
        "float32",
        draft_device="cpu",
        device_map="auto",
        max_memory={"cpu": cpu_memory},
        offload_folder=str(offload_folder),
    )


@functools.cache
def builtin_pair() -> ModelPair:
    """The project's trained pair (assets/builtin), float32 on the CPU, loaded once a process."""
    return load_pair("builtin", "builtin", device="cpu", dtype="float32")


@functools.cache
def image_and_video() -> dict[str, Media]:
    """The test image and video, made once (the fixtures hand out the same objects)."""
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


def decoded(
    pair: ModelPair, media: Media, method: str, max_new_tokens: int, prompt: str = PROMPTS[0]
) -> tuple[int, ...]:
    """The tokens `method` decodes on `pair` (the library's `decode`, run to its end)."""
    return (
        decode(pair, media, prompt, DecodeConfig(method=method, max_new_tokens=max_new_tokens)).run_to_end().token_ids
    )


def greedy(pair: ModelPair, media: Media, prompt: str, max_new_tokens: int) -> list[int]:
    """The target's own `generate(do_sample=False)`: the new tokens every method must equal."""
    inputs = pair.target.prepare(media, prompt)
    with torch.no_grad():
        output = pair.target.model.generate(**inputs, do_sample=False, max_new_tokens=max_new_tokens)
    return [int(token) for token in output[0, inputs["input_ids"].shape[1] :].tolist()]


@functools.cache
def greedy_answer(root: str, family: str, kind: str, prompt: str, max_new_tokens: int) -> tuple[int, ...]:
    """The target's greedy answer about the test image or video (`kind`), made once a process."""
    return tuple(greedy(tiny_pair(root, family, "copy"), image_and_video()[kind], prompt, max_new_tokens))


def check_pruned_prompt(header: RunHeader, prune_ratio: float) -> None:
    """The draft's prompt lost round(V * ratio) of the V visual tokens (at least one kept), and the
    kept ones the header lists are that many distinct visual tokens."""
    visual = header.visual_tokens
    kept = max(1, round(visual * (1 - prune_ratio)))
    assert visual > 0 and header.prune_ratio == prune_ratio
    assert header.draft_prompt_tokens == header.prompt_tokens - (visual - kept)
    assert header.draft_prompt_tokens is not None and header.draft_prompt_tokens < header.prompt_tokens
    indices = header.kept_visual_indices
    assert indices is not None and len(indices) == kept and list(indices) == sorted(set(indices))
    assert indices[0] >= 0 and indices[-1] < visual


__all__ = [
    "ADDED_NEW",
    "DRAFT_KINDS",
    "DRAFT_METHODS",
    "NOISE",
    "PROMPTS",
    "builtin_pair",
    "check_pruned_prompt",
    "decoded",
    "disk_offloaded_pair",
    "greedy",
    "greedy_answer",
    "image_and_video",
    "tiny_folder",
    "tiny_pair",
]
