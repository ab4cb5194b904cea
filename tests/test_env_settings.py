"""The app's environment settings: SAGE_APP_COST_CURVE (the verification cost curve at warm-up, on by
default), SAGE_MCP and SAGE_APP_CUSTOM_HUB (off by default), and the limits (SAGE_APP_MAX_QUEUE,
SAGE_APP_MAX_RACE_SECONDS, ...). A value that is none of what they take is one sentence, at launch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from app import models
from app.inputs import Limits, env_number, env_port, env_switch
from sage_core.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SWITCH = "SAGE_APP_COST_CURVE must be on or off (or 1/0, true/false, yes/no), not 'maybe'"


def test_a_switch_reads_on_and_off_and_its_default(monkeypatch):
    for value, expected in [
        ("on", True),
        ("1", True),
        ("TRUE", True),
        (" yes ", True),
        ("off", False),
        ("0", False),
        ("false", False),
        ("No", False),
    ]:
        monkeypatch.setenv("SAGE_APP_COST_CURVE", value)
        assert env_switch("SAGE_APP_COST_CURVE", default=not expected) is expected, value
    for value in ("", "  "):
        monkeypatch.setenv("SAGE_APP_COST_CURVE", value)
        assert env_switch("SAGE_APP_COST_CURVE", default=True) and not env_switch("SAGE_APP_COST_CURVE")
    monkeypatch.delenv("SAGE_APP_COST_CURVE")
    assert models.cost_curve_wanted()  # on unless set off


def test_a_bad_switch_or_number_is_one_sentence(monkeypatch):
    monkeypatch.setenv("SAGE_APP_COST_CURVE", "maybe")
    with pytest.raises(ConfigError) as refused:
        models.cost_curve_wanted()
    assert str(refused.value) == SWITCH
    monkeypatch.setenv("SAGE_APP_CUSTOM_HUB", "sometimes")
    with pytest.raises(ConfigError, match=r"^SAGE_APP_CUSTOM_HUB must be on or off"):
        models.CustomModels.from_env()
    for bad in ("sixteen", "0", "-3", "nan", "inf"):
        monkeypatch.setenv("SAGE_APP_MAX_QUEUE", bad)
        with pytest.raises(ConfigError) as refused:
            Limits.from_env()
        assert str(refused.value) == f"SAGE_APP_MAX_QUEUE must be a positive number, not {bad!r}"


def test_numbers_read_as_given_or_their_default(monkeypatch):
    monkeypatch.setenv("SAGE_APP_MAX_RACE_SECONDS", " 45 ")
    monkeypatch.setenv("SAGE_APP_MAX_QUEUE", "")
    monkeypatch.setenv("SAGE_APP_MAX_SESSIONS", "200")
    monkeypatch.setenv("SAGE_APP_SESSION_GRACE_SECONDS", "2.5")
    limits = Limits.from_env()
    assert limits.max_race_seconds == 45.0 and limits.max_queue == Limits.max_queue
    assert (limits.max_sessions, limits.session_grace_seconds) == (200, 2.5)
    monkeypatch.setenv("SAGE_APP_SESSION_GRACE_SECONDS", "-1")
    with pytest.raises(ConfigError, match=r"^SAGE_APP_SESSION_GRACE_SECONDS must be a positive number, not '-1'"):
        Limits.from_env()
    monkeypatch.delenv("SAGE_APP_SESSION_GRACE_SECONDS")
    monkeypatch.delenv("SAGE_APP_MAX_RACE_SECONDS")
    assert env_number("SAGE_APP_MAX_RACE_SECONDS", 7.0) == 7.0


def test_off_skips_the_measurement_and_on_makes_it(monkeypatch):
    measured: list[object] = []
    monkeypatch.setattr(models, "decode", lambda *args, **kwargs: SimpleNamespace(run_to_end=lambda: None))
    monkeypatch.setattr(models, "measure_warm_costs", lambda pair: measured.append(pair) or "the curve")
    monkeypatch.setenv("SAGE_APP_COST_CURVE", "off")
    assert models.warm_up("pair") is None and measured == []
    monkeypatch.delenv("SAGE_APP_COST_CURVE")
    assert models.warm_up("pair") == "the curve" and measured == ["pair"]


@pytest.mark.parametrize(
    ("name", "value", "sentence"),
    [
        ("SAGE_APP_COST_CURVE", "maybe", SWITCH),
        ("SAGE_MCP", "please", "SAGE_MCP must be on or off (or 1/0, true/false, yes/no), not 'please'"),
        ("SAGE_APP_MAX_QUEUE", "lots", "SAGE_APP_MAX_QUEUE must be a positive number, not 'lots'"),
        (
            "GRADIO_SERVER_PORT",
            "abc",
            "GRADIO_SERVER_PORT must be a port number, a whole number in [1, 65535], not 'abc'",
        ),
    ],
)
def test_the_app_refuses_a_bad_value_at_launch_in_one_line(name, value, sentence):
    env = {**os.environ, name: value, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == f"error: {sentence}"
    assert "Traceback" not in run.stderr


def test_a_pair_or_port_or_limit_that_cannot_serve_is_one_sentence(monkeypatch):
    """A pair not offered here (a silent start on another before), a port that is not one (a traceback), a
    limit so small that every upload, trace, video or race would be refused (the app started, then refused)."""
    offered = [models.BUILTIN]
    monkeypatch.setenv("SAGE_APP_PAIR", "qwen2.5-vl-7b")
    with pytest.raises(ConfigError, match=r"^SAGE_APP_PAIR 'qwen2.5-vl-7b' is not offered on this machine \(it needs"):
        models.default_preset_key(offered)
    monkeypatch.setenv("SAGE_APP_PAIR", "builtin")
    assert models.default_preset_key(offered) == "builtin"
    for port in ("0", "65536", "80.5", "-1"):
        monkeypatch.setenv("GRADIO_SERVER_PORT", port)
        with pytest.raises(ConfigError, match="GRADIO_SERVER_PORT must be a port number"):
            env_port()
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7861")
    assert env_port() == 7861
    for name, said in [
        ("SAGE_APP_MAX_UPLOAD_MB", "picture or video upload"),
        ("SAGE_APP_MAX_TRACE_MB", "trace upload"),
        ("SAGE_APP_MAX_RACE_SECONDS", "race"),
        ("SAGE_APP_MAX_VIDEO_SECONDS", "video"),
    ]:
        monkeypatch.setenv(name, "1e-9")
        with pytest.raises(ConfigError) as refused:
            Limits.from_env()
        assert str(refused.value).startswith(f"{name} must be at least ") and f"every {said} is refused" in str(
            refused.value
        )
        monkeypatch.delenv(name)
