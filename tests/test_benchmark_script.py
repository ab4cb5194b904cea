"""The benchmark script runs end to end on tiny models: our methods and transformers' peers
on the same inputs, every method's tokens equal to generate()'s, JSON and markdown written."""

from __future__ import annotations

import json
import runpy
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sage_core.methods.builtin import DRAFTING_METHODS
from sage_testkit.pairs import features_draft, tiny_folder

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "benchmark.py"


def noise_example(tmp_path: Path, side: int = 56) -> str:
    """A noise picture and an examples.json naming it; returns the examples file."""
    Image.fromarray((np.random.RandomState(3).rand(side, side, 3) * 255).astype("uint8")).save(tmp_path / "noise.png")
    (tmp_path / "examples.json").write_text(json.dumps([{"file": "noise.png", "prompt": "Describe the picture."}]))
    return str(tmp_path / "examples.json")


def run_benchmark(monkeypatch, *args: str) -> int:
    """The script's main() with these command-line arguments."""
    monkeypatch.setattr(sys, "argv", ["benchmark.py", *args])
    return runpy.run_path(str(SCRIPT), run_name="benchmark")["main"]()


def refusal(monkeypatch, capsys, *args: str) -> str:
    """The error message of a run the script refuses (exit status 2)."""
    with pytest.raises(SystemExit) as exit_info:
        run_benchmark(monkeypatch, *args)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


@pytest.fixture
def bench(tiny_root, tmp_path, monkeypatch) -> Callable[..., tuple[dict, str]]:
    """`bench(family, *args, side=56, **options)`: the script on a tiny pair of `family` (its noised draft) and
    one noise picture of `side` pixels, on the CPU in float32, with these further arguments (`options`:
    `--name value` each, `max_new_tokens=8` as `--max-new-tokens 8`): its JSON report and its markdown."""

    def run(family: str, *args: str, side: int = 56, **options: object) -> tuple[dict, str]:
        examples = noise_example(tmp_path, side)
        target, draft = tiny_folder(tiny_root, family, "target"), tiny_folder(tiny_root, family, "noised")
        out_json, out_md = tmp_path / "bench.json", tmp_path / "bench.md"
        common = ["--target", target, "--draft", draft, "--examples", examples, "--device", "cpu", "--dtype", "float32"]
        named = [word for key, value in options.items() for word in ("--" + key.replace("_", "-"), str(value))]
        outputs = ["--json", str(out_json), "--markdown", str(out_md)]
        assert run_benchmark(monkeypatch, *common, *args, *named, *outputs) == 0
        return json.loads(out_json.read_text()), out_md.read_text()

    return run


def test_benchmark_runs_every_method_and_writes_its_reports(bench):
    report, text = bench("qwen2_5_vl", repeats=2, max_new_tokens=12)
    rows = {row["method"]: row for row in report["summary"]}
    # Every registry method by default, the ablation lanes included (sage-cost is compared with them too).
    assert set(rows) == {
        "ar",
        "chain",
        "static",
        "sage",
        "sage-cost",
        "dynamic",
        "sage-frozen",
        "best-first",
        "smart",
        "generate",
        "assisted",
    }
    assert all(row["same_as_generate"] for row in rows.values())
    # Interleaved: the two repeats run the methods in different orders.
    orders = [[r["method"] for r in report["runs"] if r["repeat"] == k] for k in (0, 1)]
    assert orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1])
    sage = rows["sage"]
    assert 0 <= sage["outside_forwards_ms"] < sage["step_ms"] and sage["verify_ms"] > 0 and sage["draft_ms"] > 0
    assert "| sage |" in text
    assert "SAGE over the dynamic tree (EAGLE-2)" in text
    assert "sage-cost over SAGE with α frozen" in text
    assert "sage-cost over the best-first tree" in text
    assert "sage-cost over SMART (cost-shaped, 2026)" in text
    curve = report["cost_curve"]  # measured on the first example, printed before the table
    assert curve["sizes"] == [1, 2, 4, 8, 16, 32, 64] and all(ms > 0 for ms in curve["verify_ms"])
    assert "64 nodes: verify" in text
    assert "SAGE over static, decode only:" in text and "predicted by these costs" in text


