"""Every supported family, by the config's `model_type`."""

from __future__ import annotations

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
FAMILIES: dict[str, Family] = {family.model_type: family for family in _ALL}
