"""The fast path's promises, each checked against the plain way of doing it:
the prefill computes one position's logits, the tree mask built on the device
from parent indices equals the mask written out from ancestor lists, and a
commit that moves rows leaves the cache as step-by-step decoding would."""

from __future__ import annotations

import copy
import functools
import json
import random
import shutil
from pathlib import Path

import pytest
import torch
from transformers import DynamicCache

from sage_core import (
    BackendError,
    DecodeConfig,
    InputError,
    decode,
    drafting,
    load_pair,
    prepare_inputs,
    timing,
)
from sage_core.models import VLM, check_pair, processors_alike
from sage_core.models import lean as lean_module
from sage_core.models.forwards import COMPILED, FUSED, TRANSFORMERS
from sage_core.models.kvcache import GrowingLayer, move_rows
from sage_core.models.lean import LeanText
from sage_core.models.masks import additive_mask, in_batch_depth, rows_from_parents, rows_on_host
from sage_core.trees import Tree
from sage_testkit.pairs import decoded, disk_offloaded_pair, tiny_folder, tiny_pair
from sage_testkit.tiny_models import FAMILIES, model_class

# The families whose decoder the lean forward knows (Qwen2, Qwen3, LLaMA, Mistral text models)
LEAN_FAMILIES = (*FAMILIES, "internvl", "llava", "llava_next", "llava_next_video", "mistral3")


@functools.cache
def _vlm(root: str, family: str, kind: str) -> VLM:
    return VLM.load(tiny_folder(Path(root), family, kind), device="cpu", dtype="float32")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", ["target", "unrelated"])
def test_prefill_computes_only_the_last_position_logits(tiny_root, image, family, kind):
    vlm = _vlm(str(tiny_root), family, kind)
    shapes: list[tuple[int, ...]] = []
    hook = vlm.model.get_output_embeddings().register_forward_hook(lambda m, i, out: shapes.append(tuple(out.shape)))
    try:
        inputs = vlm.prepare(image, "Describe the picture.")
        state, logits = vlm.prefill(inputs)
    finally:
        hook.remove()
    assert shapes == [(1, 1, vlm.vocab_size)]
    assert logits.shape == (vlm.vocab_size,)
    with torch.no_grad():
        full = vlm.model(**inputs).logits[0, -1]
    assert (logits - full).abs().max().item() < 1e-4
    assert state.committed == inputs["input_ids"].shape[1]


# root -> 0 -> 2 -> 5
#      -> 1 -> 3
#           -> 4 -> 6
TREE = Tree(tokens=(40, 41, 42, 43, 44, 45, 46), parents=(-1, -1, 0, 1, 1, 2, 4), draft_probs=(0.5,) * 7)


def old_mask(committed: int, scratch: int, visible: list[tuple[int, ...]], dtype: torch.dtype) -> torch.Tensor:
    """The mask as the model code wrote it out before: a dense float matrix from Python lists."""
    count = len(visible)
    mask = torch.full((count, committed + scratch + count), torch.finfo(dtype).min, dtype=dtype)
    mask[:, :committed] = 0
    for i, seen in enumerate(visible):
        for j in seen:
            mask[i, committed + j] = 0
    return mask[None, None]


def rows_from_visible(known: torch.Tensor | None, visible: list[tuple[int, ...]]) -> torch.Tensor:
    """The scratch rows after N new entries, from explicit lists of what each sees: (S+N, S+N) bool."""
    scratch = 0 if known is None else known.shape[0]
    total = scratch + len(visible)
    rows = torch.zeros((total, total), dtype=torch.bool)
    if known is not None and scratch:
        rows[:scratch, :scratch] = known
    for i, seen in enumerate(visible):
        rows[scratch + i, list(seen)] = True
    return rows


def random_tree(generator: random.Random, size: int) -> Tree:
    parents = tuple(generator.randrange(-1, i) for i in range(size))
    return Tree(tuple(range(size)), parents, (0.5,) * size)


CHAIN = Tree(tuple(range(64)), tuple(range(-1, 63)), (0.5,) * 64)  # depth 64: every pointer-jumping round counts