def test_benchmark_runs_our_methods_on_several_backends_interleaved(bench):
    """--backend fast,plain: each of our methods on both, in one interleaved run, and the ratio printed."""
    report, text = bench("qwen3_vl", methods="generate,ar,sage", backend="fast,plain", repeats=2, max_new_tokens=10)
    rows = {row["method"]: row for row in report["summary"]}
    assert set(rows) == {"generate", "ar", "sage", "ar@plain", "sage@plain"}
    assert all(row["same_as_generate"] for row in rows.values())
    assert rows["sage@plain"]["draft_ms"] > 0 and rows["ar@plain"]["draft_prefill_ms"] is None
    orders = [[r["method"] for r in report["runs"] if r["repeat"] == k] for k in (0, 1)]
    assert orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1])
    assert "sage@plain against sage on fast:" in text and "ar@plain against ar on fast:" in text


def test_benchmark_races_a_second_draft_interleaved(tiny_root, bench):
    """--second-draft: each drafting method again with a one-pass draft, in the same interleaved repeats; the
    rows say one draft forward a round, and the lines under the table compare the drafts method by method."""
    one_pass = tiny_folder(tiny_root, "qwen2_vl", "one-pass")
    report, text = bench(
        "qwen2_vl",
        second_draft=one_pass,
        methods="generate,ar,sage,chain",
        repeats=1,
        max_new_tokens=10,
    )
    rows = {row["method"]: row for row in report["summary"]}
    tag = Path(one_pass).name
    assert set(rows) == {"generate", "ar", "sage", "chain", f"sage/{tag}", f"chain/{tag}"}
    assert all(row["same_as_generate"] for row in rows.values())
    assert rows[f"sage/{tag}"]["draft_forwards"] == 1 and rows["chain"]["draft_forwards"] == 5
    assert f"sage/{tag} over sage:" in text and "the best with the second draft" in text


def test_benchmark_races_the_targets_features_off_beside_on(tiny_root, tmp_path, bench, monkeypatch, capsys):
    """--features-off: each drafting lane whose draft reads the target's features (here --second-draft's, not the
    first draft's) again with them off, interleaved and lossless, and per kind and pooled the lane over its twin;
    refused in one sentence when no draft of the run reads them."""
    reading = features_draft(tiny_root, tmp_path, "qwen2_5_vl")
    Image.fromarray((np.random.RandomState(4).rand(40, 40, 3) * 255).astype("uint8")).save(tmp_path / "two.png")
    kinds = [("noise.png", "describe", "Describe the picture."), ("two.png", "count", "How many squares?")]
    examples = tmp_path / "kinds.json"
    examples.write_text(json.dumps([{"file": f, "kind": k, "prompt": p} for f, k, p in kinds]))
    report, text = bench(
        "qwen2_5_vl",
        "--features-off",
        second_draft=reading,
        examples=examples,
        methods="generate,ar,sage,chain",
        repeats=1,
        max_new_tokens=8,
    )
    tag, off = Path(reading).name, ", features off"
    rows = {row["method"]: row for row in report["summary"]}
    twins = {f"sage/{tag}{off}", f"chain/{tag}{off}"}  # the first (noised) draft reads none: no twin of its lanes
    assert set(rows) == {"generate", "ar", "sage", "chain", f"sage/{tag}", f"chain/{tag}", *twins}
    plain = {run["example"]: run["tokens"] for run in report["runs"] if run["method"] == "generate"}
    ran = [run for run in report["runs"] if run["method"] in twins]
    assert len(ran) == 4 and all(run["tokens"] == plain[run["example"]] for run in ran)  # lossless
    assert all(rows[twin]["same_as_generate"] and rows[twin]["tau"] is not None for twin in twins)
    assert "Each lane with the target's features on over its twin with them off" in text
    for group in ("describe (1 example)", "count (1 example)", "all kinds (2 examples)"):
        assert f"\n  sage/{tag}, {group}: " in text and f"\n  chain/{tag}, {group}: " in text
    assert "sage, describe" not in text
    target, noised = tiny_folder(tiny_root, "qwen2_5_vl", "target"), tiny_folder(tiny_root, "qwen2_5_vl", "noised")
    args = ["--target", target, "--draft", noised, "--examples", str(examples), "--device", "cpu"]
    message = refusal(monkeypatch, capsys, "--features-off", *args)
    assert "--features-off: no draft of this run reads the target's features" in message


