"""A one-pass draft (models/one_pass.py, drafting.draft_block): one draft forward a round for every method.

The draft reads the tokens committed since its last round and `block - 1` masks in one forward; the
masks take the positions of the tokens they stand for and their cache entries are dropped. Checked:

- the block's logits equal the model's own step-by-step forward over the prompt, the real tokens and the
  masks (every family: M-RoPE, sliding windows, linear attention), round after round (so the masks'
  entries were dropped and the real ones kept);
- every method equals greedy `generate()` token for token with a one-pass draft, on every family, image
  and video, every backend and with pruning, and runs exactly one draft forward a decode round, counted
  from the draft model's own forward calls;
- the record says how many draft forwards each round ran, for sequential drafts too, and traces keep it;
- a malformed declaration is refused in one sentence.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sage_core import METHODS, DecodeConfig, ModelLoadError, decode, load_pair
from sage_core.backends import open_backend
from sage_core.config import BACKENDS
from sage_core.drafting import draft_block
from sage_core.methods.builtin import DRAFTING_METHODS
from sage_core.models import VLM
from sage_core.models.one_pass import ONE_PASS_KEY, OnePass
from sage_core.records import record_from_dict, record_to_dict, save_trace
from sage_core.trace_check import load_trace
from sage_testkit.pairs import (
    ADDED_NEW,
    ONE_PASS_BLOCK,
    ONE_PASS_MASK,
    PROMPTS,
    declare_one_pass,
    greedy_answer,
    tiny_folder,
    tiny_pair,
)
from sage_testkit.references import path_logits
from sage_testkit.seams import draft_calls_per_record
from sage_testkit.tiny_models import ALL_FAMILIES, FAMILIES

TOLERANCE = 1e-4


def block_error(vlm: VLM, inputs: dict, rounds: list[list[int]]) -> float:
    """The largest gap between `draft_block`'s logits and the model's own step-by-step forward over
    the prompt, every earlier round's real tokens, this round's and the masks, over `rounds`."""
    backend = open_backend(vlm, "fast")
    state = backend.prefill(inputs, 64).state
    one_pass = vlm.one_pass
    assert one_pass is not None
    worst, real = 0.0, []
    for pending in rounds:
        logits = draft_block(backend, state, pending, one_pass)
        real += pending
        assert logits.shape[0] == one_pass.block_size
        assert state.committed == int(inputs["input_ids"].shape[1]) + len(real)  # only the real tokens kept
        for depth in range(one_pass.block_size):
            reference = path_logits(vlm, inputs, [*real, *[one_pass.mask_token_id] * depth])
            worst = max(worst, (logits[depth] - reference).abs().max().item())
    return worst


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_the_block_equals_the_models_own_forward_round_after_round(tiny_root, image, video, family):
    vlm = VLM.load(tiny_folder(tiny_root, family, "one-pass"), device="cpu", dtype="float32")
    assert vlm.one_pass == OnePass(ONE_PASS_MASK, ONE_PASS_BLOCK)
    for media in (image, video) if vlm.spec.video and family in FAMILIES else (image,):
        inputs = vlm.prepare(media, PROMPTS[0])
        assert block_error(vlm, inputs, [[11], [12, 13, 14], [15, 16]]) < TOLERANCE, (family, media.kind)


def test_a_mask_at_the_wrong_position_is_caught(tiny_root, image, monkeypatch):
    """Negative control: masks all at the last real token's next position are not the model's forward."""
    vlm = VLM.load(tiny_folder(tiny_root, "qwen2_5_vl", "one-pass"), device="cpu", dtype="float32")
    inputs = vlm.prepare(image, PROMPTS[0])
    real_extend = vlm.extend

    def flat_positions(state, tokens, positions, **kwargs):
        return real_extend(state, tokens, [min(p, positions[0] + 1) for p in positions], **kwargs)

    monkeypatch.setattr(vlm, "extend", flat_positions)
    assert block_error(vlm, inputs, [[11, 12]]) > 100 * TOLERANCE


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_every_method_is_lossless_with_one_draft_forward_a_round(tiny_root, image, video, family):
    pair = tiny_pair(str(tiny_root), family, "one-pass")
    new = 24 if family in FAMILIES else ADDED_NEW
    for media in (image, video) if pair.target.spec.video else (image,):
        expected = greedy_answer(str(tiny_root), family, media.kind, PROMPTS[0], new)
        for method in METHODS:
            run, summary, calls = draft_calls_per_record(pair, media, PROMPTS[0], DecodeConfig(method, new))
            assert summary.token_ids == expected, f"{family} {method} {media.kind}"
            rounds = [r for r in run.records if r.phase == "decode"]
            want = 0 if method == "ar" else 1
            assert [r.draft_forwards for r in rounds] == [want] * len(rounds), method
            assert [calls[r.round] for r in rounds] == [want] * len(rounds), method  # the model's own calls
            assert run.header.draft_block == (0 if method == "ar" else ONE_PASS_BLOCK)
            assert all(r.depth <= ONE_PASS_BLOCK for r in rounds)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_pruning_and_the_sequential_count(tiny_root, image, backend):
    """On every backend, pruned or not, the one-pass draft is lossless in one forward a round; a sequential
    draft's record counts the forwards it ran too (the root's, then one per expanded level)."""
    family, new = "qwen2_5_vl", 16
    expected = greedy_answer(str(tiny_root), family, "image", PROMPTS[1], new)
    one_pass = tiny_pair(str(tiny_root), family, "one-pass")
    for prune_ratio in (0.0, 0.5):
        for method in DRAFTING_METHODS:
            config = DecodeConfig(method, new, prune_ratio=prune_ratio, backend=backend)
            run, summary, calls = draft_calls_per_record(one_pass, image, PROMPTS[1], config)
            assert summary.token_ids == expected, (method, prune_ratio)
            assert {calls[r.round] for r in run.records if r.phase == "decode"} == {1}, (method, prune_ratio)
    sequential = tiny_pair(str(tiny_root), family, "noised")
    deeper = 0
    for method in DRAFTING_METHODS:
        run, summary, calls = draft_calls_per_record(
            sequential, image, PROMPTS[1], DecodeConfig(method, new, backend=backend)
        )
        assert summary.token_ids == expected, method
        for record in (r for r in run.records if r.phase == "decode"):
            assert record.draft_forwards == calls[record.round] >= 1, method
            deeper += record.draft_forwards > 1
    assert deeper, "a sequential draft ran one forward per level somewhere"


def test_sampling_with_a_one_pass_draft_is_seeded_and_its_rounds_are_one_forward(tiny_root, image):
    """Under sampling the block's distributions are the tree's proposals (exactness: test_sampling_power)."""
    from sage_core.config import SamplingConfig

    pair = tiny_pair(str(tiny_root), "qwen2_vl", "one-pass")
    for method in DRAFTING_METHODS:
        config = DecodeConfig(method, 12, sampling=SamplingConfig(temperature=1.0, seed=3))
        first, second = (decode(pair, image, PROMPTS[0], config) for _ in range(2))
        assert first.run_to_end().token_ids == second.run_to_end().token_ids, method
        assert {r.draft_forwards for r in first.records if r.phase == "decode"} == {1}, method


def test_the_trace_keeps_the_block_and_the_forwards(tiny_root, image, tmp_path):
    pair = tiny_pair(str(tiny_root), "qwen2_vl", "one-pass")
    run = decode(pair, image, PROMPTS[0], DecodeConfig("sage", 12))
    run.run_to_end()
    save_trace(tmp_path / "run.jsonl", run.header, run.records)
    header, records = load_trace(tmp_path / "run.jsonl")
    assert header.draft_block == ONE_PASS_BLOCK
    assert [r.draft_forwards for r in records] == [r.draft_forwards for r in run.records]
    assert records[0].draft_forwards is None and {r.draft_forwards for r in records[1:]} == {1}
    older = record_to_dict(run.records[1])
    del older["draft_forwards"]  # a trace written before the field: not recorded
    assert record_from_dict(older).draft_forwards is None


def test_the_cost_aware_methods_price_a_one_pass_round_as_one_forward():
    """sage-cost and SMART weigh a tree by its cost: with a one-pass draft its levels cost nothing and the feed
    reads the block's masks too, so a deeper tree costs only its verification."""
    from sage_core.cost_curve import COST_SIZES, CostCurve
    from sage_core.methods.budget import RoundCosts
    from sage_core.methods.smart import CurveReadings

    curve = CostCurve("cpu", "float32", "fast", COST_SIZES, 4.0, tuple(4 + 0.2 * n for n in COST_SIZES), (1.0,) * 7)
    sequential, one_pass = RoundCosts.of(curve, 20), RoundCosts.of(curve, 20, block=8)
    assert one_pass.level == (0.0,) * 21 and sequential.level is None
    assert one_pass.draft[3] == curve.draft_at(3 + 7)
    readings, block_readings = CurveReadings(curve), CurveReadings(curve, 8)
    assert readings.round_cost([1, 1, 1, 1], 1) > readings.round_cost([1], 1)  # each level a forward
    deep, shallow = block_readings.round_cost([1, 1, 1, 1], 1), block_readings.round_cost([4], 1)
    assert deep == shallow  # same nodes, same cost, whatever the depth


