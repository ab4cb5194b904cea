"""SAGE behind transformers' `generate()`: what `custom_generate/generate.py` runs.

    output = target.generate(**inputs, assistant_model=draft, custom_generate="<this repository>",
                             trust_remote_code=True, do_sample=False, max_new_tokens=64)

`inputs` are the target processor's tensors for one prompt (batch of one); the draft reads the
same tensors, as transformers' assisted generation has it, so it needs the target's processor
(a draft of the same family). The output is what greedy `generate()` returns (the prompt's ids
followed by the new ones, or a `GenerateDecoderOnlyOutput` with `return_dict_in_generate=True`),
equal token for token to `target.generate(**inputs, do_sample=False, max_new_tokens=64)`.

SAGE's settings are keyword arguments with the paper's defaults: `method` (any registered method:
"sage", "static", "chain", "ar", ...), `backend`, `prune_ratio`, `sage_config` (a `SageConfig`, or a
dict of its fields) and any of its fields by name with a `sage_` prefix (`sage_depth_max=8`,
`sage_candidates=10`, ...; the prefix keeps them apart from `generate()`'s own `top_k`; they apply
over `sage_config`). Another method's settings go by the names the command line and the app give them
(`method="sage-frozen", frozen_alpha=0.5`; `method="dynamic", dynamic_depth=4`). Settings that would
make plain `generate()` pick other tokens than the target's argmax (sampling, beams, repetition
penalties, logits processors, stopping criteria) are refused with one sentence: SAGE here is greedy
and lossless. A keyword that neither `generate()` nor the model reads (a typo) is refused, as plain
`generate()` refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from .config import Backend, DecodeConfig
from .decode import DecodeRun
from .errors import GenerateError, kind_of
from .media import Media
from .method_settings import OLD_SAGE_NAMES, SageConfig, shown
from .methods import drafts, is_method, method_spec, registered_names, specs
from .models import FAMILIES, VLM, check_pair
from .models.loading import input_device
from .prepared import PreparedInputs

SAGE_PREFIX = "sage_"
# generate()'s arguments and generation-config fields that change which token greedy decoding picks,
# with the value that leaves it alone.
_NEUTRAL = {
    "num_beams": 1,
    "num_beam_groups": 1,
    "penalty_alpha": None,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "bad_words_ids": None,
    "min_length": 0,
    "min_new_tokens": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "sequence_bias": None,
    "guidance_scale": None,
    "exponential_decay_length_penalty": None,
    "dola_layers": None,
    "watermarking_config": None,
    "stop_strings": None,
    "max_time": None,
    "prompt_lookup_num_tokens": None,
}


class _GivenInputs(Media):
    """The run's record of its medium: tensors handed to generate(), not a file."""

    def describe(self) -> str:
        return "inputs given to generate()"


@dataclass(frozen=True)
class _TokenizerOnly:
    """What the decode loop reads of a processor when the inputs are already made: its tokenizer."""

    tokenizer: Any


