"""The model adapter: everything model-specific lives here.

It loads a target or a draft by hub id or local folder (the same
`from_pretrained` path for both), builds the prompt with the processor's chat
template (the image or video first, then the text), runs the prefill exactly
as `generate` does (keeping only the last position's logits), and runs tree
forwards: an additive float mask built on the device from parent indices (a
bool mask is silently wrong under eager attention), positions = sequence
index + depth, plus the M-RoPE `rope_deltas` for the Qwen families, and the
KV cache (`kvcache.py`: grown in place) compacted to the accepted path by
moving only the rows out of place. The decoding algorithm never touches
cache internals; it calls `prefill`, `extend` and `commit`.
"""

from __future__ import annotations

import functools
import gc
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import numpy as np
import torch
from transformers import AutoConfig, AutoProcessor, DynamicCache

from .config import check_prompt
from .errors import InputError, MediaError, ModelLoadError, PairMismatchError
from .kvcache import growing_cache, move_rows
from .lean import LeanText
from .media import Media

# A checkout keeps assets/ beside the package; `pip install .` puts it inside as sage_core/assets.
_CHECKOUT_ASSETS = Path(__file__).resolve().parent.parent / "assets"
ASSETS = _CHECKOUT_ASSETS if (_CHECKOUT_ASSETS / "builtin").is_dir() else Path(__file__).resolve().parent / "assets"
BUILTIN_TARGET = ASSETS / "builtin" / "target"
BUILTIN_DRAFT = ASSETS / "builtin" / "draft"

# model_type -> (model class in transformers, uses M-RoPE rope_deltas)
FAMILIES: dict[str, tuple[str, bool]] = {
    "qwen2_vl": ("Qwen2VLForConditionalGeneration", True),
    "qwen2_5_vl": ("Qwen2_5_VLForConditionalGeneration", True),
    "qwen3_vl": ("Qwen3VLForConditionalGeneration", True),
    "llava_onevision": ("LlavaOnevisionForConditionalGeneration", False),
}
# The Qwen processors refuse images and frames whose long side is more than 200 times the short one
# (`smart_resize`); the limit is checked for every family, before any processor runs.
MAX_ASPECT_RATIO = 200


def resolve_device(device: str) -> torch.device:
    """'auto' picks CUDA when it is there, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError("--device cuda was asked for, but no CUDA GPU is available")
    if device != "cpu" and not device.startswith("cuda"):
        raise InputError(f"unknown device {device!r}; use auto, cpu or cuda")
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """'auto' is float32 on the CPU and bfloat16 on CUDA."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    choices = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in choices:
        raise InputError(f"unknown dtype {dtype!r}; use auto, float32, bfloat16 or float16")
    return choices[dtype]


def resolve_name(name: str, role: str) -> str:
    """'builtin' names the project's own trained pair under assets/builtin."""
    if name == "builtin":
        return str(BUILTIN_TARGET if role == "target" else BUILTIN_DRAFT)
    return name


_P = ParamSpec("_P")
_R = TypeVar("_R")


