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
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sage_core import Media, SageError, load_media
from sage_core.config import SamplingConfig, check_max_new_tokens, check_prune_ratio
from sage_core.errors import ConfigError, InputError
from sage_core.media import VIDEO_SUFFIXES
from sage_core.method_settings import as_setting, as_whole, shown
from sage_core.methods import (
    ONE_PASS,
    ONE_PASS_OFF,
    MethodSpec,
    form_settings,
    in_order,
    is_method,
    registered_names,
    specs,
)
from sage_core.models.one_pass import declares_features
from sage_core.models.prompts import check_prompt
from sage_core.pruning import PAPER_RATIOS

from .race import Choice, RaceRequest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT / "assets" / "examples"
DEFAULT_PROMPT = "describe the image in detail."  # a prompt the built-in pair knows every word of


SWITCH_ON, SWITCH_OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


def resolve_prune_ratio(choice: object, chosen: object, kind: str) -> float:
    """The pruning control: "off", "paper" (80% of an image's visual tokens, 90% of a video's) or "chosen"."""
    if choice in (None, "", "off"):
        return 0.0
    if choice == "paper":
        return PAPER_RATIOS[kind]
    if choice != "chosen":
        raise InputError(f"unknown pruning choice {shown(choice)}; use off, paper or chosen")
    return check_prune_ratio(0.0 if chosen is None else chosen)


def env_number(name: str, default: float, minimum: float = 0.0, refused: str = "") -> float:
    """A positive number from the environment variable `name` (unset or empty: `default`), at least `minimum`
    (below it, everything `refused` names would be refused); anything else is a ConfigError of one sentence,
    so the launch stops instead of running on a value nobody set."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} must be a positive number, not {shown(text)}")
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum:g} (below it every {refused} is refused), not {text}")
    return value


def env_port(name: str = "GRADIO_SERVER_PORT", default: int = 7860) -> int:
    """The port to serve on (unset or empty: `default`): a whole number in [1, 65535], else one sentence."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not (text.isdigit() and 1 <= int(text) <= 65535):
        raise ConfigError(f"{name} must be a port number, a whole number in [1, 65535], not {shown(text)}")
    return int(text)


def env_switch(name: str, default: bool = False) -> bool:
    """An on/off environment variable (1/0, on/off, true/false, yes/no; unset or empty: `default`);
    anything else is a ConfigError of one sentence."""
    text = os.environ.get(name, "").strip().lower()
    if text in SWITCH_ON + SWITCH_OFF:
        return text in SWITCH_ON
    if not text:
        return default
    raise ConfigError(f"{name} must be on or off (or 1/0, true/false, yes/no), not {shown(os.environ[name])}")


COST_CURVE_ENV = "SAGE_APP_COST_CURVE"
MCP_ENV = "SAGE_MCP"


def cost_curve_wanted() -> bool:
    """Whether the warm-up measures the verification cost curve: SAGE_APP_COST_CURVE on (the default) or
    off; ConfigError with one sentence for anything else."""
    return env_switch(COST_CURVE_ENV, default=True)


def check_launch_settings() -> int:
    """The port, and every setting read at launch that needs no model (the limits, SAGE_APP_COST_CURVE,
    SAGE_MCP), checked before Gradio and the models load: a bad one is one sentence within seconds. The
    custom-model settings are checked as the app is built (app.models.CustomModels)."""
    port = env_port("GRADIO_SERVER_PORT", 7860)
    Limits.from_env()
    cost_curve_wanted()
    env_switch(MCP_ENV)
    return port


