"""Configuration of the decoding methods (SAGE §3 and its baselines).

Every field carries the paper's default. Choices the paper leaves open are
marked *open* and documented where the field is defined.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from .backends import BACKENDS, Backend
from .errors import ConfigError, InputError, kind_of
from .method_settings import DynamicConfig, SageConfig, as_float, as_whole, in_range, read_number, shown
from .methods import Method, drafts, method_spec, specs

MIN_TEMPERATURE = 0.01
MAX_TEMPERATURE = 2.0
MAX_SAMPLING_TOP_K = 1_000_000
# Draft-side pruning keeps at least 5% of the visual tokens (the page's slider stops there too).
MAX_PRUNE_RATIO = 0.95


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
        temperature = in_range(self.temperature, 0.0, MAX_TEMPERATURE)
        if temperature is None or 0 < temperature < MIN_TEMPERATURE:
            problems.append(
                f"temperature must be 0 (greedy) or a number in [{MIN_TEMPERATURE:g}, {MAX_TEMPERATURE:g}] "
                "(near 0 the scaled logits overflow: transformers' generate fails at 1e-40; 0 is greedy), "
                f"not {shown(self.temperature)}"
            )
        top_p = in_range(self.top_p, 0.0, 1.0, above_low=True)
        if top_p is None:
            problems.append(f"top-p must lie in (0, 1], not {shown(self.top_p)}")
        top_k = in_range(self.top_k, 0, MAX_SAMPLING_TOP_K, whole=True)
        if top_k is None:
            problems.append(
                f"top-k must be an integer >= 0 (0 = off) and at most {MAX_SAMPLING_TOP_K}, not {shown(self.top_k)}"
            )
        seed = None if self.seed is None else in_range(self.seed, 0, 2**63 - 1, whole=True)
        if self.seed is not None and seed is None:
            problems.append(f"seed must be an integer in [0, 2**63), not {shown(self.seed)}")
        if problems:
            raise ConfigError("invalid sampling settings: " + "; ".join(problems))
        for name, value in (("temperature", temperature), ("top_p", top_p), ("top_k", top_k), ("seed", seed)):
            object.__setattr__(self, name, value)  # plain Python numbers (a numpy scalar becomes one)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True, init=False)
class DecodeConfig:
    """What to decode and how: the method, the token limit, every method's tree settings, greedy or sampled.

    The methods' settings travel one way: `method_settings`, (method name, settings object) pairs sorted
    by name, always holding SAGE's (`"sage"`, a `SageConfig`: SAGE's ablations and sage-cost read it too)
    and the dynamic tree's (`"dynamic"`; their registry entries are `carried`), and any other method's given; a
    method left out runs with its registry entry's defaults. `sage=` and `dynamic=` (constructor,
    `dataclasses.replace`) and `.sage` / `.dynamic` (reading) are the same mapping under the names callers use.
    """

    method: Method
    max_new_tokens: int
    # The draft's candidates per node for the static and chain templates (their
    # largest rank is 3, so 10 is plenty).
    template_candidates: int
    backend: Backend
    # Either half of the backend preset replaced (backends.py): a cache strategy ("in-place", "growing",
    # or one registered) and a forward ("transformers", "lean", "fused", "compiled", or one registered).
    cache: str | None
    forward: str | None
    # Draft-side visual token pruning (SpecVLM; pruning.py): the share of the
    # visual tokens the draft does not read (0 = off; the paper prunes 0.8 of an
    # image's, 0.9 of a video's). The target always reads them all.
    prune_ratio: float
    # SpecVLM's stage I: keep the most-attended visual tokens until they hold
    # this share of the attention mass; the rest of the budget is spread evenly.
    prune_attention_share: float
    sampling: SamplingConfig
    # Every method's settings by method name (see above).
    method_settings: tuple[tuple[str, Any], ...]

    def __init__(  # noqa: PLR0913 (the dataclass's own fields, with sage= and dynamic= for the mapping)
        self,
        method: Method = "sage",
        max_new_tokens: int = 128,
        sage: SageConfig | None = None,
        template_candidates: int = 10,
        backend: Backend = "fast",
        cache: str | None = None,
        forward: str | None = None,
        prune_ratio: float = 0.0,
        prune_attention_share: float = 0.4,
        sampling: SamplingConfig | None = None,
        dynamic: DynamicConfig | None = None,
        method_settings: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        given = {
            "method": method,
            "max_new_tokens": max_new_tokens,
            "template_candidates": template_candidates,
            "backend": backend,
            "cache": cache,
            "forward": forward,
            "prune_ratio": prune_ratio,
            "prune_attention_share": prune_attention_share,
            "sampling": SamplingConfig() if sampling is None else sampling,
        }
        for name, value in given.items():
            object.__setattr__(self, name, value)
        if sage is not None:
            check_part("sage", sage, SageConfig, "SageConfig(depth_max=...)")
        if dynamic is not None:
            check_part("dynamic", dynamic, DynamicConfig, "DynamicConfig(depth=...)")
        check_method_settings(method_settings)
        by_method = {spec.name: spec.default_settings() for spec in specs() if spec.carried}
        by_method.update({method_spec(name).name: settings for name, settings in method_settings})
        by_method.update(_given(sage=sage, dynamic=dynamic))
        object.__setattr__(self, "method_settings", tuple(sorted(by_method.items())))
        self.__post_init__()

    def __post_init__(self) -> None:
        check_part("sampling", self.sampling, SamplingConfig, "SamplingConfig(temperature=...)")
        method_spec(self.method)  # one clear error for an unknown method (or one that is no name)
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {shown(self.backend)}; choose one of {', '.join(BACKENDS)}")
        for name, value in (("cache", self.cache), ("forward", self.forward)):
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{name} must be the name of a registered {name} (backends.py), not {shown(value)}")
        for name, number in settled_numbers(self).items():
            object.__setattr__(self, name, number)  # plain Python numbers (a numpy scalar becomes one)
        if self.prune_ratio > 0 and not drafts(self.method):
            raise ConfigError(
                f"pruning removes visual tokens from the draft's prompt; method {self.method!r} has no draft"
            )

    @property
    def sage(self) -> SageConfig:
        """SAGE's tree policy (`method_settings["sage"]`)."""
        settings: SageConfig = dict(self.method_settings)["sage"]
        return settings

    @property
    def dynamic(self) -> DynamicConfig:
        """The dynamic tree's settings, EAGLE-2's defaults unless given (`method_settings["dynamic"]`)."""
        settings: DynamicConfig = dict(self.method_settings)["dynamic"]
        return settings

    def settings_for(self, method: str | None = None) -> Any:
        """The settings of `method` (default: this run's) as this configuration carries them, else its
        registry entry's defaults; None for a method without settings."""
        spec = method_spec(method or self.method)
        return dict(self.method_settings).get(spec.name, spec.default_settings())

    def with_settings(self, by_method: Mapping[str, Any]) -> DecodeConfig:
        """This configuration carrying the given settings (method name -> settings object; None for a
        method without settings is skipped)."""
        given = {method_spec(m).name: s for m, s in by_method.items() if method_spec(m).settings is not None}
        return replace(self, method_settings=tuple(sorted({**dict(self.method_settings), **given}.items())))

    def settings_record(self) -> dict[str, dict[str, Any]]:
        """Every method's settings this configuration carries, as the run header records them (`settings`):
        SAGE's, the dynamic tree's, any given, and this run's own method's (its defaults when not given)."""
        carried = dict(self.method_settings)
        own = self.settings_for()
        if own is not None:
            carried.setdefault(method_spec(self.method).name, own)
        return {name: asdict(settings) for name, settings in sorted(carried.items())}