@pytest.mark.parametrize(
    "declared",
    [
        {"mask_token_id": 3, "block_size": 1},
        {"mask_token_id": 10**9, "block_size": 4},
        {"mask_token_id": "3", "block_size": 4},
        {"mask_token_id": 3, "block_size": True},
        [3, 4],
    ],
)
def test_a_malformed_declaration_is_one_sentence(tiny_root, tmp_path, declared):
    folder = Path(tiny_folder(tiny_root, "qwen2_vl", "noised"))
    copy = tmp_path / "draft"
    copy.mkdir()
    for item in folder.iterdir():
        (copy / item.name).write_bytes(item.read_bytes())
    declare_one_pass(copy, 0, 2)
    config = json.loads((copy / "config.json").read_text())
    config[ONE_PASS_KEY] = declared
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="declares itself a one-pass draft") as caught:
        load_pair(tiny_folder(tiny_root, "qwen2_vl", "target"), str(copy), "cpu", "float32")
    assert "\n" not in str(caught.value)


def test_the_shipped_one_pass_draft_declares_itself(builtin_pair):
    """The built-in one-pass draft is found by its folder and drafts one forward a round, losslessly."""
    from sage_core.models.loading import BUILTIN_ONE_PASS_DRAFT

    pair = load_pair("builtin", str(BUILTIN_ONE_PASS_DRAFT), device="cpu", dtype="float32")
    assert pair.draft.one_pass is not None and pair.draft.one_pass.block_size >= 4
    from sage_core.media import load_media

    media = load_media(str(Path(__file__).parents[1] / "assets" / "examples" / "describe_five.png"))
    prompt = "describe the picture in detail."
    with torch.inference_mode():
        expected = decode(builtin_pair, media, prompt, DecodeConfig("ar", 40)).run_to_end().token_ids
    for method in DRAFTING_METHODS:
        run = decode(pair, media, prompt, DecodeConfig(method, 40))
        assert run.run_to_end().token_ids == expected, method
        rounds = [r for r in run.records if r.phase == "decode"]
        assert {r.draft_forwards for r in rounds} == {1}
        if method not in ("sage-cost", "smart"):  # (these two may refuse every node on a curve measured under load)
            assert sum(r.accepted_length for r in rounds) / len(rounds) > 1.0, method  # the block is trained


