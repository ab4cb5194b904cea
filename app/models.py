"""Model pairs for the app: presets, custom models, and a process-wide cache.

Each (target, draft, device, dtype) is loaded once per process, one load at
a time, warmed up with one short untimed decode (so the first race is not
charged for lazy initialisation), and then shared read-only by every user.
Loading never holds the race slot (`RACE_SLOT`): a visitor's load does not
stall the races of the others. Races hold the slot around each step, so no
two steps (of any pair) run at once and each step's time is its own.

Custom models are the operator's choice, off unless turned on
(`CustomModels`): local folders only under a folder the operator names, hub
ids only when allowed, and messages that never reveal a server path or
whether one exists.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import cv2
import torch
from PIL import Image

from sage_core import DecodeConfig, ModelPair, SageError, decode, image_media, load_media, load_pair, prepare_inputs
from sage_core.cost_curve import CostCurve
from sage_core.errors import ConfigError, ModelLoadError
from sage_core.methods import LANE_DRAFTS, ONE_PASS
from sage_core.methods.run_costs import remember_curve, settled_curve
from sage_core.models import with_draft
from sage_core.models.presets import GPU_PRESETS
from sage_core.studies.costs import measure_cost_spread, read_recorded_curve
from sage_core.studies.sweep import SweepResult, sweep
from sage_core.threads import ThreadChoice, choose_threads

from .inputs import cost_curve_wanted, env_switch, load_examples
from .spaces_compat import ZERO_GPU

ROOT = Path(__file__).resolve().parent.parent
BUILTIN_DIR = ROOT / "assets" / "builtin"


@dataclass(frozen=True)
class Preset:
    key: str
    label: str
    target: str
    draft: str
    needs_gpu: bool = False
    # A built-in draft other than the sure one: the name it is shown and recorded by (not its server path).
    shown_draft: str = ""
    # The drafts beside its own a race may add lanes for (`sage_core.methods.LANE_DRAFTS`), each with the key of the
    # preset with the same target and that draft (its sibling): a race may add each method's lane drafted by it
    # ("also race with the one-pass draft"); () when the pair has none.
    siblings: tuple[tuple[str, str], ...] = ()

    @property
    def drafts(self) -> tuple[str, ...]:
        """The drafts it offers a race beside its own (`LaneKey.draft`)."""
        return tuple(draft for draft, _ in self.siblings)


ONE_PASS_KEY = "builtin-one-pass"
BUILTIN = Preset(
    "builtin",
    "Built-in tiny pair (trained for this demo; runs on a CPU)",
    "builtin",
    "builtin",
    siblings=((ONE_PASS, ONE_PASS_KEY),),
)
HESITANT_DRAFT_DIR = BUILTIN_DIR / "hesitant-draft"
#: The built-in target with a draft that is less sure of itself (smaller, distilled less): SAGE builds
#: shallow, wide trees where it hesitates. Shown (and recorded) as "builtin-hesitant".
BUILTIN_HESITANT = Preset(
    "builtin-hesitant",
    "Built-in tiny pair, hesitant draft (SAGE goes wide; runs on a CPU)",
    "builtin",
    str(HESITANT_DRAFT_DIR),
    shown_draft="builtin-hesitant",
    siblings=((ONE_PASS, ONE_PASS_KEY),),
)
ONE_PASS_DRAFT_DIR = BUILTIN_DIR / "one-pass-draft"
#: The built-in target with the one-pass draft (PARD): every method drafts its whole tree in one draft forward
#: a round. Shown (and recorded) as "builtin-one-pass".
BUILTIN_ONE_PASS = Preset(
    ONE_PASS_KEY,
    "Built-in tiny pair, one-pass draft (one draft forward a round; runs on a CPU)",
    "builtin",
    str(ONE_PASS_DRAFT_DIR),
    shown_draft="builtin-one-pass",
)
# The GPU pairs of the library's presets (sage_core/models/presets.py) that fit one GPU.
HUB_PRESETS = tuple(Preset(p.key, p.label, p.target, p.draft, needs_gpu=True) for p in GPU_PRESETS if p.single_gpu)
CUSTOM_KEY = "custom"
ENV_KEY = "env"


def gpu_available() -> bool:
    """A GPU here, or ZeroGPU's (attached only while a race runs, so not always seen by torch between races):
    either way the GPU presets are offered."""
    return ZERO_GPU or torch.cuda.is_available()


def builtin_available() -> bool:
    return all((BUILTIN_DIR / role / "config.json").is_file() for role in ("target", "draft"))


def env_pair() -> tuple[str, str] | None:
    """SAGE_APP_TARGET / SAGE_APP_DRAFT: a pair chosen by whoever runs the app (tests, a Space)."""
    target, draft = os.environ.get("SAGE_APP_TARGET", "").strip(), os.environ.get("SAGE_APP_DRAFT", "").strip()
    return (target, draft) if target and draft else None


def presets(default_pair: tuple[str, str] | None = None) -> list[Preset]:
    """The pairs offered: a configured pair first, the built-in pair, hub presets with a GPU."""
    offered = []
    pair = default_pair or env_pair()
    if pair is not None and pair != ("builtin", "builtin"):
        offered.append(Preset(ENV_KEY, f"Configured pair: {Path(pair[0]).name} + {Path(pair[1]).name}", *pair))
    offered.append(BUILTIN)
    offered += [p for p in (BUILTIN_HESITANT, BUILTIN_ONE_PASS) if (Path(p.draft) / "config.json").is_file()]
    if gpu_available():
        offered.extend(HUB_PRESETS)
    return offered


def preset_choices(offered: Sequence[Preset], custom: bool = False) -> list[tuple[str, str]]:
    """The pair dropdown's choices; "Custom" only where the operator allows custom models."""
    choices = [(p.label, p.key) for p in offered]
    return choices + ([("Custom target and draft (advanced)", CUSTOM_KEY)] if custom else [])


