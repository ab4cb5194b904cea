"""The supported torch and transformers ranges (sage_core/compat.py): one sentence outside them, and the
forward's cache argument passed under the name the installed transformers reads."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from sage_core import compat
from sage_core.errors import SageError, VersionError

ROOT = Path(__file__).resolve().parent.parent


def test_versions_inside_the_ranges_pass():
    assert compat.version_problem({"transformers": "5.17.0", "torch": "2.11.0+cu130"}) is None
    assert compat.version_problem({"transformers": "5.24.0", "torch": "2.14.1"}) is None
    assert compat.version_problem(compat.installed_versions()) is None  # this machine's


TRANSFORMERS_516 = {"transformers": "5.16.2", "torch": "2.14.1"}
TORCH_210 = {"transformers": "5.24.0", "torch": "2.10.0+cu128"}


@pytest.mark.parametrize(
    ("installed", "named"),
    [
        (TRANSFORMERS_516, "transformers 5.16.2 is installed but sage_core needs transformers>=5.17,<5.25"),
        ({"transformers": "5.25.0", "torch": "2.14.1"}, "transformers 5.25.0 is installed"),
        (TORCH_210, "torch 2.10.0+cu128 is installed but sage_core needs torch>=2.11,<2.15"),
        ({"transformers": "5.24.0", "torch": "none"}, "torch none is installed"),
    ],
)
def test_a_version_outside_its_range_is_one_sentence_naming_both_versions(installed, named):
    with pytest.raises(VersionError) as raised:
        compat.check_versions(installed)
    message = str(raised.value)
    assert named in message and "\n" not in message and "requirements.txt" in message
    assert isinstance(raised.value, SageError)


def test_the_check_can_be_skipped(monkeypatch):
    monkeypatch.setenv(compat.SKIP_VARIABLE, "1")
    compat.check_versions({"transformers": "4.0.0", "torch": "1.0.0"})


def test_pyproject_states_the_ranges_the_import_checks():
    needs = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for name, (low, high) in compat.SUPPORTED.items():
        assert f"{name}>={low},<{high}" in needs, needs


def test_importing_the_library_outside_the_range_says_one_sentence():
    """transformers' metadata says 5.16.0: `import sage_core` fails with the sentence, as its last line."""
    code = (
        "import importlib.metadata as m\n"
        "real = m.version\n"
        "m.version = lambda name: '5.16.0' if name == 'transformers' else real(name)\n"
        "import sage_core\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(compat.SKIP_VARIABLE, None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("sage_core.errors.VersionError: transformers 5.16.0 is installed but sage_core needs"), last


class _Takes:
    def __init__(self, name: str) -> None:
        exec(f"def forward(input_ids=None, {name}=None, use_cache=None, **kwargs): return {name}", {}, ns := {})
        self.forward = ns["forward"]


@pytest.mark.parametrize("name", ["cache", "past_key_values"])
def test_the_cache_goes_under_the_forwards_own_name(name):
    assert compat.cache_keyword(_Takes(name)) == name


def test_the_cache_name_of_a_real_model_is_in_its_forward(tiny_root):
    import inspect

    from sage_core.models import VLM
    from sage_testkit.pairs import tiny_folder

    vlm = VLM.load(str(tiny_folder(tiny_root, "qwen2_5_vl", "target")), device="cpu", dtype="float32")
    assert vlm.cache_keyword in inspect.signature(vlm.model.forward).parameters
    state, _ = vlm.prefill(
        {"input_ids": torch.tensor([[5, 6, 7, 8]]), "attention_mask": torch.ones(1, 4, dtype=torch.long)}
    )
    assert state.cache.get_seq_length() == 4  # the prefill filled the project's cache (5.17 under the wrong name: 0)