@pytest.mark.parametrize("seed", range(21))
def test_verify_mask_from_parents_equals_the_old_mask(seed):
    tree = {0: TREE, 20: CHAIN}.get(seed) or random_tree(random.Random(seed), random.Random(seed).randrange(1, 70))
    visible = [(0,)] + [(0, *(1 + a for a in row)) for row in tree.ancestor_rows()]
    parents = [-1] + [1 + p for p in tree.parents]
    rows = rows_from_parents(None, torch.tensor(parents), in_batch_depth(parents, 0))
    for dtype in (torch.float32, torch.bfloat16):
        assert torch.equal(additive_mask(rows, 37, dtype), old_mask(37, 0, visible, dtype))
    assert torch.equal(rows_on_host(None, parents), rows)  # the CPU's way: the same rows


@pytest.mark.parametrize("seed", range(10))
def test_draft_level_masks_from_parents_equal_the_old_masks(seed):
    """Level by level, as the draft grows a tree: each level's parents are cached scratch entries."""
    generator = random.Random(seed)
    known_parents, known_visible, known_host = None, None, None
    parent_visible: list[tuple[int, ...]] = []  # per scratch entry: what it sees
    for _ in range(generator.randrange(1, 8)):
        scratch = len(parent_visible)
        count = generator.randrange(1, 10)
        parents = [generator.randrange(-1, scratch) for _ in range(count)]
        visible = [(parent_visible[p] if p >= 0 else ()) + (scratch + i,) for i, p in enumerate(parents)]
        known_parents = rows_from_parents(known_parents, torch.tensor(parents), in_batch_depth(parents, scratch))
        known_visible = rows_from_visible(known_visible, visible)
        known_host = rows_on_host(known_host, parents)
        assert torch.equal(known_host, known_parents)
        assert torch.equal(
            additive_mask(known_parents[scratch:], 5, torch.float32), old_mask(5, scratch, visible, torch.float32)
        )
        assert torch.equal(known_parents, known_visible)
        parent_visible.extend(visible)


def step_by_step_cache(vlm: VLM, inputs: dict, tokens: list[int]) -> DynamicCache:
    cache = DynamicCache(config=vlm.model.config)
    with torch.no_grad():
        vlm.model(**inputs, **{vlm.cache_keyword: cache}, use_cache=True)
        for token in tokens:
            vlm.model(input_ids=torch.tensor([[token]]), **{vlm.cache_keyword: cache}, use_cache=True)
    return cache


@pytest.mark.parametrize("family", FAMILIES)
def test_commit_of_a_non_prefix_path_equals_a_fresh_step_by_step_cache(tiny_root, image, family):
    vlm = _vlm(str(tiny_root), family, "target")
    inputs = vlm.prepare(image, "Describe the picture.")
    state, _ = vlm.prefill(inputs, reserve=64)
    buffers = [layer.key_buffer.data_ptr() for layer in state.cache.layers]
    start = state.committed
    vlm.extend(
        state,
        [39, *TREE.tokens],
        [start] + [start + d for d in TREE.depths],
        parents=[-1] + [1 + p for p in TREE.parents],
    )
    vlm.commit(state, [0, 1 + 1, 1 + 4, 1 + 6])  # root, node 1, node 4, node 6: not a prefix of the scratch
    assert state.committed == start + 4 and state.scratch == 0 and state.scratch_rows is None
    expected = step_by_step_cache(vlm, inputs, [39, 41, 44, 46])
    for layer, fresh in zip(state.cache.layers, expected.layers, strict=True):
        assert layer.keys.shape == fresh.keys.shape
        assert (layer.keys - fresh.keys).abs().max().item() < 1e-5
        assert (layer.values - fresh.values).abs().max().item() < 1e-5
    # Appending and committing wrote into the buffers made at the prefill: no copy of the cache.
    assert [layer.key_buffer.data_ptr() for layer in state.cache.layers] == buffers


def test_a_full_cache_grows_and_stays_exact(tiny_root, image):
    vlm = _vlm(str(tiny_root), "qwen2_vl", "target")
    inputs = vlm.prepare(image, "Describe the picture.")
    state, _ = vlm.prefill(inputs, reserve=0)
    tokens = [50 + i for i in range(12)]
    for token in tokens:
        vlm.extend(state, [token], [state.committed], parents=[-1])
        vlm.commit(state, [0])
        assert state.cache.get_seq_length() == state.committed
        assert state.cache.layers[0].key_buffer.shape[-2] >= state.committed
    expected = step_by_step_cache(vlm, inputs, tokens)
    for layer, fresh in zip(state.cache.layers, expected.layers, strict=True):
        assert (layer.keys - fresh.keys).abs().max().item() < 1e-5