def default_preset_key(offered: Sequence[Preset]) -> str:
    """SAGE_APP_PAIR, the pair the page starts on (unset: the first offered); a pair not offered here is
    one sentence at launch, not a silent start on another."""
    wanted = os.environ.get("SAGE_APP_PAIR", "").strip()
    keys = [p.key for p in offered]
    if wanted and wanted not in keys:
        gpu_only = " (it needs a GPU)" if wanted in {p.key for p in HUB_PRESETS} else ""
        raise ConfigError(
            f"SAGE_APP_PAIR {wanted!r} is not offered on this machine{gpu_only}; offered: {', '.join(keys)}"
        )
    return wanted or keys[0]


def sibling_preset(key: str, draft: str, offered: Sequence[Preset]) -> Preset:
    """The preset offered here whose draft is the pair `key`'s `draft` sibling (the same target with that draft:
    `Preset.siblings`); one sentence (ModelLoadError) for a pair that has none."""
    preset = next((p for p in offered if p.key == key), None)
    wanted = dict(preset.siblings).get(draft) if preset is not None else None
    sibling = next((p for p in offered if wanted is not None and p.key == wanted), None)
    if sibling is None:
        which = "a custom pair" if key == CUSTOM_KEY else f"the pair {key!r}"
        raise ModelLoadError(
            f"{which} has no {draft} sibling draft, so it cannot also race with the {LANE_DRAFTS.get(draft, draft)}: "
            "choose the built-in pair (or its hesitant draft), or race without it"
        )
    return sibling


HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
log = logging.getLogger("sage.app")


