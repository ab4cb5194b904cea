"""Tiny random-weight vision-language models of the real transformers classes, built offline.

Test support (not installed by `pip install .`): the tests and the scripts import it from a checkout.
Every family is one row of ``BUILDERS`` (keyed by the config's ``model_type``, as
``sage_core/models/registry.py``): its special tokens, chat-template placeholders, config, processor and
model class.

``build_tiny_vlm(family, folder)`` writes a folder that looks like a (very small) hub checkpoint:
``config.json`` + ``model.safetensors`` + ``generation_config.json`` of the real model class, and
the real processor (image processor, video processor, tokenizer, chat template) saved with
``save_pretrained``.  The project's normal loading code then runs on it without network access::

    model = <ModelClass>.from_pretrained(folder)          # or via AutoConfig + the class
    processor = AutoProcessor.from_pretrained(folder)     # -> the real <Family>Processor

Families (``FAMILIES``): ``qwen2_vl``, ``qwen2_5_vl``, ``qwen3_vl``, ``llava_onevision``.

* ``seed`` fixes the random weights (same seed -> bit-identical weights).
* ``size="small"`` (text hidden 64, 4 heads, 2 layers) and ``size="smaller"`` (hidden 32, 2 heads,
  1 layer) are a "target" and a "draft" of the same family.  Both use the *same* tokenizer and
  the same image/video processor settings, so their prompts tokenize identically.
* ``vocab_padding=k`` makes the model's embedding / lm_head ``k`` rows larger than the tokenizer
  (like real checkpoints that pad their vocabularies differently, transformers issue 37471).
  Without padding ``text_config.vocab_size == len(tokenizer)``.
* Weights are initialised with ``initializer_range=0.3`` (instead of 0.02) so greedy logits are
  peaked: logits reach ~|10|, the median top-1/top-2 gap is ~0.5, the 5th percentile ~1e-2 and
  the rare minimum ~1e-3..4e-4 (measured over ~900 greedy steps) - far above float32 noise.
  The Siglip tower of LLaVA-OneVision keeps its own (xavier/lecun) init.
* Building is fast: ~0.1 s per model (init + save + processor) once transformers is imported.

The tokenizer is a byte-level BPE without merges (256 byte tokens, **token id == byte value**,
built with the ``tokenizers`` library through ``Qwen2Tokenizer``, the fast tokenizer class the
real checkpoints use) plus the family's special tokens from id 256 on, so any text tokenizes::

    Qwen families:   <|endoftext|> 256 (pad)  <|im_start|> 257  <|im_end|> 258 (eos)
                     <|vision_start|> 259  <|vision_end|> 260  <|image_pad|> 261  <|video_pad|> 262
                     len(tokenizer) == 263
    llava_onevision: <|endoftext|> 256 (pad)  <|im_start|> 257  <|im_end|> 258 (eos)
                     <image> 259  <video> 260                   len(tokenizer) == 261

(``SPECIAL_TOKENS[family]`` has the same table.)  The chat template (saved as
``chat_template.jinja``, used by both the processor and ``AutoTokenizer``) renders
``<|im_start|>{role}\n{items in order}<|im_end|>\n`` per message, where an image item is
``<|vision_start|><|image_pad|><|vision_end|>`` (Qwen) / ``<image>`` (LLaVA-OV), a video item
``<|vision_start|><|video_pad|><|vision_end|>`` / ``<video>``; ``add_generation_prompt=True``
appends ``<|im_start|>assistant\n``.  No default system prompt.

Notes for the model code (all checked with transformers 5.24.0, torch 2.14.1 CPU)
----------------------------------------------------------------------------------
* The documented input building works unchanged for all four families, image and video::

      text = processor.apply_chat_template([{"role": "user", "content": [{"type": "image"},
                 {"type": "text", "text": prompt}]}], tokenize=False, add_generation_prompt=True)
      inputs = processor(text=[text], images=[pil_image], return_tensors="pt")
      inputs = processor(text=[text], videos=[frames],            # frames: (T, H, W, 3) uint8
                         video_metadata=[{"total_num_frames": count, "fps": fps,
                                          "frames_indices": indices}],
                         do_sample_frames=False, return_tensors="pt")
      out = model.generate(**inputs, do_sample=False, max_new_tokens=12)

  No other kwarg is needed.  The metadata may be a plain ``dict`` or a
  ``transformers.video_utils.VideoMetadata`` (same result); ``frames_indices`` may be a list or a
  numpy array; ``frames`` may also be a list of PIL images.  Pass ``**inputs`` whole to the model.
  No warnings are printed on these paths (the video processors save ``cap_pixels_per_frame=False``).
* Qwen2-VL / Qwen2.5-VL / Qwen3-VL: the processor returns ``mm_token_type_ids`` (0 text, 1 image,
  2 video), which the forward *requires* whenever ``image_grid_thw`` / ``video_grid_thw`` is given.
  Image keys: ``input_ids, attention_mask, mm_token_type_ids, pixel_values, image_grid_thw``; video
  keys: ``input_ids, attention_mask, mm_token_type_ids, pixel_values_videos, video_grid_thw``.
  After a prefill the M-RoPE offset is on ``model.model.rope_deltas`` (LongTensor ``(B, 1)``,
  negative: e.g. -14 for an 8-frame video on Qwen2-VL).
* Qwen2.5-VL additionally returns ``second_per_grid_ts`` (float tensor ``(num_videos,)``) =
  ``temporal_patch_size / sampled_fps`` with ``sampled_fps = len(frames_indices) /
  total_num_frames * fps`` (NOT ``2 / fps``: 8 frames of a 30-frame 10 fps clip -> 0.75).  It must
  reach the model; ``generate(**inputs)`` forwards it (the test checks that changing fps changes
  ``rope_deltas``).  The tiny vision config uses ``tokens_per_second=2``.
* Qwen3-VL: the chat template renders ``<|vision_start|><|video_pad|><|vision_end|>`` like the real
  one, and the processor replaces only the inner ``<|video_pad|>`` with one
  ``<{t:.1f} seconds><|vision_start|><|video_pad|>*n<|vision_end|>`` group per temporal patch
  (T frames -> T/2 groups, t = mean time of the 2 frames from ``frames_indices / fps``), so the
  prompt reads ``<|vision_start|><0.2 seconds><|vision_start|>...<|vision_end|>...<|vision_end|>``
  (the outer wrapper stays, exactly as transformers 5.24 does with the official template).  The
  timestamps are ordinary (byte) text tokens between the groups.  Without ``do_sample_frames=False``
  the Qwen3-VL video processor re-samples the given frames itself (fps=2; with no metadata it
  assumes 24 fps and silently keeps e.g. 4 of 8 frames).  Qwen3-VL's video resize bounds the
  pixels of the whole clip (T*H*W), so the tokens per frame depend on T (8 frames of 32x32 -> 4
  per group, 4 frames -> 9 per group).  Qwen3-VL image/video patch size is 16 (Qwen2/2.5: 14).
* Sizes of the visual input in tokens (tiny processors): Qwen image: 4 tokens for square images
  (min = max pixels = 56*56, resp. 64*64 for Qwen3; other aspect ratios give 2..6); Qwen2/2.5
  video: 4 tokens per 2 frames (8 frames -> 16).  LLaVA-OneVision image: anyres with Siglip
  ``image_size=32, patch_size=8`` (16 patches per crop), pinpoints ``[[32,32],[32,64],[64,32],
  [64,64]]``: 32x32 image -> 36 ``<image>`` tokens, 64x64 -> 88; video: ``T * 4 + 1`` ``<video>``
  tokens (8 frames -> 33), ``pixel_values_videos`` ``(1, T, 3, 32, 32)``.
* LLaVA-OneVision: returns ``input_ids, attention_mask, pixel_values (1, n_crops, 3, 32, 32),
  image_sizes, batch_num_images`` for an image; ``input_ids, attention_mask, pixel_values_videos``
  for a video.  No ``mm_token_type_ids``, plain 1D positions, no ``rope_deltas``.  The config
  names the ids ``image_token_index`` / ``video_token_index`` (``image_token_id`` /
  ``video_token_id`` are aliases); ``vision_feature_select_strategy="full"``.
* Config ids: ``config.image_token_id``, ``config.video_token_id`` (all families),
  ``config.vision_start_token_id`` / ``vision_end_token_id`` (Qwen).  The vocab size is on the
  text config: ``config.get_text_config().vocab_size`` (``len(tokenizer) + vocab_padding``).
* eos is ``<|im_end|>`` (``text_config.eos_token_id`` and ``generation_config.eos_token_id``),
  pad ``<|endoftext|>``; ``generation_config.json`` holds only eos/pad (no sampling, top-k/p,
  temperature or repetition penalty).  A random model sometimes emits eos early (roughly one
  greedy run in ten within 20 tokens), so ``generate(max_new_tokens=n)`` may return fewer than n
  new tokens; pass ``min_new_tokens=n`` where a test needs an exact length.
* CPU threads: on this 2-core machine with other processes running, tiny-model forwards are
  10-20x slower with torch's default 2 threads than with ``torch.set_num_threads(1)``
  (~300 ms vs ~20 ms per forward): OpenMP oversubscription.  Tests of tiny models should use 1.
* ``attn_implementation`` only matters for the instance built in memory; ``from_pretrained``
  chooses its own (default sdpa) unless given ``attn_implementation=``.  Weights do not depend on
  it (same seed -> same weights for sdpa and eager).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from sage_core.models.qwen import QWEN_SPECIAL_TOKENS

# A config, processor or tokenizer of transformers (their classes are many; the builders hand them on).
Built = Any
#: text settings -> config: (size, text kwargs, special token ids)
ConfigBuilder = Callable[[str, dict[str, Any], Mapping[str, int]], Built]
#: (family, tokenizer) -> processor
ProcessorBuilder = Callable[[str, Built], Built]

SIZES = ("small", "smaller")
INITIALIZER_RANGE = 0.3
#: Gemma 3's sliding window in the tiny models: far shorter than any prompt (an image prompt is ~50 tokens)
GEMMA3_WINDOW = 8

_QWEN_SPECIALS = QWEN_SPECIAL_TOKENS
_LLAVA_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>")
_LLAVA_IMAGE_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>")
_PIXTRAL_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "[IMG]", "[IMG_BREAK]", "[IMG_END]")
_ROW_COL = tuple(f"<row_{i + 1}_col_{j + 1}>" for i in range(6) for j in range(6))  # Idefics3's crop tags
_IDEFICS3_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<fake_token_around_image>",
    "<image>",
    "<end_of_utterance>",
    "<global-img>",
    *_ROW_COL,
)
_INTERNVL_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<video>")
_GEMMA3_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<start_of_image>",
    "<image_soft_token>",
    "<end_of_image>",
)
_GLM4V_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|video|>",
)
_GEMMA4_SPECIALS = (
    *_GEMMA3_SPECIALS,
    "<|video|>",
    "<audio_soft_token>",
    "<start_of_audio>",
    "<end_of_audio>",
)
#: InternVL's (and the Gemmas') processors read these names from their tokenizer
_INTERNVL_TOKEN_NAMES = {
    "start_image_token": "<img>",
    "end_image_token": "</img>",
    "context_image_token": "<IMG_CONTEXT>",
    "video_token": "<video>",
}
_GEMMA3_TOKEN_NAMES = {
    "boi_token": "<start_of_image>",
    "image_token": "<image_soft_token>",
    "eoi_token": "<end_of_image>",
}
_GEMMA4_TOKEN_NAMES = {
    **_GEMMA3_TOKEN_NAMES,
    "audio_token": "<audio_soft_token>",
    "boa_token": "<start_of_audio>",
    "eoa_token": "<end_of_audio>",
}
# The chat templates' (image, video) placeholders.
_QWEN_PLACEHOLDERS = ("<|vision_start|><|image_pad|><|vision_end|>", "<|vision_start|><|video_pad|><|vision_end|>")
_LLAVA_PLACEHOLDERS = ("<image>", "<video>")
_GLM4V_PLACEHOLDERS = (
    "<|begin_of_image|><|image|><|end_of_image|>",
    "<|begin_of_video|><|video|><|end_of_video|>",
)

# Text sizes: hidden, heads, kv heads, layers, intermediate.  head_dim is 16 in both sizes.
_TEXT_SIZES = {
    "small": {
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
    },
    "smaller": {
        "hidden_size": 32,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "num_hidden_layers": 1,
        "intermediate_size": 64,
    },
}
# Vision tower sizes (internal width; the output width always equals the text hidden size).
_VISION_SIZES = {
    "small": {"hidden_size": 32, "num_heads": 2, "depth": 2, "intermediate_size": 64},
    "smaller": {"hidden_size": 16, "num_heads": 1, "depth": 1, "intermediate_size": 32},
}
_MROPE_SECTION = [2, 3, 3]  # sums to head_dim / 2 = 8

# Qwen image/video resolution: min = max pixels, so every image becomes 2x2 merged tokens.
_QWEN2_PIXELS = 56 * 56  # patch 14, merge 2 -> 4x4 patches -> 4 tokens per image / per 2 frames
_QWEN3_PIXELS = 64 * 64  # patch 16, merge 2 -> 4x4 patches -> 4 tokens
# LLaVA-OneVision: Siglip image_size 32, patch 8 -> 4x4 = 16 tokens per crop, 4 per video frame.
_LLAVA_IMAGE = 32
_LLAVA_PATCH = 8
_LLAVA_PINPOINTS = [[32, 32], [32, 64], [64, 32], [64, 64]]
_CLIP_SIDE = 32  # CLIP image_size 32, patch 8 -> 16 patches (+ CLS, dropped by the "default" strategy)
_PIXTRAL_SIDE = 64  # Pixtral longest edge 64, patch 8, merge 2 -> 4x4 tokens + row breaks + end
# Idefics3 / SmolVLM / InternVL: 32x32 crops of 4x4 patches, pixel-shuffled by 2 -> 4 tokens per crop
_IDEFICS3_SEQ = 4


# --------------------------------------------------------------------------------------------
# chat template (simplified versions of the real ones: one or more turns, content items in order)
# --------------------------------------------------------------------------------------------
def _chat_template(image_placeholder: str, video_placeholder: str) -> str:
    return (
        "{%- for message in messages -%}"
        "{{ '<|im_start|>' + message['role'] + '\n' }}"
        "{%- if message['content'] is string -%}{{ message['content'] }}"
        "{%- else -%}{%- for item in message['content'] -%}"
        "{%- if item['type'] == 'image' or 'image' in item or 'image_url' in item -%}"
        "{{ '" + image_placeholder + "' }}"
        "{%- elif item['type'] == 'video' or 'video' in item -%}"
        "{{ '" + video_placeholder + "' }}"
        "{%- elif 'text' in item -%}{{ item['text'] }}"
        "{%- endif -%}"
        "{%- endfor -%}{%- endif -%}"
        "{{ '<|im_end|>\n' }}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
    )


# --------------------------------------------------------------------------------------------
# text settings shared by every family
# --------------------------------------------------------------------------------------------
def _text_kwargs(specials: Mapping[str, int], size: str, vocab_size: int) -> dict[str, Any]:
    kw: dict[str, Any] = dict(_TEXT_SIZES[size])
    kw.update(
        vocab_size=vocab_size,
        max_position_embeddings=4096,
        initializer_range=INITIALIZER_RANGE,
        rms_norm_eps=1e-6,
        bos_token_id=None,
        eos_token_id=specials["<|im_end|>"],
        pad_token_id=specials["<|endoftext|>"],
        tie_word_embeddings=False,
    )
    return kw


def _llama_text(text: dict[str, Any]) -> dict[str, Any]:
    """The LLaMA-style text settings the families added later start from (each changes what it needs)."""
    text.update(model_type="llama", rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    return text


def _qwen_ids(sp: Mapping[str, int]) -> dict[str, Any]:
    return {
        "image_token_id": sp["<|image_pad|>"],
        "video_token_id": sp["<|video_pad|>"],
        "vision_start_token_id": sp["<|vision_start|>"],
        "vision_end_token_id": sp["<|vision_end|>"],
    }


def _qwen_rope(theta: float, **more: object) -> dict[str, object]:
    return {"rope_type": "default", "rope_theta": theta, "mrope_section": _MROPE_SECTION, **more}


def _tower(size: str, *, qwen_names: bool = False, **more: Any) -> dict[str, Any]:
    """A vision tower of `size` (width, MLP, heads, depth) in the CLIP / SigLIP names, or Qwen's
    (`qwen_names`: heads `num_heads`, layers `depth`), then `more`."""
    vis = _VISION_SIZES[size]
    heads, layers = ("num_heads", "depth") if qwen_names else ("num_attention_heads", "num_hidden_layers")
    return {
        "hidden_size": vis["hidden_size"],
        "intermediate_size": vis["intermediate_size"],
        heads: vis["num_heads"],
        layers: vis["depth"],
        **more,
    }


def _qwen_tower(size: str, text: Mapping[str, Any], patch_size: int, **more: Any) -> dict[str, Any]:
    """A Qwen2.5-VL-style tower of `size` (as Qwen3-VL's and GLM-4.1V's): 2 x 2 patches of 2 frames merged
    into the text's width, then `more`."""
    merge = {"out_hidden_size": text["hidden_size"], "spatial_merge_size": 2, "temporal_patch_size": 2}
    return _tower(size, qwen_names=True, patch_size=patch_size, **merge, **more)


