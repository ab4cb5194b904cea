"""The tree settings of the drafting methods with settings of their own: SAGE's policy (paper §3.2-3.3)
and EAGLE-2's dynamic tree, with the small checks every settings surface shares (whole numbers as forms,
JSON and the command line give them; a value as a sentence names it).

They live apart from config.py so the method registry (methods.py) can name each method's settings
class without importing the decode configuration; config.py re-exports every name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, SupportsFloat, SupportsIndex, TypeGuard

from .errors import ConfigError

# The range of every whole-number SAGE setting: the page's sliders (app/page.py) read these too.
SAGE_RANGES: dict[str, tuple[int, int]] = {
    "depth_min": (1, 10),
    "depth_max": (1, 10),
    "width_min": (1, 10),
    "width_max": (1, 10),
    # Every KV buffer of a round is sized by it: 256 nodes is four times the paper's 64.
    "node_budget": (1, 256),
    "candidates": (2, 20),
    "window": (1, 100),
    "depth_max_step": (1, 10),
    "depth_max_limit": (1, 10),
}
# The range of each dynamic tree setting (DynamicConfig); the page's sliders read these too.
DYNAMIC_RANGES: dict[str, tuple[int, int]] = {"depth": (1, 10), "candidates": (1, 50), "total_tokens": (1, 256)}
FLOAT_FIELDS = ("threshold_base", "initial_alpha", "lower_below", "raise_above")
# SAGE's settings under the names they had before they were renamed (one word for one thing), and their
# names now. A trace written before is still read under the new names (trace_check.py; docs/cli-and-library.md
# says until when); a caller who passes an old name gets one sentence naming the new one (`refuse_old_names`).
OLD_SAGE_NAMES: dict[str, str] = {"top_k": "candidates", "expansion_threshold": "threshold_base"}
#: the dynamic tree's `candidates` was `top_k` on the command line and the /race API (no trace holds it)
OLD_DYNAMIC_NAMES: dict[str, str] = {"top_k": "candidates"}


@dataclass(frozen=True)
class SageConfig:
    """SAGE's tree policy (paper §3.2-3.3, Algorithm 1).

    depth  D(alpha) = depth_min + alpha * (current depth_max - depth_min)
    width  W(alpha) = width_min + (1 - alpha) * (width_max - width_min)
    level l >= 2: W_l = W(alpha) * (1 / l) * (0.5 + P_parent)
    a node at level l is kept only if its cumulative probability
    exceeds threshold_base * l / D(alpha).
    """

    depth_min: int = 3
    depth_max: int = 8
    width_min: int = 2
    width_max: int = 10
    node_budget: int = 64
    # k: the draft's candidates per node (paper: top-k = 10); alpha is the entropy of their
    # renormalised probabilities, and no level is wider than k.
    candidates: int = 10
    # The base of the expansion threshold: level l's threshold is theta_l = threshold_base * l / D(alpha)
    # (policy.level_threshold).
    threshold_base: float = 0.1
    initial_alpha: float = 0.5
    # The acceptance window that moves depth_max (paper: last 10 rounds,
    # mean < 2 lowers it, mean > 3 raises it).
    window: int = 10
    lower_below: float = 2.0
    raise_above: float = 3.0
    # *open*: step size and bounds of the depth_max moves (suggested +-1,
    # clamped to [depth_min, depth_max_limit]); and when it moves: we move it
    # once the window is full, then start a fresh window, so every move is
    # judged on rounds planned under the previous depth_max.
    depth_max_step: int = 1
    depth_max_limit: int = 10
    # *open*: how the shape is made. "online" grows the tree level by level
    # from the live draft probabilities of this round (paper §3.2 wording):
    # alpha comes from this round's root distribution. "template" plans a
    # rank template from the previous round's draft distributions before
    # drafting (paper Algorithm 1). Both are lossless.
    shape: Literal["online", "template"] = "online"
    # *open*: which draft distribution feeds alpha in template mode: "root"
    # (depth-1 distribution of the round just verified) or "path_mean" (mean
    # confidence over the draft distributions along the accepted path).
    alpha_source: Literal["root", "path_mean"] = "root"
    # *open*: whether the very first round uses the static tree (paper: yes).
    static_first_round: bool = True

    def __post_init__(self) -> None:
        problems = [
            f"{name} must be a whole number in [{low}, {high}], not {shown(getattr(self, name))}"
            for name, (low, high) in SAGE_RANGES.items()
            if not is_whole_in(getattr(self, name), low, high)
        ]
        for name in FLOAT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                problems.append(f"{name} must be a finite number, not {shown(value)}")
        numbers = all(isinstance(getattr(self, name), int) for name in SAGE_RANGES) and all(
            isinstance(getattr(self, name), int | float) for name in FLOAT_FIELDS
        )
        if problems and not numbers:  # the relations below need numbers
            raise ConfigError("invalid SAGE configuration: " + "; ".join(problems))
        if not 1 <= self.depth_min <= self.depth_max <= self.depth_max_limit:
            problems.append("need 1 <= depth_min <= depth_max <= depth_max_limit")
        if not 1 <= self.width_min <= self.width_max:
            problems.append("need 1 <= width_min <= width_max")
        if not 1 <= self.width_max <= self.candidates:
            problems.append("need width_max <= candidates")
        if not 0.0 <= self.initial_alpha <= 1.0:
            problems.append("initial_alpha must lie in [0, 1]")
        if self.shape not in ("online", "template"):
            problems.append("shape must be 'online' or 'template'")
        if self.alpha_source not in ("root", "path_mean"):
            problems.append("alpha_source must be 'root' or 'path_mean'")
        if problems:
            raise ConfigError("invalid SAGE configuration: " + "; ".join(problems))

    @classmethod
    def from_form(cls, values: Mapping[str, object]) -> SageConfig:
        """SAGE's settings from a form or a JSON call ("8", 8.0 and 8 alike); checked as every SageConfig is."""
        refuse_old_names(values, OLD_SAGE_NAMES, "SAGE's")
        settings: dict[str, Any] = {name: as_whole(value) for name, value in values.items()}
        return cls(**settings)


