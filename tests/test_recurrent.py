"""Trees through Qwen3.5's linear-attention (gated delta rule) layers: each node's logits equal its
root-to-node path run as a chain and the model's own step-by-step decoding; a commit leaves the layers
in the states step-by-step decoding reaches; negative controls (a sibling's state, a sibling's
convolution input) are caught."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sage_core.models import VLM, recurrent
from sage_core.models import caches as caches_module
from sage_testkit.pairs import PROMPTS, decoded, disk_offloaded_pair, greedy, tiny_folder, tiny_pair
from sage_testkit.references import ROOT_TOKEN, TREE, path_logits, plain, through_entry, tree_logits

FAMILY = "qwen3_5"
CLOSE = 3e-5  # a node against its path as a chain or step by step: float32 rounding of logits up to about 10
WRONG = 1e-3  # what a wrong state or window must at least change


@pytest.fixture(scope="module")
def vlm(tiny_root: Path) -> VLM:
    model = VLM.load(tiny_folder(tiny_root, FAMILY, "target"), device="cpu", dtype="float32")
    model.model.set_attn_implementation("eager")
    return model


def paths() -> list[list[int]]:
    """[root, *the tokens down to the node] for the root and every node of TREE."""
    return [[ROOT_TOKEN]] + [[ROOT_TOKEN, *(TREE.tokens[i] for i in TREE.path_to(n))] for n in range(len(TREE))]


def chain_logits(vlm: VLM, inputs: dict, path: list[int]) -> torch.Tensor:
    """The path as a chain of one forward after a fresh prefill; the last token's logits."""
    state, _ = vlm.prefill(inputs)
    start = state.committed
    return vlm.extend(state, path, [start + i for i in range(len(path))], parents=list(range(-1, len(path) - 1)))[-1]


def worst_error(vlm: VLM, inputs: dict, logits: torch.Tensor) -> float:
    return max((logits[i] - chain_logits(vlm, inputs, path)).abs().max().item() for i, path in enumerate(paths()))


def test_the_layers_run_the_tree_forward(vlm):
    linear = [m for m in vlm.model.modules() if type(m).__name__ == "Qwen3_5GatedDeltaNet"]
    assert linear and all(getattr(m, "sage_tree_forward", False) for m in linear)
    assert vlm.lean is None  # transformers' forward: the lean one does not know these layers


def test_every_node_equals_its_path_as_a_chain_and_step_by_step(vlm, image):
    inputs = vlm.prepare(image, "Describe the picture.")
    state, _ = vlm.prefill(inputs)
    logits = tree_logits(vlm, state, TREE)
    assert worst_error(vlm, inputs, logits) < CLOSE
    for i, path in enumerate(paths()):
        assert (logits[i] - path_logits(vlm, inputs, path)).abs().max().item() < CLOSE


def test_a_siblings_state_or_input_is_caught(vlm, image, monkeypatch):
    """Hand each node of a level the state (then the convolution window) of the next sibling."""
    inputs = vlm.prepare(image, "Describe the picture.")
    plan = recurrent.plan_forward

    def sibling_state(*args):
        plan(*args)
        scratch = recurrent.scratch_of(args[0])
        levels = tuple((nodes, slots.roll(1)) for nodes, slots in scratch.plan.levels)
        scratch.plan = recurrent.Plan(**{**scratch.plan.__dict__, "levels": levels, "on_device": {}})

    def sibling_window(*args):
        plan(*args)
        scratch = recurrent.scratch_of(args[0])
        windows = scratch.plan.windows.clone()
        windows[:, -2] = windows[:, -2].roll(1)  # the input just before each node: another node's
        scratch.plan = recurrent.Plan(**{**scratch.plan.__dict__, "windows": windows, "on_device": {}})

    for wrong in (sibling_state, sibling_window):
        monkeypatch.setattr(caches_module, "plan_forward", wrong)
        state, _ = vlm.prefill(inputs)
        logits = tree_logits(vlm, state, TREE)
        monkeypatch.setattr(caches_module, "plan_forward", plan)
        error = worst_error(vlm, inputs, logits)
        assert error > WRONG, wrong.__name__


def linear_states(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(layer.conv_states[0], layer.recurrent_states[0]) for layer in cache.layers if recurrent.is_linear(layer)]


