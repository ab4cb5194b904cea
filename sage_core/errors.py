"""Errors whose message is meant for the user: one clear line, no traceback.

Every error the library raises for a bad request derives from `SageError`, so
a front end (the CLI, the app) catches that one class and shows its message;
anything else that escapes is a bug, reported as an internal error.
"""


class SageError(Exception):
    """Base of every error the CLI and the app show as a plain message."""


class MediaError(SageError):
    """A missing, unreadable, unsupported or oversized image or video, or one the processors cannot take."""


class ModelLoadError(SageError):
    """A model or processor that cannot be loaded (name, network, memory)."""


class PairMismatchError(SageError):
    """A target and draft that cannot work together (different tokenizers)."""


class BackendError(SageError):
    """A backend that cannot run on this machine (torch.compile without a working compiler)."""


class InputError(SageError):
    """Any other bad request: an empty prompt, a token limit out of range."""


class ConfigError(InputError, ValueError):
    """An invalid `SageConfig`, `DecodeConfig` or sampling setting (temperature, top-p, top-k, seed);
    also a ValueError, as a bad argument."""


class TraceError(InputError, ValueError):
    """A trace file that cannot be read back: too large, malformed, or holding impossible values."""


class VersionError(SageError, ImportError):
    """An installed torch or transformers outside the range the library supports (sage_core.compat)."""


class GenerateError(InputError, ValueError):
    """A transformers `generate()` call (custom_generate) that SAGE cannot serve as plain greedy `generate()`
    would; also a ValueError, as transformers raises for bad arguments."""


def kind_of(value: object) -> str:
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"
