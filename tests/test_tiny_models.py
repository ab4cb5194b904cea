"""Tests of the tiny random-weight VLM builder in sage_testkit/tiny_models.py (offline, CPU, fast)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file
from transformers import (
    AutoConfig,
    AutoModelForImageTextToText,
    AutoProcessor,
    AutoTokenizer,
)
from transformers.utils import logging as hf_logging

# tests/ is on sys.path (pytest's rootdir-relative import of this folder, and conftest.py)
from sage_testkit.tiny_models import EXTRA_FAMILIES, FAMILIES, SPECIAL_TOKENS, build_tiny_vlm, model_class

hf_logging.disable_progress_bar()

PROCESSOR_CLASSES = {
    "qwen2_vl": "Qwen2VLProcessor",
    "qwen2_5_vl": "Qwen2_5_VLProcessor",
    "qwen3_vl": "Qwen3VLProcessor",
    "llava_onevision": "LlavaOnevisionProcessor",
    "llava": "LlavaProcessor",
    "llava_next": "LlavaNextProcessor",
    "llava_next_video": "LlavaNextVideoProcessor",
    "mistral3": "PixtralProcessor",
    "idefics3": "Idefics3Processor",
    "smolvlm": "SmolVLMProcessor",
    "internvl": "InternVLProcessor",
    "qwen3_vl_moe": "Qwen3VLProcessor",
    "gemma3": "Gemma3Processor",
    "glm4v": "Glm4vProcessor",
    "qwen3_5": "Qwen3VLProcessor",
    "gemma4": "Gemma4Processor",
    "glm46v": "Glm46VProcessor",
}
# the families added later: the visual tokens an image (and a video) becomes in the tiny processors
EXTRA_VISUAL_TOKENS = {
    "llava": (16, None),  # 4x4 CLIP patches (CLS dropped)
    "llava_next": (70, None),  # anyres on 52x40: the base grid, then the crops with row ends (as LLaVA-OneVision)
    "llava_next_video": (70, 32),  # and 8 frames pooled to 2x2
    "mistral3": (12, None),  # 52x40 -> 64x48: 4x3 merged patches ([IMG_BREAK], [IMG_END] are not image tokens)
    "idefics3": (20, None),  # 2x2 crops and the whole image, 4 tokens each
    "smolvlm": (20, 32),  # and a video: one whole image per frame
    "internvl": (20, 32),  # 4 tiles and the thumbnail; a video: one tile per frame
    "qwen3_vl_moe": (6, 16),  # as Qwen3-VL
    "gemma3": (4, None),  # 4x4 Siglip patches pooled to 2x2
    "glm4v": (12, 4),  # 52x40 -> 4x3 merged patches; 8 frames of 32x32 -> 4 frame pairs of 1
    "qwen3_5": (6, 16),  # as Qwen3-VL
    "glm46v": (12, 4),  # as GLM-4.1V
    "gemma4": (63, 512),  # the smallest budget (70 soft tokens): 52x40 -> 9x7 pooled patches; 8 frames x 64
}
CONFIG_CLASSES = {
    "qwen2_vl": "Qwen2VLConfig",
    "qwen2_5_vl": "Qwen2_5_VLConfig",
    "qwen3_vl": "Qwen3VLConfig",
    "llava_onevision": "LlavaOnevisionConfig",
}
QWEN = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
NEW_TOKENS = 6


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    """Tiny matmuls are 10-20x slower with 2 OpenMP threads on a busy 2-core machine: use 1 here."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """family -> folder of the default ("small", seed 0) tiny model, built once per module."""
    root = tmp_path_factory.mktemp("tiny")
    return {fam: build_tiny_vlm(fam, root / fam) for fam in FAMILIES}


def _load(folder):
    cfg = AutoConfig.from_pretrained(folder)
    fam = cfg.model_type
    model = model_class(fam).from_pretrained(folder).eval()
    return model, AutoProcessor.from_pretrained(folder)


def _prompt(processor, kind, text="Describe it."):
    return processor.apply_chat_template(
        [{"role": "user", "content": [{"type": kind}, {"type": "text", "text": text}]}],
        tokenize=False,
        add_generation_prompt=True,
    )


def _image(seed=0, h=40, w=52):
    return Image.fromarray(np.random.RandomState(seed).randint(0, 256, (h, w, 3), dtype=np.uint8))


def _video_inputs(processor, *, count=30, fps=10.0, num=8, side=32, seed=1):
    indices = np.round(np.linspace(0, count - 1, num)).astype(int).tolist()
    frames = np.random.RandomState(seed).randint(0, 256, (num, side, side, 3), dtype=np.uint8)
    per_text = type(processor).__name__ == "SmolVLMProcessor"  # as sage_core gives it (Family.videos_per_text)
    return processor(
        text=[_prompt(processor, "video", "What happens?")],
        videos=[[frames]] if per_text else [frames],
        video_metadata=[{"total_num_frames": count, "fps": fps, "frames_indices": indices}],
        do_sample_frames=False,
        return_tensors="pt",
    )


def _image_inputs(processor, seed=0):
    return processor(text=[_prompt(processor, "image")], images=[_image(seed)], return_tensors="pt")


def _generate(model, inputs, n=NEW_TOKENS, exact=True):
    kw = {"min_new_tokens": n} if exact else {}
    with torch.no_grad():
        return model.generate(**inputs, do_sample=False, max_new_tokens=n, **kw)


# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_load_and_generate_image_and_video(built, family):
    folder = built[family]
    cfg = AutoConfig.from_pretrained(folder)
    assert type(cfg).__name__ == CONFIG_CLASSES[family]
    model, processor = _load(folder)
    assert type(model) is model_class(family)
    assert AutoModelForImageTextToText._model_mapping[type(cfg)] is model_class(family)
    assert type(processor).__name__ == PROCESSOR_CLASSES[family]
    assert type(processor.tokenizer).__name__ == "Qwen2Tokenizer"
    assert processor.video_processor is not None and processor.image_processor is not None

    # image
    inputs = _image_inputs(processor)
    plen = inputs["input_ids"].shape[1]
    img_id = cfg.image_token_id
    n_img = int((inputs["input_ids"] == img_id).sum())
    assert 1 <= n_img <= 120, n_img
    if family in QWEN:
        assert "mm_token_type_ids" in inputs and "image_grid_thw" in inputs
        assert int(inputs["image_grid_thw"].prod()) // 4 == n_img
    else:
        assert inputs["pixel_values"].shape[-1] == 32
    out = _generate(model, inputs)
    assert out.shape == (1, plen + NEW_TOKENS)
    assert torch.equal(out[:, :plen], inputs["input_ids"])
    if family in QWEN:
        assert model.model.rope_deltas is not None and model.model.rope_deltas.shape == (1, 1)

    # the same call without min_new_tokens: at most NEW_TOKENS, shorter only if it stopped at eos
    free = _generate(model, inputs, exact=False)
    assert plen < free.shape[1] <= plen + NEW_TOKENS
    if free.shape[1] < plen + NEW_TOKENS:
        assert free[0, -1].item() == SPECIAL_TOKENS[family]["<|im_end|>"]

    # video: 8 frames of 32x32 sampled from a 30-frame clip at 10 fps
    vinputs = _video_inputs(processor)
    vlen = vinputs["input_ids"].shape[1]
    n_vid = int((vinputs["input_ids"] == cfg.video_token_id).sum())
    assert n_vid >= 4
    if family in QWEN:
        assert "mm_token_type_ids" in vinputs
        assert vinputs["video_grid_thw"].tolist()[0][0] == 4  # 8 frames / temporal patch 2
        assert int(vinputs["video_grid_thw"].prod()) // 4 == n_vid
    else:
        assert tuple(vinputs["pixel_values_videos"].shape) == (1, 8, 3, 32, 32)
        assert n_vid == 8 * 2 * 2 + 1
    if family == "qwen2_5_vl":
        # temporal_patch_size / sampled fps, sampled fps = T / total_num_frames * fps = 8 / 30 * 10
        assert torch.allclose(vinputs["second_per_grid_ts"], torch.tensor([0.75]))
    else:
        assert "second_per_grid_ts" not in vinputs
    out = _generate(model, vinputs)
    assert out.shape == (1, vlen + NEW_TOKENS)
    assert torch.equal(out[:, :vlen], vinputs["input_ids"])


@pytest.mark.parametrize("family", FAMILIES)
def test_special_tokens_config_and_generation_config(built, family):
    folder = built[family]
    model, processor = _load(folder)
    tok = processor.tokenizer
    sp = SPECIAL_TOKENS[family]
    for t, i in sp.items():
        assert tok.convert_tokens_to_ids(t) == i
        assert tok.encode(t, add_special_tokens=False) == [i]
    cfg = model.config
    if family in QWEN:
        assert cfg.image_token_id == sp["<|image_pad|>"]
        assert cfg.video_token_id == sp["<|video_pad|>"]
        assert cfg.vision_start_token_id == sp["<|vision_start|>"]
        assert cfg.vision_end_token_id == sp["<|vision_end|>"]
    else:
        assert cfg.image_token_index == sp["<image>"] == processor.image_token_id
        assert cfg.video_token_index == sp["<video>"] == processor.video_token_id
    text_cfg = cfg.get_text_config()
    assert text_cfg.vocab_size == len(tok)
    assert model.get_input_embeddings().weight.shape[0] == len(tok)
    assert model.lm_head.weight.shape[0] == len(tok)
    assert text_cfg.eos_token_id == sp["<|im_end|>"] == tok.eos_token_id
    assert text_cfg.pad_token_id == sp["<|endoftext|>"] == tok.pad_token_id
    gen = model.generation_config
    assert gen.eos_token_id == sp["<|im_end|>"] and gen.pad_token_id == sp["<|endoftext|>"]
    saved = json.loads((Path(folder) / "generation_config.json").read_text())
    assert set(saved) <= {"bos_token_id", "eos_token_id", "pad_token_id", "transformers_version"}
    assert not gen.do_sample
    for name in ("temperature", "top_k", "top_p", "repetition_penalty"):
        assert getattr(gen, name, None) in (None, 1.0, 50) and name not in saved

    # byte-level: any text round-trips; the chat template renders the real placeholders
    text = "héllo, 世界! <0.5 seconds>"
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    prompt = _prompt(processor, "image", "hi")
    ph = "<|vision_start|><|image_pad|><|vision_end|>" if family in QWEN else "<image>"
    assert prompt == f"<|im_start|>user\n{ph}hi<|im_end|>\n<|im_start|>assistant\n"
    vprompt = _prompt(processor, "video", "hi")
    ph = "<|vision_start|><|video_pad|><|vision_end|>" if family in QWEN else "<video>"
    assert vprompt == f"<|im_start|>user\n{ph}hi<|im_end|>\n<|im_start|>assistant\n"
    # the tokenizer alone carries the template too
    assert (
        AutoTokenizer.from_pretrained(folder).apply_chat_template(
            [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], tokenize=False, add_generation_prompt=True
        )
        == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_same_seed_is_deterministic_and_other_seed_differs(tmp_path, built):
    fam = "qwen2_vl"
    a = load_file(str(built[fam] / "model.safetensors"))
    b = load_file(str(build_tiny_vlm(fam, tmp_path / "b", seed=0) / "model.safetensors"))
    c = load_file(str(build_tiny_vlm(fam, tmp_path / "c", seed=1) / "model.safetensors"))
    assert a.keys() == b.keys() == c.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["lm_head.weight"], c["lm_head.weight"])
    # the builder does not disturb the caller's random state
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_vlm(fam, tmp_path / "d", seed=7)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("family", FAMILIES)
def test_small_and_smaller_share_tokenizer(tmp_path, built, family):
    small = built[family]
    smaller = build_tiny_vlm(family, tmp_path / "draft", size="smaller", seed=1)
    t1 = AutoTokenizer.from_pretrained(small)
    t2 = AutoTokenizer.from_pretrained(smaller)
    assert t1.get_vocab() == t2.get_vocab()
    c1 = AutoConfig.from_pretrained(small).get_text_config()
    c2 = AutoConfig.from_pretrained(smaller).get_text_config()
    assert (c1.hidden_size, c1.num_hidden_layers) == (64, 2)
    assert (c2.hidden_size, c2.num_hidden_layers) == (32, 1)
    assert c1.vocab_size == c2.vocab_size == len(t1)
    # same processor settings -> identical prompts for target and draft
    p1, p2 = AutoProcessor.from_pretrained(small), AutoProcessor.from_pretrained(smaller)
    i1, i2 = _image_inputs(p1), _image_inputs(p2)
    assert torch.equal(i1["input_ids"], i2["input_ids"])
    v1, v2 = _video_inputs(p1), _video_inputs(p2)
    assert torch.equal(v1["input_ids"], v2["input_ids"])
    # and the draft runs
    draft = model_class(family).from_pretrained(smaller).eval()
    assert _generate(draft, v2, n=3).shape[1] == v2["input_ids"].shape[1] + 3


@pytest.mark.parametrize("family", ["qwen2_5_vl", "llava_onevision"])
def test_vocab_padding(tmp_path, built, family):
    k = 5
    folder = build_tiny_vlm(family, tmp_path / "padded", vocab_padding=k, size="smaller")
    tok = AutoTokenizer.from_pretrained(folder)
    assert tok.get_vocab() == AutoTokenizer.from_pretrained(built[family]).get_vocab()
    model, processor = _load(folder)
    assert model.config.get_text_config().vocab_size == len(tok) + k
    assert model.lm_head.weight.shape[0] == len(tok) + k
    assert model.get_input_embeddings().weight.shape[0] == len(tok) + k
    inputs = _image_inputs(processor)
    with torch.no_grad():
        logits = model(**inputs).logits
    assert logits.shape[-1] == len(tok) + k
    assert _generate(model, inputs, n=3).shape[1] == inputs["input_ids"].shape[1] + 3


def test_qwen2_5_second_per_grid_ts_reaches_the_model(built):
    model, processor = _load(built["qwen2_5_vl"])
    deltas = {}
    for fps in (10.0, 1.0):
        inputs = _video_inputs(processor, fps=fps)
        assert torch.allclose(inputs["second_per_grid_ts"], torch.tensor([2.0 * 30 / (8 * fps)]))
        _generate(model, inputs, n=2)
        deltas[fps] = model.model.rope_deltas.clone()
    # temporal M-RoPE positions are t * second_per_grid_ts * tokens_per_second (=2):
    # 0.75 s per grid at fps 10 -> t positions 0, 1, 3, 4; 7.5 s at fps 1 -> 0, 15, 30, 45
    assert deltas[1.0].item() > deltas[10.0].item()


def test_qwen3_video_prompt_has_one_timestamp_group_per_temporal_patch(built):
    _, processor = _load(built["qwen3_vl"])
    inputs = _video_inputs(processor, count=30, fps=10.0, num=8)
    text = processor.tokenizer.decode(inputs["input_ids"][0])
    # frames 0,4,8,12,17,21,25,29 at 10 fps -> pairs averaged: 0.2, 1.0, 1.9, 2.7 s
    stamps = [s for s in ("<0.2 seconds>", "<1.0 seconds>", "<1.9 seconds>", "<2.7 seconds>") if s in text]
    assert len(stamps) == 4
    assert text.count("<|vision_start|>") == 1 + 4 and text.count("<|vision_end|>") == 1 + 4


@pytest.mark.parametrize("family", FAMILIES)
def test_logits_are_finite_and_peaked(built, family):
    model, processor = _load(built[family])
    margins = []
    for seed in range(3):
        inputs = _image_inputs(processor, seed=seed)
        with torch.no_grad():
            logits = model(**inputs).logits[0]
        assert torch.isfinite(logits).all()
        top2 = logits.topk(2, dim=-1).values
        margins.append(top2[:, 0] - top2[:, 1])
    margins = torch.cat(margins)
    assert margins.median().item() > 0.05
    assert (margins > 1e-3).float().mean().item() > 0.95
    assert logits.abs().max().item() < 100


def test_eager_attention_matches_sdpa(tmp_path):
    fam = "qwen3_vl"
    f_sdpa = build_tiny_vlm(fam, tmp_path / "sdpa", attn_implementation="sdpa")
    f_eager = build_tiny_vlm(fam, tmp_path / "eager", attn_implementation="eager")
    a = load_file(str(f_sdpa / "model.safetensors"))
    b = load_file(str(f_eager / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    processor = AutoProcessor.from_pretrained(f_sdpa)
    inputs = _image_inputs(processor)
    m1 = model_class(fam).from_pretrained(f_sdpa, attn_implementation="sdpa").eval()
    m2 = model_class(fam).from_pretrained(f_eager, attn_implementation="eager").eval()
    with torch.no_grad():
        l1, l2 = m1(**inputs).logits, m2(**inputs).logits
    assert torch.allclose(l1, l2, atol=1e-4), (l1 - l2).abs().max()


def test_rejects_unknown_family_and_size(tmp_path):
    with pytest.raises(ValueError):
        build_tiny_vlm("llama", tmp_path / "x")
    with pytest.raises(ValueError):
        build_tiny_vlm("qwen2_vl", tmp_path / "y", size="huge")


@pytest.mark.parametrize("family", EXTRA_FAMILIES)
def test_added_families_load_generate_and_share_a_tokenizer(tmp_path, family):
    """The real config, model and processor classes, image (and video) inputs of the expected size, a
    draft of the other size with the same tokenizer and prompts."""
    target = build_tiny_vlm(family, tmp_path / "target")
    draft = build_tiny_vlm(family, tmp_path / "draft", size="smaller", seed=1)
    assert json.loads((target / "config.json").read_text())["model_type"] == family
    processor, processor_draft = AutoProcessor.from_pretrained(target), AutoProcessor.from_pretrained(draft)
    assert type(processor).__name__ == PROCESSOR_CLASSES[family]
    assert processor.tokenizer.get_vocab() == processor_draft.tokenizer.get_vocab()
    config = AutoConfig.from_pretrained(target)
    visual = {config.image_token_id, getattr(config, "video_token_id", None)}
    image_tokens, video_tokens = EXTRA_VISUAL_TOKENS[family]
    cases = [(_image_inputs(processor, seed=3), _image_inputs(processor_draft, seed=3), image_tokens)]
    if video_tokens is not None:
        cases.append((_video_inputs(processor), _video_inputs(processor_draft), video_tokens))
    for inputs, inputs_draft, tokens in cases:
        assert torch.equal(inputs["input_ids"], inputs_draft["input_ids"])
        assert sum(int((inputs["input_ids"] == t).sum()) for t in visual if t is not None) == tokens
        for folder in (target, draft):
            model = model_class(family).from_pretrained(folder).eval()
            assert _generate(model, inputs, n=3).shape[1] == inputs["input_ids"].shape[1] + 3
