"""Nothing outside the methods names them in lists: the library, the app and the scripts read the registry.

A list of two or more registered method names written out (a list, tuple, set or dict literal, pairs nested in
one counted with it) in `sage_core` outside `sage_core/methods/`, in `app/` or in `scripts/` is a second
registry that a new method does not reach; the scanner below finds them, and its own test shows it can. The
renderers format what the view computed: `app/render.py` and the explainer import no study. `docs/methods.md`
names every registered method.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sage_core.methods import budgeted, choosing_budget, leads, method_names, race_default, rivals

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("sage_core", "app", "scripts")
CONTAINERS = (ast.List, ast.Tuple, ast.Set, ast.Dict)


def _strings(node: ast.AST) -> list[str]:
    """The string constants of a container literal, those of the container literals inside it included."""
    if isinstance(node, ast.Dict):
        children: list[ast.AST | None] = [*node.keys, *node.values]
    else:
        assert isinstance(node, ast.List | ast.Tuple | ast.Set)
        children = list(node.elts)
    found: list[str] = []
    for child in children:
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            found.append(child.value)
        elif isinstance(child, CONTAINERS):
            found += _strings(child)
    return found


def method_lists(source: str, names: set[str]) -> list[tuple[int, list[str]]]:
    """Each outermost container literal of `source` holding two or more different names of `names`: its line
    and the names, in order."""
    tree = ast.parse(source)
    inner = {id(c) for node in ast.walk(tree) if isinstance(node, CONTAINERS) for c in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, CONTAINERS) and id(node) not in inner:
            named = [s for s in _strings(node) if s in names]
            if len(set(named)) >= 2:
                found.append((node.lineno, named))
    return sorted(found)


def scanned_files() -> list[Path]:
    files = [path for root in SCANNED for path in sorted((ROOT / root).rglob("*.py"))]
    return [path for path in files if not path.relative_to(ROOT).as_posix().startswith("sage_core/methods/")]


def test_no_list_of_method_names_is_written_out_outside_the_methods():
    names = set(method_names())
    files = scanned_files()
    assert len(files) > 100 and any(p.name == "benchmark.py" for p in files)  # (the trees were found)
    found = [
        f"{path.relative_to(ROOT)}:{line}: {named}"
        for path in files
        for line, named in method_lists(path.read_text(encoding="utf-8"), names)
    ]
    assert not found, "method names written out in a list (read the registry instead):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "planted",
    [
        'RIVALS = ("static", "dynamic", "chain", "ar")',
        'METHODS = ["sage", "static"]',
        'if method in {"sage-cost", "smart"}: pass',
        'SYMBOLS = {"sage-cost": "star", "smart": "hexagram"}',
        'AGAINST = (("static", "the static tree"), ("chain", "the 5-token chain"))',
        'race(methods=("x", ("sage",), ["best-first"]))',
    ],
)
def test_the_scanner_finds_a_planted_list(planted):
    source = f"import os\n\n\ndef f(method):\n    {planted}\n"
    assert [line for line, _ in method_lists(source, set(method_names()))] == [5]


@pytest.mark.parametrize(
    "innocent",
    [
        'DecodeConfig("sage", 8)',
        'x = ("sage", "a setting")',
        'x = ["sage"] + ["static"]',  # (two lists of one each)
        'x = f("sage", "static")',  # (a call's arguments are no list)
        'x = ("generate", "assisted")',  # (no registered name)
    ],
)
def test_the_scanner_passes_what_is_no_list_of_methods(innocent):
    assert method_lists(innocent, set(method_names())) == []


def test_what_the_sweep_the_headline_and_the_benchmark_read_is_the_registrys():
    assert budgeted() == ("sage", "dynamic", "best-first")  # the sweep's lines, as before
    assert choosing_budget() == ("sage-cost", "smart")  # its marked choices
    assert rivals()[:2] == ("static", "dynamic") and race_default() == ("sage", "static")
    assert leads() == ("sage", "sage-cost")


def imported_modules(source: str, package: str) -> set[str]:
    """Every module `source` imports, and every name it imports from one as `module.name` (a relative import
    resolved within `package`), under TYPE_CHECKING too."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return found


def studies_imported(source: str, package: str) -> list[str]:
    return sorted(m for m in imported_modules(source, package) if m.startswith("sage_core.studies"))


@pytest.mark.parametrize("renderer", ["app/render.py", "app/explain_view.py"])
def test_the_renderers_import_no_study(renderer):
    studies = studies_imported((ROOT / renderer).read_text(encoding="utf-8"), "app")
    assert not studies, f"{renderer} imports {studies}: the view computes what a study says of a race"


@pytest.mark.parametrize(
    "planted",
    [
        "from sage_core.studies.premise import calibration_of",
        "from sage_core import studies",
        "import sage_core.studies.costs",
        "if TYPE_CHECKING:\n    from sage_core.studies.explain import RoundExplained",
    ],
)
def test_the_import_check_sees_a_planted_study(planted):
    assert studies_imported(f"from .view import RaceView\n{planted}\n", "app")
    assert studies_imported("from ..studies import premise\n", "sage_core.methods")  # (relative: resolved)
    assert not studies_imported("from .view import RaceView\nfrom sage_core.methods import look\n", "app")


def test_docs_methods_names_every_registered_method():
    text = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    missing = [name for name in method_names() if f"`{name}`" not in text]
    assert not missing, f"docs/methods.md does not name {missing}"