def test_benchmark_names_a_method_on_another_backend():
    script = runpy.run_path(str(SCRIPT), run_name="benchmark")
    config = script["method_config"]("sage+prune0.8@compiled", 16, "fast")
    assert (config.method, config.prune_ratio, config.backend) == ("sage", 0.8, "compiled")
    assert script["method_config"]("static", 16, "plain").backend == "plain"
    methods = script["on_backends"](["generate", "ar", "sage"], ["fast", "compiled", "plain"])
    assert methods == ["generate", "ar", "sage", "ar@compiled", "sage@compiled", "ar@plain", "sage@plain"]


def test_benchmark_refuses_an_unknown_backend(tmp_path, monkeypatch, capsys):
    assert "--backend: choose from" in refusal(monkeypatch, capsys, "--backend", "fast,turbo")


def test_benchmark_refuses_kinds_with_no_example(tmp_path, monkeypatch, capsys):
    (tmp_path / "examples.json").write_text(json.dumps([{"file": "x.png", "prompt": "hi", "kind": "chart"}]))
    error = refusal(monkeypatch, capsys, "--examples", str(tmp_path / "examples.json"), "--kinds", "poem")
    assert "no example of the kinds 'poem'" in error


def test_benchmark_on_the_plain_backend_with_a_long_prompt(bench):
    """--backend plain runs our methods on transformers' own cache; --long-prompt adds padded prompts
    and a table of step time against context."""
    report, text = bench(
        "qwen2_vl",
        methods="ar,sage,generate",
        repeats=1,
        max_new_tokens=8,
        backend="plain",
        long_prompt=300,
        threads=1,
    )
    assert report["backend"] == "plain" and report["threads"] == 1
    assert all(row["same_as_generate"] for row in report["summary"])
    lengths = {r["pad_tokens"]: r["prompt_tokens"] for r in report["runs"]}
    assert set(lengths) == {0, 300} and 250 < lengths[300] - lengths[0] < 350
    assert {r["pad_tokens"] for r in report["rounds"]} == {0, 300}
    assert "Step time against context" in text and "| 300 |" in text


def test_benchmark_runs_the_draft_methods_pruned(bench):
    report, _ = bench(
        "llava_onevision",
        methods="generate,ar,static,sage",
        prune_ratios="0,0.8",
        repeats=1,
        max_new_tokens=10,
        side=64,
    )
    rows = {row["method"]: row for row in report["summary"]}
    assert set(rows) == {"generate", "ar", "static", "sage", "static+prune0.8", "sage+prune0.8"}
    assert all(row["same_as_generate"] for row in rows.values())
    for method in ("static", "sage"):
        full, pruned = rows[method], rows[method + "+prune0.8"]
        assert pruned["draft_prompt_tokens"] < full["draft_prompt_tokens"] - 50  # 88 image tokens, 18 kept
        assert pruned["draft_prefill_ms"] > 0 and pruned["tokens_per_forward"] >= 1 and pruned["draft_ms"] > 0
    assert rows["ar"]["draft_prefill_ms"] is None


