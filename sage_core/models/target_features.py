"""A one-pass draft that reads the target's own features (PARD-2, AMD-AGI/PARD `pard/pard2_train.py`).

The target's verify forward already computes its hidden states; a draft may read some of them. The draft's config
declares which, under its one-pass key (`one_pass.py`):

    "one_pass_draft": {..., "target_features": {"layers": [1, 3, 5, 7], "file": "target_features.safetensors"}}

`layers` are the target's text decoder layers (0-based) whose outputs are read, concatenated in that order; `file`,
beside the config, holds one tensor, `weight` [draft width, len(layers) x target width]: a linear projection
(no bias). A token the draft reads gets `SCALE * weight @ features` added to its input embedding, where `features`
are the target's at the position before it: the token at position t gets the target's features at t - 1, the ones
that chose it (EAGLE, PARD-2), so every token the draft reads after its prompt has them once the verify that
accepted it is done (the first new token: the target's prefill's last position). The prompt and the one-pass
masks get none. A checkpoint trained with the features dropped for a tenth of its samples drafts with them or
without ("features off": nothing added).

Both ends go through forwards that may not run transformers' modules (`lean.py`), so neither is a module hook
alone: `recording(layers)` collects, for the forward run inside it, the chosen layers' outputs (a hook on each
decoder layer where transformers' forward runs, `record_layer` in the lean forward); `adding(rows)` makes the next
draft forwards inside it add `rows` to their input embeddings (`with_addition`: a hook on the input embedding
module, and the lean and fused forwards). Both are context variables: one run's features never reach another's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

#: The key, inside the one-pass declaration, of the target's features.
FEATURES_KEY = "target_features"
#: The projection's usual file name beside the config (a declaration may name another `.safetensors` file).
FEATURES_FILE = "target_features.safetensors"
#: The projection's output is scaled by this before it is added (PARD-2's 0.02), so a zero or small projection
#: starts the draft where it was.
SCALE = 0.02
#: The tensor the file holds.
WEIGHT = "weight"

_RECORDING: ContextVar[dict[int, list[torch.Tensor]] | None] = ContextVar("sage_target_features", default=None)
_ADDING: ContextVar[torch.Tensor | None] = ContextVar("sage_draft_embedding_addition", default=None)
_FEEDING: ContextVar[torch.Tensor | None] = ContextVar("sage_pending_features", default=None)


@dataclass(frozen=True, eq=False)
class TargetFeatures:
    """The target layers a draft reads and its projection [draft width, len(layers) x target width] (float32)."""

    layers: tuple[int, ...]
    weight: torch.Tensor
    _placed: dict[tuple[torch.device, torch.dtype], torch.Tensor] = field(default_factory=dict, init=False, repr=False)

    @property
    def width(self) -> int:
        """The draft's embedding width the projection writes."""
        return int(self.weight.shape[0])

    @property
    def target_width(self) -> int:
        """The target's hidden width each layer's features have."""
        return int(self.weight.shape[1]) // len(self.layers)

    def project(self, features: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """`SCALE * weight @ f` for each row of `features` [n, len(layers) x target width]: [n, draft width]."""
        key = (features.device, dtype)
        if key not in self._placed:
            self._placed[key] = self.weight.to(device=features.device, dtype=dtype)
        return SCALE * (features.to(dtype) @ self._placed[key].T)

    def save(self, path: Path | str) -> None:
        from safetensors.torch import save_file

        save_file({WEIGHT: self.weight.detach().float().contiguous().cpu()}, str(path))


def features_problem(declared: object) -> str | None:
    """What is wrong with a declaration's shape (None: `{"layers": [whole numbers >= 0, distinct],
    "file": a .safetensors name}`), as a clause."""
    if not isinstance(declared, dict) or set(declared) != {"layers", "file"}:
        return "it is not {'layers': [target layer indices], 'file': a .safetensors file beside its config}"
    layers, file = declared["layers"], declared["file"]
    whole = isinstance(layers, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in layers)
    if not whole or not layers or len(set(layers)) != len(layers):
        return "its layers are not a list of distinct target layer indices (whole numbers from 0)"
    if not (isinstance(file, str) and file.endswith(".safetensors") and Path(file).name == file):
        return "its file is not the name of a .safetensors file beside its config"
    return None


def load_features(path: Path, layers: Sequence[int], width: int) -> TargetFeatures | str:
    """The projection saved at `path` for `layers` and a draft of embedding width `width`, or what is wrong with
    it (one clause)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
    except (OSError, SafetensorError) as error:
        return f"its file {path.name} cannot be read ({type(error).__name__})"
    weight = tensors.get(WEIGHT)
    if weight is None or set(tensors) != {WEIGHT}:
        return f"its file {path.name} does not hold exactly one tensor named {WEIGHT!r}"
    if weight.dim() != 2 or not weight.is_floating_point():
        return f"its {WEIGHT} is not a 2-d float tensor"
    if weight.shape[0] != width:
        return f"its {WEIGHT} writes {weight.shape[0]} values, not the draft's embedding width {width}"
    if weight.shape[1] % len(layers) or not weight.shape[1]:
        return f"its {WEIGHT} reads {weight.shape[1]} values, not a whole number for each of its {len(layers)} layers"
    return TargetFeatures(tuple(layers), weight.float())


def target_problem(features: TargetFeatures, target: Any) -> str | None:
    """Why a target (a loaded `VLM`) cannot give a draft's features (None: it can): a layer it lacks, or another
    hidden width."""
    count = len(decoder_layers(target.spec.language_model(target.model)))
    width = int(target.model.get_input_embeddings().weight.shape[1])
    if max(features.layers) >= count:
        return f"it reads the target's layer {max(features.layers)} but the target has {count} text layers"
    if features.target_width != width:
        return f"it reads layers {features.target_width} wide but the target's are {width}"
    return None


def new_features(layers: Sequence[int], width: int, target_width: int) -> TargetFeatures:
    """A zero projection (it changes nothing until trained)."""
    return TargetFeatures(tuple(layers), torch.zeros(width, len(layers) * target_width))


def decoder_layers(language_model: Any) -> Sequence[Any]:
    """A text decoder's layers (`Family.language_model`'s)."""
    layers = getattr(language_model, "layers", None)
    return list(layers) if layers is not None else []


def hidden_width(model: Any) -> int:
    """A transformers model's text hidden width, from its config."""
    config = model.config
    text = getattr(config, "text_config", None) or config
    return int(getattr(text, "hidden_size", 0) or 0)


