"""SAGE_APP_COST_CURVE: the app measures the verification cost curve at warm-up (on, the default) or
not (off); any other value is one sentence, at launch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from app import models
from app.models import cost_curve_wanted
from sage_core.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "SAGE_APP_COST_CURVE must be on or off (or 1/0, true/false, yes/no), not 'maybe'"


def test_the_option_reads_on_and_off():
    assert all(cost_curve_wanted(value) for value in ("", "on", "1", "TRUE", " yes "))
    assert not any(cost_curve_wanted(value) for value in ("off", "0", "false", "No"))


def test_a_bad_value_is_one_sentence():
    with pytest.raises(ConfigError) as refused:
        cost_curve_wanted("maybe")
    assert str(refused.value) == SENTENCE


def test_off_skips_the_measurement_and_on_makes_it(monkeypatch):
    measured: list[object] = []
    monkeypatch.setattr(models, "decode", lambda *args, **kwargs: SimpleNamespace(run_to_end=lambda: None))
    monkeypatch.setattr(models, "measure_warm_costs", lambda pair: measured.append(pair) or "the curve")
    monkeypatch.setattr(models, "runs_trees", lambda pair: True)  # a pair that verifies trees
    monkeypatch.setenv("SAGE_APP_COST_CURVE", "off")
    assert models.warm_up("pair") is None and measured == []  # type: ignore[arg-type]
    monkeypatch.delenv("SAGE_APP_COST_CURVE")
    assert models.warm_up("pair") == "the curve" and measured == ["pair"]  # type: ignore[arg-type]


def test_the_app_refuses_a_bad_value_at_launch_in_one_line():
    env = {**os.environ, "SAGE_APP_COST_CURVE": "maybe", "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == f"error: {SENTENCE}"
    assert "Traceback" not in run.stderr