def _siglip(size: str, side: int) -> dict[str, Any]:
    """LLaVA-OneVision's and Gemma 3's tower: SigLIP without its pooling head, on `side`-pixel images."""
    return {
        "model_type": "siglip_vision_model",
        **_tower(size, image_size=side, patch_size=_LLAVA_PATCH, vision_use_head=False),
    }


def _config_class(name: str) -> Any:
    """transformers' config class of this name (the rows that share a builder name theirs)."""
    import transformers

    return getattr(transformers, name)


# --------------------------------------------------------------------------------------------
# configs, one per family
# --------------------------------------------------------------------------------------------
def _qwen2_vl_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    import transformers

    vis = _VISION_SIZES[size]
    text.update(rope_parameters=_qwen_rope(1000000.0))
    vision = {
        "depth": vis["depth"],
        "embed_dim": vis["hidden_size"],
        "hidden_size": text["hidden_size"],
        "num_heads": vis["num_heads"],
        "mlp_ratio": 2,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "initializer_range": INITIALIZER_RANGE,
    }
    return transformers.Qwen2VLConfig(
        text_config=text, vision_config=vision, tie_word_embeddings=False, **_qwen_ids(sp)
    )


def _qwen2_5_vl_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    import transformers

    text.update(rope_parameters=_qwen_rope(1000000.0))
    vision = _qwen_tower(
        size,
        text,
        14,
        tokens_per_second=2,
        window_size=56,
        fullatt_block_indexes=[_VISION_SIZES[size]["depth"] - 1],
        initializer_range=INITIALIZER_RANGE,
    )
    return transformers.Qwen2_5_VLConfig(
        text_config=text, vision_config=vision, tie_word_embeddings=False, **_qwen_ids(sp)
    )


