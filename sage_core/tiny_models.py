"""Tiny random-weight vision-language models of the real transformers classes, built offline.

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

Notes for the adapter (all checked with transformers 5.24.0, torch 2.14.1 CPU)
-------------------------------------------------------------------------------
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
from pathlib import Path

import torch

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "llava_onevision")
# Families added later: a LLaMA (LLaVA 1.5, NeXT, NeXT-Video) or Mistral (Mistral 3) text model, 1-D positions.
# Idefics3 and SmolVLM: a LLaMA text model behind `model.model.text_model`; InternVL: a Qwen2 text model.
# Qwen3-VL-MoE: Qwen3-VL with sparse experts in every text layer (4 experts, 2 per token).
EXTRA_FAMILIES = (
    "llava",
    "llava_next",
    "llava_next_video",
    "mistral3",
    "idefics3",
    "smolvlm",
    "internvl",
    "qwen3_vl_moe",
    "gemma3",
    "glm4v",
    "qwen3_5",
    "gemma4",
    "glm46v",
)
#: Gemma 3's sliding window in the tiny models: far shorter than any prompt (an image prompt is ~50 tokens)
GEMMA3_WINDOW = 8
ALL_FAMILIES = FAMILIES + EXTRA_FAMILIES
SIZES = ("small", "smaller")

INITIALIZER_RANGE = 0.3

_QWEN_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
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
#: InternVL's (and Gemma 3's) processor reads these names from its tokenizer
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

#: special token -> id, per family (byte tokens take ids 0..255).
SPECIAL_TOKENS = {
    "qwen2_vl": {t: 256 + i for i, t in enumerate(_QWEN_SPECIALS)},
    "qwen2_5_vl": {t: 256 + i for i, t in enumerate(_QWEN_SPECIALS)},
    "qwen3_vl": {t: 256 + i for i, t in enumerate(_QWEN_SPECIALS)},
    "llava_onevision": {t: 256 + i for i, t in enumerate(_LLAVA_SPECIALS)},
    "llava": {t: 256 + i for i, t in enumerate(_LLAVA_IMAGE_SPECIALS)},
    "llava_next": {t: 256 + i for i, t in enumerate(_LLAVA_IMAGE_SPECIALS)},
    "llava_next_video": {t: 256 + i for i, t in enumerate(_LLAVA_SPECIALS)},
    "mistral3": {t: 256 + i for i, t in enumerate(_PIXTRAL_SPECIALS)},
    "idefics3": {t: 256 + i for i, t in enumerate(_IDEFICS3_SPECIALS)},
    "smolvlm": {t: 256 + i for i, t in enumerate((*_IDEFICS3_SPECIALS, "<video>"))},
    "internvl": {t: 256 + i for i, t in enumerate(_INTERNVL_SPECIALS)},
    "qwen3_vl_moe": {t: 256 + i for i, t in enumerate(_QWEN_SPECIALS)},
    "gemma3": {t: 256 + i for i, t in enumerate(_GEMMA3_SPECIALS)},
    "glm4v": {t: 256 + i for i, t in enumerate(_GLM4V_SPECIALS)},
    "qwen3_5": {t: 256 + i for i, t in enumerate(_QWEN_SPECIALS)},
    "gemma4": {t: 256 + i for i, t in enumerate(_GEMMA4_SPECIALS)},
    "glm46v": {t: 256 + i for i, t in enumerate(_GLM4V_SPECIALS)},
}

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


# --------------------------------------------------------------------------------------------
# chat templates (simplified versions of the real ones: one or more turns, content items in order)
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


_QWEN_TEMPLATE = _chat_template(
    "<|vision_start|><|image_pad|><|vision_end|>", "<|vision_start|><|video_pad|><|vision_end|>"
)
_LLAVA_TEMPLATE = _chat_template("<image>", "<video>")
_PIXTRAL_TEMPLATE = _chat_template("[IMG]", "[IMG]")
_INTERNVL_TEMPLATE = _chat_template("<IMG_CONTEXT>", "<video>")
_GEMMA3_TEMPLATE = _chat_template("<start_of_image>", "<video>")
_GLM4V_TEMPLATE = _chat_template(
    "<|begin_of_image|><|image|><|end_of_image|>", "<|begin_of_video|><|video|><|end_of_video|>"
)


# --------------------------------------------------------------------------------------------
# tokenizer
# --------------------------------------------------------------------------------------------
def _byte_vocab() -> dict[str, int]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {ch: b for b, ch in sorted(bytes_to_unicode().items())}


_GEMMA4_TOKEN_NAMES = {
    **_GEMMA3_TOKEN_NAMES,
    "audio_token": "<audio_soft_token>",
    "boa_token": "<start_of_audio>",
    "eoa_token": "<end_of_audio>",
}
_TOKEN_NAMES = {"internvl": _INTERNVL_TOKEN_NAMES, "gemma3": _GEMMA3_TOKEN_NAMES, "gemma4": _GEMMA4_TOKEN_NAMES}


def build_tokenizer(family: str):
    """The family's tokenizer: byte-level BPE without merges + special tokens (ids from 256)."""
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    specials = SPECIAL_TOKENS[family]
    vocab = _byte_vocab()
    vocab.update(specials)  # fixed ids from 256 on, in SPECIAL_TOKENS order
    tok = Qwen2Tokenizer(
        vocab=vocab,
        merges=[],
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
        **({"extra_special_tokens": dict(_TOKEN_NAMES[family])} if family in _TOKEN_NAMES else {}),
    )
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    for t, i in specials.items():
        got = tok.convert_tokens_to_ids(t)
        assert got == i, (t, got, i)
    assert len(tok) == 256 + len(specials), len(tok)
    tok.chat_template = _QWEN_TEMPLATE if family.startswith("qwen") else _LLAVA_TEMPLATE
    if family == "mistral3":
        tok.chat_template = _PIXTRAL_TEMPLATE
    if family == "internvl":
        tok.chat_template = _INTERNVL_TEMPLATE
    if family == "gemma3":
        tok.chat_template = _GEMMA3_TEMPLATE
    if family in ("glm4v", "glm46v"):
        tok.chat_template = _GLM4V_TEMPLATE
    if family == "gemma4":
        tok.chat_template = _chat_template("<image_soft_token>", "<|video|>")
    return tok


