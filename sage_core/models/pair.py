"""A target and its draft: loaded, checked to share a tokenizer, and whether their processors are alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Unpack

import torch

from ..errors import InputError, ModelLoadError, PairMismatchError, kind_of
from .loading import source
from .target_features import target_problem
from .vlm import VLM


@dataclass(frozen=True)
class ModelPair:
    """A target and its draft, checked to share a tokenizer.

    `inputs_alike`: the two processors are the same (`processors_alike`), so the target's
    prepared inputs serve the draft as well and the draft's processor need not run."""

    target: VLM
    draft: VLM
    inputs_alike: bool = False

    @property
    def shared_vocab_size(self) -> int:
        """Rows of the draft's logits that name real tokens of both models."""
        return min(self.target.vocab_size, self.draft.vocab_size, len(self.target.tokenizer))

    @property
    def device(self) -> torch.device:
        return self.target.device

    @property
    def devices(self) -> tuple[torch.device, ...]:
        """Every device either model's weights sit on."""
        return tuple(dict.fromkeys((*self.target.devices, *self.draft.devices)))


def check_method(pair: ModelPair, method: str, prune_ratio: float = 0.0) -> None:
    """Refuse, in one sentence, what one of the models cannot run: draft-side pruning on a family whose
    pruning hooks are not written, or weights that left the device the model was loaded on."""
    models = (("target", pair.target),) if method == "ar" else (("target", pair.target), ("draft", pair.draft))
    for role, model in models:
        check_placement(model, role)
        if prune_ratio > 0 and not model.spec.prunable:
            raise InputError(f"visual token pruning is not available for {model.family} models yet; turn pruning off")


def check_placement(model: VLM, role: str) -> None:
    """Refuse (ModelLoadError) a model whose weights are not where it was loaded: moved to the `meta` device
    (no values: a forward fails with a raw device error) or to a device it was not loaded on (its inputs go
    to the loading device). A model placed by accelerate (a device map) is left alone: its hooks move the
    weights, and an offloaded weight sits on `meta` by design."""
    torch_model = model.model
    if not isinstance(torch_model, torch.nn.Module):  # a stand-in without weights (the test kit's toy pair)
        return
    if any(hasattr(module, "_hf_hook") for module in torch_model.modules()):
        return
    tensors = (*torch_model.parameters(), *torch_model.buffers())
    if any(tensor.device.type == "meta" for tensor in tensors):
        raise ModelLoadError(
            f"the {role} {model.name!r} has weights on the meta device (moved there, or never loaded), so it "
            "cannot compute: load the pair again with load_pair(...)"
        )
    moved = sorted({str(p.device) for p in torch_model.parameters()} - {str(d) for d in model.devices})
    if moved:
        loaded = ", ".join(sorted(str(d) for d in model.devices))
        raise ModelLoadError(
            f"the {role} {model.name!r} was loaded on {loaded} but has weights on {', '.join(moved)} now: "
            "move it back, or load the pair again with load_pair(device=...)"
        )


def check_pair(target: VLM, draft: VLM) -> ModelPair:
    """Refuse a draft whose tokenizer differs from the target's."""
    if target.tokenizer.get_vocab() != draft.tokenizer.get_vocab():
        raise PairMismatchError(
            f"the draft {draft.name!r} and the target {target.name!r} use different tokenizers; "
            "speculative decoding needs a draft of the same tokenizer (same family)"
        )
    features = draft.one_pass.features if draft.one_pass is not None else None
    problem = target_problem(features, target) if features is not None else None
    if problem is not None:  # a draft reading target layers this target does not have, or of another width
        raise PairMismatchError(f"the draft {draft.name!r} reads the target's features but {problem}: use its target")
    return ModelPair(target, draft, inputs_alike=processors_alike(target.processor, draft.processor))


#: Tokenizer settings that do not change what it makes of a prompt: where it was loaded from, and
#: the length it warns beyond (`processor_inputs` never truncates).
_TOKENIZER_IGNORED = frozenset(
    {"name_or_path", "_commit_hash", "tokenizer_file", "vocab_file", "merges_file", "model_max_length"}
)