def test_benchmark_refuses_a_bad_pruning_ratio(tmp_path, monkeypatch, capsys):
    assert "pruning ratio must lie in [0, 1)" in refusal(monkeypatch, capsys, "--prune-ratios", "0,1")


def test_benchmark_reports_tau_and_speed_per_temperature(bench):
    """--temperatures runs every method (pruned ones included) greedy and sampled: rows per temperature,
    sampled rows marked n/a for same tokens, tau and speedups at each temperature."""
    report, text = bench(
        "qwen2_5_vl",
        methods="ar,sage,generate,assisted",
        prune_ratios="0,0.8",
        temperatures="0,0.8",
        top_p="0.95",
        repeats=1,
        max_new_tokens=10,
    )
    rows = {row["method"]: row for row in report["summary"]}
    greedy = ("ar", "sage", "generate", "assisted", "sage+prune0.8")
    sampled = tuple(f"{m} T=0.8" for m in greedy)
    assert set(rows) == {*greedy, *sampled}
    assert all(rows[m]["same_as_generate"] is True and rows[m]["temperature"] == 0 for m in greedy)
    assert all(rows[m]["same_as_generate"] is None and rows[m]["temperature"] == 0.8 for m in sampled)
    for method in ("sage T=0.8", "sage+prune0.8 T=0.8"):
        assert rows[method]["tau"] is not None and rows[method]["tokens_per_s_e2e"][0] > 0
        assert rows[method]["x_ar_e2e"][0] > 0 and rows[method]["verify_ms"] > 0
    assert rows["sage+prune0.8 T=0.8"]["draft_prompt_tokens"] < rows["sage T=0.8"]["draft_prompt_tokens"]
    assert {r["temperature"] for r in report["runs"]} == {0.0, 0.8}
    assert {r["temperature"] for r in report["rounds"]} == {0.0, 0.8}
    assert report["temperatures"] == [0.0, 0.8] and report["top_p"] == 0.95
    # The peers sampled (seeded per repeat): generate's sampled tokens are not its greedy ones.
    tokens = {(r["method"], r["temperature"]): r["tokens"] for r in report["runs"]}
    assert tokens[("generate", 0.8)] != tokens[("generate", 0.0)]
    table = text
    assert "| sage T=0.8 |" in table and "| sage+prune0.8 T=0.8 |" in table and "n/a (sampled)" in table
    assert "at temperature 0.8 (both sampling)" in table


def test_benchmark_refuses_a_negative_temperature(tmp_path, monkeypatch, capsys):
    (tmp_path / "examples.json").write_text(json.dumps([{"file": "x.png", "prompt": "hi"}]))
    error = refusal(monkeypatch, capsys, "--examples", str(tmp_path / "examples.json"), "--temperatures", "0,-1")
    assert "temperature must be" in error


def test_the_context_table_has_a_column_per_method_and_temperature():
    bench = runpy.run_path(str(SCRIPT), run_name="benchmark")
    Run, Rounds, context_table = bench["Run"], bench["Rounds"], bench["context_table"]
    runs = [
        Run("a", "sage", 0, (1,) * 11, 1.0, 0.5, pad_tokens=0, prompt_tokens=40),  # 20 tok/s decode
        Run("a", "sage", 0, (1,) * 6, 1.0, 0.5, pad_tokens=0, prompt_tokens=40, temperature=0.7),  # 10
        Run("a+300tok", "sage", 0, (1,) * 11, 2.0, 1.0, pad_tokens=300, prompt_tokens=340),  # 10
        Run("a+300tok", "sage", 0, (1,) * 5, 2.0, 1.0, pad_tokens=300, prompt_tokens=340, temperature=0.7),  # 4
    ]
    rounds = [
        Rounds("a", "sage", 3, 1.0, 2.0, 4.0, 1.0, pad_tokens=0, temperature=0.0),
        Rounds("a", "sage", 3, 1.0, 2.0, 5.0, 1.0, pad_tokens=0, temperature=0.7),
        Rounds("a+300tok", "sage", 3, 1.0, 2.0, 6.0, 1.0, pad_tokens=300, temperature=0.0),
        Rounds("a+300tok", "sage", 3, 1.0, 2.0, 7.0, 1.0, pad_tokens=300, temperature=0.7),
    ]
    lines = context_table(runs, rounds, ["sage"], [0.0, 0.7]).splitlines()
    assert lines[0].split(" | ")[2:] == [
        "sage ms/round",
        "sage T=0.7 ms/round",
        "sage tok/s decode",
        "sage T=0.7 tok/s decode |",
    ]
    assert lines[2] == "| 0 | 40 | 4.0 | 5.0 | 20.0 | 10.0 |"
    assert lines[3] == "| 300 | 340 | 6.0 | 7.0 | 10.0 | 4.0 |"


