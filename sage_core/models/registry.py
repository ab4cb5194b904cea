"""Every supported family, by the config's `model_type`; `register_family` adds one at run time."""

from __future__ import annotations

from ..registry import Registry
from .family import Family
from .gemma import GEMMA3, GEMMA4
from .idefics import IDEFICS3, SMOLVLM
from .internvl import INTERNVL
from .llava import LLAVA, LLAVA_NEXT, LLAVA_NEXT_VIDEO, LLAVA_ONEVISION, MISTRAL3
from .qwen import GLM4V, GLM46V, QWEN2_5_VL, QWEN2_VL, QWEN3_VL, QWEN3_VL_MOE
from .qwen3_5 import QWEN3_5

_ALL = (
    QWEN2_VL,
    QWEN2_5_VL,
    QWEN3_VL,
    LLAVA_ONEVISION,
    LLAVA,
    LLAVA_NEXT,
    LLAVA_NEXT_VIDEO,
    MISTRAL3,
    IDEFICS3,
    SMOLVLM,
    INTERNVL,
    QWEN3_VL_MOE,
    GEMMA3,
    GLM4V,
    QWEN3_5,
    GEMMA4,
    GLM46V,
)
FAMILIES: Registry[Family] = Registry(
    "family", lambda family: family.model_type, taken="a family of model_type {name!r} is registered already"
)
for _family in _ALL:
    FAMILIES.add(_family, built_in=True)


def register_family(family: Family) -> Family:
    """Support a family by its `model_type` (`load_pair`, the CLI, `hf_generate`), as the built-in ones."""
    return FAMILIES.add(family)


def unregister_family(model_type: str) -> None:
    """Remove a family `register_family` added (the built-in ones stay)."""
    FAMILIES.remove(model_type)
