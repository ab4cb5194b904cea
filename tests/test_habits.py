"""The project's habits stay wired: pre-commit runs the ruff that requirements-dev.txt pins, mypy holds
the library and the app to annotated functions, and pytest prints the slowest tests."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_pre_commit_runs_the_pinned_ruff_lint_and_format_and_the_duplicate_check() -> None:
    pinned = re.search(r"^ruff==(\S+)$", (ROOT / "requirements-dev.txt").read_text(), re.M)
    assert pinned is not None
    repo, local = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"]
    assert repo["repo"].endswith("astral-sh/ruff-pre-commit") and repo["rev"] == f"v{pinned.group(1)}"
    assert {hook["id"] for hook in repo["hooks"]} == {"ruff-check", "ruff-format"}
    (duplicates,) = local["hooks"]
    assert local["repo"] == "local" and duplicates["entry"] == "python3 scripts/duplicates.py"
    assert "python3 scripts/duplicates.py" in (ROOT / ".ci" / "run").read_text()


def test_mypy_and_pytest_settings() -> None:
    tools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    assert {"sage_core", "app", "scripts", "custom_generate"} <= set(tools["mypy"]["files"])
    strict = [o for o in tools["mypy"]["overrides"] if o.get("disallow_untyped_defs")]
    assert strict and {"sage_core.*", "app.*"} <= set(strict[0]["module"])
    assert "--durations=20" in tools["pytest"]["ini_options"]["addopts"]


def user_docs() -> list[Path]:
    return [ROOT / "README.md", ROOT / "assets" / "builtin" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_short_and_links_only_to_what_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for page in user_docs():
        for link in re.findall(r"\]\(([^)#\s]+)", page.read_text()):
            if not link.startswith(("http://", "https://")):
                assert (page.parent / link).exists(), (page.name, link)
    assert (ROOT / "docs" / "race.png").stat().st_size < 500_000


def test_user_docs_name_no_commit_or_issue() -> None:
    for page in user_docs():
        text = page.read_text()
        assert not re.search(r"\bissues? #?\d+", text, re.I), page.name
        hashes = [h for h in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"\d", h) and re.search("[a-f]", h)]
        assert not hashes, (page.name, hashes)


def test_the_wheel_lists_every_subpackage_of_sage_core() -> None:
    """pyproject names the packages one by one (the built-in pair rides along as `sage_core.assets`):
    a new subpackage must be added there, or `pip install .` leaves it out."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "sage_core").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found <= listed, sorted(found - listed)
    assert "sage_core.assets" in listed


def test_the_decode_loop_names_no_method() -> None:
    """`DecodeRun`'s round and prefill hold no method's name: each method is its proposer (proposers.py)."""
    import ast

    from sage_core.methods.builtin import METHODS

    tree = ast.parse((ROOT / "sage_core" / "decode.py").read_text())
    (run,) = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == "DecodeRun"]
    named = [
        (function.name, node.value)
        for function in run.body
        if isinstance(function, ast.FunctionDef) and function.name in ("_run", "_round", "_prefill")
        for node in ast.walk(function)
        if isinstance(node, ast.Constant) and node.value in METHODS
    ]
    assert not named, named
