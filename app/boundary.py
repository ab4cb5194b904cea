"""The app's one error boundary: any failure becomes one clear sentence for the visitor.

- `sage_core`'s errors (`SageError`: bad input, media, models, traces) are
  shown as they are: their messages are written for the user.
- Running out of memory frees the cached blocks and says what to try.
- Anything else is a bug: its traceback is logged on the server with a short
  reference, and the visitor reads "internal error" with that reference and
  nothing of the internals.

Every handler (race, replay, the API and the page's controls) goes through
`user_message` or `guard`. What Gradio refuses before any handler runs (a
server path or a file outside its uploads, a malformed file payload, a file
URL that is not public or cannot be fetched) reaches the caller, the MCP
client included, as a sentence too (`refusals_as_sentences`).
"""

from __future__ import annotations

import functools
import logging
import re
import uuid
from collections.abc import Callable
from typing import Any, TypeVar, cast

import gradio as gr
import torch

from sage_core import SageError

from .gradio_patches import around_preprocess_data, found_again, session_lost
from .models import release_memory

log = logging.getLogger("sage.app")

OUT_OF_MEMORY = "not enough memory to decode this input: try fewer new tokens, a smaller image or a shorter video"
INTERNAL = "internal error (reference {ref}): the server could not finish this request; it has been logged"

F = TypeVar("F", bound=Callable[..., Any])


def user_message(error: BaseException) -> str:
    """The one sentence a visitor reads for `error` (an unexpected one is logged with its traceback)."""
    if isinstance(error, SageError):
        return str(error)
    if isinstance(error, torch.OutOfMemoryError | MemoryError):
        release_memory()
        return OUT_OF_MEMORY
    ref = uuid.uuid4().hex[:8]
    log.error("internal error %s", ref, exc_info=error)
    return INTERNAL.format(ref=ref)


def api_error(error: BaseException) -> gr.Error:
    """The error an API call answers with: the visitor's sentence, no traceback printed by Gradio."""
    return gr.Error(user_message(error), print_exception=False)


UNPROCESSABLE = "an input is not in the form this app takes ({what}): send the values the API page shows"
NOT_UPLOADED = (
    "the file was not uploaded to this app: upload it first (a path on the server, or a file outside the "
    "app's uploads, is refused)"
)


URL_SENT = "send a public http(s) URL of the file, or the file itself as a data: URL (data:image/png;base64,...)"
NOT_PUBLIC = "the URL's host {host} is not a public internet address, and this app fetches only those: " + URL_SENT
NOT_FETCHED = "the URL could not be fetched ({why}): " + URL_SENT


def url_refusal(error: BaseException) -> str | None:
    """The sentence for a file URL Gradio would not or could not fetch (None: not such a refusal)."""
    import httpx

    text = str(error)
    refused = re.fullmatch(r"Hostname (.+) failed validation", text)
    if isinstance(error, ValueError) and refused:
        return NOT_PUBLIC.format(host=refused.group(1))
    answered = re.fullmatch(r"Failed to download file\. Status code: (\d+)", text)
    if answered:
        return NOT_FETCHED.format(why=f"it answered HTTP {answered.group(1)}")
    if text.startswith("Exceeded maximum of") and "redirects" in text:
        return NOT_FETCHED.format(why="too many redirects")
    if isinstance(error, httpx.HTTPError):
        return NOT_FETCHED.format(why=type(error).__name__)
    return None


def refusal_sentence(error: BaseException) -> str | None:
    """The sentence for an input Gradio refused before the handler (None: not such a refusal)."""
    from gradio.exceptions import ComponentProcessingError, InvalidPathError
    from pydantic import ValidationError

    if isinstance(error, InvalidPathError):
        return NOT_UPLOADED
    if (sentence := url_refusal(error)) is not None:
        return sentence
    if isinstance(error, ValidationError):
        return UNPROCESSABLE.format(what=f"a malformed {error.title}")
    if isinstance(error, ComponentProcessingError):
        return UNPROCESSABLE.format(what="a value of the wrong type")
    return None


def refusals_as_sentences(demo: gr.Blocks) -> None:
    """Make the inputs Gradio refuses before any handler runs answer with one sentence (as `gr.Error`),
    not Gradio's bare "Error"; a raw call that leaves off trailing values gets their defaults."""

    async def preprocess_data(stock: Any, block_fn: Any, inputs: list[Any], *args: Any, **kwargs: Any) -> Any:
        refuse_if_lost(block_fn, args[0] if args else kwargs.get("state"))
        try:
            sent = with_defaults(block_fn, inputs)
            raw = list(sent) if isinstance(sent, list) else sent
            return booleans_kept(block_fn, raw, await stock(block_fn, sent, *args, **kwargs))
        except gr.Error:
            raise
        except Exception as error:
            sentence = refusal_sentence(error)
            if sentence is None:
                raise
            raise gr.Error(sentence, print_exception=False) from error

    around_preprocess_data(demo, preprocess_data)


LOST = (
    "This page's race is no longer on the server (the page was away longer than the server keeps a visitor's "
    "race, or the server restarted): what the page shows can still be read, but press Start or Replay to race again."
)


def refuse_if_lost(block_fn: Any, session: Any) -> None:
    """An event of a page whose session the app dropped (`gradio_patches.session_lost`) that reads the page's
    state is refused with `LOST`, never run on a fresh session's defaults (the landing race). An event that
    starts anew (writes a state and reads none: Start, Replay) finds the session again, and so does one that
    rewrites every state it reads (Step: the next press starts a stepped race from round 0, as told)."""
    if not session_lost(session):
        return
    reads = {block._id for block in getattr(block_fn, "inputs", []) or [] if isinstance(block, gr.State)}
    writes = {block._id for block in getattr(block_fn, "outputs", []) or [] if isinstance(block, gr.State)}
    if writes and reads <= writes:
        found_again(session)
    if reads:
        raise gr.Error(LOST, print_exception=False)


def booleans_kept(block_fn: Any, sent: Any, processed: Any) -> Any:
    """The processed values, with a boolean sent for a number (a slider, a number box) handed on as sent:
    Gradio's number box would round True to the number 1, and the settings' one number check
    (`sage_core.method_settings.read_number`) refuses a boolean in the sentence every route gives."""
    blocks = list(getattr(block_fn, "inputs", []) or [])
    if not isinstance(sent, list) or not isinstance(processed, list) or len(processed) != len(sent):
        return processed
    return [
        value if isinstance(value, bool) and isinstance(block, gr.Number | gr.Slider) else kept
        for block, value, kept in zip(blocks, sent, processed, strict=False)
    ] + processed[len(blocks) :]


def with_defaults(block_fn: Any, inputs: list[Any]) -> list[Any]:
    """A raw call's values, its trailing values left off filled with the inputs' defaults (what gradio_client
    sends for them); Gradio would answer a blank error."""
    wanted = list(getattr(block_fn, "inputs", []) or [])
    if not isinstance(inputs, list) or len(inputs) >= len(wanted):
        return inputs
    return [*inputs, *(getattr(block, "value", None) for block in wanted[len(inputs) :])]


def guard(fn: F) -> F:
    """An API handler whose every failure reaches the caller as `api_error`."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except Exception as error:
            raise api_error(error) from error

    return cast(F, guarded)