@dataclass(frozen=True)
class Limits:
    """What the app accepts and how much work one request may make (override with SAGE_APP_MAX_UPLOAD_MB,
    SAGE_APP_MAX_VIDEO_SECONDS, SAGE_APP_MAX_TRACE_MB, SAGE_APP_MAX_RACE_SECONDS, SAGE_APP_MAX_REPLAY_SECONDS,
    SAGE_APP_MAX_QUEUE, SAGE_APP_MAX_SESSIONS and SAGE_APP_SESSION_GRACE_SECONDS). Gradio refuses any
    upload above the larger of the two file limits before storing it (`max_file_size`); the app then checks
    each kind against its own."""

    max_upload_mb: float = 50.0
    max_video_seconds: float = 60.0
    video_frames: int = 8
    max_new_tokens: int = 512
    max_trace_mb: float = 20.0
    # A race's budget: each side stops at max_new_tokens, and the race when it has run this long.
    max_race_seconds: float = 120.0
    # A replay waits at most this long in all (then shows the rest at once).
    max_replay_seconds: float = 300.0
    # Requests waiting in the queue beyond the running ones; one more is told the app is busy.
    max_queue: int = 16
    # Sessions kept (the least recently used go first), and how long a session stays once its visitor left.
    max_sessions: int = 1000
    session_grace_seconds: float = 30.0

    @classmethod
    def from_env(cls) -> Limits:
        return cls(
            max_upload_mb=env_number("SAGE_APP_MAX_UPLOAD_MB", cls.max_upload_mb, 0.1, "picture or video upload"),
            max_video_seconds=env_number("SAGE_APP_MAX_VIDEO_SECONDS", cls.max_video_seconds, 1, "video"),
            max_trace_mb=env_number("SAGE_APP_MAX_TRACE_MB", cls.max_trace_mb, 0.1, "trace upload"),
            max_race_seconds=env_number("SAGE_APP_MAX_RACE_SECONDS", cls.max_race_seconds, 1, "race"),
            max_replay_seconds=env_number("SAGE_APP_MAX_REPLAY_SECONDS", cls.max_replay_seconds),
            max_queue=max(1, int(env_number("SAGE_APP_MAX_QUEUE", cls.max_queue))),
            max_sessions=max(1, int(env_number("SAGE_APP_MAX_SESSIONS", cls.max_sessions))),
            session_grace_seconds=env_number("SAGE_APP_SESSION_GRACE_SECONDS", cls.session_grace_seconds),
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


#: The race's inputs before and after the methods' settings (`race_fields`), with their defaults.
FIRST_FIELDS: dict[str, Any] = {"image": None, "video": None, "prompt": "", "pair": "", "custom_target": "",
                                "custom_draft": "", "methods": None, "max_new_tokens": 128}  # fmt: skip
LAST_FIELDS: dict[str, Any] = {"prune_choice": "off", "prune_chosen": 0.5, "temperature": 0.0, "seed": None}
#: The race's inputs added since, after every method's settings (so the positions API callers knew stay).
NEWER_FIELDS: dict[str, Any] = {"second_draft": "off"}


def race_defaults() -> dict[str, Any]:
    """Every race input by name, in the order the page sends them (`Page.race_inputs`) and the API names them,
    with its default: the common ones, with the settings of the methods raced by default among them and
    every other registered method's settings (`MethodSpec.controls`) after them, then the newer inputs (the
    positions API callers knew stay)."""
    early = {s.name: getattr(spec.default_settings(), s.field) for spec, s in form_settings() if spec.in_race}
    late = {s.name: getattr(spec.default_settings(), s.field) for spec, s in form_settings() if not spec.in_race}
    return {**FIRST_FIELDS, **early, **LAST_FIELDS, **late, **NEWER_FIELDS}


def race_fields() -> tuple[str, ...]:
    """The race's inputs in the order the page sends them and the API names them."""
    return tuple(race_defaults())


#: The race's inputs with the built-in methods (`race_fields()` reads the registry as it is now).
RACE_FIELDS = race_fields()


#: Race inputs renamed (one word for one thing), no longer read: a caller who sends one is told its name now.
RENAMED_INPUTS = {"top_k": "candidates"}


class RaceForm:
    """A race's inputs as the page or the API sends them, by name and unchecked (`check_request` checks them).

    `RaceForm(prompt=..., methods=[...], depth_max=8)`: any of `race_fields()`; the rest take their
    defaults. Read them as attributes."""

    def __init__(self, **values: Any) -> None:
        defaults = race_defaults()
        unknown = [name for name in values if name not in defaults]
        if unknown and unknown[0] in RENAMED_INPUTS:
            new = RENAMED_INPUTS[unknown[0]]
            raise InputProblem(
                f"{shown(unknown[0])} is the old name of {shown(new)}, no longer read: send {shown(new)}"
            )
        if unknown:
            raise InputProblem(f"unknown race input {shown(unknown[0])}; the inputs are {', '.join(defaults)}")
        object.__setattr__(self, "values", {**defaults, **values})

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a RaceForm does not change: use replace()")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RaceForm) and self.values == other.values

    __hash__ = None  # type: ignore[assignment]  # unhashable, as __eq__ compares values; typeshed wants a method

    def __repr__(self) -> str:
        return f"RaceForm({', '.join(f'{k}={v!r}' for k, v in self.values.items())})"

    def replace(self, **changes: Any) -> RaceForm:
        return RaceForm(**{**self.values, **changes})

    @classmethod
    def of(cls, values: Sequence[Any]) -> RaceForm:
        """The form from the page's values, in `race_fields()` order."""
        names = race_fields()
        if len(values) != len(names):
            raise InputProblem(f"a race takes {len(names)} inputs, not {len(values)}")
        return cls(**dict(zip(names, values, strict=True)))

    def settings_values(self, spec: MethodSpec) -> dict[str, Any]:
        """The form's values of one method's settings, by setting name."""
        return {s.name: self.values[s.name] for s in spec.controls if s.form}


def check_media_choice(image: object, video: object) -> str:
    """Exactly one of the two; its path."""
    if image and video:
        raise InputProblem("give either an image or a video, not both (clear one of them)")
    if not image and not video:
        raise InputProblem("no image or video: upload one, or pick an example")
    path = image or video
    if not isinstance(path, str):
        raise InputProblem("the image or video must be an uploaded file")
    return path


def open_media(path: str, limits: Limits) -> Media:
    file = Path(path)
    if not file.is_file():
        raise InputProblem(f"the uploaded file {file.name} is missing; upload it again")
    size = file.stat().st_size
    limit = int(limits.max_upload_mb * 2**20)
    if size > limit:
        raise InputProblem(f"{file.name} is {size / 2**20:.1f} MB; the upload limit is {limits.max_upload_mb:g} MB")
    return load_media(file, frames=limits.video_frames, max_bytes=limit, max_video_seconds=limits.max_video_seconds)


def sampling_settings(temperature: object, seed: object) -> SamplingConfig:
    """A race's sampling settings from the temperature slider and the seed box (0 = greedy; ConfigError when
    out of range). An empty seed picks a fresh one, recorded in the trace."""
    value: Any = as_setting(temperature, whole=False)  # SamplingConfig checks both (one number check)
    number: Any = None if seed is None or seed == "" else as_whole(seed)
    return SamplingConfig(temperature=value, seed=number)


def check_methods(methods: object) -> tuple[str, ...]:
    """At least two known methods, once each, in column order."""
    if methods is None:
        raise InputProblem("methods must be a list of method names (none was given)")
    if not isinstance(methods, list | tuple) or not all(isinstance(m, str) for m in methods):
        raise InputProblem("methods must be a list of method names")
    unknown = [m for m in methods if not is_method(m)]
    if unknown:
        raise InputProblem(f"unknown method {shown(unknown[0])}; choose from {', '.join(registered_names())}")
    chosen = in_order(methods)
    if len(chosen) < 2:
        raise InputProblem("pick at least two methods to race (SAGE and the static tree by default)")
    return tuple(chosen)


#: The second draft a race may add (`second_draft`), and the values that turn it off (the page's checkbox sends a
#: bool).
ONE_PASS_CHOICES = (ONE_PASS, True)
#: The page's radio: (label, value); the one-pass draft with the target's features off too only where the shipped
#: one-pass draft (the one-pass sibling the built-in pairs offer: `app.models.Preset.siblings`) reads them.
SECOND_DRAFT_CHOICES = (("off", "off"), ("the one-pass draft too", ONE_PASS)) + (
    (("the one-pass draft with the target's features on and off", ONE_PASS_OFF),)
    if declares_features(ROOT / "assets" / "builtin" / "one-pass-draft")
    else ()
)
NO_SECOND_DRAFT = ("", None, False, "off", "none")


def second_draft(form: RaceForm) -> str:
    """The draft the race also races each method with (`second_draft`: "one-pass", the pair's one-pass sibling
    draft, which the pair must offer: `app.models.Preset.siblings`; "one-pass-off": that draft and again with the
    target's features off, `lane_drafts`); "" for none (empty or off); anything else is one sentence."""
    value = form.second_draft
    if isinstance(value, str):
        value = value.strip().lower()
    if value in NO_SECOND_DRAFT:
        return ""
    if value in ONE_PASS_CHOICES:
        return ONE_PASS
    if value == ONE_PASS_OFF:
        return ONE_PASS_OFF
    raise InputProblem(
        f'second_draft must be "one-pass" (also race each method with the pair\'s one-pass sibling draft), '
        f'"one-pass-off" (that draft, and again with the target\'s features off) or "off", not '
        f"{shown(form.second_draft)}"
    )


def lane_drafts(second: str) -> tuple[str, ...]:
    """The drafts a race's lanes name beside the pair's own for `second_draft`'s answer: (), the one-pass
    sibling's, or that and the same draft with the target's features off (`ONE_PASS_OFF`, derived from it)."""
    return (ONE_PASS, ONE_PASS_OFF) if second == ONE_PASS_OFF else (second,) if second else ()


def check_request(form: RaceForm, pair: Choice, limits: Limits) -> RaceRequest:
    """Every check that needs no model, once, for the page, the API and the stepped race alike; raises
    InputProblem or ConfigError with the sentence to show."""
    path = check_media_choice(form.image, form.video)
    prompt = check_prompt(form.prompt).strip()
    methods = check_methods(form.methods)
    tokens = check_max_new_tokens(form.max_new_tokens, limits.max_new_tokens)
    settings = {spec.name: spec.settings_from(form.settings_values(spec)) for spec in specs() if spec.settings}
    sampling = sampling_settings(form.temperature, form.seed)
    media = open_media(path, limits)
    prune_ratio = resolve_prune_ratio(form.prune_choice, form.prune_chosen, media.kind)
    # a held setting unset (or left at its default): its method holds the average of the lane it reads
    holding = frozenset(spec.name for spec in specs() if spec.holds_in_race(settings.get(spec.name)))
    return RaceRequest(media, prompt, methods, tokens, settings, sampling, prune_ratio, pair, holding)


__all__ = ["Choice", "RaceForm", "RaceRequest", "check_request", "lane_drafts", "race_fields", "second_draft"]


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
    """The examples listed in assets/examples/examples.json, but those marked ``"gallery": false`` (a clip the
    built-in pair answers wrong: `sage_world.scenes.OFF_GALLERY`); a few generated scenes when absent."""
    listing = folder / "examples.json"
    if listing.is_file():
        try:
            entries = json.loads(listing.read_text(encoding="utf-8"))
            examples = [
                Example(str(folder / e["file"]), str(e["prompt"]), str(e.get("kind", "")))
                for e in entries
                if (folder / e["file"]).is_file() and e.get("gallery", True) is not False
            ]
            if examples:
                return examples
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return generated_examples()


def generated_examples(count: int = 4) -> list[Example]:
    """Synthetic scenes of the kind the built-in pair was trained on."""
    from sage_world.scenes import make_examples

    folder = Path(tempfile.gettempdir()) / "sage-app-examples"
    folder.mkdir(exist_ok=True)
    examples = []
    for index, scene in enumerate(make_examples(seed=7, n=count)):
        path = folder / f"scene-{index}-{scene.kind}.png"
        scene.image.save(path)  # always: a file left by an older version may show another scene
        examples.append(Example(str(path), scene.question, scene.kind))
    return examples


def remove_older(folder: Path, pattern: str, max_age: float) -> None:
    """Delete the files of `folder` matching `pattern` last written more than `max_age` seconds ago
    (the app's own downloads and drawings: they are kept for a while, not forever)."""
    cutoff = time.time() - max_age
    for old in folder.glob(pattern):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            pass  # removed by another request meanwhile
