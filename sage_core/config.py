"""Configuration of the decoding methods (SAGE §3 and its baselines).

Every field carries the paper's default. Choices the paper leaves open are
marked *open* and documented where the field is defined.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .arguments import check_part
from .errors import ConfigError, InputError

# The methods, their labels and trees live in one registry (methods.py); these names stay here too.
from .methods import METHOD_LABELS as METHOD_LABELS
from .methods import METHODS as METHODS
from .methods import PRUNED_METHOD_LABELS as PRUNED_METHOD_LABELS
from .methods import Method as Method
from .methods import drafts, method_spec
from .methods import method_label as method_label
from .trees import CHAIN_TREE as CHAIN_TREE
from .trees import STATIC_TREE as STATIC_TREE
from .trees import RankPath as RankPath

# How the loop talks to the models (backends.py): "fast" (caches grown in place, masks built
# on the device, commits that move only the accepted rows, and the lean text forward of lean.py
# where the model allows it: the target's bit for bit, the draft's fused), "compiled" (the same,
# with the draft's fused forward through torch.compile), "fast-hf" (the fast path with
# transformers' own forward for both) or "plain" (transformers' own DynamicCache and host-built
# masks). All are lossless.
Backend = Literal["fast", "compiled", "fast-hf", "plain"]
BACKENDS: tuple[Backend, ...] = ("fast", "compiled", "fast-hf", "plain")

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
# Names settings had before they were renamed (one word for one thing), and their names now: a trace
# written before, or a caller using an old name, is read under the new one.
OLD_SAGE_NAMES: dict[str, str] = {"top_k": "candidates", "expansion_threshold": "threshold_base"}
OLD_DYNAMIC_NAMES: dict[str, str] = {"top_k": "candidates"}
# Sampling: near 0 the scaled logits overflow (transformers' generate fails at 1e-40); 0 itself is greedy.
MIN_TEMPERATURE = 0.01
MAX_TEMPERATURE = 2.0
MAX_SAMPLING_TOP_K = 1_000_000
# Draft-side pruning keeps at least 5% of the visual tokens (the page's slider stops there too).
MAX_PRUNE_RATIO = 0.95


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
        named = with_current_names(values, OLD_SAGE_NAMES)
        return cls(**{name: as_whole(value) for name, value in named.items()})  # type: ignore[arg-type]


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
        named = with_current_names(values, OLD_DYNAMIC_NAMES)
        return cls(**{name: as_whole(value) for name, value in named.items()})  # type: ignore[arg-type]


@dataclass(frozen=True)
class SamplingConfig:
    """How the target's next token is chosen: greedy (temperature 0) or sampled.

    With temperature > 0 the output is distributed exactly as the target's own
    `generate(do_sample=True, temperature=..., top_k=..., top_p=...)`: its
    logits go through the same transformers warpers in the same order
    (temperature, top-k, top-p), and verification is by rejection sampling
    (sampling.py). top_k defaults to 50 as transformers' does (0 turns it
    off); top-p and top-k only apply when sampling. The checkpoint's own
    generation_config sampling defaults are not read: these settings are.
    `seed` makes a run reproducible; None draws one at the start of the run
    and records it in the run's header.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 50
    seed: int | None = None

    def __post_init__(self) -> None:
        problems = []
        temperature = self.temperature
        number = isinstance(temperature, int | float) and not isinstance(temperature, bool)
        if not (number and (temperature == 0 or MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE)):
            problems.append(
                f"temperature must be 0 (greedy) or a number in [{MIN_TEMPERATURE:g}, {MAX_TEMPERATURE:g}] "
                "(near 0 the scaled logits overflow: transformers' generate fails at 1e-40; 0 is greedy), "
                f"not {shown(temperature)}"
            )
        if not (isinstance(self.top_p, int | float) and 0.0 < self.top_p <= 1.0):
            problems.append(f"top-p must lie in (0, 1], not {shown(self.top_p)}")
        if not is_whole_in(self.top_k, 0, MAX_SAMPLING_TOP_K):
            problems.append(
                f"top-k must be an integer >= 0 (0 = off) and at most {MAX_SAMPLING_TOP_K}, not {shown(self.top_k)}"
            )
        if self.seed is not None and not is_whole_in(self.seed, 0, 2**63 - 1):
            problems.append(f"seed must be an integer in [0, 2**63), not {shown(self.seed)}")
        if problems:
            raise ConfigError("invalid sampling settings: " + "; ".join(problems))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class DecodeConfig:
    """What to decode and how: the method, the token limit, SAGE's policy, greedy or sampled."""

    method: Method = "sage"
    max_new_tokens: int = 128
    sage: SageConfig = field(default_factory=SageConfig)
    # The draft's candidates per node for the static and chain templates (their
    # largest rank is 3, so 10 is plenty).
    template_candidates: int = 10
    backend: Backend = "fast"
    # Draft-side visual token pruning (SpecVLM; pruning.py): the share of the
    # visual tokens the draft does not read (0 = off; the paper prunes 0.8 of an
    # image's, 0.9 of a video's). The target always reads them all.
    prune_ratio: float = 0.0
    # SpecVLM's stage I: keep the most-attended visual tokens until they hold
    # this share of the attention mass; the rest of the budget is spread evenly.
    prune_attention_share: float = 0.4
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    # The dynamic tree's settings (method "dynamic"; EAGLE-2's defaults).
    dynamic: DynamicConfig = field(default_factory=DynamicConfig)

    def __post_init__(self) -> None:
        check_part("sage", self.sage, SageConfig, "SageConfig(depth_max=...)")
        check_part("sampling", self.sampling, SamplingConfig, "SamplingConfig(temperature=...)")
        check_part("dynamic", self.dynamic, DynamicConfig, "DynamicConfig(depth=...)")
        if isinstance(self.prune_ratio, str | bool) or not isinstance(self.prune_ratio, int | float):
            raise ConfigError(f"prune_ratio must be a number in [0, 1), not {shown(self.prune_ratio)}")
        method_spec(self.method)  # one clear error for an unknown method
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        check_prune_ratio(self.prune_ratio)
        if self.prune_ratio > 0 and not drafts(self.method):
            raise ConfigError(
                f"pruning removes visual tokens from the draft's prompt; method {self.method!r} has no draft"
            )
        if not 0.0 <= self.prune_attention_share <= 1.0:
            raise ConfigError(f"prune_attention_share must lie in [0, 1], not {self.prune_attention_share}")
        if not isinstance(self.max_new_tokens, int) or isinstance(self.max_new_tokens, bool):
            raise ConfigError(f"max new tokens must be a whole number, not {shown(self.max_new_tokens)}")
        check_max_new_tokens(self.max_new_tokens)
        if not is_whole_in(self.template_candidates, 4, 20):
            raise ConfigError(
                f"template_candidates must be a whole number in [4, 20], not {shown(self.template_candidates)}"
            )