def _qwen3_vl_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    import transformers

    text.update(head_dim=16, rope_parameters=_qwen_rope(5000000.0, mrope_interleaved=True))
    text.pop("tie_word_embeddings")
    vision = _qwen_tower(
        size, text, 16, num_position_embeddings=16, deepstack_visual_indexes=[0], initializer_range=INITIALIZER_RANGE
    )
    return transformers.Qwen3VLConfig(
        text_config=text, vision_config=vision, tie_word_embeddings=False, **_qwen_ids(sp)
    )


def _parts_of(dense: Built) -> tuple[dict[str, Any], dict[str, Any]]:
    """A tiny config's text and vision settings, without what names their classes."""
    text, vision = dense.text_config.to_dict(), dense.vision_config.to_dict()
    for part in (text, vision):
        for key in ("model_type", "architectures", "transformers_version"):
            part.pop(key, None)
    return text, vision


def _dense_ids(dense: Built) -> dict[str, Any]:
    names = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    return {name: getattr(dense, name) for name in names}


def _qwen3_vl_moe_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    """Qwen3-VL-MoE from a tiny Qwen3-VL config: the same settings, experts in every text layer."""
    import transformers

    dense = _qwen3_vl_config(size, text, sp)
    text, vision = _parts_of(dense)
    text.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1)
    return transformers.Qwen3VLMoeConfig(
        text_config=text, vision_config=vision, tie_word_embeddings=False, **_dense_ids(dense)
    )