def processors_alike(first: Any, second: Any) -> bool:
    """Whether two processors turn every prompt and medium into the same tensors.

    Compared: the processor's class and its serialised settings (image and video processors
    included), the chat template, and the tokenizer's class, its full serialisation (vocabulary,
    merges, normaliser, pre- and post-processing, added tokens) and its settings. A slow
    tokenizer (no serialisation to compare) or any difference counts as not alike: the only cost
    of a wrong "no" is one more processor pass.
    """
    if first is second:
        return True
    if type(first) is not type(second) or getattr(first, "chat_template", None) != getattr(
        second, "chat_template", None
    ):
        return False
    try:
        if first.to_dict() != second.to_dict():
            return False
    except (AttributeError, TypeError, ValueError):
        return False
    one: Any = getattr(first, "tokenizer", None)
    two: Any = getattr(second, "tokenizer", None)
    if getattr(one, "backend_tokenizer", None) is None or getattr(two, "backend_tokenizer", None) is None:
        return False
    if type(one) is not type(two) or one.backend_tokenizer.to_str() != two.backend_tokenizer.to_str():
        return False

    def settings(tokenizer: Any) -> dict[str, Any]:
        return {k: v for k, v in tokenizer.init_kwargs.items() if k not in _TOKENIZER_IGNORED}

    return settings(one) == settings(two)


class Placement(TypedDict, total=False):
    """accelerate's placement of the target, as `load_pair` takes it (its keywords; see `VLM.load`)."""

    device_map: str | None
    max_memory: Mapping[str, str] | None
    offload_folder: str | None


def load_pair(
    target: str = "builtin",
    draft: str = "builtin",
    device: str = "auto",
    dtype: str = "auto",
    *,
    draft_device: str | None = None,
    report: Callable[[str], None] | None = None,
    **placement: Unpack[Placement],
) -> ModelPair:
    """Load and check a target and its draft (each by hub id or local folder).

    The target may be placed by accelerate (the keywords `device_map`, `max_memory`,
    `offload_folder`: `Placement`, see `VLM.load`); the draft sits on `draft_device`
    (default: `device`). The two models exchange only token ids, so they may
    sit on different devices. `report` is told each stage as it starts.
    """
    unknown = [name for name in placement if name not in Placement.__annotations__]
    if unknown:
        raise TypeError(f"load_pair() got an unexpected keyword argument {unknown[0]!r}")
    check_load_arguments(target, draft, device, dtype)
    say = report or (lambda stage: None)
    say(f"loading the target {target} ({source(target, 'target')})")
    where = (placement.get("device_map"), placement.get("max_memory"), placement.get("offload_folder"))
    loaded_target = VLM.load(target, "target", device, dtype, *where)
    say(f"loading the draft {draft} ({source(draft, 'draft')})")
    return check_pair(loaded_target, VLM.load(draft, "draft", draft_device or device, dtype))


def with_draft(pair: ModelPair, draft: str, report: Callable[[str], None] | None = None) -> ModelPair:
    """The pair's target (the same object: its weights are not loaded again) with another draft (a hub id or a
    folder), loaded on the device and in the dtype of the pair's draft, checked to share its tokenizer."""
    dtype = str(pair.draft.dtype).removeprefix("torch.")
    check_load_arguments(pair.target.name, draft, "auto", dtype)
    (report or (lambda stage: None))(f"loading the draft {draft} ({source(draft, 'draft')})")
    return check_pair(pair.target, VLM.load(draft, "draft", str(pair.draft.device), dtype))


def check_load_arguments(target: Any, draft: Any, device: Any, dtype: Any) -> None:
    """`load_pair`'s models (a hub id or a folder) and its device and dtype names."""
    for name, value in (("target", target), ("draft", draft)):
        if not isinstance(value, str | Path) or not str(value).strip():
            raise InputError(f"the {name} must be a hub id or a folder (a str or a Path), not {kind_of(value)}")
    for name, value in (("device", device), ("dtype", dtype)):
        if not isinstance(value, str):
            raise InputError(f"{name} must be a name (a str such as 'auto'), not {kind_of(value)}")