def generate(  # noqa: PLR0913  (transformers' generate() signature, which a custom_generate must take)
    model: Any,
    inputs: torch.Tensor | None = None,
    generation_config: Any = None,
    logits_processor: Any = None,
    stopping_criteria: Any = None,
    prefix_allowed_tokens_fn: Any = None,
    synced_gpus: bool | None = None,
    assistant_model: Any = None,
    streamer: Any = None,
    negative_prompt_ids: torch.Tensor | None = None,
    negative_prompt_attention_mask: torch.Tensor | None = None,
    method: str = "sage",
    backend: Backend = "fast",
    prune_ratio: float = 0.0,
    sage_config: SageConfig | Mapping[str, Any] | None = None,
    tokenizer: Any = None,
    assistant_tokenizer: Any = None,
    **kwargs: Any,
) -> Any:
    """Decode one prompt with SAGE (or a baseline) and return what greedy `generate()` returns."""
    if logits_processor or stopping_criteria or prefix_allowed_tokens_fn is not None or negative_prompt_ids is not None:
        raise GenerateError("SAGE's generate() is greedy and lossless: it takes no logits processors or stop criteria")
    del synced_gpus, negative_prompt_attention_mask  # one process, no guidance: nothing to do with them
    if not is_method(method):
        raise GenerateError(f"unknown method {shown(method)}; choose one of {', '.join(registered_names())}")
    sage = _sage_config(sage_config, kwargs)
    own_settings = _method_settings(method, kwargs)
    config, model_inputs = _generation_config(model, generation_config, kwargs)
    _check_known(model, model_inputs, method)
    _check_greedy(config, model.generation_config)
    _check_plain_output(config, model_inputs)
    if inputs is not None:
        model_inputs["input_ids"] = inputs
    input_ids = model_inputs.get("input_ids")
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise GenerateError("SAGE's generate() takes input_ids for one prompt: a (1, length) tensor")
    mask = model_inputs.get("attention_mask")
    if isinstance(mask, torch.Tensor) and not bool(mask.all()):
        raise GenerateError("SAGE's generate() takes one unpadded prompt: the attention mask must be all ones")
    max_new = config.max_new_tokens if config.max_new_tokens is not None else config.max_length - input_ids.shape[1]
    if drafts(method) and assistant_model is None:
        raise GenerateError(f"method {method!r} drafts: pass the draft model as assistant_model")
    decode_config = DecodeConfig(method, max_new, sage, backend=backend, prune_ratio=prune_ratio)
    if own_settings is not None:
        decode_config = decode_config.with_settings({method: own_settings})
    target = _vlm(model, tokenizer, "target")
    draft = _vlm(assistant_model, assistant_tokenizer or tokenizer, "draft") if assistant_model is not None else target
    pair = check_pair(target, draft)
    media = _GivenInputs(kind="video" if "pixel_values_videos" in model_inputs else "image", name="inputs")
    on_target = {k: v.to(target.device) if isinstance(v, torch.Tensor) else v for k, v in model_inputs.items()}
    on_draft = {k: v.to(draft.device) if isinstance(v, torch.Tensor) else v for k, v in model_inputs.items()}
    prepared = PreparedInputs(media, "", on_target, on_draft if method != "ar" else None, 0.0, 0.0)
    run = DecodeRun(pair, media, "", decode_config, prepared)
    return _decoded(run, input_ids, streamer, bool(config.return_dict_in_generate))


def _decoded(run: DecodeRun, input_ids: torch.Tensor, streamer: Any, return_dict: bool) -> Any:
    """Run the decode, the new tokens streamed as they come; the prompt and its answer as `generate()`
    returns them."""
    if streamer is not None:
        streamer.put(input_ids.cpu())
    new_tokens: list[int] = []
    for record in run:
        new_tokens.extend(record.new_tokens)
        if streamer is not None and record.new_tokens:
            streamer.put(torch.tensor(record.new_tokens))
    if streamer is not None:
        streamer.end()
    added = torch.tensor([new_tokens], dtype=input_ids.dtype, device=input_ids.device)
    sequences = torch.cat([input_ids, added], dim=1)
    if return_dict:
        from transformers.generation.utils import GenerateDecoderOnlyOutput

        return GenerateDecoderOnlyOutput(sequences=sequences)  # type: ignore[arg-type]  # transformers types it a LongTensor
    return sequences


def _sage_config(given: object, kwargs: dict[str, Any]) -> SageConfig:
    """`sage_config` (a `SageConfig`, or a dict of its fields), or the paper's defaults, with the `sage_*`
    keyword arguments applied (taken out of kwargs); an unknown name or a wrong type in one sentence."""
    names = {f.name for f in fields(SageConfig)}
    if given is None:
        base = SageConfig()
    elif isinstance(given, SageConfig):
        base = given
    elif isinstance(given, Mapping):
        for key in given:
            _check_sage_name(key, names, f"{shown(key)} in sage_config")
        base = SageConfig(**{str(key): value for key, value in given.items()})
    else:
        raise GenerateError(
            f"sage_config must be a sage_core SageConfig or a dict of its fields, not {kind_of(given)}: "
            "pass sage_config=SageConfig(depth_max=...) or sage_config={'depth_max': ...}"
        )
    changes = {}
    for key in [k for k in kwargs if k.startswith(SAGE_PREFIX)]:
        name = key.removeprefix(SAGE_PREFIX)
        _check_sage_name(name, names, repr(key), prefix=SAGE_PREFIX)
        changes[name] = kwargs.pop(key)
    return replace(base, **changes) if changes else base


def _check_sage_name(name: object, names: set[str], said: str, prefix: str = "") -> None:
    """Refuse a name that is not a `SageConfig` field (an old one named with its new name)."""
    if isinstance(name, str) and name in OLD_SAGE_NAMES:  # top_k: now candidates
        new = prefix + OLD_SAGE_NAMES[name]
        raise GenerateError(f"{said} is the old name of SAGE's {new!r}, no longer read: pass {new!r} instead")
    if not isinstance(name, str) or name not in names:
        listed = ", ".join(prefix + n for n in sorted(names))
        raise GenerateError(f"unknown SAGE setting {said}; the settings are {listed}")