@pytest.mark.parametrize("method", ["ar", "static", "sage"])
def test_one_synchronisation_and_one_host_copy_per_forward(tiny_root, image, monkeypatch, method):
    """Per decode step: one synchronisation, and one device-to-host copy per draft forward and per verification.

    On a CPU, reading a tensor copies nothing, and `top_candidates` reads two lists there; the test makes it
    take the device's way (one list per forward), so the count checks what a GPU run does."""
    monkeypatch.setattr(drafting, "_copies_to_host", lambda tensor: True)
    pair = load_pair(
        tiny_folder(tiny_root, "qwen2_vl", "target"), tiny_folder(tiny_root, "qwen2_vl", "noised"), "cpu", "float32"
    )
    syncs, copies, forwards = [0], [0], [0]
    real_tolist, real_extend = torch.Tensor.tolist, pair.draft.extend

    def counting_tolist(tensor):
        copies[0] += 1
        return real_tolist(tensor)

    def counting_extend(*args, **kwargs):
        forwards[0] += 1
        return real_extend(*args, **kwargs)

    monkeypatch.setattr(timing, "synchronize", lambda device: syncs.__setitem__(0, syncs[0] + 1))
    monkeypatch.setattr(torch.Tensor, "tolist", counting_tolist)
    monkeypatch.setattr(pair.draft, "extend", counting_extend)
    run = decode(pair, image, "Describe the picture.", DecodeConfig(method=method, max_new_tokens=24))
    next(run)  # the prefill
    while not run.records[-1].finished:
        syncs[0], copies[0], forwards[0] = 0, 0, 0
        next(run)
        assert syncs[0] == 1
        assert copies[0] == forwards[0] + 1
    assert len(run.records) > 2


def _draft_with_another_processor(tiny_root, tmp_path) -> str:
    """The noised Qwen3-VL draft with one image-processor setting changed (the same tokens)."""
    folder = tmp_path / "other-processor"
    shutil.copytree(tiny_folder(tiny_root, "qwen3_vl", "noised"), folder)
    config_file = folder / "processor_config.json"
    settings = json.loads(config_file.read_text())
    settings["image_processor"]["image_mean"] = [0.4, 0.4, 0.4]
    config_file.write_text(json.dumps(settings))
    return str(folder)


def test_processors_are_alike_only_when_they_make_the_same_inputs(tiny_root, tmp_path, image):
    target = VLM.load(tiny_folder(tiny_root, "qwen3_vl", "target"), "target", "cpu", "float32")
    same = VLM.load(tiny_folder(tiny_root, "qwen3_vl", "noised"), "draft", "cpu", "float32")
    other = VLM.load(_draft_with_another_processor(tiny_root, tmp_path), "draft", "cpu", "float32")
    family = VLM.load(tiny_folder(tiny_root, "qwen2_vl", "noised"), "draft", "cpu", "float32")
    assert processors_alike(target.processor, same.processor)
    assert not processors_alike(target.processor, other.processor)
    assert not processors_alike(target.processor, family.processor)
    assert check_pair(target, same).inputs_alike and not check_pair(target, other).inputs_alike
    shared = prepare_inputs(check_pair(target, same), image, "Describe the picture.")
    assert shared.draft is not None and shared.draft["pixel_values"] is shared.target["pixel_values"]
    own = prepare_inputs(check_pair(target, other), image, "Describe the picture.")
    assert own.draft is not None and not torch.equal(own.draft["pixel_values"], own.target["pixel_values"])
    assert torch.equal(own.draft["input_ids"], own.target["input_ids"])
    template = copy.copy(same.processor)
    template.chat_template = same.processor.chat_template + " "
    assert not processors_alike(target.processor, template)
    settings = copy.deepcopy(same.processor)
    settings.tokenizer.init_kwargs["clean_up_tokenization_spaces"] = True
    assert not processors_alike(target.processor, settings)


