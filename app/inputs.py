"""What the user asked for, checked before any model is touched.

Every bad input becomes an `InputProblem` with one clear line for the UI (and
for API callers): no media, both an image and a video, a file too large, a
corrupt or unsupported file, a video too long, an empty prompt, a bad method
choice or SAGE setting. The file checks are `sage_core.load_media`'s, run
with the app's limits.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sage_core import Media, SageConfig, SageError, load_media
from sage_core.config import SamplingConfig, check_max_new_tokens, check_prompt
from sage_core.errors import ConfigError
from sage_core.media import VIDEO_SUFFIXES

from .race import order_methods

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT / "assets" / "examples"
DEFAULT_PROMPT = "What is shown in the image?"


def _env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if math.isfinite(value) and value > 0 else default


@dataclass(frozen=True)
class Limits:
    """What the app accepts (override with SAGE_APP_MAX_UPLOAD_MB, SAGE_APP_MAX_VIDEO_SECONDS and
    SAGE_APP_MAX_TRACE_MB). Gradio refuses any upload above the larger of the two file limits before
    storing it (`max_file_size`); the app then checks each kind against its own."""

    max_upload_mb: float = 50.0
    max_video_seconds: float = 60.0
    video_frames: int = 8
    max_new_tokens: int = 512
    max_trace_mb: float = 20.0

    @classmethod
    def from_env(cls) -> Limits:
        return cls(
            max_upload_mb=_env_float("SAGE_APP_MAX_UPLOAD_MB", cls.max_upload_mb),
            max_video_seconds=_env_float("SAGE_APP_MAX_VIDEO_SECONDS", cls.max_video_seconds),
            max_trace_mb=_env_float("SAGE_APP_MAX_TRACE_MB", cls.max_trace_mb),
        )

    @property
    def max_file_bytes(self) -> int:
        """Gradio's own upload limit: the larger of the media and trace limits."""
        return int(max(self.max_upload_mb, self.max_trace_mb) * 2**20)

    @property
    def max_trace_bytes(self) -> int:
        return int(self.max_trace_mb * 2**20)


class InputProblem(SageError):
    """A request the app refuses, with the message to show."""


@dataclass(frozen=True)
class RaceRequest:
    media: Media
    prompt: str
    methods: list[str]
    max_new_tokens: int
    sage: SageConfig


def check_media_choice(image: str | None, video: str | None) -> str:
    """Exactly one of the two; its path."""
    if image and video:
        raise InputProblem("give either an image or a video, not both (clear one of them)")
    if not image and not video:
        raise InputProblem("no image or video: upload one, or pick an example")
    return str(image or video)


def open_media(path: str, limits: Limits) -> Media:
    file = Path(path)
    if not file.is_file():
        raise InputProblem(f"the uploaded file {file.name} is missing; upload it again")
    size = file.stat().st_size
    limit = int(limits.max_upload_mb * 2**20)
    if size > limit:
        raise InputProblem(f"{file.name} is {size / 2**20:.1f} MB; the upload limit is {limits.max_upload_mb:g} MB")
    return load_media(file, frames=limits.video_frames, max_bytes=limit, max_video_seconds=limits.max_video_seconds)


SAGE_FIELDS = ("depth_min", "depth_max", "width_min", "width_max", "node_budget", "top_k")


def sage_config(d_min: float, d_max: float, w_min: float, w_max: float, budget: float, top_k: float) -> SageConfig:
    """SAGE's settings from the form: whole numbers, checked by `SageConfig` (a ConfigError names the rule)."""
    values: dict[str, Any] = {}
    for name, value in zip(SAGE_FIELDS, (d_min, d_max, w_min, w_max, budget, top_k), strict=True):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if isinstance(value, bool) or not number.is_integer():
            raise InputProblem(f"the SAGE setting {name} must be a whole number, not {value!r}")
        values[name] = int(number)
    return SageConfig(**values)


def sampling_settings(temperature: object, seed: object) -> SamplingConfig:
    """A race's sampling settings from the temperature slider and the seed box (0 = greedy; ConfigError when
    out of range). An empty seed picks a fresh one, recorded in the trace."""
    try:
        value = float(temperature)  # type: ignore[arg-type]
        number = None if seed is None or seed == "" else int(seed)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError) as error:
        raise ConfigError(f"the temperature and the seed must be numbers, not {temperature!r}, {seed!r}") from error
    return SamplingConfig(temperature=value, seed=number)


def check_request(
    image: str | None,
    video: str | None,
    prompt: object,
    methods: object,
    max_new_tokens: object,
    sage: tuple[float, float, float, float, float, float],
    limits: Limits,
) -> RaceRequest:
    """Validate everything that needs no model; raises InputProblem."""
    path = check_media_choice(image, video)
    prompt = check_prompt(prompt).strip()
    methods = methods or []
    if not isinstance(methods, list | tuple) or not all(isinstance(m, str) for m in methods):
        raise InputProblem("methods must be a list of method names")
    chosen = order_methods(methods)
    if len(chosen) < 2:
        raise InputProblem("pick at least two methods to race (SAGE and the static tree by default)")
    tokens = check_max_new_tokens(max_new_tokens, limits.max_new_tokens)
    config = sage_config(*sage)
    media = open_media(path, limits)
    return RaceRequest(media, prompt, chosen, tokens, config)


# -- examples ------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    file: str
    prompt: str
    task: str = ""

    @property
    def is_video(self) -> bool:
        return Path(self.file).suffix.lower() in VIDEO_SUFFIXES

    def thumbnail(self) -> str:
        """The image itself, or a video's middle frame saved as a PNG."""
        if not self.is_video:
            return self.file
        import cv2

        target = Path(tempfile.gettempdir()) / "sage-app-examples" / (Path(self.file).stem + "-thumb.png")
        if not target.exists():
            capture = cv2.VideoCapture(self.file)
            try:
                capture.set(cv2.CAP_PROP_POS_FRAMES, int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) // 2)
                ok, frame = capture.read()
            finally:
                capture.release()
            if not ok:
                return self.file
            target.parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(target), frame)
        return str(target)


def load_examples(folder: Path = EXAMPLES_DIR) -> list[Example]:
    """The examples listed in assets/examples/examples.json; a few generated scenes when absent."""
    listing = folder / "examples.json"
    if listing.is_file():
        try:
            entries = json.loads(listing.read_text(encoding="utf-8"))
            examples = [
                Example(str(folder / e["file"]), str(e["prompt"]), str(e.get("kind", "")))
                for e in entries
                if (folder / e["file"]).is_file()
            ]
            if examples:
                return examples
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return generated_examples()


def generated_examples(count: int = 4) -> list[Example]:
    """Synthetic scenes of the kind the built-in pair was trained on."""
    from sage_core.builtin.scenes import make_examples

    folder = Path(tempfile.gettempdir()) / "sage-app-examples"
    folder.mkdir(exist_ok=True)
    examples = []
    for index, scene in enumerate(make_examples(seed=7, n=count)):
        path = folder / f"scene-{index}-{scene.kind}.png"
        scene.image.save(path)  # always: a file left by an older version may show another scene
        examples.append(Example(str(path), scene.question, scene.kind))
    return examples
