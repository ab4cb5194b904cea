"""Draft-side visual token pruning (SpecVLM): the selection rule, the target's scores (equal to
eager attention), the draft's pruned prefill (equal to the full prefill with the pruned tokens
masked out, original positions kept), the settings and the CLI.

Losslessness with pruning on is tested with the other methods in test_lossless.py."""

from __future__ import annotations

import json
import math

import pytest
import torch

from sage_core import DecodeConfig, decode, load_trace
from sage_core.cli import main
from sage_core.models import VLM
from sage_core.models.caches import IN_PLACE, RecurrentState
from sage_core.pruning import keep_budget, select_visual_tokens
from sage_core.trace_check import parse_trace
from sage_testkit.pairs import (
    ADDED_NEW,
    DRAFT_METHODS,
    PROMPTS,
    check_pruned_prompt,
    greedy,
    greedy_answer,
    tiny_folder,
    tiny_pair,
)
from sage_testkit.seams import generate_argv
from sage_testkit.tiny_models import ALL_FAMILIES, model_class

PROMPT = "Describe the picture."


# -- the selection rule ------------------------------------------------------


def test_stage_one_keeps_the_most_attended_until_the_share_then_fills_evenly():
    # 20 tokens; 3 of them hold 60% of the mass; the budget at ratio 0.7 is 6.
    scores = [1.0] * 20
    scores[4], scores[11], scores[17] = 10.0, 9.0, 8.0  # 27 of 44
    kept = select_visual_tokens(scores, 0.7, attention_share=0.5)
    assert len(kept) == keep_budget(20, 0.7) == 6
    # stage I: 10 + 9 = 19 < 22 (half the mass), + 8 = 27 >= 22: three tokens
    assert {4, 11, 17} <= set(kept)
    rest = [i for i in range(20) if i not in (4, 11, 17)]  # 17 tokens, 3 picks evenly spaced
    assert sorted(set(kept) - {4, 11, 17}) == [rest[2], rest[8], rest[14]]
    assert list(kept) == sorted(kept)


def test_selection_edges():
    scores = [float(i) for i in range(10)]
    assert select_visual_tokens(scores, 0.0) == tuple(range(10))
    assert select_visual_tokens(scores, 0.99) == (9,)  # at least one token: the most attended
    # share 0: nothing in stage I, the whole budget spread evenly
    assert select_visual_tokens(scores, 0.6, attention_share=0.0) == (1, 3, 6, 8)
    # share 1: the budget goes to the most attended tokens
    assert select_visual_tokens(scores, 0.5, attention_share=1.0) == (5, 6, 7, 8, 9)
    assert keep_budget(0, 0.9) == 0 and keep_budget(4, 0.9) == 1 and keep_budget(4, 0.5) == 2


# -- the target's scores and the draft's pruned prefill ----------------------


def eager_target(tiny_root, family: str):
    """The family's target loaded with eager attention, for its attention weights."""
    folder = tiny_folder(tiny_root, family, "target")
    return model_class(family).from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()


def media_of(vlm: VLM, image, video) -> tuple:
    """The image, and the video where the family's processor takes one."""
    return (image, video) if vlm.spec.video else (image,)


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_scores_equal_the_mean_eager_attention_from_the_trailing_text(tiny_root, image, video, family):
    check_scores(tiny_root, image, video, family)


@pytest.mark.parametrize("family", ["qwen2_5_vl", "gemma4"])
def test_scores_in_small_chunks_of_heads_and_queries_are_the_same(tiny_root, image, video, family, monkeypatch):
    """The scores' scratch is bounded (a long question after the image): with a bound of 64 elements each
    head's scores are cut into chunks of queries, and the scores still equal eager attention's."""
    from sage_core.models import visual

    monkeypatch.setattr(visual, "SCORE_CHUNK", 64)
    check_scores(tiny_root, image, video, family)