def inference(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """`torch.inference_mode()` for a per-round call, entered only when it is not on already: the
    decode loop turns it on once per round, and each entry costs tens of microseconds on a small CPU."""

    @functools.wraps(function)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if torch.is_inference_mode_enabled():
            return function(*args, **kwargs)
        with torch.inference_mode():
            return function(*args, **kwargs)

    return run


@dataclass
class KVState:
    """One model's cache in one run.

    The cache holds `committed` positions of the output sequence, then
    `scratch` entries for tree nodes that are not (yet) committed.
    `position_offset` is the M-RoPE delta of the Qwen families (0 else).
    `scratch_rows` says which scratch entries each scratch entry sees (its
    ancestors and itself): a (scratch, scratch) bool tensor on the device, or
    None while there is no scratch.
    """

    cache: DynamicCache
    committed: int
    position_offset: int
    scratch: int = 0
    scratch_rows: torch.Tensor | None = None


class VLM:
    """A loaded vision-language model with its processor."""

    def __init__(self, name: str, model: Any, processor: Any, device: torch.device) -> None:
        self.name = name
        self.model = model
        self.processor = processor
        self.device = device  # where its inputs go (the first layers' device)
        # every device its weights sit on (several under a device map)
        self.devices: tuple[torch.device, ...] = tuple(
            sorted({p.device for p in model.parameters() if p.device.type != "meta"} | {device}, key=str)
        )
        self.family = model.config.model_type
        self.uses_rope_deltas = FAMILIES[self.family][1]
        self.dtype: torch.dtype = next(model.parameters()).dtype
        self.vocab_size: int = model.get_output_embeddings().weight.shape[0]
        _check_full_attention(model.config, name)
        # the decode-time text forward without transformers' module machinery, where it is safe (lean.py)
        self.lean: LeanText | None = LeanText.of(model)

    @classmethod
    def load(
        cls,
        name: str,
        role: str = "target",
        device: str = "auto",
        dtype: str = "auto",
        device_map: str | None = None,
        max_memory: Mapping[str, str] | None = None,
        offload_folder: str | None = None,
    ) -> VLM:
        """Load by hub id or local folder; the same path for targets and drafts.

        `device_map` ("auto", "balanced", ...) hands the placement to accelerate,
        for a model that does not fit one device: spread over several GPUs, or
        partly offloaded to the CPU (`max_memory`, e.g. {"0": "70GiB", "cpu":
        "200GiB"}) or to disk (`offload_folder`). Without it the whole model
        sits on `device`.
        """
        import transformers

        path = resolve_name(name, role)
        torch_device = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, torch_device)
        placement: dict[str, Any] = {"device_map": str(torch_device)}
        if device_map is not None:
            placement = {
                "device_map": device_map,
                "max_memory": _memory_map(max_memory),
                "offload_folder": offload_folder,
            }
        try:
            config = AutoConfig.from_pretrained(path)
        except (OSError, ValueError) as error:
            raise ModelLoadError(f"cannot load the {role} model {name!r}: {_first_line(error)}") from error
        if config.model_type not in FAMILIES:
            raise ModelLoadError(
                f"the {role} model {name!r} is a {config.model_type!r} model; supported families: {', '.join(FAMILIES)}"
            )
        model_class = getattr(transformers, FAMILIES[config.model_type][0])
        try:
            model = model_class.from_pretrained(path, dtype=torch_dtype, **placement)
            processor = AutoProcessor.from_pretrained(path)
        except torch.OutOfMemoryError as error:
            gc.collect()
            raise ModelLoadError(f"not enough memory to load the {role} model {name!r}") from error
        except (OSError, ValueError, RuntimeError) as error:
            raise ModelLoadError(f"cannot load the {role} model {name!r}: {_first_line(error)}") from error
        model.eval()
        return cls(name, model, processor, _input_device(model) if device_map is not None else torch_device)

    @property
    def control_tokens(self) -> tuple[str, ...]:
        """The tokenizer's special token strings (chat turns, media placeholders, end of text)."""
        tokenizer = self.tokenizer
        special = {str(t) for t in getattr(tokenizer, "all_special_tokens", ())}
        added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
        special |= {str(t.content) for t in added.values() if getattr(t, "special", False)}
        return tuple(sorted(t for t in special if t.strip()))

    @property
    def tokenizer(self) -> Any:
        return self.processor.tokenizer

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """The end-of-sequence ids `generate` stops at."""
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.model.config.get_text_config().eos_token_id
        if eos is None:
            return ()
        return tuple(eos) if isinstance(eos, list | tuple) else (int(eos),)

    # -- prompts -------------------------------------------------------------

    def prepare(self, media: Media, prompt: str) -> dict[str, Any]:
        """One user turn, the media first, then the text, with the generation prompt."""
        check_prompt(prompt)
        control = next((t for t in self.control_tokens if t in prompt), None)
        if control is not None:  # it would be read as a control token: a visitor could write the model's turns
            raise InputError(f"the prompt contains the control token {control!r}; remove it")
        check_media(self.processor, media)
        try:
            inputs = processor_inputs(self.processor, [chat_prompt(self.processor, media.kind, prompt)], [media])
        except (ValueError, TypeError, IndexError) as error:  # a limit of the processor not checked above
            raise MediaError(f"the model's processor cannot take {media.describe()}: {_first_line(error)}") from error
        return {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}

    # -- forwards ------------------------------------------------------------

    @torch.inference_mode()
    def prefill(
        self, inputs: Mapping[str, Any], reserve: int = 256, cache: DynamicCache | None = None
    ) -> tuple[KVState, torch.Tensor]:
        """The prompt forward, as `generate` runs it; returns the last position's logits.

        Only the last position's logits are computed (`logits_to_keep=1`): the full
        (prompt, vocab) matrix would cost gigabytes on a long video prompt.
        The cache has room for `reserve` more entries (the run's new tokens and
        scratch) before it must grow; `cache` replaces it (the plain backend's).
        """
        if cache is None:
            cache = growing_cache(self.model.config, reserve)
        output = self.model(**inputs, cache=cache, use_cache=True, logits_to_keep=1)
        offset = 0
        deltas = getattr(self.model.model, "rope_deltas", None) if self.uses_rope_deltas else None
        if deltas is not None:  # None after a text-only prompt: positions are sequential
            offset = int(deltas.reshape(-1)[0])
        state = KVState(cache=cache, committed=inputs["input_ids"].shape[1], position_offset=offset)
        return state, output.logits[0, -1].float()

    # -- draft-side visual token pruning (pruning.py) -------------------------

    def visual_positions(self, inputs: Mapping[str, Any]) -> torch.Tensor:
        """Where the image or video tokens sit in the prompt: (V,) sequence indices, ascending."""
        config = self.model.config
        ids = {getattr(config, name, None) for name in ("image_token_id", "video_token_id")} - {None}
        input_ids = inputs["input_ids"][0]
        marks = torch.zeros_like(input_ids, dtype=torch.bool)
        for token in ids:
            marks |= input_ids == token
        return marks.nonzero().squeeze(1)

    def visual_token_boxes(self, inputs: Mapping[str, Any]) -> list[VisualBox | None]:
        """Where each visual token looks, in the order of `visual_positions`: the sampled frames it
        covers and its box as fractions of the frame, or None for a token with no place of its own
        (LLaVA-OneVision's row-end tokens and its high-resolution crops; only its base grid is placed).
        """
        count = int(self.visual_positions(inputs).numel())
        vision = self.model.config.vision_config
        if self.family == "llava_onevision":
            side = vision.image_size // vision.patch_size
            if "pixel_values_videos" in inputs:  # per frame a pooled grid, then one newline token
                pooled = math.ceil(side / 2)
                frames = (count - 1) // (pooled * pooled)
                boxes: list[VisualBox | None] = [
                    _grid_box(frame, frame, index, pooled, pooled)
                    for frame in range(frames)
                    for index in range(pooled * pooled)
                ]
                return boxes + [None] * (count - len(boxes))
            base = [_grid_box(0, 0, index, side, side) for index in range(min(count, side * side))]
            return [*base, *([None] * (count - len(base)))]
        merge = vision.spatial_merge_size
        video = "video_grid_thw" in inputs
        time, height, width = (int(v) for v in inputs["video_grid_thw" if video else "image_grid_thw"][0])
        rows, cols = height // merge, width // merge
        step = vision.temporal_patch_size if video else 1
        placed: list[VisualBox | None] = [
            _grid_box(group * step, group * step + step - 1, index, rows, cols)
            for group in range(time)
            for index in range(rows * cols)
        ]
        return placed[:count]

    @torch.inference_mode()
    def prefill_scored(
        self, inputs: Mapping[str, Any], reserve: int = 256, cache: DynamicCache | None = None
    ) -> tuple[KVState, torch.Tensor, torch.Tensor]:
        """`prefill`, plus each visual token's score: the attention it receives from the text after
        the last visual token, averaged over heads, those queries and every decoder layer; (V,) float32.

        Each layer's attention module gets a forward hook that recomputes the text tokens' queries
        (a few rows) from the module's own input and reads the keys it just cached, so the
        prefill itself runs with its usual (sdpa or flash) attention, never eager.
        """
        visual = self.visual_positions(inputs)
        if visual.numel() == 0:
            raise InputError("visual token pruning needs an image or video in the prompt")
        first_query = int(visual[-1]) + 1
        layers = self.model.model.language_model.layers
        total = torch.zeros(visual.numel(), dtype=torch.float32, device=self.device)
        owner = threading.get_ident()

        def score(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
            if threading.get_ident() != owner:  # another thread's forward of a shared model
                return
            hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            cache: Any = kwargs["cache"] if "cache" in kwargs else kwargs["past_key_values"]
            keys = cache.layers[module.layer_idx].keys[0]  # [kv heads, S, d], RoPE applied
            received = text_to_visual_attention(
                module, hidden[0, first_query:], kwargs["position_embeddings"], keys, visual.to(keys.device)
            )
            total.add_(received.to(total.device))

        hooks = [layer.self_attn.register_forward_hook(score, with_kwargs=True) for layer in layers]
        try:
            state, logits = self.prefill(inputs, reserve, cache)
        finally:
            for hook in hooks:
                hook.remove()
        return state, logits, (total / len(layers)).cpu()

    @torch.inference_mode()
    def prefill_pruned(
        self,
        inputs: Mapping[str, Any],
        kept_visual: Sequence[int],
        reserve: int = 256,
        cache: DynamicCache | None = None,
    ) -> tuple[KVState, torch.Tensor]:
        """`prefill` on the prompt without the visual tokens not in `kept_visual` (indices among them).

        The model embeds its own image or video as usual; a hook at the entry of its language model
        keeps only the text and the kept visual rows, each with its original position (all three
        M-RoPE axes for the Qwen families, the 1-D index for LLaVA-OneVision). The cache then holds
        fewer entries than the prompt has tokens, so the state's position offset grows by the pruned
        count: the next token's position is the one the target gives it.
        """
        visual = self.visual_positions(inputs)
        length = int(inputs["input_ids"].shape[1])
        keep = torch.ones(length, dtype=torch.bool, device=visual.device)
        keep[visual] = False
        kept_index = torch.tensor(list(kept_visual), dtype=torch.long, device=visual.device)
        keep[visual[kept_index]] = True
        rows = keep.nonzero().squeeze(1)  # (P,): the sequence indices the draft reads
        owner = threading.get_ident()

        def prune(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
            if threading.get_ident() != owner:
                return args, kwargs
            embeds = kwargs["inputs_embeds"]
            kwargs["inputs_embeds"] = embeds[:, rows.to(embeds.device)]
            positions = kwargs.get("position_ids")
            if positions is None:  # 1-D positions (LLaVA-OneVision): the sequence index
                positions = torch.arange(length, device=embeds.device).unsqueeze(0)
            kwargs["position_ids"] = positions[..., rows.to(positions.device)]  # (..., B, P) on every axis
            mask = kwargs.get("attention_mask")
            if isinstance(mask, torch.Tensor) and mask.dim() == 2:
                kwargs["attention_mask"] = mask[:, rows.to(mask.device)]
            if kwargs.get("visual_pos_masks") is not None:  # Qwen3-VL's deepstack features
                kwargs["visual_pos_masks"] = kwargs["visual_pos_masks"][:, rows.to(kwargs["visual_pos_masks"].device)]
                kwargs["deepstack_visual_embeds"] = [
                    e[kept_index.to(e.device)] for e in kwargs["deepstack_visual_embeds"]
                ]
            return args, kwargs

        hook = self.model.model.language_model.register_forward_pre_hook(prune, with_kwargs=True)
        try:
            state, logits = self.prefill(inputs, reserve, cache)
        finally:
            hook.remove()
        state.committed = int(rows.numel())
        state.position_offset += length - state.committed
        return state, logits

    @inference
    def extend(
        self,
        state: KVState,
        tokens: Sequence[int],
        positions: Sequence[int],
        visible: Sequence[Sequence[int]] | None = None,
        *,
        parents: Sequence[int] | None = None,
        lean: bool = True,
        fused: bool = False,
        compiled: bool = False,
    ) -> torch.Tensor:
        """Feed new tokens after the cache; returns their logits, (N, vocab).

        `positions[i]` is token i's index in the output sequence (the M-RoPE
        delta is added here). Every token sees all committed positions, and
        the scratch entries (numbered over the scratch already cached followed
        by the new tokens) given by one of:
        - `parents[i]`: the entry token i continues (before i), or -1 when it
          continues the committed sequence; token i then sees its parent's
          entries and itself. The mask is built on the device from this one
          small tensor (the decode loop's way; on a CPU, from the list with
          numpy: `rows_on_host`);
        - `visible[i]`: the entries token i sees, listed (built on the host).

        The forward is `lean.py`'s where the model allows it (and `lean`), else transformers'.
        `fused`: the lean forward's fused variant, for a draft only (its rounding is not
        transformers' own; see `LeanText.fused`); `compiled`: that variant through torch.compile.
        """
        count = len(tokens)
        if (visible is None) == (parents is None):
            raise ValueError("give either visible or parents")
        mask: torch.Tensor | None = None
        positions = [p + state.position_offset for p in positions]  # the M-RoPE delta
        if self.device.type == "cpu" and (parents is not None or (count == 1 and state.scratch == 0)):
            # On a CPU the host is the device, and right after a forward every tensor operation
            # runs on cold caches (a tenth of a millisecond each on a small CPU): numpy builds
            # the ids, positions, ancestor rows and mask, and torch wraps them without copies.
            packed = torch.from_numpy(np.array([tokens, positions], dtype=np.int64))
            input_ids, position_ids = packed[0:1], packed[1:2]
            if count == 1 and state.scratch == 0:  # one token after the committed sequence
                rows = torch.ones((1, 1), dtype=torch.bool)
            else:
                assert parents is not None
                rows, mask = tree_mask_on_host(state.scratch_rows, parents, state.committed, self.dtype)
                if fused and count == 1 and mask is not None and bool(rows.numpy()[-1].all()):
                    mask = None  # a draft token that sees every entry (its rounding may differ)
        elif count == 1 and state.scratch == 0:
            # One token after the committed sequence (plain decoding, or a draft fed one token):
            # it sees everything cached, so no mask, and the model attends as in `generate`.
            input_ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
            position_ids = torch.tensor([list(positions)], dtype=torch.long, device=self.device)
            rows = torch.ones((1, 1), dtype=torch.bool, device=self.device)
        elif parents is not None:
            # tokens, positions, parents: one host-to-device copy.  [3, N]
            packed = torch.tensor([list(tokens), list(positions), list(parents)], dtype=torch.long).to(self.device)
            input_ids, position_ids = packed[0:1], packed[1:2]
            rows = rows_from_parents(state.scratch_rows, packed[2], in_batch_depth(parents, state.scratch))
            mask = additive_mask(rows[state.scratch :], state.committed, self.dtype)
        else:
            assert visible is not None
            input_ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
            position_ids = torch.tensor([list(positions)], dtype=torch.long, device=self.device)
            rows = rows_from_visible(state.scratch_rows, visible, self.device)
            if rows.shape[0] > 1:
                mask = additive_mask(rows[state.scratch :], state.committed, self.dtype)
        # positions: (1, N), the M-RoPE delta included; the Qwen models expand it to their 3 axes.
        if lean and self.lean is not None:
            fused_up_to = max(positions) + 1 if fused else None
            logits = self.lean.forward(
                input_ids, position_ids, mask, state.cache, fused_up_to=fused_up_to, compiled=compiled
            )
        else:
            logits = self.model(
                input_ids=input_ids,
                position_ids=position_ids,
                attention_mask=mask,
                cache=state.cache,
                use_cache=True,
            ).logits
        state.scratch += count
        state.scratch_rows = rows
        logits = logits[0]
        return logits if logits.dtype == torch.float32 else logits.float()

    @inference
    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        """Keep the listed scratch entries (in order) as committed; drop the rest.

        Only the kept rows that are not already in place move; the rest of the
        scratch is cut off. Nothing before the scratch is copied.
        """
        keep = list(keep)
        first_moved = next((i for i, entry in enumerate(keep) if entry != i), len(keep))
        start = state.committed
        move_rows(state.cache, [start + entry for entry in keep[first_moved:]], start + first_moved)
        dropped = state.scratch - len(keep)
        if dropped:
            state.cache.crop(-dropped)
        state.committed += len(keep)
        state.scratch = 0
        state.scratch_rows = None


# (first frame, last frame, x0, y0, x1, y1): the sampled frames a visual token covers, its box in fractions
VisualBox = tuple[int, int, float, float, float, float]


def _grid_box(first: int, last: int, index: int, rows: int, cols: int) -> VisualBox:
    """The box of cell `index` (row-major) of a rows x cols grid over the frame."""
    row, col = divmod(index, cols)
    return (first, last, col / cols, row / rows, (col + 1) / cols, (row + 1) / rows)


def text_to_visual_attention(
    module: Any,
    hidden: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor],
    keys: torch.Tensor,
    visual: torch.Tensor,
) -> torch.Tensor:
    """The attention the visual keys receive from trailing text queries in one layer, mean over heads and queries.

    `hidden`: (T, hidden) the attention module's input for the last T prompt tokens; `keys`: (KV heads, S, d),
    the layer's cached keys of the whole prompt; `visual`: (V,) key indices. The queries are made as the
    module makes them (projection, the Qwen3 per-head norm, RoPE with the module's own cos/sin), and each
    attends causally over all S keys. Returns (V,) float32.
    """
    count, seq = hidden.shape[0], keys.shape[1]
    head_dim = keys.shape[-1]
    query = module.q_proj(hidden).view(count, -1, head_dim)  # [T, H, d]
    if hasattr(module, "q_norm"):
        query = module.q_norm(query)
    cos, sin = (t[0, seq - count :].unsqueeze(1).to(query.dtype) for t in position_embeddings)  # [T, 1, d]
    half = head_dim // 2
    query = query * cos + torch.cat((-query[..., half:], query[..., :half]), dim=-1) * sin
    query = query.transpose(0, 1).float()  # [H, T, d]
    heads = query.shape[0]
    keys = keys.float().repeat_interleave(heads // keys.shape[0], dim=0)  # [H, S, d]
    # causal: the text query at sequence index seq - count + t sees keys up to that index
    future = torch.arange(seq, device=keys.device) > (seq - count + torch.arange(count, device=keys.device))[:, None]
    received = torch.zeros(visual.numel(), dtype=torch.float32, device=keys.device)
    step = max(1, (1 << 26) // max(1, count * seq))  # heads per chunk: bounded scratch for long prompts
    for start in range(0, heads, step):
        scores = query[start : start + step] @ keys[start : start + step].transpose(1, 2) * module.scaling
        probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)  # [h, T, S]
        received += probs[..., visual].sum(dim=(0, 1))
    return received / (heads * count)


def in_batch_depth(parents: Sequence[int], scratch: int) -> int:
    """The longest chain of new tokens whose parents are new tokens too (0 when none is)."""
    depth: list[int] = []
    for parent in parents:
        depth.append(depth[parent - scratch] + 1 if parent >= scratch else 0)
    return max(depth, default=0)


def rows_from_parents(known: torch.Tensor | None, parents: torch.Tensor, depth: int) -> torch.Tensor:
    """The scratch rows after N new entries, built on the device: (S+N, S+N) bool.

    `known`: the (S, S) rows of the cached scratch; `parents`: (N,) indices
    over the S+N entries, -1 for none. A new entry's row is its parent's row
    plus itself (EAGLE's rule). Parents that are new entries themselves are
    resolved by pointer jumping: after k rounds a row holds the rows of the
    entries fewer than 2^k steps up, so `depth` (the longest in-batch chain,
    known on the host) fixes the number of rounds without reading the device.
    """
    scratch, count = (0 if known is None else known.shape[0]), parents.shape[0]
    total = scratch + count
    # rows: [S+N+1, S+N]; the last row is empty and stands for "no parent".
    rows = torch.zeros((total + 1, total), dtype=torch.bool, device=parents.device)
    if known is not None and scratch:
        rows[:scratch, :scratch] = known
    rows[scratch:total, scratch:].fill_diagonal_(True)
    pointer = parents.masked_fill(parents < 0, total)  # [N]: the row each new entry takes in next
    rounds = (depth + 1).bit_length()
    if rounds > 1:
        # jump: [S+N+1]; cached rows are complete already, so they jump to the empty row.
        jump = torch.full((total + 1,), total, dtype=torch.long, device=parents.device)
        jump[scratch:total] = pointer
    for done in range(1, rounds + 1):
        rows[scratch:total] |= rows[pointer]
        if done < rounds:  # twice as far up next round
            pointer, jump = jump[pointer], jump[jump]
    return rows[:total]


def rows_on_host(known: torch.Tensor | None, parents: Sequence[int]) -> torch.Tensor:
    """`rows_from_parents` on the host, for a model on the CPU: (S+N, S+N) bool, from the parents
    as a list (each new entry's parent comes before it)."""
    scratch = 0 if known is None else known.shape[0]
    total = scratch + len(parents)
    rows = np.zeros((total, total), dtype=bool)
    if known is not None and scratch:
        rows[:scratch, :scratch] = known.numpy()
    for i, parent in enumerate(parents):
        row = scratch + i
        if parent >= 0:
            rows[row, : parent + 1] = rows[parent, : parent + 1]  # the rest of the parent's row is empty
        rows[row, row] = True
    return torch.from_numpy(rows)


_BLOCKED_FLOAT32 = np.finfo(np.float32).min  # the additive mask's "blocked"


def tree_mask_on_host(
    known: torch.Tensor | None, parents: Sequence[int], committed: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """`rows_on_host` and `additive_mask` in one, for a model on the CPU: the scratch rows
    (S+N, S+N) and the mask (1, 1, N, committed + S + N) of N new tokens, built with numpy."""
    rows = rows_on_host(known, parents)
    if dtype != torch.float32:
        return rows, additive_mask(rows[rows.shape[0] - len(parents) :], committed, dtype)
    host = rows.numpy()
    count, total = len(parents), host.shape[0]
    mask = np.zeros((1, 1, count, committed + total), dtype=np.float32)
    np.copyto(mask[0, 0, :, committed:], _BLOCKED_FLOAT32, where=~host[total - count :])
    return rows, torch.from_numpy(mask)


def rows_from_visible(
    known: torch.Tensor | None, visible: Sequence[Sequence[int]], device: torch.device
) -> torch.Tensor:
    """The scratch rows after N new entries, from explicit lists (built on the host): (S+N, S+N) bool."""
    scratch = 0 if known is None else known.shape[0]
    total = scratch + len(visible)
    rows = torch.zeros((total, total), dtype=torch.bool)
    if known is not None and scratch:
        rows[:scratch, :scratch] = known.cpu()
    for i, seen in enumerate(visible):
        rows[scratch + i, list(seen)] = True
    return rows.to(device)


def additive_mask(rows: torch.Tensor, committed: int, dtype: torch.dtype) -> torch.Tensor:
    """The 4D additive mask (1, 1, N, committed + S + N) of N new tokens from their scratch rows (N, S + N).

    0 = attend, the dtype's minimum = blocked (a bool mask is silently wrong
    under eager attention: it is added to the scores).
    """
    count, width = rows.shape[0], committed + rows.shape[1]
    if rows.device.type == "cpu" and dtype == torch.float32:  # numpy: fewer calls, the same mask
        host = np.zeros((1, 1, count, width), dtype=np.float32)
        host[0, 0, :, committed:][~rows.numpy()] = np.finfo(np.float32).min
        return torch.from_numpy(host)
    mask = torch.zeros((1, 1, count, width), dtype=dtype, device=rows.device)
    mask[0, 0, :, committed:].masked_fill_(~rows, torch.finfo(dtype).min)
    return mask


def chat_prompt(processor: Any, kind: str, prompt: str) -> str:
    """One user turn through the processor's chat template: the image or video first, then the text."""
    content = [{"type": kind}, {"type": "text", "text": prompt}]
    return processor.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )


def processor_inputs(processor: Any, texts: Sequence[str], media: Sequence[Media]) -> Any:
    """The processor's tensors for chat-formatted ``texts``, one medium each (all images or all
    videos; a batch is padded as the tokenizer pads).

    Videos go in as sampled (`media.py`), with their metadata and `do_sample_frames=False`, so the
    processor does not re-sample them.
    """
    if media[0].kind == "image":
        return processor(text=list(texts), images=[m.image for m in media], return_tensors="pt", padding=True)
    metadata = [
        {"total_num_frames": m.total_frames, "fps": m.fps, "frames_indices": list(m.frame_indices)} for m in media
    ]
    extra = {}
    video_processor: Any = getattr(processor, "video_processor", None)
    if hasattr(video_processor, "cap_pixels_per_frame") and video_processor.cap_pixels_per_frame is None:
        # The Qwen video processors: bound each frame's pixels as the reference code
        # (qwen-vl-utils) does, so long videos cannot grow without bound.
        extra["cap_pixels_per_frame"] = True
    return processor(
        text=list(texts),
        videos=[m.frames for m in media],
        video_metadata=metadata,
        do_sample_frames=False,
        return_tensors="pt",
        padding=True,
        **extra,
    )


def check_media(processor: Any, media: Media) -> None:
    """Refuse media the processors cannot take, naming the limit: extreme aspect ratios, and videos with
    fewer frames than the processor's temporal patch (2 for the Qwen families)."""
    if media.kind == "image":
        assert media.image is not None
        width, height = media.image.size
    else:
        assert media.frames is not None
        height, width = int(media.frames.shape[1]), int(media.frames.shape[2])
        needed = int(getattr(getattr(processor, "video_processor", None), "temporal_patch_size", 1) or 1)
        if len(media.frames) < needed:
            raise MediaError(
                f"{media.name} has {len(media.frames)} frame(s); this model reads videos of at least {needed} frames "
                "(give a still as an image)"
            )
    if min(width, height) < 1 or max(width, height) / min(width, height) > MAX_ASPECT_RATIO:
        raise MediaError(
            f"{media.name} is {width}x{height}; the long side may be at most {MAX_ASPECT_RATIO} times the short one"
        )


def _check_full_attention(config: Any, name: str) -> None:
    text_config = config.get_text_config()
    layer_types = getattr(text_config, "layer_types", None) or ()
    if getattr(text_config, "use_sliding_window", False) or any(t != "full_attention" for t in layer_types):
        raise ModelLoadError(f"{name}: sliding-window or linear-attention layers are not supported")


def _memory_map(max_memory: Mapping[str, str] | None) -> dict[int | str, str] | None:
    """accelerate's max_memory: GPU indices as ints, "cpu" and "disk" as they are."""
    if max_memory is None:
        return None
    return {int(key) if key.isdigit() else key: value for key, value in max_memory.items()}


def _input_device(model: Any) -> torch.device:
    """Where a model placed by accelerate takes its inputs: where its token embedding runs."""
    embedding = model.get_input_embeddings()
    hook_device = getattr(getattr(embedding, "_hf_hook", None), "execution_device", None)
    return torch.device(hook_device) if hook_device is not None else embedding.weight.device


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]


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


def check_pair(target: VLM, draft: VLM) -> ModelPair:
    """Refuse a draft whose tokenizer differs from the target's."""
    if target.tokenizer.get_vocab() != draft.tokenizer.get_vocab():
        raise PairMismatchError(
            f"the draft {draft.name!r} and the target {target.name!r} use different tokenizers; "
            "speculative decoding needs a draft of the same tokenizer (same family)"
        )
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


def load_pair(
    target: str = "builtin",
    draft: str = "builtin",
    device: str = "auto",
    dtype: str = "auto",
    device_map: str | None = None,
    max_memory: Mapping[str, str] | None = None,
    offload_folder: str | None = None,
    draft_device: str | None = None,
    report: Callable[[str], None] | None = None,
) -> ModelPair:
    """Load and check a target and its draft (each by hub id or local folder).

    The target may be placed by accelerate (`device_map`, `max_memory`,
    `offload_folder`: see `VLM.load`); the draft sits on `draft_device`
    (default: `device`). The two models exchange only token ids, so they may
    sit on different devices. `report` is told each stage as it starts.
    """
    say = report or (lambda stage: None)
    say(f"loading the target {target} ({_source(target, 'target')})")
    loaded_target = VLM.load(target, "target", device, dtype, device_map, max_memory, offload_folder)
    say(f"loading the draft {draft} ({_source(draft, 'draft')})")
    return check_pair(loaded_target, VLM.load(draft, "draft", draft_device or device, dtype))


def _source(name: str, role: str) -> str:
    """Where a model comes from, for progress messages: a local folder, or the hub (downloaded on first use)."""
    return "local folder" if Path(resolve_name(name, role)).is_dir() else "from the hub, downloaded on first use"