def test_a_trace_with_bad_draft_figures_is_refused_in_one_sentence(tiny_root, image, tmp_path):
    """A trace's draft forwards must be a whole number and its draft block 0 or at least 2."""
    import dataclasses

    from sage_core.errors import InputError

    pair = tiny_pair(str(tiny_root), "qwen2_vl", "one-pass")
    run = decode(pair, image, PROMPTS[0], DecodeConfig("chain", 6))
    run.run_to_end()
    bad_record = [run.records[0], dataclasses.replace(run.records[1], draft_forwards=-1)]
    bad_header = dataclasses.replace(run.header, draft_block=1)
    for header, records, words in ((run.header, bad_record, "draft forwards"), (bad_header, run.records, "block")):
        save_trace(tmp_path / "bad.jsonl", header, records)
        with pytest.raises((InputError, ValueError)) as caught:
            load_trace(tmp_path / "bad.jsonl")
        assert words in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--one-pass", "1"], "--one-pass"),
        (["--block-copies", "0"], "--block-copies"),
        (["--block-weight", "0"], "--block-weight"),
    ],
)
def test_the_training_scripts_one_pass_flags_refuse_bad_values(flags, words, capsys):
    import runpy

    script = runpy.run_path(str(Path(__file__).resolve().parent.parent / "scripts" / "train_builtin_pair.py"))
    with pytest.raises(SystemExit):
        script["parse_args"](flags)
    assert words in capsys.readouterr().err