def _qwen3_5_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    """Qwen3.5 from a tiny Qwen3-VL config: linear-attention (gated delta rule) layers before each
    full-attention one, RoPE on half of each head (the real models: a quarter)."""
    import transformers

    dense = _qwen3_vl_config(size, text, sp)
    text, vision = _parts_of(dense)
    vision.pop("deepstack_visual_indexes", None)
    text.update(
        num_hidden_layers=2,  # the draft too (narrower): one layer of each kind
        layer_types=["linear_attention", "full_attention"],
        linear_conv_kernel_dim=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
    )
    text["rope_parameters"] = dict(text["rope_parameters"], partial_rotary_factor=0.5, mrope_section=[1, 1, 2])
    return transformers.Qwen3_5Config(
        text_config=text, vision_config=vision, tie_word_embeddings=False, **_dense_ids(dense)
    )


def _llava_onevision_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    import transformers

    text.update(model_type="qwen2", rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    return transformers.LlavaOnevisionConfig(
        text_config=text,
        vision_config=_siglip(size, _LLAVA_IMAGE),
        image_token_index=sp["<image>"],
        video_token_index=sp["<video>"],
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        image_grid_pinpoints=copy.deepcopy(_LLAVA_PINPOINTS),
        vision_aspect_ratio="anyres_max_9",
        tie_word_embeddings=False,
    )


def _llava_kwargs(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> dict[str, Any]:
    """LLaVA 1.5 / NeXT / NeXT-Video: a CLIP tower and a LLaMA text model."""
    width = _VISION_SIZES[size]["hidden_size"]
    clip = {
        "model_type": "clip_vision_model",
        **_tower(size, image_size=_CLIP_SIDE, patch_size=_LLAVA_PATCH, projection_dim=width),
    }
    return {
        "text_config": _llama_text(text),
        "vision_config": clip,
        "image_token_index": sp.get("<image>"),
        "vision_feature_select_strategy": "default",
        "vision_feature_layer": -2,
        "tie_word_embeddings": False,
    }


def _llava_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    import transformers

    kwargs = _llava_kwargs(size, text, sp)
    return transformers.LlavaConfig(image_seq_length=(_CLIP_SIDE // _LLAVA_PATCH) ** 2, **kwargs)


def _llava_next_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    import transformers

    kwargs = _llava_kwargs(size, text, sp)
    return transformers.LlavaNextConfig(image_grid_pinpoints=copy.deepcopy(_LLAVA_PINPOINTS), **kwargs)


def _llava_next_video_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    import transformers

    return transformers.LlavaNextVideoConfig(
        image_grid_pinpoints=copy.deepcopy(_LLAVA_PINPOINTS),
        video_token_index=sp["<video>"],
        spatial_pool_stride=2,
        **_llava_kwargs(size, text, sp),
    )


def _mistral3_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    """Pixtral tower, Mistral text with head_dim given apart from hidden / heads."""
    import transformers

    vis = _VISION_SIZES[size]
    # as Mistral-Small-3.1 (no window)
    _llama_text(text).update(model_type="mistral", head_dim=16, sliding_window=None)
    pixtral = _tower(
        size, image_size=_PIXTRAL_SIDE, patch_size=_LLAVA_PATCH, head_dim=vis["hidden_size"] // vis["num_heads"]
    )
    vision = {"model_type": "pixtral", **pixtral}
    return transformers.Mistral3Config(
        text_config=text,
        vision_config=vision,
        image_token_index=sp["[IMG]"],
        spatial_merge_size=2,
        vision_feature_layer=-1,
        tie_word_embeddings=False,
    )


def _idefics_like(class_name: str, size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    """Idefics3 and SmolVLM (`class_name`, their config class): a LLaMA text model behind
    `model.model.text_model`."""
    return _config_class(class_name)(
        text_config=_llama_text(text),
        vision_config=_tower(size, image_size=_CLIP_SIDE, patch_size=_LLAVA_PATCH),
        image_token_id=sp["<image>"],
        scale_factor=2,
        tie_word_embeddings=False,
    )


def _internvl_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    """InternVL: a Qwen2 text model."""
    import transformers

    _llama_text(text).update(model_type="qwen2", rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    return transformers.InternVLConfig(
        text_config=text,
        vision_config=_tower(size, image_size=[_CLIP_SIDE, _CLIP_SIDE], patch_size=[_LLAVA_PATCH, _LLAVA_PATCH]),
        image_token_id=sp["<IMG_CONTEXT>"],
        image_seq_length=_IDEFICS3_SEQ,
        downsample_ratio=0.5,
        tie_word_embeddings=False,
    )


def _gemma3_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    import transformers

    _llama_text(text).update(
        model_type="gemma3_text",
        # one per layer type, as transformers 5.17 requires (5.24 also reads a flat one and fills full_attention's)
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        head_dim=16,
        query_pre_attn_scalar=16,
        sliding_window=GEMMA3_WINDOW,
        layer_types=["sliding_attention", "full_attention"][: text["num_hidden_layers"]],
    )
    return transformers.Gemma3Config(
        text_config=text,
        vision_config=_siglip(size, _CLIP_SIDE),
        mm_tokens_per_image=_IDEFICS3_SEQ,
        boi_token_index=sp["<start_of_image>"],
        eoi_token_index=sp["<end_of_image>"],
        image_token_index=sp["<image_soft_token>"],
        initializer_range=INITIALIZER_RANGE,
        tie_word_embeddings=False,
    )


def _gemma4_config(size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    import transformers

    vis = _VISION_SIZES[size]
    _llama_text(text).pop("rope_parameters")  # Gemma 4's own: one per layer type
    text.update(
        model_type="gemma4_text",
        num_hidden_layers=4,  # the last two share the KV of the first two (num_kv_shared_layers)
        head_dim=16,
        global_head_dim=16,
        sliding_window=GEMMA3_WINDOW,
        layer_types=["sliding_attention", "full_attention"] * 2,
        num_kv_shared_layers=2,
        vocab_size_per_layer_input=text["vocab_size"],
        hidden_size_per_layer_input=8,
    )
    vision = _tower(
        size,
        num_key_value_heads=vis["num_heads"],
        head_dim=vis["hidden_size"] // vis["num_heads"],
        patch_size=_LLAVA_PATCH,
        pooling_kernel_size=2,
        position_embedding_size=64,
    )
    return transformers.Gemma4Config(
        text_config=text,
        vision_config=vision,
        audio_config=None,
        boi_token_id=sp["<start_of_image>"],
        eoi_token_id=sp["<end_of_image>"],
        image_token_id=sp["<image_soft_token>"],
        video_token_id=sp["<|video|>"],
        tie_word_embeddings=False,
    )


def _glm_like(class_name: str, size: str, text: dict[str, Any], sp: Mapping[str, int]) -> Built:
    """GLM-4.1V and GLM-4.6V (`class_name`, their config class)."""
    _llama_text(text).pop("model_type")
    # M-RoPE on half of each head (partial_rotary_factor 0.5): the sections sum to 16 * 0.5 / 2
    text["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": 10000.0,
        "mrope_section": [1, 1, 2],
        "partial_rotary_factor": 0.5,
    }
    return _config_class(class_name)(
        text_config=text,
        vision_config=_qwen_tower(size, text, 14, image_size=56),
        image_token_id=sp["<|image|>"],
        video_token_id=sp["<|video|>"],
        image_start_token_id=sp["<|begin_of_image|>"],
        image_end_token_id=sp["<|end_of_image|>"],
        video_start_token_id=sp["<|begin_of_video|>"],
        video_end_token_id=sp["<|end_of_video|>"],
        tie_word_embeddings=False,
    )


# --------------------------------------------------------------------------------------------
# processors, one per family (the tokenizer is built first, from the family's row)
# --------------------------------------------------------------------------------------------
def _qwen_vl_processor(family: str, tok: Built) -> Built:
    """Qwen2-VL, Qwen2.5-VL and Qwen3-VL (whose processor the MoE and Qwen3.5 rows use too)."""
    import transformers
    from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

    qwen3 = family == "qwen3_vl"
    if qwen3:
        patch, pixels, mean, std = 16, _QWEN3_PIXELS, [0.5] * 3, [0.5] * 3
    else:
        patch, pixels, mean, std = 14, _QWEN2_PIXELS, list(OPENAI_CLIP_MEAN), list(OPENAI_CLIP_STD)
    common: dict[str, Any] = {
        "patch_size": patch,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": mean,
        "image_std": std,
    }
    image_processor = transformers.Qwen2VLImageProcessor(
        size={"shortest_edge": pixels, "longest_edge": pixels}, **common
    )
    video_kwargs: dict[str, Any] = {
        "size": {"shortest_edge": pixels, "longest_edge": pixels},
        "cap_pixels_per_frame": False,
        **common,
    }
    if qwen3:
        # Qwen3-VL's video smart_resize bounds the pixels of the whole clip (T * H * W)
        video_kwargs.update(
            size={"shortest_edge": 8 * pixels, "longest_edge": 16 * pixels}, fps=2, do_sample_frames=True
        )
    video_class = transformers.Qwen3VLVideoProcessor if qwen3 else transformers.Qwen2VLVideoProcessor
    processor_class = {
        "qwen2_vl": transformers.Qwen2VLProcessor,
        "qwen2_5_vl": transformers.Qwen2_5_VLProcessor,
        "qwen3_vl": transformers.Qwen3VLProcessor,
    }[family]
    return processor_class(
        image_processor=image_processor,
        tokenizer=tok,
        video_processor=video_class(**video_kwargs),
        chat_template=tok.chat_template,
    )


def _llava_onevision_processor(family: str, tok: Built) -> Built:
    import transformers

    sq = {"height": _LLAVA_IMAGE, "width": _LLAVA_IMAGE}
    image_processor = transformers.LlavaOnevisionImageProcessor(
        size=dict(sq),
        crop_size=dict(sq),
        image_grid_pinpoints=copy.deepcopy(_LLAVA_PINPOINTS),
        image_mean=[0.5] * 3,
        image_std=[0.5] * 3,
    )
    video_processor = transformers.LlavaOnevisionVideoProcessor(
        size=dict(sq), image_mean=[0.5] * 3, image_std=[0.5] * 3
    )
    return transformers.LlavaOnevisionProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        video_processor=video_processor,
        num_image_tokens=(_LLAVA_IMAGE // _LLAVA_PATCH) ** 2,
        vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_9",
        chat_template=tok.chat_template,
    )


def _gemma4_processor(family: str, tok: Built) -> Built:
    import transformers

    budget: dict[str, Any] = {
        "patch_size": _LLAVA_PATCH,
        "max_soft_tokens": 70,
        "pooling_kernel_size": 2,
    }  # the smallest budget
    return transformers.Gemma4Processor(
        feature_extractor=transformers.Gemma4AudioFeatureExtractor(),
        image_processor=transformers.Gemma4ImageProcessor(**budget),
        tokenizer=tok,
        video_processor=transformers.Gemma4VideoProcessor(**budget),
        image_seq_length=70,
        chat_template=tok.chat_template,
    )


def _glm_processor(family: str, tok: Built) -> Built:
    """GLM-4.1V and GLM-4.6V: 2x2 merged tokens per image, 1 per frame pair."""
    import transformers

    common: dict[str, Any] = {"patch_size": 14, "temporal_patch_size": 2, "merge_size": 2}
    pixels = 4 * _QWEN2_PIXELS
    glm46 = family == "glm46v"
    image_class = transformers.Glm46VImageProcessor if glm46 else transformers.Glm4vImageProcessor
    video_class = transformers.Glm46VVideoProcessor if glm46 else transformers.Glm4vVideoProcessor
    return (transformers.Glm46VProcessor if glm46 else transformers.Glm4vProcessor)(
        image_processor=image_class(size={"shortest_edge": pixels, "longest_edge": pixels}, **common),
        tokenizer=tok,
        video_processor=video_class(size={"shortest_edge": _QWEN2_PIXELS, "longest_edge": 8 * _QWEN2_PIXELS}, **common),
        chat_template=tok.chat_template,
    )


def _gemma3_processor(family: str, tok: Built) -> Built:
    import transformers

    image_processor = transformers.Gemma3ImageProcessor(
        size={"height": _CLIP_SIDE, "width": _CLIP_SIDE}, do_pan_and_scan=False
    )
    return transformers.Gemma3Processor(
        image_processor=image_processor,
        tokenizer=tok,
        image_seq_length=_IDEFICS3_SEQ,
        chat_template=tok.chat_template,
    )


_CROPS: dict[str, Any] = {"size": {"longest_edge": 2 * _CLIP_SIDE}, "max_image_size": {"longest_edge": _CLIP_SIDE}}


def _idefics3_processor(family: str, tok: Built) -> Built:
    import transformers

    return transformers.Idefics3Processor(
        image_processor=transformers.Idefics3ImageProcessor(**copy.deepcopy(_CROPS)),
        tokenizer=tok,
        image_seq_len=_IDEFICS3_SEQ,
        chat_template=tok.chat_template,
    )


def _smolvlm_processor(family: str, tok: Built) -> Built:
    import transformers

    frame = {"longest_edge": _CLIP_SIDE}
    return transformers.SmolVLMProcessor(
        image_processor=transformers.SmolVLMImageProcessor(**copy.deepcopy(_CROPS)),
        tokenizer=tok,
        video_processor=transformers.SmolVLMVideoProcessor(size=dict(frame), max_image_size=dict(frame)),
        image_seq_len=_IDEFICS3_SEQ,
        chat_template=tok.chat_template,
    )


def _internvl_processor(family: str, tok: Built) -> Built:
    import transformers

    side = {"height": _CLIP_SIDE, "width": _CLIP_SIDE}
    return transformers.InternVLProcessor(
        image_processor=transformers.GotOcr2ImageProcessor(
            size=dict(side), crop_to_patches=True, min_patches=1, max_patches=4
        ),
        tokenizer=tok,
        video_processor=transformers.InternVLVideoProcessor(size=dict(side)),
        image_seq_length=_IDEFICS3_SEQ,
        chat_template=tok.chat_template,
    )


def _mistral3_processor(family: str, tok: Built) -> Built:
    import transformers

    image_processor = transformers.PixtralImageProcessor(size={"longest_edge": _PIXTRAL_SIDE}, patch_size=_LLAVA_PATCH)
    return transformers.PixtralProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        patch_size=_LLAVA_PATCH,
        spatial_merge_size=2,
        chat_template=tok.chat_template,
    )


def _llava_common(tok: Built) -> dict[str, Any]:
    return {
        "tokenizer": tok,
        "patch_size": _LLAVA_PATCH,
        "vision_feature_select_strategy": "default",
        "num_additional_image_tokens": 1,
        "chat_template": tok.chat_template,
    }


def _llava_processor(family: str, tok: Built) -> Built:
    import transformers

    sq = {"height": _CLIP_SIDE, "width": _CLIP_SIDE}
    image_processor = transformers.CLIPImageProcessor(size={"shortest_edge": _CLIP_SIDE}, crop_size=dict(sq))
    return transformers.LlavaProcessor(image_processor=image_processor, **_llava_common(tok))


def _llava_next_image_processor() -> Built:
    import transformers

    sq = {"height": _CLIP_SIDE, "width": _CLIP_SIDE}
    return transformers.LlavaNextImageProcessor(
        size={"shortest_edge": _CLIP_SIDE}, crop_size=dict(sq), image_grid_pinpoints=copy.deepcopy(_LLAVA_PINPOINTS)
    )


def _llava_next_processor(family: str, tok: Built) -> Built:
    import transformers

    return transformers.LlavaNextProcessor(image_processor=_llava_next_image_processor(), **_llava_common(tok))


def _llava_next_video_processor(family: str, tok: Built) -> Built:
    import transformers

    sq = {"height": _CLIP_SIDE, "width": _CLIP_SIDE}
    video_processor = transformers.LlavaNextVideoVideoProcessor(size={"shortest_edge": _CLIP_SIDE}, crop_size=dict(sq))
    return transformers.LlavaNextVideoProcessor(
        video_processor=video_processor, image_processor=_llava_next_image_processor(), **_llava_common(tok)
    )


# --------------------------------------------------------------------------------------------
# the table: one row per family
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TinyFamily:
    """How to build one family's tiny checkpoint."""

    model_type: str
    specials: tuple[str, ...]  # special tokens, ids from 256 on in this order
    placeholders: tuple[str, str]  # the chat template's image and video items
    config: ConfigBuilder
    processor: ProcessorBuilder
    model_class: str  # the transformers class, by name
    token_names: Mapping[str, str] = field(default_factory=dict)  # special tokens the processor reads by name
    processor_family: str = ""  # whose processor (and tokenizer) it uses, when not its own

    @property
    def special_ids(self) -> dict[str, int]:
        return {token: 256 + i for i, token in enumerate(self.specials)}


_ROWS = (
    TinyFamily("qwen2_vl", _QWEN_SPECIALS, _QWEN_PLACEHOLDERS, _qwen2_vl_config, _qwen_vl_processor,
               "Qwen2VLForConditionalGeneration"),
    TinyFamily("qwen2_5_vl", _QWEN_SPECIALS, _QWEN_PLACEHOLDERS, _qwen2_5_vl_config, _qwen_vl_processor,
               "Qwen2_5_VLForConditionalGeneration"),
    TinyFamily("qwen3_vl", _QWEN_SPECIALS, _QWEN_PLACEHOLDERS, _qwen3_vl_config, _qwen_vl_processor,
               "Qwen3VLForConditionalGeneration"),
    TinyFamily("llava_onevision", _LLAVA_SPECIALS, _LLAVA_PLACEHOLDERS, _llava_onevision_config,
               _llava_onevision_processor, "LlavaOnevisionForConditionalGeneration"),
    TinyFamily("llava", _LLAVA_IMAGE_SPECIALS, _LLAVA_PLACEHOLDERS, _llava_config, _llava_processor,
               "LlavaForConditionalGeneration"),
    TinyFamily("llava_next", _LLAVA_IMAGE_SPECIALS, _LLAVA_PLACEHOLDERS, _llava_next_config, _llava_next_processor,
               "LlavaNextForConditionalGeneration"),
    TinyFamily("llava_next_video", _LLAVA_SPECIALS, _LLAVA_PLACEHOLDERS, _llava_next_video_config,
               _llava_next_video_processor, "LlavaNextVideoForConditionalGeneration"),
    TinyFamily("mistral3", _PIXTRAL_SPECIALS, ("[IMG]", "[IMG]"), _mistral3_config, _mistral3_processor,
               "Mistral3ForConditionalGeneration"),
    TinyFamily("idefics3", _IDEFICS3_SPECIALS, _LLAVA_PLACEHOLDERS, partial(_idefics_like, "Idefics3Config"),
               _idefics3_processor, "Idefics3ForConditionalGeneration"),
    TinyFamily("smolvlm", (*_IDEFICS3_SPECIALS, "<video>"), _LLAVA_PLACEHOLDERS,
               partial(_idefics_like, "SmolVLMConfig"), _smolvlm_processor, "SmolVLMForConditionalGeneration"),
    TinyFamily("internvl", _INTERNVL_SPECIALS, ("<IMG_CONTEXT>", "<video>"), _internvl_config, _internvl_processor,
               "InternVLForConditionalGeneration", token_names=_INTERNVL_TOKEN_NAMES),
    TinyFamily("qwen3_vl_moe", _QWEN_SPECIALS, _QWEN_PLACEHOLDERS, _qwen3_vl_moe_config, _qwen_vl_processor,
               "Qwen3VLMoeForConditionalGeneration", processor_family="qwen3_vl"),
    TinyFamily("gemma3", _GEMMA3_SPECIALS, ("<start_of_image>", "<video>"), _gemma3_config, _gemma3_processor,
               "Gemma3ForConditionalGeneration", token_names=_GEMMA3_TOKEN_NAMES),
    TinyFamily("glm4v", _GLM4V_SPECIALS, _GLM4V_PLACEHOLDERS, partial(_glm_like, "Glm4vConfig"), _glm_processor,
               "Glm4vForConditionalGeneration"),
    TinyFamily("qwen3_5", _QWEN_SPECIALS, _QWEN_PLACEHOLDERS, _qwen3_5_config, _qwen_vl_processor,
               "Qwen3_5ForConditionalGeneration", processor_family="qwen3_vl"),
    TinyFamily("gemma4", _GEMMA4_SPECIALS, ("<image_soft_token>", "<|video|>"), _gemma4_config, _gemma4_processor,
               "Gemma4ForConditionalGeneration", token_names=_GEMMA4_TOKEN_NAMES),
    TinyFamily("glm46v", _GLM4V_SPECIALS, _GLM4V_PLACEHOLDERS, partial(_glm_like, "Glm46VConfig"), _glm_processor,
               "Glm46VForConditionalGeneration"),
)  # fmt: skip
#: every family's builder, by the config's `model_type` (as sage_core/models/registry.py's FAMILIES)
BUILDERS: dict[str, TinyFamily] = {row.model_type: row for row in _ROWS}

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "llava_onevision")
# Families added later: a LLaMA (LLaVA 1.5, NeXT, NeXT-Video) or Mistral (Mistral 3) text model, 1-D positions.
# Idefics3 and SmolVLM: a LLaMA text model behind `model.model.text_model`; InternVL: a Qwen2 text model.
# Qwen3-VL-MoE: Qwen3-VL with sparse experts in every text layer (4 experts, 2 per token).
EXTRA_FAMILIES = tuple(name for name in BUILDERS if name not in FAMILIES)
ALL_FAMILIES = FAMILIES + EXTRA_FAMILIES
#: special token -> id, per family (byte tokens take ids 0..255).
SPECIAL_TOKENS = {name: row.special_ids for name, row in BUILDERS.items()}


def _row(family: str) -> TinyFamily:
    if family not in BUILDERS:
        raise ValueError(f"unknown family {family!r}; expected one of {ALL_FAMILIES}")
    return BUILDERS[family]


# --------------------------------------------------------------------------------------------
# tokenizer, config, processor, model class
# --------------------------------------------------------------------------------------------
def _byte_vocab() -> dict[str, int]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {ch: b for b, ch in sorted(bytes_to_unicode().items())}


def build_tokenizer(family: str) -> Built:
    """The family's tokenizer: byte-level BPE without merges + special tokens (ids from 256)."""
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    row = _row(family)
    specials = row.special_ids
    vocab = _byte_vocab()
    vocab.update(specials)  # fixed ids from 256 on, in SPECIAL_TOKENS order
    more: dict[str, Any] = {"unk_token": None}  # byte-level: every text has tokens
    if row.token_names:
        more["extra_special_tokens"] = dict(row.token_names)
    tok = Qwen2Tokenizer(
        vocab=vocab,
        merges=[],
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
        **more,
    )
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    for t, i in specials.items():
        got = tok.convert_tokens_to_ids(t)
        assert got == i, (t, got, i)
    assert len(tok) == 256 + len(specials), len(tok)
    tok.chat_template = _chat_template(*row.placeholders)
    return tok


def build_config(family: str, size: str = "small", vocab_padding: int = 0) -> Built:
    """The tiny config of the family's real config class."""
    row = _row(family)
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; expected one of {SIZES}")
    if vocab_padding < 0:
        raise ValueError("vocab_padding must be >= 0")
    sp = row.special_ids
    cfg = row.config(size, _text_kwargs(sp, size, 256 + len(sp) + vocab_padding), sp)
    cfg.initializer_range = INITIALIZER_RANGE
    return cfg


def build_processor(family: str) -> Built:
    """The real processor class of the family, with tiny image/video resolutions."""
    family = _row(family).processor_family or family
    return _row(family).processor(family, build_tokenizer(family))


def model_class(family: str) -> Any:
    """The real ``...ForConditionalGeneration`` class of ``family``."""
    import transformers

    return getattr(transformers, _row(family).model_class)


# --------------------------------------------------------------------------------------------
# the builder
# --------------------------------------------------------------------------------------------
def build_tiny_vlm(
    family: str,
    folder: str | Path,
    *,
    seed: int = 0,
    size: str = "small",
    attn_implementation: str = "sdpa",
    vocab_padding: int = 0,
) -> Path:
    """Build a tiny random-weight model + real processor of ``family`` into ``folder``; return it."""
    from transformers import GenerationConfig

    cfg = build_config(family, size=size, vocab_padding=vocab_padding)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sp = SPECIAL_TOKENS[family]

    cls = model_class(family)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = cls._from_config(cfg, attn_implementation=attn_implementation, dtype=torch.float32)
    model.eval()
    model.generation_config = GenerationConfig(
        bos_token_id=None,
        eos_token_id=sp["<|im_end|>"],
        pad_token_id=sp["<|endoftext|>"],
    )
    model.save_pretrained(folder)
    build_processor(family).save_pretrained(folder)
    return folder


__all__ = [
    "ALL_FAMILIES",
    "BUILDERS",
    "EXTRA_FAMILIES",
    "FAMILIES",
    "GEMMA3_WINDOW",
    "INITIALIZER_RANGE",
    "SIZES",
    "SPECIAL_TOKENS",
    "TinyFamily",
    "build_config",
    "build_processor",
    "build_tiny_vlm",
    "build_tokenizer",
    "model_class",
]
