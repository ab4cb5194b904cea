"""Real GPU pairs whose published files share a tokenizer, and the paper's 72B targets on several GPUs.

Each pair is checked again when it loads (`check_pair` refuses two tokenizers in one sentence), so a
preset can never decode with a mismatched draft. Memory figures are the bf16 weights (2 bytes a
parameter) plus the KV cache and activations of one request; a 72B target (~146 GB) does not fit one
141 GB GPU and is spread over two by accelerate (`device_map`, `max_memory`), the draft on the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError


@dataclass(frozen=True)
class GpuPreset:
    """A target and its draft for GPUs: placement and the memory the pair needs, as written down."""

    key: str
    label: str
    target: str
    draft: str
    memory: str  # what the pair needs, in words
    device_map: str | None = None
    max_memory: dict[str, str] = field(default_factory=dict)
    draft_device: str | None = None
    single_gpu: bool = True


GPU_PRESETS: tuple[GpuPreset, ...] = (
    GpuPreset(
        "qwen2.5-vl-7b",
        "Qwen2.5-VL-7B-Instruct, 3B draft",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "Qwen/Qwen2.5-VL-3B-Instruct",
        "about 25 GB on one GPU (16.6 + 7.5 GB of bf16 weights)",
    ),
    GpuPreset(
        "llava-ov-7b",
        "LLaVA-OneVision-7B, 0.5B draft",
        "llava-hf/llava-onevision-qwen2-7b-ov-hf",
        "llava-hf/llava-onevision-qwen2-0.5b-ov-hf",
        "about 18 GB on one GPU (16 + 1.8 GB of bf16 weights)",
    ),
    GpuPreset(
        "qwen3-vl-8b",
        "Qwen3-VL-8B-Instruct, 2B draft",
        "Qwen/Qwen3-VL-8B-Instruct",
        "Qwen/Qwen3-VL-2B-Instruct",
        "about 22 GB on one GPU (17 + 4.5 GB of bf16 weights)",
    ),
    GpuPreset(
        "smolvlm2-2.2b",
        "SmolVLM2-2.2B-Instruct, 256M draft",
        "HuggingFaceTB/SmolVLM2-2.2B-Instruct",
        "HuggingFaceTB/SmolVLM2-256M-Video-Instruct",
        "about 6 GB on one GPU (4.5 + 0.5 GB of bf16 weights)",
    ),
    GpuPreset(
        "qwen2.5-vl-72b",
        "Qwen2.5-VL-72B-Instruct, 7B draft (two GPUs)",
        "Qwen/Qwen2.5-VL-72B-Instruct",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "about 165 GB over two 141 GB GPUs (146 GB target + 16 GB draft of bf16 weights)",
        device_map="auto",
        max_memory={"0": "110GiB", "1": "130GiB"},
        draft_device="cuda:0",
        single_gpu=False,
    ),
    GpuPreset(
        "llava-ov-72b",
        "LLaVA-OneVision-72B, 0.5B draft (two GPUs)",
        "llava-hf/llava-onevision-qwen2-72b-ov-hf",
        "llava-hf/llava-onevision-qwen2-0.5b-ov-hf",
        "about 150 GB over two 141 GB GPUs (146 GB target + 1 GB draft of bf16 weights)",
        device_map="auto",
        max_memory={"0": "120GiB", "1": "130GiB"},
        draft_device="cuda:0",
        single_gpu=False,
    ),
)


def gpu_preset(key: str) -> GpuPreset:
    """The preset named `key`, or one sentence listing them."""
    for preset in GPU_PRESETS:
        if preset.key == key:
            return preset
    raise InputError(f"unknown preset {key!r}; choose one of {', '.join(p.key for p in GPU_PRESETS)}")
