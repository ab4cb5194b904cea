"""The library's door: each public call's arguments checked for their type before any work.

A wrong type (a path where a `Media` is expected, a dict where a `SageConfig` is, `None` for the
pair or the config, bytes for the prompt) is refused with one `SageError` sentence that names the
argument, what it takes and how to make one, instead of an AttributeError from deep inside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import ConfigError, InputError


def kind_of(value: object) -> str:
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def check_part(name: str, value: object, wanted: type, example: str) -> None:
    """`DecodeConfig`'s part `name` must be a `wanted` (a dict is told how to make one)."""
    if isinstance(value, wanted):
        return
    how = f"{wanted.__name__}(**that_dict)" if isinstance(value, dict) else example
    raise ConfigError(f"DecodeConfig's {name} must be a sage_core {wanted.__name__}, not {kind_of(value)}: pass {how}")


def check_media(media: object) -> None:
    from PIL import Image

    from .media import Media

    if isinstance(media, Media):
        return
    if isinstance(media, str | Path):
        how = f"call sage_core.load_media({str(media)!r}) and pass what it returns"
    elif isinstance(media, Image.Image):
        how = "call sage_core.image_media(picture) for a PIL image, or load_media(path) for a file"
    else:
        how = "call sage_core.load_media(path) for an image or video file"
    raise InputError(f"media must be a sage_core Media, not {kind_of(media)}: {how}")


def check_prompt_type(prompt: object) -> None:
    if isinstance(prompt, str):
        return
    how = "decode it first (prompt.decode('utf-8'))" if isinstance(prompt, bytes | bytearray) else "pass a str"
    raise InputError(f"the prompt must be text (a str), not {kind_of(prompt)}: {how}")


def check_decode_arguments(pair: object, media: object, prompt: object, config: object, prepared: object) -> None:
    """`decode()` and `DecodeRun`'s arguments, each of its type."""
    from .config import DecodeConfig
    from .models import ModelPair
    from .prepared import PreparedInputs

    if not isinstance(pair, ModelPair):
        raise InputError(f"pair must be a sage_core ModelPair, not {kind_of(pair)}: call sage_core.load_pair(...)")
    check_media(media)
    check_prompt_type(prompt)
    if not isinstance(config, DecodeConfig):
        raise ConfigError(f"config must be a sage_core DecodeConfig, not {kind_of(config)}: pass DecodeConfig(...)")
    if prepared is not None and not isinstance(prepared, PreparedInputs):
        raise InputError(
            f"prepared must be None or what sage_core.prepare_inputs returns, not {kind_of(prepared)}: leave it out"
        )


def check_load_arguments(target: Any, draft: Any, device: Any, dtype: Any) -> None:
    """`load_pair`'s models (a hub id or a folder) and its device and dtype names."""
    for name, value in (("target", target), ("draft", draft)):
        if not isinstance(value, str | Path) or not str(value).strip():
            raise InputError(f"the {name} must be a hub id or a folder (a str or a Path), not {kind_of(value)}")
    for name, value in (("device", device), ("dtype", dtype)):
        if not isinstance(value, str):
            raise InputError(f"{name} must be a name (a str such as 'auto'), not {kind_of(value)}")
