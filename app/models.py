"""Model pairs for the app: presets, and a process-wide cache.

Each (target, draft, device, dtype) is loaded once per process, under a
lock, warmed up with one short untimed decode (so the first race is not
charged for lazy initialisation), and then shared read-only by every user.
A pair also carries a lock that the race holds around each step, so two
races never step the same models at once.
"""

from __future__ import annotations

import gc
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from PIL import Image

from sage_core import DecodeConfig, ModelPair, SageError, decode, image_media, load_pair
from sage_core.errors import ModelLoadError

ROOT = Path(__file__).resolve().parent.parent
BUILTIN_DIR = ROOT / "assets" / "builtin"


@dataclass(frozen=True)
class Preset:
    key: str
    label: str
    target: str
    draft: str
    needs_gpu: bool = False


BUILTIN = Preset("builtin", "Built-in tiny pair (trained for this demo; runs on a CPU)", "builtin", "builtin")
HUB_PRESETS = (
    Preset("qwen2.5-vl-7b", "Qwen2.5-VL-7B-Instruct, 3B draft", "Qwen/Qwen2.5-VL-7B-Instruct",
           "Qwen/Qwen2.5-VL-3B-Instruct", needs_gpu=True),
    Preset("llava-ov-7b", "LLaVA-OneVision-7B, 0.5B draft", "llava-hf/llava-onevision-qwen2-7b-ov-hf",
           "llava-hf/llava-onevision-qwen2-0.5b-ov-hf", needs_gpu=True),
)  # fmt: skip
CUSTOM_KEY = "custom"
ENV_KEY = "env"


def gpu_available() -> bool:
    return torch.cuda.is_available()


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
    if gpu_available():
        offered.extend(HUB_PRESETS)
    return offered


def preset_choices(offered: Sequence[Preset]) -> list[tuple[str, str]]:
    return [(p.label, p.key) for p in offered] + [("Custom target and draft (advanced)", CUSTOM_KEY)]


def default_preset_key(offered: Sequence[Preset]) -> str:
    wanted = os.environ.get("SAGE_APP_PAIR", "").strip()
    keys = [p.key for p in offered]
    return wanted if wanted in keys else keys[0]


def resolve_pair(key: str, offered: Sequence[Preset], custom_target: str, custom_draft: str) -> tuple[str, str]:
    """The (target, draft) names a choice stands for; SageError when it names nothing."""
    if key == CUSTOM_KEY:
        target, draft = (custom_target or "").strip(), (custom_draft or "").strip()
        if not target or not draft:
            raise ModelLoadError("a custom pair needs both a target and a draft (hub ids or local folders)")
        return target, draft
    for preset in offered:
        if preset.key == key:
            if preset.target == "builtin" and not builtin_available():
                raise ModelLoadError(
                    "the built-in pair is missing from assets/builtin (python scripts/train_builtin_pair.py makes it)"
                )
            return preset.target, preset.draft
    for preset in HUB_PRESETS:
        if preset.key == key:
            raise ModelLoadError(f"{preset.label} needs a GPU, and none is available here")
    raise ModelLoadError(f"unknown model pair {key!r}")


@dataclass
class LoadedPair:
    pair: ModelPair
    lock: threading.RLock = field(default_factory=threading.RLock)

    def token_texts(self, tokens: Sequence[int]) -> list[str]:
        tokenizer = self.pair.target.tokenizer
        return [tokenizer.decode([t], skip_special_tokens=False) for t in tokens]


class PairCache:
    """Pairs by (target, draft, device, dtype); the oldest is dropped beyond `capacity`."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._pairs: OrderedDict[tuple[str, str, str, str], LoadedPair] = OrderedDict()
        self._lock = threading.Lock()

    def loaded(self, target: str, draft: str, device: str = "auto", dtype: str = "auto") -> bool:
        return (target, draft, device, dtype) in self._pairs

    def get(self, target: str, draft: str, device: str = "auto", dtype: str = "auto") -> LoadedPair:
        key = (target, draft, device, dtype)
        with self._lock:
            if key in self._pairs:
                self._pairs.move_to_end(key)
                return self._pairs[key]
            if len(self._pairs) >= self.capacity:  # make room first: a GPU holds one pair
                while len(self._pairs) >= self.capacity:
                    self._pairs.popitem(last=False)
                release_memory()
            try:
                loaded = LoadedPair(load_pair(target, draft, device=device, dtype=dtype))
                warm_up(loaded.pair)
            except SageError:
                raise
            except (torch.OutOfMemoryError, MemoryError) as error:
                release_memory()
                raise ModelLoadError(f"not enough memory to load {target!r} with {draft!r}") from error
            except Exception as error:  # a broken checkpoint must not take the app down
                raise ModelLoadError(
                    f"cannot load {target!r} with {draft!r}: {type(error).__name__}: {error}"
                ) from error
            self._pairs[key] = loaded
            return loaded

    def clear(self) -> None:
        with self._lock:
            self._pairs.clear()

    def __len__(self) -> int:
        return len(self._pairs)


def release_memory() -> None:
    """After an out-of-memory error: give the cached blocks back so the next request can run."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def warm_up(pair: ModelPair) -> None:
    """One short untimed decode per kind of forward (prefill, tree verify, plain step)."""
    media = image_media(Image.new("RGB", (112, 112), (255, 255, 255)), "warm-up")
    for method, tokens in (("sage", 4), ("ar", 2)):
        decode(pair, media, "warm up", DecodeConfig(method=method, max_new_tokens=tokens)).run_to_end()  # type: ignore[arg-type]


# One GPU holds one pair at a time; a CPU can keep a few small ones.
PAIRS = PairCache(capacity=1 if gpu_available() else 3)
