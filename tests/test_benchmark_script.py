"""The benchmark script runs end to end on tiny models: our methods and transformers' peers
on the same inputs, every method's tokens equal to generate()'s, JSON and markdown written."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import tiny_folder
from PIL import Image

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "benchmark.py"


def test_benchmark_runs_every_method_and_writes_its_reports(tiny_root, tmp_path, monkeypatch):
    Image.fromarray((np.random.RandomState(3).rand(56, 56, 3) * 255).astype("uint8")).save(tmp_path / "noise.png")
    (tmp_path / "examples.json").write_text(json.dumps([{"file": "noise.png", "prompt": "Describe the picture."}]))
    target, draft = tiny_folder(tiny_root, "qwen2_5_vl", "target"), tiny_folder(tiny_root, "qwen2_5_vl", "noised")
    out_json, out_md = tmp_path / "bench.json", tmp_path / "bench.md"
    monkeypatch.setattr(sys, "argv", [
        "benchmark.py", "--target", target, "--draft", draft, "--examples", str(tmp_path / "examples.json"),
        "--repeats", "2", "--max-new-tokens", "12", "--device", "cpu", "--dtype", "float32",
        "--json", str(out_json), "--markdown", str(out_md),
    ])  # fmt: skip
    main = runpy.run_path(str(SCRIPT), run_name="benchmark")["main"]
    assert main() == 0
    report = json.loads(out_json.read_text())
    rows = {row["method"]: row for row in report["summary"]}
    assert set(rows) == {"ar", "chain", "static", "sage", "generate", "assisted"}
    assert all(row["same_as_generate"] for row in rows.values())
    # Interleaved: the two repeats run the methods in different orders.
    orders = [[r["method"] for r in report["runs"] if r["repeat"] == k] for k in (0, 1)]
    assert orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1])
    sage = rows["sage"]
    assert 0 <= sage["outside_forwards_ms"] < sage["step_ms"] and sage["verify_ms"] > 0 and sage["draft_ms"] > 0
    assert "| sage |" in out_md.read_text()


def test_benchmark_refuses_kinds_with_no_example(tmp_path, monkeypatch, capsys):
    (tmp_path / "examples.json").write_text(json.dumps([{"file": "x.png", "prompt": "hi", "kind": "chart"}]))
    monkeypatch.setattr(sys, "argv", ["benchmark.py", "--examples", str(tmp_path / "examples.json"), "--kinds", "poem"])
    main = runpy.run_path(str(SCRIPT), run_name="benchmark")["main"]
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    assert "no example of the kinds 'poem'" in capsys.readouterr().err


def test_benchmark_reports_tau_and_speed_per_temperature(tiny_root, tmp_path, monkeypatch):
    Image.fromarray((np.random.RandomState(3).rand(56, 56, 3) * 255).astype("uint8")).save(tmp_path / "noise.png")
    (tmp_path / "examples.json").write_text(json.dumps([{"file": "noise.png", "prompt": "Describe the picture."}]))
    target, draft = tiny_folder(tiny_root, "qwen2_5_vl", "target"), tiny_folder(tiny_root, "qwen2_5_vl", "noised")
    out_json, out_md = tmp_path / "bench.json", tmp_path / "bench.md"
    monkeypatch.setattr(sys, "argv", [
        "benchmark.py", "--target", target, "--draft", draft, "--examples", str(tmp_path / "examples.json"),
        "--methods", "ar,sage,generate,assisted", "--temperatures", "0,0.8", "--top-p", "0.95",
        "--repeats", "1", "--max-new-tokens", "10", "--device", "cpu", "--dtype", "float32",
        "--json", str(out_json), "--markdown", str(out_md),
    ])  # fmt: skip
    main = runpy.run_path(str(SCRIPT), run_name="benchmark")["main"]
    assert main() == 0
    report = json.loads(out_json.read_text())
    rows = {row["method"]: row for row in report["summary"]}
    sampled = ("ar T=0.8", "sage T=0.8", "generate T=0.8", "assisted T=0.8")
    assert set(rows) == {"ar", "sage", "generate", "assisted", *sampled}
    assert all(rows[m]["same_as_generate"] for m in ("ar", "sage", "assisted"))
    assert all(rows[m]["same_as_generate"] is None and rows[m]["temperature"] == 0.8 for m in sampled)
    assert rows["sage T=0.8"]["tau"] is not None and rows["sage T=0.8"]["tokens_per_s_e2e"][0] > 0
    assert rows["sage T=0.8"]["x_ar_e2e"][0] > 0 and rows["sage T=0.8"]["verify_ms"] > 0
    assert {r["temperature"] for r in report["runs"]} == {0.0, 0.8}
    table = out_md.read_text()
    assert "| sage T=0.8 |" in table and "n/a (sampled)" in table


def test_benchmark_refuses_a_negative_temperature(tmp_path, monkeypatch, capsys):
    (tmp_path / "examples.json").write_text(json.dumps([{"file": "x.png", "prompt": "hi"}]))
    monkeypatch.setattr(sys, "argv", ["benchmark.py", "--examples", str(tmp_path / "examples.json"),
                                      "--temperatures", "0,-1"])  # fmt: skip
    main = runpy.run_path(str(SCRIPT), run_name="benchmark")["main"]
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    assert "temperature must be" in capsys.readouterr().err