def check_scores(tiny_root, image, video, family: str) -> None:
    target = tiny_pair(str(tiny_root), family, "copy").target
    eager = eager_target(tiny_root, family)
    for media in media_of(target, image, video):
        inputs = target.prepare(media, PROMPT)
        _, logits, scores = target.prefill_scored(inputs)
        visual = target.visual_positions(inputs)
        first_text = int(visual[-1]) + 1
        with torch.no_grad():
            output = eager(**inputs, output_attentions=True)
        per_layer = [a[0, :, first_text:][..., visual].mean(dim=(0, 1)) for a in output.attentions]
        expected = torch.stack(per_layer).mean(dim=0)
        assert scores.shape == (visual.numel(),)
        torch.testing.assert_close(scores, expected, atol=1e-6, rtol=1e-4)
        torch.testing.assert_close(logits, output.logits[0, -1], atol=1e-4, rtol=1e-4)
        assert len(set(scores.tolist())) > 1  # a real ranking, not a constant


def masked_prefill(model: VLM, inputs, dropped: torch.Tensor):
    """The full prefill with the dropped rows invisible to every token: what the pruned draft must equal.

    The model's own masks (one per layer type where it makes several: Gemma 3's sliding windows and
    bidirectional image attention) with the dropped columns blocked; a causal mask where it makes none."""
    length = inputs["input_ids"].shape[1]
    causal = torch.ones(length, length, dtype=torch.bool).tril()

    def block(mask):
        if not isinstance(mask, torch.Tensor) or mask.dim() != 4:
            mask = causal[None, None]
        allowed = mask.clone() if mask.dtype == torch.bool else mask == 0
        allowed[..., dropped] = False
        allowed[..., dropped, dropped] = True  # a dropped token still sees itself (its row is discarded anyway)
        return torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)

    def use_mask(module, args, kwargs):
        given = kwargs.get("attention_mask")
        kwargs["attention_mask"] = {k: block(m) for k, m in given.items()} if isinstance(given, dict) else block(given)
        return args, kwargs

    hook = model.spec.language_model(model.model).register_forward_pre_hook(use_mask, with_kwargs=True)
    try:
        return model.prefill(inputs)
    finally:
        hook.remove()


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_pruned_prefill_keeps_original_positions(tiny_root, image, video, family):
    pair = tiny_pair(str(tiny_root), family, "noised")
    draft = pair.draft
    if isinstance(draft.spec.cache_strategy(IN_PLACE, draft.model.config), RecurrentState):
        # no mask reaches linear-attention layers: no masked full prefill to compare with
        pytest.skip("the pruned hybrid draft is checked by the losslessness tests")
    for media in media_of(draft, image, video):
        inputs = draft.prepare(media, PROMPT)
        visual = draft.visual_positions(inputs)
        count = visual.numel()
        kept = tuple(range(1, count, 3))  # every third visual token but the first
        dropped = visual[[i for i in range(count) if i not in kept]]
        state, logits = draft.prefill_pruned(inputs, kept)
        full, full_logits = masked_prefill(draft, inputs, dropped)
        length = inputs["input_ids"].shape[1]
        rows = [i for i in range(length) if i not in set(dropped.tolist())]
        assert state.committed == len(rows) == length - len(dropped)
        # the next token's position equals the one the unpruned prompt gives it
        assert state.committed + state.position_offset == length + full.position_offset
        torch.testing.assert_close(logits, full_logits, atol=1e-4, rtol=1e-4)
        for layer, reference_layer in zip(state.cache.layers, full.cache.layers, strict=True):
            if reference_layer.keys is None:  # a shared-KV layer's placeholder (Gemma 4): nothing cached there
                assert layer.keys is None
                continue
            # RoPE is in the cached keys: equal keys mean equal positions on every M-RoPE axis
            # (the first visual token is dropped, so sequential positions would shift every later row)
            torch.testing.assert_close(layer.keys, reference_layer.keys[:, :, rows], atol=1e-4, rtol=1e-4)


# -- settings --------------------------------------------------------------