def _given(**settings: Any) -> dict[str, Any]:
    """The settings given by their keywords (`DecodeConfig(sage=..., dynamic=...)`), by method name."""
    return {name: value for name, value in settings.items() if value is not None}


MAX_NEW_TOKENS_LIMIT = 4096


def check_method_settings(given: object) -> None:
    """`DecodeConfig.method_settings`: (method name, its settings object) pairs in a tuple, each object of the
    class the method's registry entry names; one ConfigError naming the field else."""
    if not isinstance(given, tuple) or not all(isinstance(pair, tuple) and len(pair) == 2 for pair in given):
        raise ConfigError(
            "DecodeConfig's method_settings must be a tuple of (method name, settings) pairs, not "
            f"{kind_of(given)}: pass DecodeConfig(...).with_settings({{name: settings}})"
        )
    for name, settings in given:
        kind = method_spec(name).settings
        if kind is None or not isinstance(settings, kind):
            raise ConfigError(f"the settings given for {name!r} are not the ones its registry entry names")


def settled_numbers(config: DecodeConfig) -> dict[str, Any]:
    """`DecodeConfig`'s numbers, each checked (`in_range`) and as a plain Python number; one ConfigError
    naming the first that is not in its range."""
    tokens = in_range(config.max_new_tokens, 1, MAX_NEW_TOKENS_LIMIT, whole=True)
    if tokens is None:
        raise ConfigError(
            f"max new tokens must be a whole number in [1, {MAX_NEW_TOKENS_LIMIT}], not {shown(config.max_new_tokens)}"
        )
    candidates = in_range(config.template_candidates, 4, 20, whole=True)
    if candidates is None:
        raise ConfigError(
            f"template_candidates must be a whole number in [4, 20], not {shown(config.template_candidates)}"
        )
    ratio = read_number(config.prune_ratio)
    if ratio is None:
        raise ConfigError(f"prune_ratio must be a number in [0, 1), not {shown(config.prune_ratio)}")
    share = in_range(config.prune_attention_share, 0.0, 1.0)
    if share is None:
        raise ConfigError(
            f"prune_attention_share must be a number in [0, 1], not {shown(config.prune_attention_share)}"
        )
    return {
        "max_new_tokens": tokens,
        "template_candidates": candidates,
        "prune_ratio": check_prune_ratio(ratio),
        "prune_attention_share": share,
    }