@dataclass(frozen=True)
class CustomModels:
    """Which custom models visitors may race: none unless the operator allows them.

    SAGE_APP_CUSTOM_MODELS_DIR=/srv/models allows the model folders inside that
    folder (a visitor names them relative to it); SAGE_APP_CUSTOM_HUB=1 allows
    hub ids (owner/name), downloaded on first use. A name that is neither is
    refused with one message, whether or not such a path exists on the server.
    """

    folder: Path | None = None
    hub: bool = False

    @classmethod
    def from_env(cls) -> CustomModels:
        folder = os.environ.get("SAGE_APP_CUSTOM_MODELS_DIR", "").strip()
        hub = env_switch("SAGE_APP_CUSTOM_HUB")
        return cls(Path(folder) if folder else None, hub)

    @property
    def enabled(self) -> bool:
        return self.folder is not None or self.hub

    def describe(self) -> str:
        kinds = (["a model folder in the server's models folder"] if self.folder is not None else []) + (
            ["a hub id (owner/name)"] if self.hub else []
        )
        return " or ".join(kinds)

    def resolve(self, name: str, role: str) -> str:
        """What to load for a visitor's `name`: a folder inside the allowed folder, or an allowed hub id."""
        if not self.enabled:
            raise ModelLoadError("custom models are turned off on this server; pick one of the listed pairs")
        name = (name or "").strip()
        if self.folder is not None and name and ".." not in Path(name).parts:
            root = self.folder.resolve()
            candidate = (root / name).resolve()
            if candidate != root and candidate.is_relative_to(root) and (candidate / "config.json").is_file():
                return str(candidate)
        if self.hub and HUB_ID.fullmatch(name) and ".." not in name:
            return name
        raise ModelLoadError(
            f"the custom {role} {name[:100]!r} is not a model this server offers: give {self.describe()}"
        )


def resolve_pair(
    key: str, offered: Sequence[Preset], custom_target: str, custom_draft: str, custom: CustomModels | None = None
) -> tuple[str, str]:
    """The (target, draft) names a choice stands for; SageError when it names nothing (or nothing allowed)."""
    if key == CUSTOM_KEY:
        custom = custom or CustomModels()
        if not custom.enabled:
            raise ModelLoadError("custom models are turned off on this server; pick one of the listed pairs")
        target, draft = (custom_target or "").strip(), (custom_draft or "").strip()
        if not target or not draft:
            raise ModelLoadError(f"a custom pair needs both a target and a draft ({custom.describe()})")
        return custom.resolve(target, "target"), custom.resolve(draft, "draft")
    for preset in offered:
        if preset.key == key:
            if preset.target == "builtin" and not builtin_available():
                raise ModelLoadError(
                    "the built-in pair is missing from assets/builtin "
                    "(PYTHONPATH=. python scripts/train_builtin_pair.py makes it)"
                )
            return preset.target, preset.draft
    for preset in HUB_PRESETS:
        if preset.key == key:
            raise ModelLoadError(f"{preset.label} needs a GPU, and none is available here")
    raise ModelLoadError(f"unknown model pair {key!r}")


@dataclass
class LoadedPair:
    pair: ModelPair
    # The pair's target with other drafts (its one-pass sibling's), by draft: loaded once when a race asks for
    # them (`PairCache.sibling`), dropped with the pair.
    siblings: dict[str, ModelPair] = field(default_factory=dict)
    # The verification cost curve measured at the warm-up, on the pair's device and dtype (None: not measured).
    costs: CostCurve | None = None
    # The budget sweep measured on this machine the first time it was asked for (`measured_sweep`), and how.
    sweep: SweepResult | None = None
    sweep_note: str = ""
    # The CPU threads its forwards run on (`sage_core.threads`: SAGE_THREADS or the like, else measured at the
    # load); None until chosen.
    threads: ThreadChoice | None = None

    @property
    def slot(self) -> PairSlot:
        """The race slot on this pair's thread count: what its races and its measurements step under."""
        return PairSlot(self.threads)

    def token_texts(self, tokens: Sequence[int]) -> list[str]:
        tokenizer = self.pair.target.tokenizer
        return [tokenizer.decode([t], skip_special_tokens=False) for t in tokens]


Report = Callable[[str, float], None]  # a loading stage and how far along the load is (0..1)
PATH_LIKE = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\s'\"\\/]+){2,}[\\/]?")


def scrub_paths(message: str, names: dict[str, str]) -> str:
    """A load error for a visitor: each loaded path shown as the name the visitor gave, any other path hidden."""
    for path, name in names.items():
        message = message.replace(path, name)
    return PATH_LIKE.sub("<path>", message)