@pytest.mark.parametrize("ratio", [1.0, -0.1, 1.5, math.nan])
def test_bad_ratios_are_refused(ratio):
    with pytest.raises(ValueError, match=r"pruning ratio must lie in \[0, 1\)"):
        DecodeConfig("sage", prune_ratio=ratio)


def test_pruning_without_a_draft_is_refused():
    with pytest.raises(ValueError, match="'ar' has no draft"):
        DecodeConfig("ar", prune_ratio=0.8)
    assert DecodeConfig("ar").prune_ratio == 0.0  # off by default


def test_cli_json_reports_both_prompt_lengths_and_the_trace_the_kept_tokens(tiny_root, video, tmp_path, capsys):
    import numpy as np
    from PIL import Image

    path = tmp_path / "noise.png"
    Image.fromarray((np.random.RandomState(0).rand(56, 56, 3) * 255).astype("uint8")).save(path)
    target = tiny_folder(tiny_root, "llava_onevision", "target")
    draft = tiny_folder(tiny_root, "llava_onevision", "noised")
    trace = tmp_path / "run.jsonl"
    more = ["--method", "static", "--max-new-tokens", "12", "--prune-ratio", "0.8", "--json", "--trace", str(trace)]
    code = main(generate_argv(target, draft, path, PROMPT, *more))
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    header, _ = load_trace(trace)
    kept = keep_budget(header.visual_tokens, 0.8)
    assert header.visual_tokens > 50 and len(header.kept_visual_indices) == kept
    assert result["draft_prompt_tokens"] == result["prompt_tokens"] - (header.visual_tokens - kept)
    pair = tiny_pair(str(tiny_root), "llava_onevision", "noised")
    from sage_core import load_media

    assert result["token_ids"] == greedy(pair, load_media(path), PROMPT, 12)


def test_old_traces_without_pruning_fields_still_load(tiny_root, image):
    pair = tiny_pair(str(tiny_root), "qwen2_vl", "noised")
    run = decode(pair, image, PROMPT, DecodeConfig("static", 6, prune_ratio=0.5))
    run.run_to_end()
    from sage_core.records import trace_lines

    lines = list(trace_lines(run.header, run.records))
    assert parse_trace(lines)[0] == run.header  # kept indices survive the round trip as a tuple
    old = json.loads(lines[0])
    for name in ("prune_ratio", "visual_tokens", "draft_prompt_tokens", "kept_visual_indices"):
        del old["header"][name]
    header, _ = parse_trace([json.dumps(old), *lines[1:]])
    assert header.kept_visual_indices is None and header.prune_ratio == 0.0


# Families whose crops or tiles get no place, only the whole image or frame (as LLaVA-OneVision's crops)
PARTLY_PLACED = ("idefics3", "smolvlm", "internvl")


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_every_visual_token_has_its_place_on_the_frames(tiny_root, image, video, family):
    draft = tiny_pair(str(tiny_root), family, "noised").draft
    for media in media_of(draft, image, video):
        inputs = draft.prepare(media, PROMPT)
        boxes = draft.visual_token_boxes(inputs)
        assert len(boxes) == draft.visual_positions(inputs).numel()
        placed = [box for box in boxes if box is not None]
        frames = 1 if media.kind == "image" else len(media.frame_indices)
        assert all(0 <= b[0] <= b[1] < frames + 1 and 0 <= b[2] < b[4] <= 1 and 0 <= b[3] < b[5] <= 1 for b in placed)
        if family in PARTLY_PLACED or (family in ("llava_next", "llava_next_video") and media.kind == "image"):
            # the whole image (or each frame) is placed once; crops and tiles are not
            assert sum((b[4] - b[2]) * (b[5] - b[3]) for b in placed) == pytest.approx(frames)
            assert {b[0] for b in placed} == set(range(frames))
        elif family != "llava_onevision":  # the Qwen, LLaVA and Pixtral grids tile every frame exactly
            assert len(placed) == len(boxes)
            area = sum((b[4] - b[2]) * (b[5] - b[3]) * (b[1] - b[0] + 1) for b in placed)
            assert area == pytest.approx(frames)
        elif media.kind == "video":  # every frame's pooled grid; the last token ends the video
            assert boxes[-1] is None and len(placed) == len(boxes) - 1 and {b[0] for b in placed} == set(range(frames))
        else:  # the base grid tiles the image; the high-resolution crops are not placed
            assert sum((b[4] - b[2]) * (b[5] - b[3]) for b in placed) == pytest.approx(1.0)


