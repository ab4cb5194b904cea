"""What differs between model families, behind one interface (`Family`).

A family module (`qwen.py`, `llava.py`, ...) describes one `model_type`: its model class in
transformers, whether its positions carry M-RoPE deltas, which token ids mark the image and video
in the prompt, where each visual token looks (for the pruning view), what its processor needs
for a video, and which configurations the shared tree forward cannot run. Everything else (the
forwards, the masks, the caches, the pruning hooks) is shared (`vlm.py`, `masks.py`, `visual.py`).
Adding a family is a module with one `Family` subclass, registered in `registry.py`, plus its tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ModelLoadError
from .caches import CacheStrategy
from .masks import key_positions, windowed
from .visual import rotate_half_rope

# What `get_rope_index` reads of a prompt's tensors (the same names in transformers 5.17 and 5.24).
_ROPE_INDEX_INPUTS = (
    "input_ids",
    "mm_token_type_ids",
    "image_grid_thw",
    "video_grid_thw",
    "second_per_grid_ts",
    "attention_mask",
)

# (first frame, last frame, x0, y0, x1, y1): the sampled frames a visual token covers, its box in fractions
VisualBox = tuple[int, int, float, float, float, float]


def grid_box(first: int, last: int, index: int, rows: int, cols: int) -> VisualBox:
    """The box of cell `index` (row-major) of a rows x cols grid over the frame."""
    row, col = divmod(index, cols)
    return (first, last, col / cols, row / rows, (col + 1) / cols, (row + 1) / rows)


@dataclass(frozen=True)
class Family:
    """One model family. Subclasses override what their family does differently.

    `model_type`: the config's `model_type`; `model_class`: the class in transformers that loads it;
    `rope_deltas`: positions are M-RoPE with a delta per prompt (`position_offset`);
    `video`: the processor takes videos; `windows_by_mask`: the text model has sliding-window layers,
    which keep every cache row and see only their window through the tree masks (`layer_masks`).
    """

    model_type: str
    model_class: str
    rope_deltas: bool = False
    video: bool = True
    windows_by_mask: bool = False
    prunable: bool = True  # the pruning hooks (visual.py) know its attention layers
    # its processor takes each text's videos as a list of their own (SmolVLM's on transformers 5.17 counts a
    # bare video's frames as videos; 5.24 reads both)
    videos_per_text: bool = False

    def visual_token_ids(self, config: Any) -> set[int]:
        """The ids of the tokens that stand for image or video features in the prompt."""
        names = ("image_token_id", "video_token_id", "image_token_index", "video_token_index")
        return {int(value) for value in (getattr(config, name, None) for name in names) if value is not None}

    def visual_boxes(
        self, config: Any, inputs: Mapping[str, Any], count: int, processor: Any
    ) -> list[VisualBox | None]:
        """Where each of the `count` visual tokens looks (None: no place of its own); `processor`: the model's."""
        return [None] * count

    def video_processor_kwargs(self, processor: Any) -> dict[str, Any]:
        """Extra keywords for the processor when it reads a video."""
        return {}

    def rotary(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """RoPE as the family's attention applies it to a query (for the pruning scores)."""
        return rotate_half_rope(x, cos, sin)

    def scored_rows(self, config: Any, trailing: int) -> int:
        """How many trailing prompt rows the scored prefill carries to its last layer (its `logits_to_keep`):
        one, as `generate`'s prefill, where every layer computes every row anyway."""
        return 1

    def language_model(self, model: Any) -> Any:
        """The text decoder (its layers carry the attention the pruning scores read)."""
        return model.model.language_model

    def layer_masks(
        self,
        config: Any,
        mask: torch.Tensor,
        query_positions: Sequence[int],
        key_positions: Sequence[int] | torch.Tensor,
    ) -> torch.Tensor | dict[str, torch.Tensor]:
        """The tree mask for each kind of layer: one mask for all, or with sliding windows one per layer type
        (the full layers' mask, and the same with every key `sliding_window` or more positions behind its
        query blocked, as the model's own decoding sees them)."""
        if not self.windows_by_mask:
            return mask
        window = int(config.get_text_config().sliding_window)
        return {"full_attention": mask, "sliding_attention": windowed(mask, query_positions, key_positions, window)}

    def cache_strategy(self, chosen: CacheStrategy, config: Any) -> CacheStrategy:
        """The cache strategy a run of a model of this config uses when `chosen` is asked for: `chosen`
        itself (Qwen3.5: its recurrent state over `chosen`'s cache, caches.py)."""
        return chosen

    def tree_masks(
        self,
        config: Any,
        mask: torch.Tensor | None,
        committed: int,
        scratch_positions: Sequence[int],
        query_positions: Sequence[int],
    ) -> torch.Tensor | dict[str, torch.Tensor] | None:
        """A tree forward's masks as transformers' forward takes them: the mask itself, or with sliding
        windows kept by mask each layer type's (`layer_masks`; keys: the committed entries, then the
        scratch's and the new tokens' sequence positions)."""
        if mask is None or not self.windows_by_mask:
            return mask
        keys = key_positions(committed, (*scratch_positions, *query_positions), mask.device)
        return self.layer_masks(config, mask, query_positions, keys)

    def position_offset(self, model: Any, inputs: Mapping[str, Any]) -> int:
        """The M-RoPE delta of this prompt: how far the positions after it run from its length (0 for plain
        positions, or for a prompt without media, where positions are sequential).

        Computed from the prompt's own tensors with the model's `get_rope_index`, as its prefill computes it,
        never read from `model.model.rope_deltas`: transformers keeps the delta of the last prompt with media
        there and leaves it for a later prompt without any, so the value on the model may be another call's."""
        grids = [inputs.get(name) for name in ("image_grid_thw", "video_grid_thw")]
        if not self.rope_deltas or all(grid is None for grid in grids):
            return 0
        given = {name: inputs[name] for name in _ROPE_INDEX_INPUTS if inputs.get(name) is not None}
        _, deltas = model.model.get_rope_index(**given)
        return int(deltas.reshape(-1)[0])

    def prepare(self, model: Any) -> None:
        """Fit a loaded model for the forwards after the prefill (nothing by default; Qwen3.5: the
        tree forward of its linear-attention layers)."""

    def check_config(self, config: Any, name: str) -> None:
        """Refuse a configuration the shared forwards cannot run exactly (one sentence)."""
        text_config = config.get_text_config()
        layer_types = getattr(text_config, "layer_types", None)
        if layer_types:
            windowed = any(t != "full_attention" for t in layer_types)
        else:  # Mistral's config names its window without layer types
            windowed = getattr(text_config, "sliding_window", None) is not None
        if getattr(text_config, "use_sliding_window", False) or windowed:
            raise ModelLoadError(f"{name}: sliding-window or linear-attention layers are not supported")