MAX_NEW_TOKENS_LIMIT = 4096
MAX_PROMPT_CHARS = 4000


def check_max_new_tokens(value: object, limit: int = MAX_NEW_TOKENS_LIMIT) -> int:
    """The token limit as a whole number in [1, limit] (a form's "12" or 12.0 included); ConfigError else."""
    number = as_whole(value)
    if not is_whole_in(number, 1, limit):
        raise ConfigError(f"max new tokens must be a whole number in [1, {limit}], not {shown(value)}")
    return int(number)  # type: ignore[call-overload]


def check_prune_ratio(value: object) -> float:
    """The pruning ratio as a number in [0, MAX_PRUNE_RATIO] (a form's "0.5" included); ConfigError else."""
    try:
        ratio = float(value.strip()) if isinstance(value, str) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        ratio = None
    if isinstance(value, bool) or ratio is None:
        raise ConfigError(f"the pruning ratio must be a number in [0, 1), not {shown(value)}")
    if not 0.0 <= ratio <= MAX_PRUNE_RATIO:
        raise ConfigError(
            f"the pruning ratio must lie in [0, 1) and be at most {MAX_PRUNE_RATIO:g} (the draft reads at least "
            f"{1 - MAX_PRUNE_RATIO:.0%} of the visual tokens), not {shown(value)}"
        )
    return ratio


def check_prompt(prompt: object) -> str:
    """A prompt that is text, not blank, valid Unicode, at most MAX_PROMPT_CHARS long; InputError else."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise InputError("the prompt is empty: ask something about the image or video")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise InputError(f"the prompt has {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InputError(
            f"the prompt is not valid text: character {error.start + 1} is a lone surrogate ({prompt[error.start]!a}); "
            "remove it"
        ) from error
    return prompt


def check_positions(prompt_tokens: int, positions: int | None, model: str = "the model") -> None:
    """A prompt that leaves room in the model's positions for at least one new token; InputError else."""
    if positions is not None and prompt_tokens >= positions:
        raise InputError(
            f"the prompt is {prompt_tokens} tokens with the image or video; {model} reads at most {positions} "
            "positions: shorten the prompt, or use a smaller image or fewer frames"
        )


def with_current_names(values: Mapping[str, object], old_names: Mapping[str, str]) -> dict[str, object]:
    """Settings under their current names: a value under an old name is read under its new one, unless the
    new name is given too (it wins)."""
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
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())  # exact, however long
    return int(number) if number.is_integer() else value


def is_whole_in(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def shown(value: object, limit: int = 40) -> str:
    """A value as a sentence names it: a huge number by its digits' count, a long text cut."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return f"a {len(str(abs(value)))}-digit number"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