def test_every_family_prunes_and_one_whose_hooks_are_unknown_is_refused_in_one_sentence(tiny_root, image):
    """Every registered family has the pruning hooks (Gemma 4's shared-KV layers and per-layer inputs too);
    a family marked otherwise is refused before any forward, with the sentence naming what to do."""
    import copy
    import dataclasses

    from sage_core.errors import InputError
    from sage_core.models import ModelPair
    from sage_core.models.registry import FAMILIES

    assert all(family.prunable for family in FAMILIES.values())
    pair = tiny_pair(str(tiny_root), "gemma4", "noised")
    draft = copy.copy(pair.draft)
    draft.spec = dataclasses.replace(draft.spec, prunable=False)
    refusal = "visual token pruning is not available for gemma4 models yet; turn pruning off"
    with pytest.raises(InputError, match=refusal):
        decode(ModelPair(pair.target, draft), image, PROMPT, DecodeConfig("sage", 4, prune_ratio=0.5))
    run = decode(ModelPair(pair.target, draft), image, PROMPT, DecodeConfig("sage", 4))  # unpruned: it runs
    assert run.run_to_end().token_ids


@pytest.mark.parametrize("family", ["gemma3", "gemma4"])
def test_sliding_window_families_pruned_at_the_papers_ratios_equal_greedy_generate(tiny_root, image, video, family):
    """The sliding-window families (Gemma 4 with its shared-KV layers and per-layer inputs) with the draft
    pruned at the paper's ratios: every drafting method's output is the target's own greedy output, images
    and video where the family takes one, on the fast path and on transformers' plain one."""
    for backend, draft_kind in (("fast", "copy"), ("plain", "noised")):
        pair = tiny_pair(str(tiny_root), family, draft_kind)
        for media in media_of(pair.target, image, video):
            expected = list(greedy_answer(str(tiny_root), family, media.kind, PROMPTS[0], ADDED_NEW))
            ratio = 0.9 if media.kind == "video" else 0.8
            for method in DRAFT_METHODS:
                config = DecodeConfig(method, ADDED_NEW, prune_ratio=ratio, backend=backend)
                run = decode(pair, media, PROMPTS[0], config)
                assert list(run.run_to_end().token_ids) == expected, f"{family} {method} {media.kind} {backend}"
                check_pruned_prompt(run.header, ratio)


def test_pruning_a_prompt_without_visual_tokens_is_refused_in_one_sentence(tiny_root, image):
    """Inputs prepared by the caller with no image in them (text only): nothing to prune, one sentence;
    the same inputs decode unpruned."""
    from sage_core.errors import InputError
    from sage_core.prepared import PreparedInputs

    pair = tiny_pair(str(tiny_root), "gemma4", "noised")
    processor = pair.target.processor
    text = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}], tokenize=False, add_generation_prompt=True
    )
    inputs = dict(processor(text=[text], return_tensors="pt"))
    assert pair.target.visual_positions(inputs).numel() == 0
    prepared = PreparedInputs(image, PROMPT, inputs, inputs, 0.0, 0.0)
    with pytest.raises(InputError, match="visual token pruning needs an image or a video with visual tokens"):
        decode(pair, image, PROMPT, DecodeConfig("sage", 4, prune_ratio=0.5), prepared)
    assert decode(pair, image, PROMPT, DecodeConfig("sage", 4), prepared).run_to_end().token_ids
