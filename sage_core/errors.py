"""Errors whose message is meant for the user: one clear line, no traceback."""


class SageError(Exception):
    """Base of every error the CLI and the app show as a plain message."""


class MediaError(SageError):
    """A missing, unreadable, unsupported or oversized image or video."""


class ModelLoadError(SageError):
    """A model or processor that cannot be loaded (name, network, memory)."""


class PairMismatchError(SageError):
    """A target and draft that cannot work together (different tokenizers)."""


class InputError(SageError):
    """Any other bad request: an empty prompt, a token limit out of range."""


class ConfigError(InputError, ValueError):
    """Settings out of range (sampling temperature, top-p, top-k, seed)."""
