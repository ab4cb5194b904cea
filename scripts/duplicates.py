"""Duplicate code: runs of at least --min-lines code lines that appear twice (pylint's duplicate-code idea,
hashed once over the whole tree, so it takes well under a second; pylint's pairwise comparison took minutes
here). Lines are compared stripped; blank lines, comments, docstrings and import lines are left out, as
pylint's `ignore-comments`, `ignore-docstrings` and `ignore-imports` do. Exit status 1 when it finds any.

    PYTHONPATH=. python scripts/duplicates.py [--min-lines 8] [PATH ...]   # default: DEFAULT_PATHS, from the repository
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATHS = ("sage_core", "app", "scripts", "custom_generate", "app.py")
#: Runs this long are reported: an 8-line run is a block of logic; shorter ones are mostly the same
#: call with the same keywords (a Gradio component, a dataclass's fields).
MIN_LINES = 8

#: Left out, each with its reason; a path here that is gone fails the check (so the list stays short).
EXCLUDED: dict[str, str] = {}

Line = tuple[Path, int, str]  # file, line number, the stripped text


def code_lines(path: Path) -> list[Line]:
    """The lines that count: stripped, without blank lines, comments, docstrings and imports."""
    text = path.read_text(encoding="utf-8")
    skipped: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                skipped.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
        if isinstance(node, ast.Import | ast.ImportFrom):
            skipped.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.split("  # ")[0].strip()
        if stripped and not stripped.startswith("#") and number not in skipped:
            lines.append((path, number, stripped))
    return lines


def duplicates(files: list[Path], min_lines: int = MIN_LINES) -> list[tuple[int, list[tuple[Path, int, int]]]]:
    """Each run of >= `min_lines` lines found at two places or more: (its length, [(file, first, last)])."""
    places: dict[tuple[str, ...], list[tuple[int, int]]] = defaultdict(list)  # window -> (file index, start)
    listed = [code_lines(path) for path in files]
    for index, lines in enumerate(listed):
        for start in range(len(lines) - min_lines + 1):
            places[tuple(text for _, _, text in lines[start : start + min_lines])].append((index, start))
    repeated = {key: where for key, where in places.items() if len(where) > 1}
    found: list[tuple[int, list[tuple[Path, int, int]]]] = []
    seen: set[tuple[int, int]] = set()  # (file index, start) already inside a finding
    for where in repeated.values():
        if where[0] in seen:
            continue
        # Grow the run while every place keeps agreeing (a longer copy is one finding, not many).
        length = min_lines
        while all(start + length < len(listed[i]) for i, start in where) and (
            len({listed[i][start + length][2] for i, start in where}) == 1
        ):
            length += 1
        seen.update((i, start + offset) for i, start in where for offset in range(length - min_lines + 1))
        spans = [(files[i], listed[i][start][1], listed[i][start + length - 1][1]) for i, start in where]
        found.append((length, spans))
    return sorted(found, key=lambda item: -item[0])


def shown_path(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=DEFAULT_PATHS)
    parser.add_argument("--min-lines", type=int, default=MIN_LINES)
    args = parser.parse_args(argv)
    gone = [name for name in EXCLUDED if not (ROOT / name).exists()]
    if gone:
        print(f"excluded but gone: drop from scripts/duplicates.py's EXCLUDED: {', '.join(gone)}")
        return 1
    files = []
    for name in args.paths:
        path = ROOT / name  # relative to the repository (an absolute one stays as it is)
        files += [path] if path.is_file() else sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
    files = [path for path in files if path.resolve() not in {(ROOT / name).resolve() for name in EXCLUDED}]
    found = duplicates(files, args.min_lines)
    for length, spans in found:
        shown = ", ".join(f"{shown_path(f)}:{a}-{b}" for f, a, b in spans)
        print(f"{length} similar lines in {len(spans)} places: {shown}")
    print(f"duplicate code (runs of {args.min_lines}+ lines) in {len(files)} files: {len(found)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