def step_by_step_states(vlm: VLM, inputs: dict, tokens: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    from transformers import DynamicCache

    cache = DynamicCache(config=vlm.model.config)
    with torch.no_grad():
        vlm.model(**inputs, **{vlm.cache_keyword: cache}, use_cache=True)
        for token in tokens:
            vlm.model(input_ids=torch.tensor([[token]]), **{vlm.cache_keyword: cache}, use_cache=True)
    return linear_states(cache)


@pytest.mark.parametrize("node", [4, 6])  # a node inside the tree (recomputed along the path), a deepest one (kept)
def test_a_commit_leaves_the_states_of_step_by_step_decoding(vlm, image, node):
    inputs = vlm.prepare(image, "Describe the picture.")
    state, _ = vlm.prefill(inputs)
    before = [(conv.clone(), rec.clone()) for conv, rec in linear_states(state.cache)]
    tree_logits(vlm, state, TREE)
    for (conv, rec), (conv_before, rec_before) in zip(linear_states(state.cache), before, strict=True):
        assert torch.equal(conv, conv_before) and torch.equal(rec, rec_before)  # a round writes no committed state
    path = list(TREE.path_to(node))
    vlm.commit(state, [0, *(1 + n for n in path)])
    tokens = [ROOT_TOKEN, *(TREE.tokens[n] for n in path)]
    for (conv, rec), (conv_ref, rec_ref) in zip(
        linear_states(state.cache), step_by_step_states(vlm, inputs, tokens), strict=True
    ):
        assert (conv - conv_ref).abs().max().item() < CLOSE and (rec - rec_ref).abs().max().item() < CLOSE
    after = vlm.extend(state, [47], [state.committed], parents=[-1])[0]
    assert (after - path_logits(vlm, inputs, [*tokens, 47])).abs().max().item() < CLOSE


def test_a_tree_grown_over_several_forwards_as_the_draft_grows_it(vlm, image):
    """Level by level, one forward each (the draft's `grow_tree`), then a node under an entry two
    forwards back (its state recomputed along its path)."""
    inputs = vlm.prepare(image, "Describe the picture.")
    state, _ = vlm.prefill(inputs)
    start = state.committed
    root = vlm.extend(state, [ROOT_TOKEN], [start], parents=[-1])
    first = vlm.extend(state, [40, 41], [start + 1] * 2, parents=[0, 0])
    second = vlm.extend(state, [42, 43, 44], [start + 2] * 3, parents=[1, 2, 2])
    back = vlm.extend(state, [45], [start + 2], parents=[1])  # under 40, from two forwards back
    rows = torch.cat([root, first, second, back])
    for row, path in zip(
        rows, [[39], [39, 40], [39, 41], [39, 40, 42], [39, 41, 43], [39, 41, 44], [39, 40, 45]], strict=True
    ):
        assert (row - path_logits(vlm, inputs, path)).abs().max().item() < CLOSE
    vlm.commit(state, [0, 1, 6])
    assert (
        vlm.extend(state, [46], [state.committed], parents=[-1])[0] - path_logits(vlm, inputs, [39, 40, 45, 46])
    ).abs().max().item() < CLOSE


def off_the_first_chain(record) -> bool:
    """Whether the round accepted a node that is not its parent's first child (a commit that keeps
    entries out of order in the scratch)."""
    tree, parent = record.tree, -1
    for node in record.accepted_nodes:
        if tree.children(parent)[0] != node:
            return True
        parent = node
    return False


@pytest.mark.parametrize("backend", ["fast", "plain"])
def test_every_method_equals_greedy_generate_over_longer_answers(tiny_root, image, video, backend):
    """40 tokens, both prompts, image and video, a noised and a copy draft: every method equals the
    target's `generate(do_sample=False)`, and the trees accept paths off the draft's first chain."""
    from sage_core import METHODS, DecodeConfig, decode

    off_chain = 0
    for draft_kind in ("noised", "copy"):
        pair = tiny_pair(str(tiny_root), FAMILY, draft_kind)
        for media in (image, video):
            for prompt in PROMPTS:
                expected = greedy(pair, media, prompt, 40)
                for method in METHODS:
                    run = decode(pair, media, prompt, DecodeConfig(method, 40, backend=backend))
                    assert list(run.run_to_end().token_ids) == expected, (draft_kind, media.kind, prompt, method)
                    off_chain += sum(off_the_first_chain(r) for r in run.records if r.phase == "decode" and r.tree)
    assert off_chain > 0


@pytest.mark.parametrize("method", ["static", "sage", "dynamic"])
def test_the_cli_runs_trees_on_qwen3_5(tiny_root, capsys, method):
    """Trees are no longer refused: the CLI's tree methods give the target's greedy answer (exit 0)."""
    import json

    from sage_core.cli import main
    from sage_core.media import load_image

    path = Path(__file__).resolve().parent.parent / "assets" / "examples" / "bar_value.png"
    target, draft = tiny_folder(tiny_root, FAMILY, "target"), tiny_folder(tiny_root, FAMILY, "noised")
    argv = ["generate", "--target", target, "--draft", draft, "--image", str(path), "--prompt", "hi", "--json"]
    assert main([*argv, "--method", method, "--device", "cpu", "--dtype", "float32", "--max-new-tokens", "8"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["token_ids"] == greedy(tiny_pair(str(tiny_root), FAMILY, "noised"), load_image(path), "hi", 8)


def test_the_app_races_every_method_on_a_custom_qwen3_5_pair(tiny_root, monkeypatch, tmp_path):
    """The app's custom models: a Qwen3.5 pair loads (its warm-up runs SAGE and measures tree verifies)
    and races every method, each lane the target's greedy answer."""
    from dataclasses import fields
    from types import SimpleNamespace

    from app import handlers
    from app.handlers import Handlers, Settings
    from app.inputs import Limits, RaceForm
    from app.models import CUSTOM_KEY, CustomModels
    from app.page import Page
    from sage_core import METHODS

    monkeypatch.setattr(handlers, "TRACE_DIR", tmp_path)
    target, draft = Path(tiny_folder(tiny_root, FAMILY, "target")), Path(tiny_folder(tiny_root, FAMILY, "noised"))
    settings = Settings(Limits(), [], CUSTOM_KEY, CustomModels(folder=target.parent), [])
    page = SimpleNamespace(**{f.name: f.name for f in fields(Page)})
    image = Path(__file__).resolve().parent.parent / "assets" / "examples" / "bar_value.png"
    form = RaceForm(
        image=str(image),
        prompt="hi",
        pair=CUSTOM_KEY,
        custom_target=target.name,
        custom_draft=draft.name,
        methods=list(METHODS),
        max_new_tokens=8,
    )
    result = Handlers(page, settings).race_to_end(form)
    assert sorted(result["methods"]) == sorted(METHODS)
    assert all(ids == result["token_ids"]["ar"] for ids in result["token_ids"].values()) and result["token_ids"]["ar"]
    assert result["lossless"]["identical"], result["lossless"]


def test_transformers_entry_point_runs_trees_on_qwen3_5(tiny_root, image, video):
    """`generate(custom_generate=...)` with a Qwen3.5 pair: the tree methods equal plain greedy `generate`
    (which, after the entry point wrapped the model, still runs the layers' own forward)."""
    pair = tiny_pair(str(tiny_root), FAMILY, "noised")
    for media in (image, video):
        inputs = pair.target.prepare(media, "Describe the picture.")
        for method in ("sage", "static", "dynamic"):
            assert through_entry(pair, inputs, method=method).tolist() == plain(pair, inputs).tolist(), method


def test_a_target_offloaded_to_disk_by_accelerate_runs_trees(tiny_root, image, tmp_path):
    """--device-map auto with a memory cap: the linear-attention layer's weights on disk, loaded by
    accelerate's hook before each forward, which the tree forward runs under."""
    pair = disk_offloaded_pair(tiny_root, FAMILY, "300KB", tmp_path / "offload")
    linear = next(m for m in pair.target.model.modules() if type(m).__name__ == "Qwen3_5GatedDeltaNet")
    assert linear.conv1d.weight.device.type == "meta" and hasattr(linear, "_hf_hook")  # on disk until its forward
    plain = tiny_pair(str(tiny_root), FAMILY, "noised")
    for method in ("ar", "chain", "sage"):
        assert decoded(pair, image, method, 12) == decoded(plain, image, method, 12), method
