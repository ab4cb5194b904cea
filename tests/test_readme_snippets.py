"""The README's snippets run as written: the transformers `generate()` block, offline on the built-in pair
(its answer is the chart's, as examples.json has it), and the command line's install line makes `sage`."""

from __future__ import annotations

import contextlib
import io
import json
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def block_after(heading: str) -> str:
    """The first ```python block after `heading` in the README."""
    found = re.search(re.escape(heading) + r".*?```python\n(.*?)```", README, re.S)
    assert found, heading
    return found[1]


@pytest.mark.skipif(not (ROOT / "assets" / "builtin" / "target" / "config.json").is_file(), reason="not trained")
def test_the_transformers_snippet_runs_offline_on_the_built_in_pair(monkeypatch):
    code = block_after("**transformers' `generate()`**")
    assert "assets/builtin/target" in code and "custom_generate=" in code
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})  # the README's own code, as written
    listing = json.loads((ROOT / "assets" / "examples" / "examples.json").read_text())
    chart = next(e for e in listing if e["file"] == "chart.png")
    assert printed.getvalue().strip().lower() == chart["answer"]


def test_the_command_line_section_names_the_install_that_makes_sage():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["sage"] == "sage_core.cli:main"
    assert "`pip install -e .` puts `sage` on the PATH" in README
    assert "-e ." in (ROOT / "requirements-dev.txt").read_text().splitlines()