@pytest.mark.parametrize("alike", [True, False], ids=["alike", "different-processors"])
def test_a_race_runs_each_processor_once_and_charges_each_side_its_own_share(
    tiny_root, image, monkeypatch, tmp_path, alike
):
    from app.race import RaceRequest, race_steps

    draft = (
        tiny_folder(tiny_root, "qwen3_vl", "noised") if alike else _draft_with_another_processor(tiny_root, tmp_path)
    )
    pair = load_pair(tiny_folder(tiny_root, "qwen3_vl", "target"), draft, "cpu", "float32")
    assert pair.inputs_alike == alike
    calls = {"target": 0, "draft": 0}
    for role in calls:
        model = getattr(pair, role)
        real = model.prepare

        def counting(media, prompt, role=role, real=real):
            calls[role] += 1
            return real(media, prompt)

        monkeypatch.setattr(model, "prepare", counting)
    *_, data = race_steps(pair, RaceRequest(image, "Describe the picture.", ("sage", "static", "chain", "ar"), 16))
    # processors alike: the draft reads the target's tensors, and its processor never runs
    assert calls == {"target": 1, "draft": 0 if alike else 1}
    headers = {lane.method: lane.header for lane in data.lanes}
    assert all(h.prepare_shared for h in headers.values())
    assert headers["sage"].prepare_seconds == headers["static"].prepare_seconds >= headers["ar"].prepare_seconds > 0
    if not alike:  # the draft's own processor pass is charged to the methods that draft
        assert headers["sage"].prepare_seconds > headers["ar"].prepare_seconds
    for lane in data.lanes:
        assert lane.records[0].round_seconds >= lane.header.prepare_seconds
        assert lane.token_ids == data.lane("ar").token_ids


def test_prepared_inputs_for_another_prompt_are_refused(tiny_root, image):
    pair = load_pair(
        tiny_folder(tiny_root, "qwen3_vl", "target"), tiny_folder(tiny_root, "qwen3_vl", "noised"), "cpu", "float32"
    )
    prepared = prepare_inputs(pair, image, "Describe the picture.", with_draft=False)
    with pytest.raises(InputError):
        decode(pair, image, "Another prompt.", DecodeConfig(method="ar"), prepared)
    # A run that drafts adds the draft's inputs it was not given.
    run = decode(pair, image, "Describe the picture.", DecodeConfig(method="sage", max_new_tokens=8), prepared)
    assert run.draft_inputs is not None and run.header.prepare_shared
    assert (
        run.run_to_end().token_ids
        == decode(pair, image, "Describe the picture.", DecodeConfig("ar", 8)).run_to_end().token_ids
    )


def test_a_target_placed_by_accelerate_with_disk_offload_stays_lossless(tiny_root, image, tmp_path):
    """--device-map auto with a memory cap: part of the target lives on disk, loaded layer by layer."""
    pair = disk_offloaded_pair(tiny_root, "qwen2_vl", "500KB", tmp_path / "offload")
    placed = set(pair.target.model.hf_device_map.values())
    assert "disk" in placed and "cpu" in placed, placed
    plain = tiny_pair(str(tiny_root), "qwen2_vl", "noised")
    for method in ("ar", "sage"):
        assert decoded(pair, image, method, 16) == decoded(plain, image, method, 16), method


def test_cli_parses_placement_flags():
    from sage_core.cli import build_parser

    args = build_parser().parse_args(
        ["generate", "--image", "x.png", "--prompt", "hi", "--device-map", "auto", "--max-memory", "0=70GiB,cpu=200GiB"]
    )
    assert args.device_map == "auto" and args.max_memory == {"0": "70GiB", "cpu": "200GiB"}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate", "--image", "x.png", "--prompt", "hi", "--max-memory", "70GiB"])


