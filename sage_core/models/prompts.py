"""Prompts and processors: one user turn through the chat template, the processor's tensors, and
the limits checked before any processor runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InputError, MediaError
from ..media import Media

# The Qwen processors refuse images and frames whose long side is more than 200 times the short one
# (`smart_resize`); the limit is checked for every family, before any processor runs.
MAX_ASPECT_RATIO = 200


def chat_prompt(processor: Any, kind: str, prompt: str) -> str:
    """One user turn through the processor's chat template: the image or video first, then the text."""
    content = [{"type": kind}, {"type": "text", "text": prompt}]
    return processor.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )


def processor_inputs(
    processor: Any,
    texts: Sequence[str],
    media: Sequence[Media],
    extra: Mapping[str, Any] | None = None,
    videos_per_text: bool = False,
) -> Any:
    """The processor's tensors for chat-formatted ``texts``, one medium each (all images or all
    videos; a batch is padded as the tokenizer pads). `extra`: the family's own keywords for videos;
    `videos_per_text`: each text's videos given as a list of their own (`Family.videos_per_text`).

    Videos go in as sampled (`media.py`), with their metadata and `do_sample_frames=False`, so the
    processor does not re-sample them.
    """
    if media[0].kind == "image":
        return processor(text=list(texts), images=[m.image for m in media], return_tensors="pt", padding=True)
    metadata = [
        {"total_num_frames": m.total_frames, "fps": m.fps, "frames_indices": list(m.frame_indices)} for m in media
    ]
    keywords = dict(extra or {})
    video_processor: Any = getattr(processor, "video_processor", None)
    if hasattr(video_processor, "cap_pixels_per_frame") and video_processor.cap_pixels_per_frame is None:
        # The Qwen video processors: bound each frame's pixels as the reference code
        # (qwen-vl-utils) does, so long videos cannot grow without bound.
        keywords["cap_pixels_per_frame"] = True
    return processor(
        text=list(texts),
        videos=[[m.frames] for m in media] if videos_per_text else [m.frames for m in media],
        video_metadata=metadata,
        do_sample_frames=False,
        return_tensors="pt",
        padding=True,
        **keywords,
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


MAX_PROMPT_CHARS = 4000


def check_prompt(prompt: object) -> str:
    """A prompt that is text, not blank, valid Unicode, at most MAX_PROMPT_CHARS long; InputError else."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise InputError("the prompt is empty: ask something about the image or video")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise InputError(f"the prompt has {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InputError(
            f"the prompt is not valid text: character {error.start + 1} is a lone surrogate ({prompt[error.start]!a}); "
            "remove it"
        ) from error
    return prompt