def _method_settings(method: str, kwargs: dict[str, Any]) -> Any:
    """The settings of a method other than SAGE by their registry names, as the command line and the app
    name them (`frozen_alpha=0.5` for sage-frozen, `dynamic_depth=4` for the dynamic tree), taken out of
    kwargs; None when the method has none of its own here (SAGE's are `sage_config` and `sage_*`)."""
    spec = method_spec(method)
    if spec.settings is None or spec.name == "sage":
        return None
    given = {s.name: kwargs.pop(s.name) for s in spec.controls if s.name in kwargs}
    return spec.settings_from(given) if given else None


def _check_known(model: Any, model_inputs: dict[str, Any], method: str) -> None:
    """Refuse keyword arguments neither generate() nor the model takes, as transformers' generate() does
    (its `_validate_model_kwargs`: a typo is never dropped in silence); a setting of SAGE or of another
    method named the way this call cannot take it gets its own sentence."""
    unknown = []
    for key, value in model_inputs.items():
        try:
            model._validate_model_kwargs({key: value})
        except ValueError:
            unknown.append(key)
    if not unknown:
        return
    sage_names = {f.name for f in fields(SageConfig)}
    for key in unknown:
        owner = next((spec for spec in specs() for s in spec.controls if s.name == key), None)
        if key in sage_names:
            raise GenerateError(f"SAGE's settings are passed with a {SAGE_PREFIX!r} prefix: pass {SAGE_PREFIX}{key}")
        if owner is not None and owner.name != method:
            raise GenerateError(
                f"{key!r} is a setting of method {owner.name!r}, and this call runs {method!r}: "
                f"pass method={owner.name!r}"
            )
    raise GenerateError(
        f"generate() does not take {', '.join(map(repr, unknown))} (neither generate() nor the model reads "
        "it; typos are refused as plain generate() refuses them)"
    )


def _generation_config(model: Any, given: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The generation config as transformers' generate() makes it (a `GenerationConfig` given: its unset fields
    from the checkpoint's config, then the global defaults; keyword arguments last), and the model's inputs."""
    from transformers import GenerationConfig

    if given is not None and not isinstance(given, GenerationConfig):
        raise GenerateError(f"generation_config must be a transformers GenerationConfig, not {type(given).__name__}")
    return model._prepare_generation_config(given, **kwargs)


def _check_greedy(config: Any, model_config: Any) -> None:
    """Refuse what would make plain generate() choose other tokens than the target's argmax."""
    for name, neutral in (("do_sample", False), *_NEUTRAL.items()):
        value = getattr(config, name, neutral)
        if value is not None and value != neutral and value not in ([], {}):
            raise GenerateError(_not_greedy(name, value, getattr(model_config, name, neutral)))
    if config.eos_token_id != model_config.eos_token_id:
        raise GenerateError("SAGE's generate() stops at the model's own end of sequence: leave eos_token_id unset")


def _not_greedy(name: str, value: Any, checkpoint_value: Any) -> str:
    source = "the checkpoint's generation config sets" if value == checkpoint_value else "the call sets"
    return (
        f"SAGE's generate() is greedy and lossless, and {source} {name}={value!r}: pass do_sample=False, "
        "repetition_penalty=1.0 (and leave the other non-greedy settings unset) to decode greedily"
    )


#: generate() outputs the decode loop does not keep (it verifies a tree per forward, not one token).
_NOT_KEPT = ("output_scores", "output_logits", "output_attentions", "output_hidden_states")


def _check_plain_output(config: Any, model_inputs: dict[str, Any]) -> None:
    """Refuse outputs SAGE does not fill and caches it does not take, each in one sentence."""
    wanted = [name for name in _NOT_KEPT if getattr(config, name, False)]
    if wanted:
        raise GenerateError(
            f"SAGE's generate() returns the tokens only, not {', '.join(wanted)}: call plain generate() with "
            "do_sample=False for them (its tokens are the same)"
        )
    if any(model_inputs.get(name) is not None for name in ("past_key_values", "cache")):
        raise GenerateError("SAGE's generate() builds its own caches from the prompt: leave past_key_values unset")


def _vlm(model: Any, tokenizer: Any, role: str) -> VLM:
    """A model handed to generate() as the decode loop's VLM (its tokenizer loaded from its folder if not given)."""
    family = model.config.model_type
    if family not in FAMILIES:
        raise GenerateError(f"the {role} is a {family!r} model; supported families: {', '.join(FAMILIES)}")
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model.name_or_path)
    tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor: its tokenizer
    return VLM(str(model.name_or_path), model, _TokenizerOnly(tokenizer), input_device(model))