@pytest.mark.parametrize("family", FAMILIES)
def test_the_plain_backend_keeps_transformers_cache_and_commits_the_same_rows(tiny_root, image, family):
    """The two backends behind one interface: the plain one grows transformers' own DynamicLayers,
    the fast one its GrowingLayers; after the same tree and a non-prefix commit their caches agree."""
    from transformers.cache_utils import DynamicLayer

    from sage_core.backends import open_backend

    vlm = _vlm(str(tiny_root), family, "target")
    inputs = vlm.prepare(image, "Describe the picture.")
    states = {}
    for name in ("fast", "plain"):
        backend = open_backend(vlm, name)
        assert backend.cache.name == ("growing" if name == "plain" else "in-place")
        state = backend.prefill(inputs, 64).state
        start = state.committed
        logits = backend.extend(
            state,
            [39, *TREE.tokens],
            [start] + [start + d for d in TREE.depths],
            parents=[-1] + [1 + p for p in TREE.parents],
        )
        backend.commit(state, [0, 1 + 1, 1 + 4, 1 + 6])
        states[name] = (state, logits)
    fast, plain = states["fast"][0], states["plain"][0]
    assert all(type(layer) is DynamicLayer for layer in plain.cache.layers)
    assert all(isinstance(layer, GrowingLayer) for layer in fast.cache.layers)
    assert (states["fast"][1] - states["plain"][1]).abs().max().item() < 1e-4
    assert fast.committed == plain.committed
    for a, b in zip(fast.cache.layers, plain.cache.layers, strict=True):
        assert a.keys.shape == b.keys.shape
        assert (a.keys - b.keys).abs().max().item() < 1e-5 and (a.values - b.values).abs().max().item() < 1e-5


def test_an_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown backend"):
        DecodeConfig(backend="turbo")


def test_cli_parses_the_backend():
    from sage_core.cli import build_parser

    base = ["generate", "--image", "x.png", "--prompt", "hi"]
    assert build_parser().parse_args(base).backend == "fast"
    assert build_parser().parse_args([*base, "--backend", "plain"]).backend == "plain"
    assert build_parser().parse_args([*base, "--backend", "fast-hf"]).backend == "fast-hf"
    assert build_parser().parse_args([*base, "--backend", "compiled"]).backend == "compiled"
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--backend", "turbo"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_move_rows_gathers_before_it_writes_in_every_dtype(dtype):
    """Overlapping sources and targets, on numpy's way (float32, float16) and torch's (bfloat16)."""
    cache = DynamicCache()
    cache.layers = [GrowingLayer(8), GrowingLayer(8)]
    rows = torch.arange(2 * 3 * 12 * 4, dtype=torch.float32).view(2, 3, 12, 4).to(dtype)  # [B, H, N, D]
    for layer in cache.layers:
        layer.update(rows.clone(), -rows.clone())
    sources = [6, 4, 9]
    with torch.inference_mode():
        move_rows(cache, sources, 5)  # row 5 is written before row 6 is read from
    expected = rows.clone()
    expected[..., 5:8, :] = rows[..., sources, :]
    for layer in cache.layers:
        assert torch.equal(layer.keys, expected) and torch.equal(layer.values, -expected)


def token_tree_and_level(vlm: VLM, inputs, level_at: int, **options):
    """One token after the prompt, a tree of scratch entries after it, and a draft level on top
    (at `level_at` positions past the prompt), each through `vlm.extend(..., **options)`: the
    logits of all three, and every layer's keys and values after them."""
    state, _ = vlm.prefill(inputs, reserve=64)
    start = state.committed
    steps = [vlm.extend(state, [39], [start], parents=[-1], **options)]
    vlm.commit(state, [0])
    tree, parents = [start + 1] + [start + 1 + d for d in TREE.depths], [-1] + [1 + p for p in TREE.parents]
    steps.append(vlm.extend(state, [40, *TREE.tokens], tree, parents=parents, **options))
    level = start + level_at
    steps.append(vlm.extend(state, [50, 51], [level, level], parents=[3, 3], **options))
    return torch.cat(steps), [(layer.keys.clone(), layer.values.clone()) for layer in state.cache.layers]


@pytest.mark.parametrize("family", LEAN_FAMILIES)
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_the_lean_forward_equals_transformers_forward_bit_for_bit(tiny_root, image, family, attention):
    """lean.py runs the same operations as transformers' forward: one token after the cache, a
    tree of scratch entries after it, and a draft level on top, give the same logits and caches."""
    folder = tiny_folder(tiny_root, family, "target")
    if attention == "eager":
        model = model_class(family).from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
        vlm = VLM(folder, model.eval(), _vlm(str(tiny_root), family, "target").processor, torch.device("cpu"))
    else:
        vlm = _vlm(str(tiny_root), family, "target")
    assert vlm.lean is not None
    inputs = vlm.prepare(image, "Describe the picture.")
    logits, caches = {}, {}
    for lean in (True, False):
        options = {} if lean else {"forward": TRANSFORMERS}
        logits[lean], caches[lean] = token_tree_and_level(vlm, inputs, level_at=5, **options)
    assert torch.equal(logits[True], logits[False])
    for (keys, values), (plain_keys, plain_values) in zip(caches[True], caches[False], strict=True):
        assert torch.equal(keys, plain_keys) and torch.equal(values, plain_values)