class PairCache:
    """Pairs by (target, draft, device, dtype); the oldest is dropped beyond `capacity`.

    One pair loads at a time (`_loading`); looking up a loaded pair never
    waits for a load in progress.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._pairs: OrderedDict[tuple[str, str, str, str], LoadedPair] = OrderedDict()
        self._lock = threading.Lock()  # guards `_pairs`, held only for a moment
        self._loading = threading.Lock()

    def loaded(self, target: str, draft: str, device: str = "auto", dtype: str = "auto") -> bool:
        return (target, draft, device, dtype) in self._pairs

    def get(
        self,
        target: str,
        draft: str,
        device: str = "auto",
        dtype: str = "auto",
        report: Report | None = None,
        names: tuple[str, str] | None = None,
    ) -> LoadedPair:
        """The pair, loaded and warmed up first when needed (stages told to `report`).

        `names`: how the pair is shown (a custom pair by the names the visitor
        gave, never by its server paths). Stages and load errors are told
        with every path hidden (the log has them).
        """
        key = (target, draft, device, dtype)
        with self._lock:
            if key in self._pairs:
                self._pairs.move_to_end(key)
                return self._pairs[key]
        with self._loading:
            with self._lock:
                if key in self._pairs:
                    return self._pairs[key]
                dropped = len(self._pairs) >= self.capacity
                while len(self._pairs) >= self.capacity:  # make room first: a GPU holds one pair
                    self._pairs.popitem(last=False)
            if dropped:
                release_memory()
            loaded = self._load(target, draft, device, dtype, report or (lambda stage, done: None), names)
            with self._lock:
                self._pairs[key] = loaded
            return loaded

    def _load(
        self, target: str, draft: str, device: str, dtype: str, report: Report, names: tuple[str, str] | None
    ) -> LoadedPair:
        shown = dict(zip((target, draft), names, strict=True)) if names else {}
        stages = iter((0.05, 0.45))
        with load_errors(target, draft, names):
            pair = load_pair(
                target,
                draft,
                device=device,
                dtype=dtype,
                report=lambda stage: report(scrub_paths(stage, shown), next(stages, 0.5)),
            )
            if names:
                pair.target.name, pair.draft.name = names
            loaded = LoadedPair(pair)
            report("choosing the CPU threads (timing the one-token step at each count)", 0.7)
            with RACE_SLOT:  # no race beside the timing: each count's step is its own
                loaded.threads = choose_threads(pair)
            log.info("threads for %s: %s", target, loaded.threads.describe())
            report("warming up (one short untimed decode, then the verification cost of 1 to 64 nodes)", 0.85)
            with loaded.slot:  # the curve measured on the pair's threads, no race beside it
                loaded.costs = warm_up(loaded.pair)
        report("ready", 1.0)
        return loaded

    def sibling(self, loaded: LoadedPair, draft: str, name: str = "", report: Report | None = None) -> ModelPair:
        """`loaded`'s target with another draft (`with_draft`: the same target object, its weights not loaded
        again), loaded and warmed up the first time it is asked for, one load at a time, and kept with the pair
        (dropped with it). `name`: how the draft is shown (never its server path)."""
        if draft in loaded.siblings:
            return loaded.siblings[draft]
        with self._loading:
            if draft not in loaded.siblings:
                say = report or (lambda stage, done: None)
                names = (loaded.pair.target.name, name) if name else None
                shown = {draft: name} if name else {}
                with load_errors(loaded.pair.target.name, draft, names):
                    pair = with_draft(loaded.pair, draft, report=lambda stage: say(scrub_paths(stage, shown), 0.9))
                    if name:
                        pair.draft.name = name
                    warm_decodes(pair)
                loaded.siblings[draft] = pair
        return loaded.siblings[draft]

    def clear(self) -> None:
        with self._lock:
            self._pairs.clear()

    def __len__(self) -> int:
        return len(self._pairs)


@contextmanager
def load_errors(target: str, draft: str, names: tuple[str, str] | None) -> Iterator[None]:
    """A load's failure as one sentence for a visitor (every path shown by the name the visitor gave, or hidden;
    the log has them): the library's own sentence, running out of memory, or a broken checkpoint (which must not
    take the app down)."""
    shown = dict(zip((target, draft), names, strict=True)) if names else {}
    try:
        yield
    except SageError as error:
        log.warning("loading %s with %s failed: %s", target, draft, error)
        raise type(error)(scrub_paths(str(error), shown)) from error
    except (torch.OutOfMemoryError, MemoryError) as error:
        release_memory()
        raise ModelLoadError("not enough memory to load this pair") from error
    except Exception as error:
        log.exception("loading %s with %s failed", target, draft)
        detail = scrub_paths(f"{type(error).__name__}: {error}".splitlines()[0][:300], shown)
        label = names or (target, draft)
        raise ModelLoadError(scrub_paths(f"cannot load {label[0]!r} with {label[1]!r}: {detail}", shown)) from error


def release_memory() -> None:
    """After an out-of-memory error: give the cached blocks back so the next request can run."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