def check_max_new_tokens(value: object, limit: int = MAX_NEW_TOKENS_LIMIT) -> int:
    """The token limit as a whole number in [1, limit] (a form's "12" or 12.0 included); ConfigError else."""
    number = in_range(as_whole(value), 1, limit, whole=True)
    if number is None:
        raise ConfigError(f"max new tokens must be a whole number in [1, {limit}], not {shown(value)}")
    return int(number)


def check_prune_ratio(value: object) -> float:
    """The pruning ratio as a number in [0, MAX_PRUNE_RATIO] (a form's "0.5" included); ConfigError else."""
    ratio = as_float(value)
    if ratio is None:
        raise ConfigError(f"the pruning ratio must be a number in [0, 1), not {shown(value)}")
    if not 0.0 <= ratio <= MAX_PRUNE_RATIO:
        raise ConfigError(
            f"the pruning ratio must lie in [0, 1) and be at most {MAX_PRUNE_RATIO:g} (the draft reads at least "
            f"{1 - MAX_PRUNE_RATIO:.0%} of the visual tokens), not {shown(value)}"
        )
    return ratio


def check_positions(prompt_tokens: int, positions: int | None, model: str = "the model") -> None:
    """A prompt that leaves room in the model's positions for at least one new token; InputError else."""
    if positions is not None and prompt_tokens >= positions:
        raise InputError(
            f"the prompt is {prompt_tokens} tokens with the image or video; {model} reads at most {positions} "
            "positions: shorten the prompt, or use a smaller image or fewer frames"
        )


def check_part(name: str, value: object, wanted: type, example: str) -> None:
    """`DecodeConfig`'s part `name` must be a `wanted` (a dict is told how to make one)."""
    if isinstance(value, wanted):
        return
    how = f"{wanted.__name__}(**that_dict)" if isinstance(value, dict) else example
    raise ConfigError(f"DecodeConfig's {name} must be a sage_core {wanted.__name__}, not {kind_of(value)}: pass {how}")