def test_the_lean_forward_steps_aside_where_it_is_not_known_to_be_safe(tiny_root):
    """A model placed by accelerate (hooks move its weights), or a decoder the lean forward does not
    know, keeps transformers' forward."""
    vlm = _vlm(str(tiny_root), "qwen3_vl", "target")
    assert LeanText.of(vlm.model) is not None
    from accelerate.hooks import ModelHook, add_hook_to_module

    model = model_class("qwen3_vl").from_pretrained(tiny_folder(tiny_root, "qwen3_vl", "target"), dtype=torch.float32)
    add_hook_to_module(model.model.language_model.layers[0].mlp, ModelHook())
    assert LeanText.of(model) is None
    model = model_class("qwen3_vl").from_pretrained(tiny_folder(tiny_root, "qwen3_vl", "target"), dtype=torch.float32)
    model.model.language_model.rotary_emb.rope_type = "dynamic"
    assert LeanText.of(model) is None
    assert LeanText.of(torch.nn.Linear(2, 2)) is None


def test_the_lean_forward_carries_every_bias(tiny_root, image):
    """Biases on the MLP projections and the LM head (none of the four families has them, a
    fine-tune might) reach the logits as in transformers' forward."""
    folder = tiny_folder(tiny_root, "qwen2_vl", "target")
    model = model_class("qwen2_vl").from_pretrained(folder, dtype=torch.float32).eval()
    generator = torch.Generator().manual_seed(3)
    linears = [
        m
        for layer in model.model.language_model.layers
        for m in (layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj)
    ] + [model.lm_head]
    for linear in linears:
        linear.bias = torch.nn.Parameter(torch.randn(linear.out_features, generator=generator))
    vlm = VLM(folder, model, _vlm(str(tiny_root), "qwen2_vl", "target").processor, torch.device("cpu"))
    assert vlm.lean is not None
    inputs = vlm.prepare(image, "Describe the picture.")
    logits = []
    for lean in (True, False):
        state, _ = vlm.prefill(inputs, reserve=8)
        options = {} if lean else {"forward": TRANSFORMERS}
        logits.append(vlm.extend(state, [39, 40], [state.committed] * 2, parents=[-1, 0], **options))
    assert torch.equal(logits[0], logits[1])


