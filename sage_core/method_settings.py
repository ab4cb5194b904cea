"""The tree settings of the drafting methods with settings of their own: SAGE's policy (paper §3.2-3.3)
and EAGLE-2's dynamic tree, with the small checks every settings surface shares (whole numbers as forms,
JSON and the command line give them; a value as a sentence names it).

They live apart from config.py so the method registry (methods.py) can name each method's settings
class without importing the decode configuration; config.py re-exports every name.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

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
# The range of every real SAGE setting. θ_l = threshold_base · l / D(α) is compared with a cumulative
# probability, so a base above 1 would cut every deepest node; α is a confidence; the window's thresholds
# compare a mean accepted length, at most the deepest tree (depth_max_limit's top).
SAGE_REAL_RANGES: dict[str, tuple[float, float]] = {
    "threshold_base": (0.0, 1.0),
    "initial_alpha": (0.0, 1.0),
    "lower_below": (0.0, SAGE_RANGES["depth_max_limit"][1]),
    "raise_above": (0.0, SAGE_RANGES["depth_max_limit"][1]),
}
FLOAT_FIELDS = tuple(SAGE_REAL_RANGES)
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
        problems = settle_numbers(self, SAGE_RANGES, whole=True) + settle_numbers(self, SAGE_REAL_RANGES, whole=False)
        problems += self._relation_problems()
        if self.shape not in ("online", "template"):
            problems.append(f"shape must be 'online' or 'template', not {shown(self.shape)}")
        if self.alpha_source not in ("root", "path_mean"):
            problems.append(f"alpha_source must be 'root' or 'path_mean', not {shown(self.alpha_source)}")
        first = read_boolean(self.static_first_round)
        if first is None:
            problems.append(f"static_first_round must be True or False, not {shown(self.static_first_round)}")
        else:
            object.__setattr__(self, "static_first_round", first)
        if problems:
            raise ConfigError("invalid SAGE configuration: " + "; ".join(problems))

    def _relation_problems(self) -> list[str]:
        """What the settings' relations refuse (none while a setting is no number: its own sentence says so)."""
        number: dict[str, Any] = {name: read_number(getattr(self, name)) for name in (*SAGE_RANGES, *SAGE_REAL_RANGES)}
        if any(value is None or (isinstance(value, float) and not math.isfinite(value)) for value in number.values()):
            return []
        problems = []
        if not number["depth_min"] <= number["depth_max"] <= number["depth_max_limit"]:
            problems.append("need depth_min <= depth_max <= depth_max_limit")
        if not number["width_min"] <= number["width_max"] <= number["candidates"]:
            problems.append("need width_min <= width_max <= candidates")
        if not number["lower_below"] <= number["raise_above"]:
            problems.append(
                f"need lower_below <= raise_above (a window's mean below {shown(self.lower_below)} lowers D_max, "
                f"above {shown(self.raise_above)} raises it)"
            )
        return problems

    @classmethod
    def from_form(cls, values: Mapping[str, object]) -> SageConfig:
        """SAGE's settings from a form or a JSON call ("8", 8.0 and 8 alike; "0.2" a real); checked as every
        SageConfig is."""
        refuse_old_names(values, OLD_SAGE_NAMES, "SAGE's")
        numbers = {**dict.fromkeys(SAGE_RANGES, True), **dict.fromkeys(SAGE_REAL_RANGES, False)}
        settings: dict[str, Any] = {
            name: as_setting(value, numbers[name]) if name in numbers else value for name, value in values.items()
        }
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
        problems = settle_numbers(self, DYNAMIC_RANGES, whole=True)
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
#: 0.12 more a round than SAGE, where 0.89 accepts 0.31 less (docs/training-history.md, "Run 10"). Measure it
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
        alpha = in_range(self.alpha, 0.0, 1.0)
        if alpha is None:
            raise ConfigError(f"sage-frozen's α must be a number in [0, 1], not {shown(self.alpha)}")
        object.__setattr__(self, "alpha", alpha)


#: The deepest tree a method without SAGE's acceptance window grows: sage-cost's D_max (D(alpha) reaches it at
#: alpha = 1), best-first's depth and SMART's default depth cap. SAGE's window moves its D_max up to
#: `depth_max_limit` (10) only; the budget methods stop growing where a level no longer pays, and on the
#: built-in pair with the sure draft their trees ran into 10 levels with the deepest still paying (nearly
#: every round of sage-cost's; docs/benchmarks.md, 2026-12-04), so they reach further.
BUDGET_TREE_DEPTH = 16

#: best-first's nodes per round when none is given and SAGE did not race beside it: SAGE's mean node count
#: on the built-in pair's long examples with the sure draft (10.8 nodes a round, scripts/benchmark.py).
BEST_FIRST_NODES = 11


