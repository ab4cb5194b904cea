"""scripts/gpu_check.py, the one command for a lent GPU: it runs from a plain checkout, every section runs end
to end on tiny models on this CPU (`--smoke`), each section's figures are on disk as soon as it ends (a failure
injected mid-run keeps what came before and runs what comes after), and a section that will not fit in the
budget is skipped with a note."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.py"


def run_check(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """As on the GPU machine: `python3 scripts/gpu_check.py ...` from another folder, no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, str(SCRIPT), "--repeats", "2", "--out", str(tmp_path / "out"), *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)


def lines(tmp_path: Path) -> tuple[list[dict], dict[str, dict]]:
    """The rows and each section's end, read back from results.jsonl."""
    rows, ends = [], {}
    for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines():
        item = json.loads(line)
        if "end" in item:
            ends[item["end"]["section"]] = item["end"]
        else:
            rows.append(item)
    return rows, ends


@pytest.mark.slow
def test_every_section_runs_on_tiny_models(tmp_path):
    done = run_check(tmp_path, "--smoke")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows, ends = lines(tmp_path)
    assert {name: end["status"] for name, end in ends.items()} == {
        "versions": "ran",
        "verify": "ran",
        "verify_72b": "ran",
        "draft": "ran",
        "tau": "ran",
        "predict": "ran",
        "bf16": "ran",
        "plain": "ran",
        "race": "ran",
        "budget_sweep": "ran",
        "memory": "ran",
    }
    by = lambda section: [r for r in rows if r["section"] == section]  # noqa: E731
    assert Path(by("versions")[0]["sage_core"]) == ROOT / "sage_core"  # this checkout, not an installed copy
    trees = {(r["tree"], r.get("nodes")) for r in by("verify")}
    assert {("chain", 5), ("static", 25), ("sage-shaped", 11), ("bushy", 8), ("one-token", 0)} <= trees
    assert all(r["ms"] > 0 for r in by("verify") if "ms" in r)
    assert {r["kind"] for r in by("draft")} >= {"level", "compile", "level_compiled"}
    assert {r["method"] for r in by("tau")} >= {"chain", "static", "sage", "dynamic"}
    assert all(r["lossless"] for r in by("tau"))
    predicted = by("predict")
    assert {r["tau_source"].split(",")[0] for r in predicted} == {"built-in pair", "paper"}
    assert all(r["speedup"] >= 0 and r["draft_ms_per_token"] >= 0 for r in predicted)  # CPU noise: tiny, not negative
    pairs = {(r["target"], r["draft"]) for r in predicted}
    assert pairs == {("tiny-target", "tiny-draft"), ("tiny-target", "tiny-draft-b"), ("tiny-target-big", "tiny-target")}
    big = by("verify_72b")
    assert {r["model"] for r in big} >= {"tiny-target-big (1 layers)", "tiny-target-big (2 layers)"}
    assert any(r["model"].endswith("(extrapolated to 4 layers)") and r["tree"] == "bushy" for r in big)
    assert all(r["identical"] for r in by("bf16")) and {r["draft"] for r in by("bf16")} == {"copy", "noised"}
    assert by("plain")[-1]["same"] is True  # the library's plain decoding == generate()'s tokens
    assert {r["method"] for r in by("race")} == {"ar", "chain", "sage"}
    assert [r["pad_tokens"] for r in by("memory")] == [0, 40]
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert "## verify: ran" in markdown and "| model | context | tree |" in markdown and "## memory: ran" in markdown


def test_a_failure_mid_run_keeps_the_figures_before_it_and_runs_the_rest(tmp_path):
    done = run_check(tmp_path, "--smoke", "--sections", "versions,verify,predict,plain", "--fail-in", "verify")
    assert done.returncode == 1
    rows, ends = lines(tmp_path)
    assert [(n, e["status"]) for n, e in ends.items()] == [
        ("versions", "ran"),
        ("verify", "failed"),
        ("predict", "ran"),
        ("plain", "ran"),
    ]
    assert "failure injected in verify" in ends["verify"]["note"]
    assert "nothing to predict" in ends["predict"]["note"]  # it needed verify's costs, and says so
    assert {r["section"] for r in rows} == {"versions", "plain"}
    assert "RuntimeError: failure injected in verify" in (tmp_path / "out" / "errors.log").read_text()
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert "## versions: ran" in markdown and "## verify: failed" in markdown and "## plain: ran" in markdown


def test_a_section_that_does_not_fit_the_budget_is_skipped_and_said_so(tmp_path):
    done = run_check(tmp_path, "--smoke", "--sections", "versions,memory", "--budget-seconds", "8")
    assert done.returncode == 0, done.stderr[-2000:]
    _, ends = lines(tmp_path)
    assert ends["versions"]["status"] == "ran"
    assert ends["memory"]["status"] == "skipped" and "left of the budget" in ends["memory"]["note"]


def test_without_a_gpu_it_refuses_the_real_sizes(tmp_path):
    done = run_check(tmp_path)
    assert done.returncode == 2 and "needs a CUDA GPU" in done.stderr


def test_each_real_shape_stands_for_a_preset_whose_written_memory_it_reports():
    from sage_core.models.presets import gpu_preset
    from scripts import gpu_figures

    assert set(gpu_figures.PRESET_OF) == set(gpu_figures.SHAPES)
    for key, role in gpu_figures.PRESET_OF.values():
        assert "GB" in gpu_preset(key).memory and role in ("target", "draft")