# --------------------------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------------------------
def _text_kwargs(family: str, size: str, vocab_size: int) -> dict:
    sp = SPECIAL_TOKENS[family]
    kw = dict(_TEXT_SIZES[size])
    kw.update(
        vocab_size=vocab_size,
        max_position_embeddings=4096,
        initializer_range=INITIALIZER_RANGE,
        rms_norm_eps=1e-6,
        bos_token_id=None,
        eos_token_id=sp["<|im_end|>"],
        pad_token_id=sp["<|endoftext|>"],
        tie_word_embeddings=False,
    )
    return kw


def build_config(family: str, size: str = "small", vocab_padding: int = 0):
    """The tiny config of the family's real config class."""
    if family not in ALL_FAMILIES:
        raise ValueError(f"unknown family {family!r}; expected one of {ALL_FAMILIES}")
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; expected one of {SIZES}")
    if vocab_padding < 0:
        raise ValueError("vocab_padding must be >= 0")
    sp = SPECIAL_TOKENS[family]
    vocab_size = 256 + len(sp) + vocab_padding
    text = _text_kwargs(family, size, vocab_size)
    vis = _VISION_SIZES[size]
    hidden = text["hidden_size"]

    if family == "qwen2_vl":
        from transformers import Qwen2VLConfig

        text.update(rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": _MROPE_SECTION})
        vision = {
            "depth": vis["depth"],
            "embed_dim": vis["hidden_size"],
            "hidden_size": hidden,
            "num_heads": vis["num_heads"],
            "mlp_ratio": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "initializer_range": INITIALIZER_RANGE,
        }
        cfg = Qwen2VLConfig(
            text_config=text,
            vision_config=vision,
            image_token_id=sp["<|image_pad|>"],
            video_token_id=sp["<|video_pad|>"],
            vision_start_token_id=sp["<|vision_start|>"],
            vision_end_token_id=sp["<|vision_end|>"],
            tie_word_embeddings=False,
        )
    elif family == "qwen3_vl_moe":
        cfg = _moe_config(build_config("qwen3_vl", size, vocab_padding))
    elif family == "qwen3_5":
        cfg = _hybrid_config(build_config("qwen3_vl", size, vocab_padding))
    elif family in EXTRA_FAMILIES:
        cfg = _extra_config(family, size, text, sp)
    elif family == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig

        text.update(rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": _MROPE_SECTION})
        vision = {
            "depth": vis["depth"],
            "hidden_size": vis["hidden_size"],
            "intermediate_size": vis["intermediate_size"],
            "num_heads": vis["num_heads"],
            "out_hidden_size": hidden,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "tokens_per_second": 2,
            "window_size": 56,
            "fullatt_block_indexes": [vis["depth"] - 1],
            "initializer_range": INITIALIZER_RANGE,
        }
        cfg = Qwen2_5_VLConfig(
            text_config=text,
            vision_config=vision,
            image_token_id=sp["<|image_pad|>"],
            video_token_id=sp["<|video_pad|>"],
            vision_start_token_id=sp["<|vision_start|>"],
            vision_end_token_id=sp["<|vision_end|>"],
            tie_word_embeddings=False,
        )
    elif family == "qwen3_vl":
        from transformers import Qwen3VLConfig

        text.update(
            head_dim=16,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 5000000.0,
                "mrope_section": _MROPE_SECTION,
                "mrope_interleaved": True,
            },
        )
        text.pop("tie_word_embeddings")
        vision = {
            "depth": vis["depth"],
            "hidden_size": vis["hidden_size"],
            "intermediate_size": vis["intermediate_size"],
            "num_heads": vis["num_heads"],
            "out_hidden_size": hidden,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "num_position_embeddings": 16,
            "deepstack_visual_indexes": [0],
            "initializer_range": INITIALIZER_RANGE,
        }
        cfg = Qwen3VLConfig(
            text_config=text,
            vision_config=vision,
            image_token_id=sp["<|image_pad|>"],
            video_token_id=sp["<|video_pad|>"],
            vision_start_token_id=sp["<|vision_start|>"],
            vision_end_token_id=sp["<|vision_end|>"],
            tie_word_embeddings=False,
        )
    else:  # llava_onevision
        from transformers import LlavaOnevisionConfig

        text.update(model_type="qwen2", rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
        vision = {
            "model_type": "siglip_vision_model",
            "hidden_size": vis["hidden_size"],
            "intermediate_size": vis["intermediate_size"],
            "num_attention_heads": vis["num_heads"],
            "num_hidden_layers": vis["depth"],
            "image_size": _LLAVA_IMAGE,
            "patch_size": _LLAVA_PATCH,
            "vision_use_head": False,
        }
        cfg = LlavaOnevisionConfig(
            text_config=text,
            vision_config=vision,
            image_token_index=sp["<image>"],
            video_token_index=sp["<video>"],
            vision_feature_select_strategy="full",
            vision_feature_layer=-1,
            image_grid_pinpoints=copy.deepcopy(_LLAVA_PINPOINTS),
            vision_aspect_ratio="anyres_max_9",
            tie_word_embeddings=False,
        )
    cfg.initializer_range = INITIALIZER_RANGE
    return cfg


# --------------------------------------------------------------------------------------------
# processors
# --------------------------------------------------------------------------------------------
def build_processor(family: str):
    """The real processor class of the family, with tiny image/video resolutions."""
    if family in ("qwen3_vl_moe", "qwen3_5"):  # Qwen3-VL's processor
        family = "qwen3_vl"
    tok = build_tokenizer(family)
    if family in EXTRA_FAMILIES:
        return _extra_processor(family, tok)
    if family in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl"):
        from transformers import Qwen2VLImageProcessor

        if family == "qwen3_vl":
            from transformers import Qwen3VLProcessor as Proc
            from transformers import Qwen3VLVideoProcessor as VProc

            patch, pixels, mean, std = 16, _QWEN3_PIXELS, [0.5] * 3, [0.5] * 3
        else:
            from transformers import Qwen2VLVideoProcessor as VProc

            if family == "qwen2_vl":
                from transformers import Qwen2VLProcessor as Proc
            else:
                from transformers import Qwen2_5_VLProcessor as Proc
            from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

            patch, pixels, mean, std = 14, _QWEN2_PIXELS, list(OPENAI_CLIP_MEAN), list(OPENAI_CLIP_STD)
        common = {
            "patch_size": patch,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "image_mean": mean,
            "image_std": std,
        }
        image_processor = Qwen2VLImageProcessor(size={"shortest_edge": pixels, "longest_edge": pixels}, **common)
        video_size = {"shortest_edge": pixels, "longest_edge": pixels}
        if family == "qwen3_vl":
            # Qwen3-VL's video smart_resize bounds the pixels of the whole clip (T * H * W)
            video_size = {"shortest_edge": 8 * pixels, "longest_edge": 16 * pixels}
        video_kwargs = dict(
            size=video_size,
            cap_pixels_per_frame=False,
            **common,
        )
        if family == "qwen3_vl":
            video_kwargs.update(fps=2, do_sample_frames=True)
        video_processor = VProc(**video_kwargs)
        return Proc(
            image_processor=image_processor,
            tokenizer=tok,
            video_processor=video_processor,
            chat_template=tok.chat_template,
        )

    from transformers import (
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    sq = {"height": _LLAVA_IMAGE, "width": _LLAVA_IMAGE}
    image_processor = LlavaOnevisionImageProcessor(
        size=dict(sq),
        crop_size=dict(sq),
        image_grid_pinpoints=copy.deepcopy(_LLAVA_PINPOINTS),
        image_mean=[0.5] * 3,
        image_std=[0.5] * 3,
    )
    video_processor = LlavaOnevisionVideoProcessor(size=dict(sq), image_mean=[0.5] * 3, image_std=[0.5] * 3)
    return LlavaOnevisionProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        video_processor=video_processor,
        num_image_tokens=(_LLAVA_IMAGE // _LLAVA_PATCH) ** 2,
        vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_9",
        chat_template=tok.chat_template,
    )


def _model_class(family: str):
    import transformers

    return {
        "qwen2_vl": transformers.Qwen2VLForConditionalGeneration,
        "qwen2_5_vl": transformers.Qwen2_5_VLForConditionalGeneration,
        "qwen3_vl": transformers.Qwen3VLForConditionalGeneration,
        "llava_onevision": transformers.LlavaOnevisionForConditionalGeneration,
        "llava": transformers.LlavaForConditionalGeneration,
        "llava_next": transformers.LlavaNextForConditionalGeneration,
        "llava_next_video": transformers.LlavaNextVideoForConditionalGeneration,
        "mistral3": transformers.Mistral3ForConditionalGeneration,
        "idefics3": transformers.Idefics3ForConditionalGeneration,
        "smolvlm": transformers.SmolVLMForConditionalGeneration,
        "internvl": transformers.InternVLForConditionalGeneration,
        "qwen3_vl_moe": transformers.Qwen3VLMoeForConditionalGeneration,
        "gemma3": transformers.Gemma3ForConditionalGeneration,
        "glm4v": transformers.Glm4vForConditionalGeneration,
        "qwen3_5": transformers.Qwen3_5ForConditionalGeneration,
        "gemma4": transformers.Gemma4ForConditionalGeneration,
        "glm46v": transformers.Glm46VForConditionalGeneration,
    }[family]


def model_class(family: str):
    """The real ``...ForConditionalGeneration`` class of ``family``."""
    if family not in ALL_FAMILIES:
        raise ValueError(f"unknown family {family!r}; expected one of {ALL_FAMILIES}")
    return _model_class(family)


# --------------------------------------------------------------------------------------------
# the families added later (LLaVA 1.5 / NeXT / NeXT-Video: CLIP tower, LLaMA text; Mistral 3:
# Pixtral tower, Mistral text with head_dim given apart from hidden / heads)
# --------------------------------------------------------------------------------------------
_CLIP_SIDE = 32  # CLIP image_size 32, patch 8 -> 16 patches (+ CLS, dropped by the "default" strategy)
_PIXTRAL_SIDE = 64  # Pixtral longest edge 64, patch 8, merge 2 -> 4x4 tokens + row breaks + end
# Idefics3 / SmolVLM / InternVL: 32x32 crops of 4x4 patches, pixel-shuffled by 2 -> 4 tokens per crop
_IDEFICS3_SEQ = 4


def _clip_vision(size: str) -> dict:
    vis = _VISION_SIZES[size]
    return {
        "model_type": "clip_vision_model",
        "hidden_size": vis["hidden_size"],
        "intermediate_size": vis["intermediate_size"],
        "num_attention_heads": vis["num_heads"],
        "num_hidden_layers": vis["depth"],
        "image_size": _CLIP_SIDE,
        "patch_size": _LLAVA_PATCH,
        "projection_dim": vis["hidden_size"],
    }


def _extra_config(family: str, size: str, text: dict, sp: dict):
    import transformers

    text.update(model_type="llama", rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    llava = {
        "text_config": text,
        "vision_config": _clip_vision(size),
        "image_token_index": sp.get("<image>"),
        "vision_feature_select_strategy": "default",
        "vision_feature_layer": -2,
        "tie_word_embeddings": False,
    }
    if family == "llava":
        return transformers.LlavaConfig(image_seq_length=(_CLIP_SIDE // _LLAVA_PATCH) ** 2, **llava)
    if family == "llava_next":
        return transformers.LlavaNextConfig(image_grid_pinpoints=copy.deepcopy(_LLAVA_PINPOINTS), **llava)
    if family == "llava_next_video":
        return transformers.LlavaNextVideoConfig(
            image_grid_pinpoints=copy.deepcopy(_LLAVA_PINPOINTS),
            video_token_index=sp["<video>"],
            spatial_pool_stride=2,
            **llava,
        )
    vis = _VISION_SIZES[size]
    if family == "gemma4":
        text.pop("rope_parameters")  # Gemma 4's own: one per layer type
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
        vision = {
            "hidden_size": vis["hidden_size"],
            "intermediate_size": vis["intermediate_size"],
            "num_hidden_layers": vis["depth"],
            "num_attention_heads": vis["num_heads"],
            "num_key_value_heads": vis["num_heads"],
            "head_dim": vis["hidden_size"] // vis["num_heads"],
            "patch_size": _LLAVA_PATCH,
            "pooling_kernel_size": 2,
            "position_embedding_size": 64,
        }
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
    if family in ("glm4v", "glm46v"):
        text.pop("model_type")
        # M-RoPE on half of each head (partial_rotary_factor 0.5): the sections sum to 16 * 0.5 / 2
        text["rope_parameters"] = {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": [1, 1, 2],
            "partial_rotary_factor": 0.5,
        }
        vision = {
            "depth": vis["depth"],
            "hidden_size": vis["hidden_size"],
            "num_heads": vis["num_heads"],
            "intermediate_size": vis["intermediate_size"],
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": text["hidden_size"],
            "image_size": 56,
        }
        config_class = transformers.Glm4vConfig if family == "glm4v" else transformers.Glm46VConfig
        return config_class(
            text_config=text,
            vision_config=vision,
            image_token_id=sp["<|image|>"],
            video_token_id=sp["<|video|>"],
            image_start_token_id=sp["<|begin_of_image|>"],
            image_end_token_id=sp["<|end_of_image|>"],
            video_start_token_id=sp["<|begin_of_video|>"],
            video_end_token_id=sp["<|end_of_video|>"],
            tie_word_embeddings=False,
        )
    if family == "gemma3":
        text.update(
            model_type="gemma3_text",
            head_dim=16,
            query_pre_attn_scalar=16,
            sliding_window=GEMMA3_WINDOW,
            layer_types=["sliding_attention", "full_attention"][: text["num_hidden_layers"]],
        )
        vision = {
            "model_type": "siglip_vision_model",
            "hidden_size": vis["hidden_size"],
            "intermediate_size": vis["intermediate_size"],
            "num_attention_heads": vis["num_heads"],
            "num_hidden_layers": vis["depth"],
            "image_size": _CLIP_SIDE,
            "patch_size": _LLAVA_PATCH,
            "vision_use_head": False,
        }
        return transformers.Gemma3Config(
            text_config=text,
            vision_config=vision,
            mm_tokens_per_image=_IDEFICS3_SEQ,
            boi_token_index=sp["<start_of_image>"],
            eoi_token_index=sp["<end_of_image>"],
            image_token_index=sp["<image_soft_token>"],
            initializer_range=INITIALIZER_RANGE,
            tie_word_embeddings=False,
        )
    if family in ("idefics3", "smolvlm"):
        config_class = transformers.Idefics3Config if family == "idefics3" else transformers.SmolVLMConfig
        vision = {
            "hidden_size": vis["hidden_size"],
            "intermediate_size": vis["intermediate_size"],
            "num_attention_heads": vis["num_heads"],
            "num_hidden_layers": vis["depth"],
            "image_size": _CLIP_SIDE,
            "patch_size": _LLAVA_PATCH,
        }
        return config_class(
            text_config=text,
            vision_config=vision,
            image_token_id=sp["<image>"],
            scale_factor=2,
            tie_word_embeddings=False,
        )
    if family == "internvl":
        text.update(model_type="qwen2", rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
        vision = {
            "hidden_size": vis["hidden_size"],
            "intermediate_size": vis["intermediate_size"],
            "num_attention_heads": vis["num_heads"],
            "num_hidden_layers": vis["depth"],
            "image_size": [_CLIP_SIDE, _CLIP_SIDE],
            "patch_size": [_LLAVA_PATCH, _LLAVA_PATCH],
        }
        return transformers.InternVLConfig(
            text_config=text,
            vision_config=vision,
            image_token_id=sp["<IMG_CONTEXT>"],
            image_seq_length=_IDEFICS3_SEQ,
            downsample_ratio=0.5,
            tie_word_embeddings=False,
        )
    text.update(model_type="mistral", head_dim=16, sliding_window=None)  # as Mistral-Small-3.1 (no window)
    vision = {
        "model_type": "pixtral",
        "hidden_size": vis["hidden_size"],
        "intermediate_size": vis["intermediate_size"],
        "num_attention_heads": vis["num_heads"],
        "num_hidden_layers": vis["depth"],
        "image_size": _PIXTRAL_SIDE,
        "patch_size": _LLAVA_PATCH,
        "head_dim": vis["hidden_size"] // vis["num_heads"],
    }
    return transformers.Mistral3Config(
        text_config=text,
        vision_config=vision,
        image_token_index=sp["[IMG]"],
        spatial_merge_size=2,
        vision_feature_layer=-1,
        tie_word_embeddings=False,
    )


def _moe_config(dense):
    """Qwen3-VL-MoE from a tiny Qwen3-VL config: the same settings, experts in every text layer."""
    import transformers

    text, vision = dense.text_config.to_dict(), dense.vision_config.to_dict()
    for part in (text, vision):
        for key in ("model_type", "architectures", "transformers_version"):
            part.pop(key, None)
    text.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1)
    return transformers.Qwen3VLMoeConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=dense.image_token_id,
        video_token_id=dense.video_token_id,
        vision_start_token_id=dense.vision_start_token_id,
        vision_end_token_id=dense.vision_end_token_id,
        tie_word_embeddings=False,
    )


def _hybrid_config(dense):
    """Qwen3.5 from a tiny Qwen3-VL config: linear-attention (gated delta rule) layers before each
    full-attention one, RoPE on half of each head (the real models: a quarter)."""
    import transformers

    text, vision = dense.text_config.to_dict(), dense.vision_config.to_dict()
    for part in (text, vision):
        for key in ("model_type", "architectures", "transformers_version"):
            part.pop(key, None)
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
        text_config=text,
        vision_config=vision,
        image_token_id=dense.image_token_id,
        video_token_id=dense.video_token_id,
        vision_start_token_id=dense.vision_start_token_id,
        vision_end_token_id=dense.vision_end_token_id,
        tie_word_embeddings=False,
    )


def _extra_processor(family: str, tok):
    import transformers

    if family == "gemma4":
        budget = {"patch_size": _LLAVA_PATCH, "max_soft_tokens": 70, "pooling_kernel_size": 2}  # the smallest budget
        return transformers.Gemma4Processor(
            feature_extractor=transformers.Gemma4AudioFeatureExtractor(),
            image_processor=transformers.Gemma4ImageProcessor(**budget),
            tokenizer=tok,
            video_processor=transformers.Gemma4VideoProcessor(**budget),
            image_seq_length=70,
            chat_template=tok.chat_template,
        )
    if family in ("glm4v", "glm46v"):
        common = {"patch_size": 14, "temporal_patch_size": 2, "merge_size": 2}
        pixels = 4 * _QWEN2_PIXELS  # 2x2 merged tokens per image, 1 per frame pair
        glm46 = family == "glm46v"
        return (transformers.Glm46VProcessor if glm46 else transformers.Glm4vProcessor)(
            image_processor=(transformers.Glm46VImageProcessor if glm46 else transformers.Glm4vImageProcessor)(
                size={"shortest_edge": pixels, "longest_edge": pixels}, **common
            ),
            tokenizer=tok,
            video_processor=(transformers.Glm46VVideoProcessor if glm46 else transformers.Glm4vVideoProcessor)(
                size={"shortest_edge": _QWEN2_PIXELS, "longest_edge": 8 * _QWEN2_PIXELS}, **common
            ),
            chat_template=tok.chat_template,
        )
    if family == "gemma3":
        image_processor = transformers.Gemma3ImageProcessor(
            size={"height": _CLIP_SIDE, "width": _CLIP_SIDE}, do_pan_and_scan=False
        )
        return transformers.Gemma3Processor(
            image_processor=image_processor,
            tokenizer=tok,
            image_seq_length=_IDEFICS3_SEQ,
            chat_template=tok.chat_template,
        )
    if family in ("idefics3", "smolvlm"):
        crops = {"size": {"longest_edge": 2 * _CLIP_SIDE}, "max_image_size": {"longest_edge": _CLIP_SIDE}}
        if family == "idefics3":
            return transformers.Idefics3Processor(
                image_processor=transformers.Idefics3ImageProcessor(**crops),
                tokenizer=tok,
                image_seq_len=_IDEFICS3_SEQ,
                chat_template=tok.chat_template,
            )
        frame = {"longest_edge": _CLIP_SIDE}
        return transformers.SmolVLMProcessor(
            image_processor=transformers.SmolVLMImageProcessor(**crops),
            tokenizer=tok,
            video_processor=transformers.SmolVLMVideoProcessor(size=dict(frame), max_image_size=dict(frame)),
            image_seq_len=_IDEFICS3_SEQ,
            chat_template=tok.chat_template,
        )
    if family == "internvl":
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

    if family == "mistral3":
        image_processor = transformers.PixtralImageProcessor(
            size={"longest_edge": _PIXTRAL_SIDE}, patch_size=_LLAVA_PATCH
        )
        return transformers.PixtralProcessor(
            image_processor=image_processor,
            tokenizer=tok,
            patch_size=_LLAVA_PATCH,
            spatial_merge_size=2,
            chat_template=tok.chat_template,
        )
    sq = {"height": _CLIP_SIDE, "width": _CLIP_SIDE}
    common = {
        "tokenizer": tok,
        "patch_size": _LLAVA_PATCH,
        "vision_feature_select_strategy": "default",
        "num_additional_image_tokens": 1,
        "chat_template": tok.chat_template,
    }
    if family == "llava":
        image_processor = transformers.CLIPImageProcessor(size={"shortest_edge": _CLIP_SIDE}, crop_size=dict(sq))
        return transformers.LlavaProcessor(image_processor=image_processor, **common)
    image_processor = transformers.LlavaNextImageProcessor(
        size={"shortest_edge": _CLIP_SIDE}, crop_size=dict(sq), image_grid_pinpoints=copy.deepcopy(_LLAVA_PINPOINTS)
    )
    if family == "llava_next":
        return transformers.LlavaNextProcessor(image_processor=image_processor, **common)
    video_processor = transformers.LlavaNextVideoVideoProcessor(size={"shortest_edge": _CLIP_SIDE}, crop_size=dict(sq))
    return transformers.LlavaNextVideoProcessor(
        video_processor=video_processor, image_processor=image_processor, **common
    )


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

    cls = _model_class(family)
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
    "EXTRA_FAMILIES",
    "FAMILIES",
    "INITIALIZER_RANGE",
    "SIZES",
    "SPECIAL_TOKENS",
    "build_config",
    "build_processor",
    "build_tiny_vlm",
    "build_tokenizer",
    "model_class",
]