@dataclass(frozen=True)
class BestFirstConfig:
    """`best-first`, an ablation lane: a tree of `nodes` nodes of highest cumulative draft probability each
    round, no entropy shaping. In a race beside SAGE, unless given, it holds SAGE's mean node count in that
    race (the same average size, so what differs is the shape alone)."""

    nodes: int = BEST_FIRST_NODES

    def __post_init__(self) -> None:
        nodes = in_range(self.nodes, 1, 256, whole=True)
        if nodes is None:
            raise ConfigError(f"best-first's nodes must be a whole number in [1, 256], not {shown(self.nodes)}")
        object.__setattr__(self, "nodes", nodes)


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


# -- numbers: one check for every settings class and every route ----------------------------


def read_number(value: object, text: bool = False) -> int | float | None:
    """`value` as a plain Python int or float when it is a real number of any Python or numpy type (a 0-d
    array or tensor too; an int kept exact however large, a real too large for a float read as an infinity),
    and with `text` as a form, JSON or the command line writes one ("8", " 0.5 "); None for anything else:
    a boolean above all (True is 1 to Python, never a setting's 1), a complex, a list, a word.

    The settings classes read their fields with it (text=False: the library takes numbers), the routes with
    text=True before handing the value on; `in_range` then checks it, so no route can differ."""
    value = _plain(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real | Decimal):
        return _as_float(value)
    if text and isinstance(value, str):
        return _number_in_text(value.strip())
    return None


def _as_float(value: Any) -> float | None:
    """float(value), an infinity where the value is too large for a float (an int, a Fraction), None where
    float() refuses it."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
    except (TypeError, ValueError):  # a signalling Decimal NaN, a word
        return None


def _number_in_text(text: str) -> int | float | None:
    if WHOLE_TEXT.fullmatch(text):
        try:
            return int(text)  # exact, however long
        except ValueError:  # over Python's 4300 digits
            return -math.inf if text.startswith("-") else math.inf
    return _as_float(text)


WHOLE_TEXT = re.compile(r"[+-]?\d+")


def in_range(value: object, low: float, high: float, whole: bool = False, above_low: bool = False) -> Any:
    """`value` (`read_number`, text=False) as a plain Python int (`whole`) or float when it lies in
    [low, high] ((low, high] with `above_low`), finite, and whole where asked (8.0 is the whole number 8);
    None otherwise, for a boolean, NaN, an infinity or a number out of range however large (an int is
    compared exactly, never turned into a float that overflows)."""
    number = read_number(value)
    if number is None or (isinstance(number, float) and not math.isfinite(number)):
        return None
    if whole and isinstance(number, float):
        if not number.is_integer():
            return None
        number = int(number)
    inside = (low < number if above_low else low <= number) and number <= high
    if not inside:
        return None
    return number if whole else float(number)


def range_sentence(name: str, value: object, low: float, high: float, whole: bool = False) -> str:
    """The one sentence for a setting out of its range: "depth_max must be a whole number in [1, 10], not 11"."""
    kind = "a whole number" if whole else "a number"
    return f"{name} must be {kind} in [{low:g}, {high:g}], not {shown(value)}"


def settle_numbers(settings: object, ranges: Mapping[str, tuple[float, float]], whole: bool) -> list[str]:
    """Every field of `settings` (a frozen dataclass, in its __post_init__) that `ranges` names, checked by
    `in_range` and stored back as a plain Python number (a numpy scalar becomes one, so a trace writes it as
    JSON); the sentence of each field out of its range."""
    problems = []
    for name, (low, high) in ranges.items():
        value = getattr(settings, name)
        number = in_range(value, low, high, whole)
        if number is None:
            problems.append(range_sentence(name, value, low, high, whole))
        else:
            object.__setattr__(settings, name, number)
    return problems


def as_whole(value: object) -> object:
    """A form's whole number as an int ("8", 8.0, 8, numpy's 8); anything else as it came (the settings
    class then names it: a boolean, 8.5, a word)."""
    number = read_number(value, text=True)
    if isinstance(number, float) and number.is_integer():
        return int(number)
    return number if isinstance(number, int) else value


def as_float(value: object) -> float | None:
    """A form's number as a float ("0.5" with spaces around, 0.5, 1, numpy's scalars; an int too large for
    a float as an infinity, which the check then refuses); None for a boolean or what is no number."""
    number = read_number(value, text=True)
    return _as_float(number) if isinstance(number, int) else number


def as_setting(value: object, whole: bool) -> object:
    """A form's value as a settings class takes it: its number (`as_whole` or `as_float`), else the value as
    it came, for the class to name (a boolean, a word)."""
    if whole:
        return as_whole(value)
    number = as_float(value)
    return value if number is None else number


def read_boolean(value: object) -> bool | None:
    """A switch as a Python bool (numpy's bool too); None for anything else (1 is not True here)."""
    value = _plain(value)
    return value if isinstance(value, bool) else None


def _plain(value: Any) -> Any:
    """A numpy scalar, or a 0-d array or tensor, as its Python value (`.item()`); anything else as it is."""
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        try:
            return value.item()
        except (RuntimeError, TypeError, ValueError):  # a tensor without data (on `meta`): no number
            return None
    return value


def shown(value: object, limit: int = 40) -> str:
    """A value as a sentence names it: a huge number by its digits' count, a long text cut."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return f"a {len(str(abs(value)))}-digit number"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
