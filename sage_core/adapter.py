"""The model adapter's old import path, kept for code outside the project that imported it before the
split; the code lives in the model package (`sage_core/models/`: loading, prompts, visual tokens, tree
masks, forwards, one module per family), and the project itself imports from there."""

from __future__ import annotations

from .models.family import Family, VisualBox, grid_box
from .models.loading import (
    ASSETS,
    BUILTIN_DRAFT,
    BUILTIN_TARGET,
    resolve_device,
    resolve_dtype,
    resolve_name,
)
from .models.masks import additive_mask, in_batch_depth, rows_from_parents, rows_on_host, tree_mask_on_host
from .models.pair import ModelPair, check_pair, load_pair, processors_alike
from .models.prompts import MAX_ASPECT_RATIO, chat_prompt, check_media, processor_inputs
from .models.registry import FAMILIES
from .models.visual import text_to_visual_attention
from .models.vlm import VLM, KVState, inference

__all__ = [
    "ASSETS",
    "BUILTIN_DRAFT",
    "BUILTIN_TARGET",
    "FAMILIES",
    "MAX_ASPECT_RATIO",
    "VLM",
    "Family",
    "KVState",
    "ModelPair",
    "VisualBox",
    "additive_mask",
    "chat_prompt",
    "check_media",
    "check_pair",
    "grid_box",
    "in_batch_depth",
    "inference",
    "load_pair",
    "processor_inputs",
    "processors_alike",
    "resolve_device",
    "resolve_dtype",
    "resolve_name",
    "rows_from_parents",
    "rows_on_host",
    "text_to_visual_attention",
    "tree_mask_on_host",
]