#: The warm-up's prompt: words every pair has tokens for (the built-in pair's vocabulary is small).
WARM_UP_PROMPT = "describe the image."


def warm_up(pair: ModelPair) -> CostCurve | None:
    """One short untimed decode per kind of forward (prefill, tree verify, plain step); then the
    verification cost curve on the pair's device and dtype (sage_core.studies.costs), which it returns
    (None when SAGE_APP_COST_CURVE is off: the app then shows no curve and no predicted speedups)."""
    warm_decodes(pair)
    return measure_warm_costs(pair) if cost_curve_wanted() else None


def warm_decodes(pair: ModelPair) -> None:
    """One short untimed decode per kind of forward (prefill, tree verify, plain step)."""
    media = image_media(Image.new("RGB", (112, 112), (255, 255, 255)), "warm-up")
    decode(pair, media, WARM_UP_PROMPT, DecodeConfig(method="sage", max_new_tokens=4)).run_to_end()  # tree verify
    decode(pair, media, WARM_UP_PROMPT, DecodeConfig(method="ar", max_new_tokens=2)).run_to_end()  # plain step


#: The cost curve recorded with the built-in pair on a CPU (scripts/headline_check.py --record-curve writes it):
#: what the app falls back to when the warm-up's measurement will not settle on a busy machine.
RECORDED_CURVE = BUILTIN_DIR / "cost_curve.json"


def recorded_curve(pair: ModelPair) -> CostCurve | None:
    """The curve recorded with this pair on its device and dtype (the built-in pair's only), or None."""
    paths = (str(BUILTIN_DIR / "target"), str(BUILTIN_DIR / "draft"))
    loaded = tuple(str(getattr(m.model.config, "_name_or_path", "")) for m in (pair.target, pair.draft))
    curve = read_recorded_curve(RECORDED_CURVE) if loaded == paths else None
    dtype = str(pair.target.dtype).removeprefix("torch.")
    return curve if curve is not None and (curve.device, curve.dtype) == (str(pair.device), dtype) else None


def measure_warm_costs(pair: ModelPair) -> CostCurve | None:
    """The cost curve after the warm-up, measured to its stated precision (each point's spread over
    interleaved passes under `NOISY_SPREAD` of its median, monotone, sane ratios; measured again over more
    passes, `SETTLE_PASSES`), else the curve recorded with the pair, labelled so (`settled_curve`). Only a
    trusted curve is handed to sage-cost's races (`remember_curve`): every visitor's races share it, so one
    visitor's load at the warm-up must not decide their trees. None, logged, when it cannot be measured."""
    media = image_media(Image.new("RGB", (112, 112), (255, 255, 255)), "warm-up")
    try:
        curve = settled_curve(
            lambda passes: measure_cost_spread(pair, media, WARM_UP_PROMPT, passes=passes), recorded_curve(pair)
        )
    except (RuntimeError, ValueError) as error:
        log.warning("the cost curve could not be measured: %s", error)
        return None
    if curve.set_aside:
        log.warning("the cost curve did not settle; using the recorded one: %s", curve.set_aside)
    remember_curve(pair, DecodeConfig().backend, curve)  # sage-cost's races weigh their budgets by it
    return curve


