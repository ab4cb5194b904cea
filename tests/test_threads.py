"""The CPU threads a pair runs on (sage_core.threads), and acceptance figures as engines report them
(sage_core.acceptance): asked for, measured, recorded in the header and the CLI's answer, refused when bad."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy
import pytest
import torch
from app_records import ar_records, header, sage_records, static_records
from PIL import Image

from sage_core import threads as threads_module
from sage_core.cli import main
from sage_core.errors import ConfigError, TraceError
from sage_core.records import save_trace
from sage_core.studies.acceptance import acceptance_stats
from sage_core.threads import MORE_THREADS_GAIN, asked_threads, candidate_counts, choose_threads, pick
from sage_core.trace_check import parse_trace
from sage_testkit.pairs import tiny_folder


@pytest.fixture(scope="module")
def image_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("media") / "noise.png"
    Image.fromarray((numpy.random.RandomState(0).rand(56, 56, 3) * 255).astype("uint8")).save(path)
    return path


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_a_count_is_asked_by_the_flag_then_the_variables_in_order():
    env = {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "4"}
    assert asked_threads(None, env) == (3, "OMP_NUM_THREADS")
    assert asked_threads(None, {**env, "SAGE_THREADS": "2"}) == (2, "SAGE_THREADS")
    assert asked_threads(5, {**env, "SAGE_THREADS": "2"}) == (5, "asked (--threads)")
    assert asked_threads(None, {"MKL_NUM_THREADS": "4", "SAGE_THREADS": " "}) == (4, "MKL_NUM_THREADS")
    assert asked_threads(None, {}) is None


@pytest.mark.parametrize(("value", "words"), [("0", "1-256 threads"), ("many", "whole number"), ("1000", "1-256")])
def test_a_bad_count_is_one_sentence_naming_where_it_was_given(value, words):
    with pytest.raises(ConfigError, match=words) as refused:
        asked_threads(None, {"SAGE_THREADS": value})
    assert str(refused.value).startswith("SAGE_THREADS must be")


def test_the_candidates_double_up_to_the_cores():
    assert candidate_counts(1) == (1,)
    assert candidate_counts(2) == (1, 2)
    assert candidate_counts(6) == (1, 2, 4, 6)
    assert candidate_counts(8) == (1, 2, 4, 8)


def test_more_threads_only_when_they_pay_clearly():
    assert pick({1: 5.0, 2: 4.5}) == 1  # 11 % faster: not worth a thread a busy machine makes dear
    assert pick({1: 10.0, 2: 5.0, 4: 4.5}) == 2  # 4 is within the gain of 2's time
    assert pick({1: 10.0, 2: 7.0, 4: 7.0 / (MORE_THREADS_GAIN + 0.1)}) == 4
    assert pick({1: 3.0, 2: 9.0}) == 1  # a busy second core: one thread


def fake_pair(device: str = "cpu") -> SimpleNamespace:
    return SimpleNamespace(device=torch.device(device))


def test_the_count_is_measured_at_each_candidate_and_the_choice_applied(monkeypatch, restore_threads):
    monkeypatch.setattr(threads_module, "available_cores", lambda: 4)
    seen: list[int] = []

    def measure(pair) -> float:  # a pair whose step halves from 1 to 2 threads and gains little beyond
        seen.append(torch.get_num_threads())
        return {1: 10.0, 2: 5.0, 4: 4.4}[torch.get_num_threads()]

    choice = choose_threads(fake_pair(), environ={}, measure=measure, passes=2)
    assert (choice.threads, choice.source, choice.cores) == (2, "measured", 4)
    assert choice.step_ms == {1: 10.0, 2: 5.0, 4: 4.4}
    assert sorted(seen) == sorted([1, 2, 4] * 3)  # one untimed pass, then two timed ones
    assert torch.get_num_threads() == 2
    assert "2 threads of 4 cores" in choice.describe() and "5.00 ms at 2" in choice.describe()
    assert choice.as_dict()["step_ms"] == {"1": 10.0, "2": 5.0, "4": 4.4}


def test_an_asked_count_or_a_gpu_pair_is_not_measured(monkeypatch, restore_threads):
    def never(pair) -> float:
        raise AssertionError("measured")

    choice = choose_threads(fake_pair(), environ={"OMP_NUM_THREADS": "2"}, measure=never)
    assert (choice.threads, choice.source, torch.get_num_threads()) == (2, "OMP_NUM_THREADS", 2)
    choice = choose_threads(fake_pair(), flag=1, environ={"SAGE_THREADS": "2"}, measure=never)
    assert (choice.threads, choice.source, torch.get_num_threads()) == (1, "asked (--threads)", 1)
    assert choose_threads(fake_pair("meta"), environ={}, measure=never).source.startswith("a GPU pair")
    monkeypatch.setattr(threads_module, "available_cores", lambda: 1)
    assert choose_threads(fake_pair(), environ={}, measure=never).source == "one core"


def test_the_builtin_pairs_step_is_timed_for_real(builtin_pair, monkeypatch, restore_threads):
    monkeypatch.delenv("SAGE_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    choice = choose_threads(builtin_pair, passes=1)
    assert choice.source == "measured" and set(choice.step_ms) == set(candidate_counts(choice.cores))
    assert all(0 < ms < 10_000 for ms in choice.step_ms.values())
    assert choice.threads == pick(choice.step_ms) == torch.get_num_threads()


def test_the_header_records_the_threads_and_a_trace_keeps_them(tmp_path, restore_threads):
    torch.set_num_threads(1)
    path = tmp_path / "t.jsonl"
    save_trace(path, replace(header("sage"), threads=3), sage_records())
    read, _ = parse_trace(path.read_text().splitlines())
    assert read.threads == 3
    for bad in (-1, 257, True, 1.5):
        lines = path.read_text().splitlines()
        first = json.loads(lines[0])
        first["header"]["threads"] = bad
        with pytest.raises(TraceError, match="thread count"):
            parse_trace([json.dumps(first), *lines[1:]])


def test_acceptance_is_counted_as_vllm_counts_it():
    stats = acceptance_stats(sage_records())  # two drafts: 5 nodes accepting 3, then 3 nodes accepting 2
    assert (stats.num_drafts, stats.num_draft_tokens, stats.num_accepted_tokens) == (2, 8, 5)
    assert stats.num_accepted_tokens_per_pos == (2, 2, 1)
    assert stats.acceptance_rate_per_pos == (1.0, 1.0, 0.5)
    assert stats.accepted_length_histogram == (0, 0, 1, 1)
    assert stats.mean_acceptance_length == 1 + 5 / 2
    assert stats.draft_acceptance_rate == 5 / 8
    assert stats.spec_verify_ct == 2 and stats.spec_accept_length == (4 + 3) / 2
    plain = acceptance_stats(ar_records())
    assert (plain.num_drafts, plain.mean_acceptance_length, plain.acceptance_rate_per_pos) == (0, 1.0, ())
    assert plain.spec_accept_length == 1.0
    static = acceptance_stats(static_records()).as_dict()
    assert static["num_accepted_tokens_per_pos"] == [3, 1] and static["accepted_length_histogram"] == [0, 2, 1]


def test_the_clis_answer_names_its_threads_and_acceptance(tiny_root, image_file, capsys, monkeypatch, restore_threads):
    target = tiny_folder(tiny_root, "qwen2_vl", "target")
    argv = ["generate", "--image", str(image_file), "--prompt", "hi", "--target", target, "--draft", target]
    argv += ["--device", "cpu", "--max-new-tokens", "6", "--json", "--threads", "1"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["threads"]["threads"] == 1 and result["threads"]["source"] == "asked (--threads)"
    assert "[threads: 1 thread of" in captured.err
    stats = result["acceptance"]
    assert stats["num_drafts"] == result["rounds"] - sum(1 for r in result["trace"][1:] if not r["tree_tokens"])
    assert sum(stats["accepted_length_histogram"]) == stats["num_drafts"]
    assert sum(stats["num_accepted_tokens_per_pos"]) == stats["num_accepted_tokens"]
    assert result["trace"] and all(isinstance(r, dict) for r in result["trace"])
    monkeypatch.setenv("SAGE_THREADS", "0")
    assert main(argv[:-2]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: SAGE_THREADS must be 1-256 threads, not 0"


def test_a_saved_traces_stats_are_its_records_counted(tmp_path, capsys):
    path = tmp_path / "run.jsonl"
    save_trace(path, replace(header("sage"), threads=1), sage_records())
    assert main(["stats", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["acceptance"] == acceptance_stats(sage_records()).as_dict()
    assert result["threads"] == 1 and result["rounds"] == 2
    assert main(["stats", str(path)]) == 0
    said = capsys.readouterr().out
    assert "sage on cpu, float32, 1 thread" in said and "acceptance rate per position: 1.00, 1.00, 0.50" in said
    (tmp_path / "broken.jsonl").write_text("not json\n")
    assert main(["stats", str(tmp_path / "broken.jsonl")]) == 2
    assert capsys.readouterr().err.startswith("error: ")
