"""The forwards of a loaded model: the prefill as `generate` runs it, into the cache a cache
strategy makes (`caches.py`), tree forwards after the cache (an additive float mask from parent
indices, positions = sequence index + depth plus the family's M-RoPE delta) through a forward
(`forwards.py`), and the commit of the strategy that made the cache. The decoding algorithm never
touches cache internals; it calls a backend's `prefill`, `extend` and `commit` (`backends.py`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import numpy as np
import torch

from ..compat import cache_keyword
from ..errors import InputError, MediaError
from ..media import Media
from .caches import IN_PLACE, CacheStrategy, KVState
from .family import VisualBox
from .forwards import LEAN, Forward, TreeBatch
from .lean import LeanText
from .loading import asking_note_of, first_line, load_model
from .masks import additive_mask, in_batch_depth, rows_from_parents, tree_mask_on_host
from .one_pass import OnePass, one_pass_of
from .prompts import chat_prompt, check_media, check_prompt, processor_inputs
from .registry import FAMILIES
from .visual import last_logits_only, pruned_prefill, scored_prefill, visual_positions

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
        self.spec = FAMILIES[self.family]  # what this family does differently (family.py)
        self.uses_rope_deltas = self.spec.rope_deltas
        self.dtype: torch.dtype = next(model.parameters()).dtype
        self.vocab_size: int = model.get_output_embeddings().weight.shape[0]
        self.cache_keyword = cache_keyword(model)  # the forward's name for the cache: transformers 5.17 vs 5.24
        self.spec.check_config(model.config, name)
        self.spec.prepare(model)
        # the decode-time text forward without transformers' module machinery, where it is safe (lean.py)
        self.lean: LeanText | None = LeanText.of(model)
        # what a prompt with words it has no token for is told, when its folder ships a note (loading.ASKING_NOTE)
        folder = str(getattr(model.config, "_name_or_path", "") or "")
        self.asking_note = asking_note_of(folder)
        self.other_language_note = asking_note_of(folder, "other_language")
        # a one-pass draft's mask token and block (its config's `one_pass_draft`; None: sequential)
        rows = model.get_input_embeddings().weight.shape[0]
        self.one_pass: OnePass | None = one_pass_of(model.config, name, rows)

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
        model, processor, input_device = load_model(name, role, device, dtype, device_map, max_memory, offload_folder)
        return cls(name, model, processor, input_device)

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
        if media.kind == "video" and not self.spec.video:
            raise MediaError(f"{self.name} reads images only ({self.family}); give a still image instead of a video")
        check_media(self.processor, media)
        extra = self.spec.video_processor_kwargs(self.processor) if media.kind == "video" else None
        try:
            text = chat_prompt(self.processor, media.kind, prompt)
            inputs = processor_inputs(self.processor, [text], [media], extra, self.spec.videos_per_text)
        except (ValueError, TypeError, IndexError) as error:  # a limit of the processor not checked above
            raise MediaError(f"the model's processor cannot take {media.describe()}: {first_line(error)}") from error
        return {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}

    # -- forwards ------------------------------------------------------------

    @torch.inference_mode()
    def prefill(
        self,
        inputs: Mapping[str, Any],
        reserve: int = 256,
        strategy: CacheStrategy = IN_PLACE,
        logits_to_keep: int = 1,
    ) -> tuple[KVState, torch.Tensor]:
        """The prompt forward, as `generate` runs it; returns the last position's logits.

        Only the last position's logits are computed (`logits_to_keep=1`): the full
        (prompt, vocab) matrix would cost gigabytes on a long video prompt.
        The cache is `strategy`'s (as the family runs it: `Family.cache_strategy`), with room
        for `reserve` more entries (the run's new tokens and scratch) where it is sized ahead.
        `logits_to_keep`: more trailing rows through every layer, where the pruning scores need them
        (`Family.scored_rows`); the lm_head still reads the last row only (`last_logits_only`).
        """
        strategy = self.spec.cache_strategy(strategy, self.model.config)
        cache = strategy.new_cache(self.model.config, reserve, self.spec.windows_by_mask)
        head = self.model.get_output_embeddings() if logits_to_keep > 1 else None
        with last_logits_only(head):
            output = self.model(**inputs, **{self.cache_keyword: cache}, use_cache=True, logits_to_keep=logits_to_keep)
        offset = self.spec.position_offset(self.model, inputs)  # this prompt's own, never the model's last one
        state = KVState(cache=cache, committed=inputs["input_ids"].shape[1], position_offset=offset, strategy=strategy)
        return state, output.logits[0, -1].float()

    # -- draft-side visual token pruning (visual.py, pruning.py) --------------

    def visual_positions(self, inputs: Mapping[str, Any]) -> torch.Tensor:
        """Where the image or video tokens sit in the prompt: (V,) sequence indices, ascending."""
        return visual_positions(inputs["input_ids"][0], self.spec.visual_token_ids(self.model.config))

    def visual_token_boxes(self, inputs: Mapping[str, Any]) -> list[VisualBox | None]:
        """Where each visual token looks, in the order of `visual_positions`: the sampled frames it
        covers and its box as fractions of the frame, or None for a token with no place of its own
        (e.g. LLaVA-OneVision's row-end tokens and its high-resolution crops)."""
        count = int(self.visual_positions(inputs).numel())
        return self.spec.visual_boxes(self.model.config, inputs, count, self.processor)

    @torch.inference_mode()
    def prefill_scored(
        self, inputs: Mapping[str, Any], reserve: int = 256, strategy: CacheStrategy = IN_PLACE
    ) -> tuple[KVState, torch.Tensor, torch.Tensor]:
        """`prefill`, plus each visual token's score (visual.py: `scored_prefill`); (V,) float32."""
        language_model = self.spec.language_model(self.model)
        visual = self.visual_positions(inputs)
        trailing = int(inputs["input_ids"].shape[1]) - (int(visual[-1]) + 1 if visual.numel() else 0)
        rows = self.spec.scored_rows(self.model.config, trailing)
        return scored_prefill(
            language_model,
            visual,
            self.device,
            lambda: self.prefill(inputs, reserve, strategy, logits_to_keep=rows),
            self.spec.rotary,
        )

    @torch.inference_mode()
    def prefill_pruned(
        self,
        inputs: Mapping[str, Any],
        kept_visual: Sequence[int],
        reserve: int = 256,
        strategy: CacheStrategy = IN_PLACE,
    ) -> tuple[KVState, torch.Tensor]:
        """`prefill` on the prompt without the visual tokens not in `kept_visual` (indices among them).

        The cache then holds fewer entries than the prompt has tokens, so the state's position
        offset grows by the pruned count: the next token's position is the one the target gives it.
        """
        length = int(inputs["input_ids"].shape[1])
        state, logits, kept = pruned_prefill(
            self.spec.language_model(self.model),
            self.visual_positions(inputs),
            length,
            kept_visual,
            lambda: self.prefill(inputs, reserve, strategy),
        )
        state.committed = kept
        state.position_offset += length - kept
        return state, logits

    @inference
    def extend(
        self,
        state: KVState,
        tokens: Sequence[int],
        positions: Sequence[int],
        *,
        parents: Sequence[int],
        forward: Forward = LEAN,
    ) -> torch.Tensor:
        """Feed new tokens after the cache; returns their logits, (N, vocab).

        `positions[i]` is token i's index in the output sequence (the M-RoPE
        delta is added here). Every token sees all committed positions, and
        the scratch entries (numbered over the scratch already cached followed
        by the new tokens) of its parent: `parents[i]` is the entry token i
        continues (before i), or -1 when it continues the committed sequence;
        token i then sees its parent's entries and itself. The mask is built on
        the device from this one small tensor (on a CPU, from the list with
        numpy: `tree_mask_on_host`).

        `forward` computes the logits (forwards.py): by default `lean.py`'s where the model
        allows it, else transformers'. The cache's strategy is told first (`before_forward`).
        """
        state.strategy.before_forward(state, parents)
        batch = self._tree_batch(state, tokens, positions, parents)
        logits = forward(self, batch, state.cache)[0]
        state.scratch += len(tokens)
        state.scratch_rows = batch.rows
        return logits if logits.dtype == torch.float32 else logits.float()

    def _tree_batch(
        self, state: KVState, tokens: Sequence[int], positions: Sequence[int], parents: Sequence[int]
    ) -> TreeBatch:
        """`extend`'s tensors (`TreeBatch`); the state learns the new entries' sequence positions."""
        sequence_positions = tuple(positions)
        positions = [p + state.position_offset for p in positions]  # the M-RoPE delta
        input_ids, position_ids, rows, mask = _tree_inputs(state, tokens, positions, parents, self.dtype, self.device)
        config = self.model.config
        masks = self.spec.tree_masks(config, mask, state.committed, state.scratch_positions, sequence_positions)
        state.scratch_positions += sequence_positions
        # positions: (1, N), the M-RoPE delta included; the Qwen models expand it to their 3 axes.
        return TreeBatch(input_ids, position_ids, mask, masks, rows, max(positions, default=0) + 1)

    @inference
    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        """Keep the listed scratch entries (in order) as committed; drop the rest: the commit of the
        strategy that made the cache (`caches.py`; the in-place one moves only the kept rows that are
        not already in place and cuts the rest of the scratch off)."""
        state.strategy.commit(state, list(keep))


def _tree_inputs(
    state: KVState,
    tokens: Sequence[int],
    positions: Sequence[int],
    parents: Sequence[int],
    dtype: torch.dtype,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """`extend`'s tensors: the ids and positions (1, N), the scratch rows after the new tokens, and
    the additive mask (None where every new token sees every entry, as in `generate`)."""
    count, mask = len(tokens), None
    alone = count == 1 and state.scratch == 0  # one token after the committed sequence: it sees everything
    if device.type == "cpu":
        # On a CPU the host is the device, and right after a forward every tensor operation
        # runs on cold caches (a tenth of a millisecond each on a small CPU): numpy builds
        # the ids, positions, ancestor rows and mask, and torch wraps them without copies.
        packed = torch.from_numpy(np.array([tokens, positions], dtype=np.int64))
        input_ids, position_ids = packed[0:1], packed[1:2]
        if alone:
            rows = torch.ones((1, 1), dtype=torch.bool)
        else:
            rows, mask = tree_mask_on_host(state.scratch_rows, parents, state.committed, dtype)
    elif alone:
        # Plain decoding, or a draft fed one token: no mask, and the model attends as in `generate`.
        input_ids = torch.tensor([list(tokens)], dtype=torch.long, device=device)
        position_ids = torch.tensor([list(positions)], dtype=torch.long, device=device)
        rows = torch.ones((1, 1), dtype=torch.bool, device=device)
    else:
        # tokens, positions, parents: one host-to-device copy.  [3, N]
        packed = torch.tensor([list(tokens), list(positions), list(parents)], dtype=torch.long).to(device)
        input_ids, position_ids = packed[0:1], packed[1:2]
        rows = rows_from_parents(state.scratch_rows, packed[2], in_batch_depth(parents, state.scratch))
        mask = additive_mask(rows[state.scratch :], state.committed, dtype)
    return input_ids, position_ids, rows, mask