def test_benchmark_refuses_a_thread_count_below_one(tmp_path, monkeypatch, capsys):
    (tmp_path / "examples.json").write_text(json.dumps([{"file": "x.png", "prompt": "hi"}]))
    error = refusal(monkeypatch, capsys, "--examples", str(tmp_path / "examples.json"), "--threads", "0")
    assert "--threads must be 1-256 threads, not 0" in error


def test_sage_is_compared_with_the_static_tree_and_the_chain_example_by_example():
    """The lines under the table: the median over examples of SAGE's per-example speed ratio."""
    bench = runpy.run_path(str(SCRIPT), run_name="benchmark")
    Run = bench["Run"]
    seconds = {  # per example: sage, static, chain, each making 10 tokens
        "a": (1.0, 2.0, 1.0),  # x static 2.0, x chain 1.0
        "b": (1.0, 1.0, 4.0),  # x static 1.0, x chain 4.0
        "c": (2.0, 3.0, 1.0),  # x static 1.5, x chain 0.5
    }
    runs = [
        Run(example, method, 0, (1,) * 10, t, t / 2, pad_tokens=0, prompt_tokens=40)
        for example, times in seconds.items()
        for method, t in zip(("sage", "static", "chain"), times, strict=True)
    ]
    rows = bench["summarize"](runs, [], ["sage", "static", "chain"], [0.0])
    lines = bench["sage_lines"](rows).strip().split("\n\n")
    assert lines[:-1] == [
        "SAGE over the static tree: 1.50 [1.00–2.00] end to end, 1.50 [1.00–2.00] decode only.",
        "SAGE over the 5-token chain: 1.00 [0.50–4.00] end to end, 1.00 [0.50–4.00] decode only.",
    ]
    assert lines[-1].startswith("Efficiency") and lines[-1].endswith("n/a.")  # no plain decoding ran
    # without the static tree, no line for it
    only_chain = bench["summarize"]([r for r in runs if r.method != "static"], [], ["sage", "chain"], [0.0])
    assert "static tree" not in bench["sage_lines"](only_chain)


def test_sage_cost_is_compared_with_every_method_and_efficiency_is_speedup_per_forward():
    bench = runpy.run_path(str(SCRIPT), run_name="benchmark")
    Run = bench["Run"]
    # One example; ar 10 tokens in 2 s, sage in 1 s (5 tokens a forward), sage-cost in 0.8 s (4 a forward).
    runs = [
        Run("a", "ar", 0, (1,) * 10, 2.0, 1.0),
        Run("a", "sage", 0, (1,) * 10, 1.0, 0.5, mean_accepted=4.0, tokens_per_forward=5.0),
        Run("a", "sage-cost", 0, (1,) * 10, 0.8, 0.4, mean_accepted=3.0, tokens_per_forward=4.0),
    ]
    rows = bench["summarize"](runs, [], ["sage-cost", "sage", "ar"], [0.0])
    lines = bench["sage_lines"](rows).strip().split("\n\n")
    assert "sage-cost over the paper's SAGE: 1.25 [1.25–1.25] end to end, 1.25 [1.25–1.25] decode only." in lines
    # efficiency: sage-cost 2.5x plain / 4 = 0.62 (both ways), sage 2.0x / 5 = 0.40
    assert lines[-1].endswith("sage-cost 0.62 / 0.62, sage 0.40 / 0.40.")