@dataclass(frozen=True)
class DynamicConfig:
    """EAGLE-2's dynamic draft tree (Li et al. 2024, "EAGLE-2: Faster Inference of Language Models
    with Dynamic Draft Trees", §4): grow the tree where the draft's cumulative probability is highest,
    then rerank every drafted node and verify the best `total_tokens`.

    Each of `depth` levels expands the `candidates` frontier nodes of highest cumulative probability
    (the product of the draft's probabilities along the path), each with its `candidates` most likely
    children (EAGLE-2's code calls this k `top_k`); the root's own candidates are the first level, so
    the tree is at most depth + 1 deep.
    The defaults are those of EAGLE-2's released code (SafeAILab/EAGLE, EAGLE-2 release of
    2024-06-27: `EaModel.from_pretrained(total_token=59, depth=5, top_k=10)` in
    eagle/model/ea_model.py; the growth and rerank in `Model.topK_genrate`, eagle/model/cnets.py):
    59 verified nodes beside the root, a budget comparable with SAGE's 64.
    """

    depth: int = 5
    candidates: int = 10
    total_tokens: int = 59

    def __post_init__(self) -> None:
        problems = []
        for name, (low, high) in DYNAMIC_RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                problems.append(f"{name} must be a whole number in [{low}, {high}], not {shown(value)}")
        if problems:
            raise ConfigError("invalid dynamic tree settings: " + "; ".join(problems))

    @classmethod
    def from_form(cls, values: Mapping[str, object]) -> DynamicConfig:
        """The dynamic tree's settings from a form or a JSON call ("5", 5.0 and 5 alike); checked as always."""
        refuse_old_names(values, OLD_DYNAMIC_NAMES, "the dynamic tree's")
        settings: dict[str, Any] = {name: as_whole(value) for name, value in values.items()}
        return cls(**settings)


#: sage-frozen's α unless set: the α whose frozen trees match SAGE's own in size on the built-in pair's 40
#: calibration prompts (run 10, sure draft; scripts/tau_study.py --kinds describe,chart,narrate,row --n 40 --seed
#: 4242, not the 120 graded ones of seed 31337): every α from 0.80 to 0.89 gives the same 7-deep trees, 11.24 nodes
#: a round against SAGE's 11.23; 0.92 gives full-depth trees of 12.37. SAGE's mean α there, 0.938, lies above 0.9,
#: where D(α) = 3 + 5α rounds up to D_max: held there every tree is full depth and, on the graded prompts, accepts
#: 0.12 more a round than SAGE, where 0.89 accepts 0.31 less (assets/builtin/README.md, "Run 10"). Measure it
#: again when the pair is retrained; the hesitant draft's mean α is 0.79.
FROZEN_ALPHA = 0.89
FROZEN_ALPHA_SOURCE = "the α whose frozen trees match SAGE's in size on the built-in pair's calibration prompts"


@dataclass(frozen=True)
class FrozenSageConfig:
    """`sage-frozen`, an ablation lane: SAGE's own policy (its settings are SAGE's) with α held at `alpha`
    for the whole answer instead of read from each round's draft entropy. The default is the α whose trees
    match SAGE's in size on the built-in pair (near its mean α, on the side of D(α)'s rounding that gives
    SAGE's node count); for another pair start from its mean α (scripts/tau_study.py prints SAGE's mean α
    and each lane's nodes per round) to race SAGE against itself without adaptation there."""

    alpha: float = FROZEN_ALPHA

    def __post_init__(self) -> None:
        value = self.alpha
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not (number and 0.0 <= value <= 1.0):
            raise ConfigError(f"sage-frozen's α must be a number in [0, 1], not {shown(value)}")


def refuse_old_names(names: Iterable[str], old_names: Mapping[str, str], whose: str) -> None:
    """One sentence (ConfigError) for a caller who names a setting as it was called before it was renamed."""
    for name in names:
        if name in old_names:
            new = old_names[name]
            raise ConfigError(f"{name!r} is the old name of {whose} {new!r}, no longer read: pass {new!r} instead")


def with_current_names(values: Mapping[str, object], old_names: Mapping[str, str]) -> dict[str, object]:
    """A trace's fields under their current names: a value under an old name is read under its new one,
    unless the new name is given too (it wins)."""
    current = {name: value for name, value in values.items() if name not in old_names}
    for old, new in old_names.items():
        if old in values and new not in values:
            current[new] = values[old]
    return current


# -- whole numbers, as forms, JSON and the command line give them ------------------------


def as_whole(value: object) -> object:
    """A whole number as an int ("8", 8.0, 8); anything else as it came (the check then names it)."""
    if isinstance(value, int):  # bool included: the check names it
        return value
    number = as_float(value)
    if number is None:
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())  # exact, however long
    return int(number) if number.is_integer() else value


def as_float(value: object) -> float | None:
    """A number as float() reads it ("0.5" with spaces around, 0.5, 1, numpy's scalars); None where float()
    refuses it (the check then names the value)."""
    if isinstance(value, str):
        value = value.strip()
    if not isinstance(value, str | bytes | bytearray | SupportsFloat | SupportsIndex):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):  # numpy's arrays of more than one number among them
        return None


def is_whole_in(value: object, low: int, high: int) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def shown(value: object, limit: int = 40) -> str:
    """A value as a sentence names it: a huge number by its digits' count, a long text cut."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return f"a {len(str(abs(value)))}-digit number"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
