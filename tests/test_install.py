"""`pip install .` into a fresh virtual environment: from another directory `import sage_core`, its
`__version__` and the `sage` command work, and the installed package finds the built-in pair."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*command: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_pip_install_gives_an_importable_package_and_the_sage_command(tmp_path: Path) -> None:
    # A copy of what the build reads, so the build's own folders (build/, *.egg-info) never land in the checkout.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("sage_core", "sage_world"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "assets", source / "assets")
    venv = tmp_path / "venv"
    # The system's packages (torch, transformers, setuptools) are seen, so nothing is downloaded; without a pip
    # of its own the environment has no older setuptools of its own either: this pip installs into it.
    made = run(sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    python, sage = venv / "bin" / "python", venv / "bin" / "sage"
    pip = (sys.executable, "-m", "pip", "--python", python)
    installed = run(*pip, "install", "-q", "--no-build-isolation", source, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]
    shutil.rmtree(source)  # the installed package must not lean on the copy it was built from

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = (
        "import importlib.metadata as m, json, sage_core, sage_core.models.loading as a; "
        "print(json.dumps([sage_core.__version__, sage_core.__file__, str(a.BUILTIN_TARGET), str(a.BUILTIN_DRAFT), "
        "sorted(str(f) for f in m.files('sage-demo') if str(f).endswith('.py'))]))"
    )
    imported = run(python, "-c", probe, cwd=elsewhere)
    assert imported.returncode == 0, imported.stderr
    version, module, target, draft, code = json.loads(imported.stdout)
    # the installed code: the library and the built-in pair's world, without the test support (sage_testkit/)
    assert {f.split("/")[0] for f in code} == {"sage_core", "sage_world"} and "sage_core/records.py" in code, code
    assert not any("tiny_models" in f or "testkit" in f for f in code), code
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dynamic"] == ["version"]
    assert (
        version
        == run(
            python, "-c", "import importlib.metadata as m; print(m.version('sage-demo'))", cwd=elsewhere
        ).stdout.strip()
    )
    assert version.count(".") == 2 and all(part.isdigit() for part in version.split("."))
    assert Path(module).is_relative_to(venv), module
    for folder in (target, draft):
        assert Path(folder).is_relative_to(venv) and (Path(folder) / "config.json").is_file(), folder

    helped = run(sage, "--help", cwd=elsewhere)
    assert helped.returncode == 0 and "generate" in helped.stdout, helped.stderr
    # `sage generate` on the installed built-in pair, against an image outside any checkout.
    shutil.copy(ROOT / "assets" / "examples" / "count.png", elsewhere / "count.png")
    generated = run(
        sage,
        "generate",
        "--image",
        "count.png",
        "--prompt",
        "How many shapes?",
        "--max-new-tokens",
        "6",
        "--device",
        "cpu",
        "--json",
        cwd=elsewhere,
    )
    assert generated.returncode == 0, generated.stderr[-3000:]
    result = json.loads(generated.stdout.strip().splitlines()[-1])
    assert result["method"] == "sage" and len(result["token_ids"]) >= 1 and result["text"], result