@pytest.mark.parametrize("family", LEAN_FAMILIES)
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_the_drafts_fused_forward_computes_the_same_logits_to_rounding(tiny_root, image, family, attention):
    """The draft's fused forward (torch's RMSNorm, a rotary table, SDPA with grouped heads) is the same
    mathematics as transformers' forward: one token, a tree and a level on top give logits and caches
    equal within float32 rounding and the same top tokens; positions beyond the table's first size
    grow it. The decode loop's draft on the fast backend runs it, its target does not."""
    folder = tiny_folder(tiny_root, family, "unrelated")  # a smaller model, as drafts are
    model = model_class(family).from_pretrained(folder, dtype=torch.float32, attn_implementation=attention)
    vlm = VLM(folder, model.eval(), _vlm(str(tiny_root), family, "unrelated").processor, torch.device("cpu"))
    assert vlm.lean is not None
    inputs = vlm.prepare(image, "Describe the picture.")
    logits, caches = {}, {}
    for fused in (True, False):  # the level sits past the rotary table's first 1,024 positions
        logits[fused], caches[fused] = token_tree_and_level(
            vlm, inputs, level_at=3000, forward=FUSED if fused else TRANSFORMERS
        )
    torch.testing.assert_close(logits[True], logits[False], rtol=1e-5, atol=1e-5)
    assert torch.equal(logits[True].argmax(-1), logits[False].argmax(-1))
    for (keys, values), (plain_keys, plain_values) in zip(caches[True], caches[False], strict=True):
        torch.testing.assert_close(keys, plain_keys, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(values, plain_values, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["fast", "compiled"])
def test_the_fast_backends_fuse_the_drafts_forward_only(tiny_root, image, monkeypatch, backend):
    """The draft runs the fused forward (through the compiled halves on "compiled"); the target
    runs the exact one, never fused, never compiled."""
    pair = load_pair(tiny_folder(tiny_root, "qwen3_vl", "target"), tiny_folder(tiny_root, "qwen3_vl", "noised"))
    calls: list[tuple[str, bool, bool]] = []
    for name, vlm in (("target", pair.target), ("draft", pair.draft)):
        assert vlm.lean is not None
        original = vlm.lean.forward

        def spy(*args, _name=name, _original=original, **kwargs):
            calls.append((_name, kwargs.get("fused_up_to") is not None, kwargs.get("compiled", False)))
            return _original(*args, **kwargs)

        monkeypatch.setattr(vlm.lean, "forward", spy)
    halves: list[str] = []

    def counted(function):
        def run(*args, **kwargs):
            halves.append(function.__name__)
            return function(*args, **kwargs)

        return run

    # the compiled halves, counted (and run eagerly here: the losslessness suite runs the real compile)
    monkeypatch.setattr(
        lean_module,
        "_compiled_halves",
        lambda: (counted(lean_module._attention_in), counted(lean_module._attention_out)),
    )
    config = DecodeConfig("sage", max_new_tokens=12, backend=backend)
    decode(pair, image, "Describe the picture.", config).run_to_end()
    compiled = backend == "compiled"
    assert all(not fused and not compiled_call for name, fused, compiled_call in calls if name == "target")
    assert ("target", False, False) in calls and ("draft", True, compiled) in calls
    assert ("draft", False, False) not in calls and ("draft", True, not compiled) not in calls
    layers = len(pair.draft.lean.layers)
    draft_forwards = sum(name == "draft" for name, *_ in calls)
    assert len(halves) == (2 * layers * draft_forwards if compiled else 0)


def test_a_compiler_that_cannot_build_the_draft_is_one_clear_error(tiny_root, image, monkeypatch):
    """torch.compile without a working C++ compiler (a bare machine): the run stops with a BackendError
    that names the fix, not a compiler's traceback."""

    def no_compiler(*args, **kwargs):
        raise torch._dynamo.exc.BackendCompilerFailed(no_compiler, RuntimeError("no working C++ compiler found"), None)

    monkeypatch.setattr(lean_module, "_compiled_halves", lambda: (no_compiler, no_compiler))
    pair = load_pair(tiny_folder(tiny_root, "qwen3_vl", "target"), tiny_folder(tiny_root, "qwen3_vl", "noised"))
    run = decode(pair, image, "Describe the picture.", DecodeConfig("sage", max_new_tokens=8, backend="compiled"))
    with pytest.raises(BackendError, match=r"cannot build the draft's forward here \(.*C\+\+ compiler.*fast backend"):
        run.run_to_end()


def test_the_compiled_draft_forward_computes_the_fused_forwards_logits(tiny_root, image):
    """torch.compile of the fused forward's halves: the same logits and caches to rounding."""
    vlm = _vlm(str(tiny_root), "qwen2_5_vl", "unrelated")
    assert vlm.lean is not None and vlm.lean.compilable
    inputs = vlm.prepare(image, "Describe the picture.")
    eager = token_tree_and_level(vlm, inputs, level_at=7, forward=FUSED)
    compiled = token_tree_and_level(vlm, inputs, level_at=7, forward=COMPILED)
    torch.testing.assert_close(compiled[0], eager[0], rtol=1e-5, atol=1e-5)
    assert torch.equal(compiled[0].argmax(-1), eager[0].argmax(-1))
    for (keys, values), (eager_keys, eager_values) in zip(compiled[1], eager[1], strict=True):
        torch.testing.assert_close(keys, eager_keys, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(values, eager_values, rtol=1e-5, atol=1e-5)


def test_gpu_presets_fill_the_pair_and_its_placement(capsys):
    """--preset names a GPU pair: the 72B targets spread over two GPUs with their memory caps, the draft on
    the first; an explicit --target/--draft or placement wins; an unknown name is one sentence, exit 2."""
    from sage_core.cli import apply_preset, build_parser, main
    from sage_core.models.presets import GPU_PRESETS

    base = ["generate", "--image", "x.png", "--prompt", "hi"]
    args = build_parser().parse_args([*base, "--preset", "qwen2.5-vl-72b"])
    apply_preset(args)
    assert (args.target, args.draft) == ("Qwen/Qwen2.5-VL-72B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct")
    assert args.device_map == "auto" and args.max_memory == {"0": "110GiB", "1": "130GiB"}
    assert args.draft_device == "cuda:0"
    args = build_parser().parse_args(
        [*base, "--preset", "smolvlm2-2.2b", "--max-memory", "0=20GiB", "--device-map", "x"]
    )
    apply_preset(args)
    assert args.draft == "HuggingFaceTB/SmolVLM2-256M-Video-Instruct" and args.max_memory == {"0": "20GiB"}
    assert all(p.memory and (p.single_gpu or p.device_map) for p in GPU_PRESETS)
    image = Path(__file__).resolve().parent.parent / "assets" / "examples"
    picture = next(image.glob("*.png"))
    assert main(["generate", "--image", str(picture), "--prompt", "hi", "--preset", "nope"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: unknown preset 'nope'") and "\n" not in error


@pytest.mark.parametrize(
    ("family", "media", "method", "message"),
    [
        ("llava", "appearing_shape.webm", "chain", "reads images only (llava); give a still image"),
    ],
)
def test_what_a_family_cannot_run_is_one_sentence_and_exit_2(tiny_root, capsys, family, media, method, message):
    """A video on an image-only family: the CLI says why in one line, exit 2."""
    from sage_core.cli import main

    folder = tiny_folder(tiny_root, family, "target")
    path = Path(__file__).resolve().parent.parent / "assets" / "examples" / media
    flag = "--video" if media.endswith((".mp4", ".webm")) else "--image"
    argv = ["generate", "--target", folder, "--draft", folder, flag, str(path), "--prompt", "hi"]
    assert main([*argv, "--method", method, "--device", "cpu", "--max-new-tokens", "4"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error: ") and message in error


@pytest.mark.parametrize("family", LEAN_FAMILIES)
def test_a_small_drafts_merged_forward_computes_the_fused_forwards_logits(tiny_root, image, family, monkeypatch):
    """A small draft runs its merged forward (lean_merged.py: the projections merged, the norms' weights
    folded in); a draft whose merged copy would pass the size limit keeps the fused one. Both give the
    same logits and caches to rounding, and the same top tokens."""
    from sage_core.models import lean_merged

    vlm = _vlm(str(tiny_root), family, "unrelated")
    assert vlm.lean is not None and vlm.lean.merged() is not None
    inputs = vlm.prepare(image, "Describe the picture.")
    merged = token_tree_and_level(vlm, inputs, level_at=9, forward=FUSED)
    monkeypatch.setattr(lean_merged, "MERGED_LIMIT_BYTES", 0)
    monkeypatch.setattr(vlm, "lean", LeanText.of(vlm.model))  # the cached model gets its own back after
    assert vlm.lean is not None and vlm.lean.merged() is None
    fused = token_tree_and_level(vlm, inputs, level_at=9, forward=FUSED)
    torch.testing.assert_close(merged[0], fused[0], rtol=1e-5, atol=1e-5)
    assert torch.equal(merged[0].argmax(-1), fused[0].argmax(-1))
    for (keys, values), (fused_keys, fused_values) in zip(merged[1], fused[1], strict=True):
        torch.testing.assert_close(keys, fused_keys, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(values, fused_values, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_merged_forwards_norm_does_not_overflow_in_half_precision(dtype):
    """The merged forward's RMSNorm leaves its factor sqrt(width) to the weights after it and sums the
    squares in float32: hidden states whose squares overflow float16 still normalise."""
    from sage_core.models.lean_merged import _normalized

    hidden = torch.linspace(-300.0, 300.0, 2 * 64).view(2, 64).to(dtype)
    expected = torch.nn.functional.rms_norm(hidden.float(), (64,), None, 1e-6) / 64**0.5
    torch.testing.assert_close(_normalized(hidden, 1e-6).float(), expected, rtol=1e-2, atol=1e-3)