def test_the_tau_study_compares_every_drafting_method_and_checks_the_premise(capsys):
    from sage_core.models import BUILTIN_TARGET

    if not (BUILTIN_TARGET / "config.json").exists():
        pytest.skip("built-in pair not trained")
    study = runpy.run_path(str(SCRIPT.parent / "tau_study.py"), run_name="tau_study")["main"]
    figures = study(["--n", "2", "--max-new-tokens", "48", "--threads", "1"])
    assert set(figures["methods"]) == {*DRAFTING_METHODS}  # every drafting method of the registry
    assert figures["lossless"] and set(figures["delta_vs_sage"]) == set(figures["methods"]) - {"sage"}
    assert figures["calibration"]["lane"] == "chain" and figures["acceptance_histogram"]["sage"]
    assert figures["methods"]["dynamic"]["nodes_per_round"] <= 59
    premise = figures["premise"]  # per kind (two answers: two kinds), then over all kinds
    assert len(premise) == 3 and list(premise)[-1] == "all kinds"
    everything = premise["all kinds"]
    rounds = everything["alpha_accept"]["points"]
    assert rounds >= 4 and everything["entropy_lag1"]["points"] == rounds - 2  # lag pairs stay within an answer
    printed = capsys.readouterr().out
    assert "Dynamic" in printed and "premise, all kinds: lag-1 autocorr(round entropy) per answer" in printed
    assert "centred" in printed and "pooled" in printed
    with pytest.raises(SystemExit):
        study(["--n", "1", "--methods", "sage,eagle"])
    assert "unknown method 'eagle'" in capsys.readouterr().err


def test_the_entropy_ablation_races_sage_cost_at_a_fixed_depth(bench, monkeypatch, capsys):
    from sage_core.methods import method_names

    report, _ = bench("qwen2_5_vl", methods="generate,sage-cost", sage_cost_fixed_depth=3, repeats=1, max_new_tokens=8)
    out = capsys.readouterr().out
    assert "sage-cost over sage-cost at a fixed depth (no entropy): " in out
    assert "sage-cost's mean D(α): " in out  # what the fixed depth is held near
    fixed = [run["tokens"] for run in report["runs"] if run["method"] == "sage-cost-fixed"]
    plain = [run["tokens"] for run in report["runs"] if run["method"] == "generate"]
    assert fixed and plain and all(tokens == plain[0] for tokens in fixed)  # lossless: generate's tokens
    assert {row["method"] for row in report["summary"]} >= {"sage-cost", "sage-cost-fixed"}
    assert "sage-cost-fixed" not in method_names()  # registered for that run only
    assert "--sage-cost-fixed-depth: sage-cost's fixed depth must be in [1, 16]" in refusal(
        monkeypatch, capsys, "--sage-cost-fixed-depth", "17"
    )
    assert "sage-cost-fixed" not in method_names()


def test_benchmark_refuses_a_second_draft_it_cannot_load(tiny_root, tmp_path, monkeypatch, capsys):
    """A second draft that is not a model, or has another tokenizer than the target's, is one sentence."""
    target = tiny_folder(tiny_root, "qwen2_vl", "target")
    args = ["--target", target, "--draft", target, "--examples", noise_example(tmp_path), "--device", "cpu"]
    args += ["--dtype", "float32"]
    assert "--second-draft:" in refusal(monkeypatch, capsys, *args, "--second-draft", str(tmp_path / "nothing"))
    other = tiny_folder(tiny_root, "llava_onevision", "target")
    message = refusal(monkeypatch, capsys, *args, "--second-draft", other)
    assert "--second-draft:" in message and "tokenizer" in message