# -- the target's end: recording the chosen layers' outputs -----------------------------------------------------------


@contextmanager
def recording(layers: Sequence[int]) -> Iterator[dict[int, list[torch.Tensor]]]:
    """Collect, for the forwards run inside, each of `layers`' outputs ([1, n, width] each, in call order)."""
    found: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}
    token = _RECORDING.set(found)
    try:
        yield found
    finally:
        _RECORDING.reset(token)


def record_layer(index: int, hidden: torch.Tensor) -> None:
    """A forward's layer `index` has output `hidden`: kept when a recording asks for it (else nothing)."""
    found = _RECORDING.get()
    if found is not None and index in found:
        found[index].append(hidden.detach())


def recorded(found: dict[int, list[torch.Tensor]], layers: Sequence[int]) -> torch.Tensor:
    """The last recorded forward's features per token: [n, len(layers) x width] (float32), its last n tokens where
    a family's last layers read fewer rows than its first (a prompt's trailing rows only: Gemma 4's)."""
    outputs = [found[layer][-1][0] for layer in layers]
    rows = min(int(output.shape[0]) for output in outputs)
    return torch.cat([output[-rows:].float() for output in outputs], dim=-1)


def watch_layers(language_model: Any) -> None:
    """Hook each layer of a text decoder (once) so that a recording sees its output where transformers' forward
    runs."""
    for index, layer in enumerate(decoder_layers(language_model)):
        if not getattr(layer, "_sage_feature_hook", False):
            layer.register_forward_hook(_layer_hook(index))
            layer._sage_feature_hook = True


def _layer_hook(index: int) -> Any:
    def hook(module: Any, args: Any, output: Any) -> None:
        if _RECORDING.get() is not None:
            record_layer(index, output[0] if isinstance(output, tuple) else output)

    return hook


# -- the draft's end: adding the projected features to its input embeddings ------------------------------------------


@contextmanager
def adding(rows: torch.Tensor | None) -> Iterator[None]:
    """The draft forwards inside add `rows` [n, width] to the input embeddings of their n tokens (None: nothing)."""
    token = _ADDING.set(rows)
    try:
        yield
    finally:
        _ADDING.reset(token)


def with_addition(embedded: torch.Tensor) -> torch.Tensor:
    """Input embeddings ([1, n, width] or [n, width]) with the rows `adding` asks for added (unchanged outside it,
    or when the forward's tokens are not the rows')."""
    rows = _ADDING.get()
    if rows is None or embedded.shape[-2:] != rows.shape or embedded.dim() not in (2, 3):
        return embedded
    return embedded + rows.to(device=embedded.device, dtype=embedded.dtype)


@contextmanager
def feeding(features: torch.Tensor | None) -> Iterator[None]:
    """The draft rounds drafted inside read `features` [pending tokens, len(layers) x target width]: the
    target's features of the tokens the draft has not read yet (None: none, the lane with them off)."""
    token = _FEEDING.set(features)
    try:
        yield
    finally:
        _FEEDING.reset(token)


def fed_features() -> torch.Tensor | None:
    """The features `feeding` gives the rounds drafted inside (None: none)."""
    return _FEEDING.get()


def feature_rows(features: TargetFeatures | None, pending: int, fed: int) -> torch.Tensor | None:
    """What a one-pass round adds to the embeddings of its `fed` tokens, the first `pending` real (their projected
    features, from `feeding`), the rest masks (nothing); None where the draft reads no features or the loop
    gives none for these tokens."""
    given = fed_features()
    if features is None or given is None or given.shape[0] != pending:
        return None
    rows = features.project(given, given.dtype)
    return torch.cat((rows, rows.new_zeros(fed - pending, rows.shape[1])))


def watch_embeddings(model: Any) -> None:
    """Hook `model`'s input embedding module (once) so that `adding` reaches transformers' forward."""
    module = model.get_input_embeddings()
    if not getattr(module, "_sage_feature_hook", False):
        module.register_forward_hook(lambda _module, _args, output: with_addition(output))
        module._sage_feature_hook = True
