"""What the seam tests and the command-line tests share: a toy registered for a test module's duration, and
the argument list of a `generate` run on the command line."""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any, TypeVar

from sage_core import DecodeConfig, DecodeRun, Media, RunSummary, decode, load_pair
from sage_core.models import ModelPair

from .pairs import tiny_folder
from .references import files_naming

T = TypeVar("T")


@contextmanager
def lent(toy: T, register: Callable[[T], object], unregister: Callable[[], object]) -> Iterator[T]:
    """`toy` registered (`register`) for the block's duration, then unregistered (`unregister`), whatever
    happened in the block."""
    register(toy)
    try:
        yield toy
    finally:
        unregister()


def own_pair(root: Path, family: str) -> ModelPair:
    """`family`'s tiny target and noised draft loaded afresh for one test module (not the process's shared
    pair: a toy's runs touch no other module's models)."""
    return load_pair(tiny_folder(root, family, "target"), tiny_folder(root, family, "noised"), "cpu")


def files_needing(toy: str, name: str) -> list[str]:
    """The checkout's files that name `name` (`files_naming`), said for the toy `toy` in the test's output."""
    files = files_naming(name)
    print(f"files {toy} needed: {len(files)} ({', '.join(files)})")
    return files


def generate_argv(
    target: str, draft: str, media: str | Path, prompt: str, *more: str, media_flag: str = "--image"
) -> list[str]:
    """The command line's `generate` on this pair, medium (`media_flag`: --image or --video) and prompt, on the
    CPU, then `more` arguments."""
    models = ["--target", target, "--draft", draft]
    return ["generate", *models, media_flag, str(media), "--prompt", prompt, "--device", "cpu", *more]


def cli_token_ids(argv: Sequence[str]) -> list[int]:
    """The new tokens the command line's `generate ... --json` reports with these arguments (it exits 0)."""
    from sage_core.cli import main

    out = io.StringIO()
    with redirect_stdout(out):
        assert main([*argv, "--json"]) == 0
    return json.loads(out.getvalue())["token_ids"]


__all__ = ["cli_token_ids", "files_needing", "generate_argv", "lent", "own_pair"]


def draft_calls_per_record(
    pair: ModelPair, media: Media, prompt: str, config: DecodeConfig
) -> tuple[DecodeRun, RunSummary, Counter[int]]:
    """Run to the end, counting the draft model's forward calls per record (the prefill's under 0): what one
    draft forward a round is checked against. Returns the run, its summary and the counts."""
    run = decode(pair, media, prompt, config)
    calls: Counter[int] = Counter()
    real_extend = pair.draft.extend

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[len(run.records)] += 1
        return real_extend(*args, **kwargs)

    pair.draft.extend = counted  # type: ignore[method-assign]  # this run's calls only: removed below
    try:
        summary = run.run_to_end()
    finally:
        del pair.draft.extend
    return run, summary, calls