#: The app's budget sweep: a few budgets on one example, short answers (seconds on a CPU for the built-in pair).
SWEEP_BUDGETS: tuple[int, ...] = (4, 8, 16, 32, 64)
SWEEP_TOKENS = 32


def measured_sweep(loaded: LoadedPair) -> SweepResult:
    """The pair's budget sweep (sage_core.studies.sweep), measured the first time it is asked for, in the race slot
    (no race runs beside it, so its times are its own); `loaded.sweep_note` says how it was measured."""
    with loaded.slot:
        if loaded.sweep is None:
            example = next((e for e in load_examples() if not e.is_video), None)
            prompt = example.prompt if example else WARM_UP_PROMPT
            media = load_media(example.file) if example else image_media(Image.new("RGB", (112, 112), "white"), "")
            name = Path(example.file).name if example else "a white picture"
            prepared = prepare_inputs(loaded.pair, media, prompt)
            loaded.sweep = sweep(loaded.pair, [(name, prepared)], SWEEP_BUDGETS, max_new_tokens=SWEEP_TOKENS)
            pair = loaded.pair
            loaded.sweep_note = (
                f"Measured on this machine ({pair.device}, {str(pair.target.dtype).removeprefix('torch.')}) at "
                f"{time.strftime('%H:%M UTC', time.gmtime())}: one example ({name}), answers of up to "
                f"{SWEEP_TOKENS} tokens, one timed run per budget after a warm-up run (rough on a busy machine)."
            )
    return loaded.sweep


T = TypeVar("T")

# The page's own OpenCV work (previews, video exports) on one thread: it never spreads over a race's core.
cv2.setNumThreads(1)
# One GPU holds one pair at a time; a CPU can keep a few small ones.
PAIRS = PairCache(capacity=1 if gpu_available() else 3)
# Held around each race step (any pair): no two steps share the device, so each step's time is its own.
# Loading a pair holds it only to time the pair's thread counts and its cost curve.
RACE_SLOT = threading.RLock()


class Racing:
    """How many races are streaming now (`racing`), so the page's own heavy work (an export's frames) can wait
    for a gap between races instead of running beside their steps (`between_races`)."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)

    def enter(self) -> None:
        with self._lock:
            self._count += 1

    def leave(self) -> None:
        with self._lock:
            self._count -= 1
            if self._count == 0:
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for no race to be streaming; whether none is."""
        with self._lock:
            return self._idle.wait_for(lambda: self._count == 0, timeout)


RACING = Racing()
#: The longest the page's own work waits for a gap between races before taking its turn in the race slot.
BACKGROUND_PATIENCE_S = 2.0


def racing(steps: Iterator[T]) -> Iterator[T]:
    """A race's steps, counted as a race streaming from its first step to its last (or until it is closed)."""
    RACING.enter()
    try:
        yield from steps
    finally:
        RACING.leave()


@contextmanager
def between_races(patience: float = BACKGROUND_PATIENCE_S) -> Iterator[None]:
    """The race slot for the page's own heavy work (an export's frame): taken when no race streams, or after
    `patience` seconds at the latest (so a stream of races never starves it), and never during a race's step:
    a race's measured time stays its own, and a race waits at most one frame."""
    RACING.wait_idle(patience)
    with RACE_SLOT:
        yield


class PairSlot:
    """`RACE_SLOT`, with torch set to a pair's thread count while it is held (the count is process-wide, and
    each pair has its own: `LoadedPair.threads`). Re-entrant, as the slot is."""

    def __init__(self, threads: ThreadChoice | None) -> None:
        self.threads = threads

    def __enter__(self) -> None:
        RACE_SLOT.acquire()
        if self.threads is not None:
            self.threads.apply()

    def __exit__(self, *exc: object) -> None:
        RACE_SLOT.release()
