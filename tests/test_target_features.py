"""A one-pass draft that reads the target's own features (models/target_features.py; PARD-2).

Checked:
- declared by the draft's config and loaded with it; a malformed declaration or file, or a target that cannot
  give the features (a layer it lacks, another width), is refused in one sentence;
- a zero projection adds nothing; the additions reach the draft's embeddings on every forward (transformers', the
  lean one, the fused and the merged one) and nowhere outside `adding`;
- the alignment: each token the draft reads gets the target's features at the position before it, equal to the
  target's own layer outputs over the whole sequence (the first new token: the prompt's last position);
- lossless: every method with a features-reading one-pass draft equals the target's greedy output token for
  token, on every family the one-pass tests cover, image and video, every backend, with pruning, in one draft
  forward a round (counted from the draft model's own calls); the features changed the drafts (the lane is
  live), and with them off (`without_features`) the drafts equal a draft without the declaration.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sage_core import METHODS, DecodeConfig, ModelLoadError, PairMismatchError, decode, load_pair
from sage_core.config import BACKENDS
from sage_core.drafting import draft_block
from sage_core.methods.builtin import DRAFTING_METHODS
from sage_core.models.one_pass import without_features
from sage_core.models.target_features import FEATURES_FILE as FILE
from sage_core.models.target_features import (
    adding,
    decoder_layers,
    feature_rows,
    fed_features,
    feeding,
    hidden_width,
    new_features,
    with_addition,
)
from sage_testkit.pairs import ADDED_NEW, PROMPTS, features_draft, greedy_answer, layer_count, tiny_folder, tiny_pair
from sage_testkit.references import path_logits
from sage_testkit.seams import draft_calls_per_record
from sage_testkit.tiny_models import ALL_FAMILIES, FAMILIES

#: Methods whose trees follow the pair's measured cost curve (a wall clock): compared by their output only.
TIMED = ("sage-cost", "smart")


def features_pair(tiny_root: Path, where: Path, family: str):
    return load_pair(
        tiny_folder(tiny_root, family, "target"), features_draft(tiny_root, where, family), "cpu", "float32"
    )


@pytest.fixture(scope="module")
def qwen_pair(tiny_root, tmp_path_factory):
    return features_pair(tiny_root, tmp_path_factory.mktemp("features"), "qwen2_5_vl")


def test_a_declared_projection_loads_with_its_draft(qwen_pair, tiny_root):
    features = qwen_pair.draft.one_pass.features
    assert features is not None and features.layers == (0, layer_count(tiny_root, "qwen2_5_vl") - 1)
    assert features.width == hidden_width(qwen_pair.draft.model)
    assert features.target_width == hidden_width(qwen_pair.target.model)
    assert tiny_pair(str(tiny_root), "qwen2_5_vl", "one-pass").draft.one_pass.features is None
    off = without_features(qwen_pair)
    assert off.draft.one_pass.features is None and off.draft.model is qwen_pair.draft.model
    assert qwen_pair.draft.one_pass.features is features  # the pair itself unchanged


@pytest.mark.parametrize(
    ("declared", "weight", "words"),
    [
        ("target_features.safetensors", None, "it is not {'layers'"),
        ({"layers": [0], "file": FILE, "scale": 1}, None, "it is not {'layers'"),
        ({"layers": [], "file": FILE}, None, "not a list of distinct target layer indices"),
        ({"layers": [0, 0], "file": FILE}, None, "not a list of distinct target layer indices"),
        ({"layers": [-1], "file": FILE}, None, "not a list of distinct target layer indices"),
        ({"layers": [0, True], "file": FILE}, None, "not a list of distinct target layer indices"),
        ({"layers": [0], "file": "features.bin"}, None, "not the name of a .safetensors file"),
        ({"layers": [0], "file": "sub/" + FILE}, None, "not the name of a .safetensors file"),
        ({"layers": [0], "file": "absent.safetensors"}, None, "is not beside its config"),
        (None, "garbage", "cannot be read"),
        (None, "two tensors", "exactly one tensor named 'weight'"),
        (None, "one-d", "not a 2-d float tensor"),
        (None, "narrow", "not the draft's embedding width"),
        (None, "odd", "not a whole number for each of its 2 layers"),
    ],
)
def test_a_malformed_declaration_or_file_is_refused_in_one_sentence(tiny_root, tmp_path, declared, weight, words):
    from safetensors.torch import save_file

    folder = Path(features_draft(tiny_root, tmp_path, "qwen2_5_vl", declared))

    pair = tiny_pair(str(tiny_root), "qwen2_5_vl", "one-pass")
    width, target_width = hidden_width(pair.draft.model), hidden_width(pair.target.model)
    broken = {
        "two tensors": {"weight": torch.zeros(width, 2 * target_width), "bias": torch.zeros(width)},
        "one-d": {"weight": torch.zeros(width)},
        "narrow": {"weight": torch.zeros(width - 1, 2 * target_width)},
        "odd": {"weight": torch.zeros(width, 2 * target_width + 1)},
    }
    if weight == "garbage":
        (folder / FILE).write_bytes(b"not a safetensors file")
    elif weight is not None:
        save_file(broken[weight], str(folder / FILE))
    with pytest.raises(ModelLoadError, match="declares the target's features") as caught:
        load_pair(tiny_folder(tiny_root, "qwen2_5_vl", "target"), str(folder), "cpu", "float32")
    assert words in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("mismatch", ["layer", "width"])
def test_a_target_that_cannot_give_the_features_is_refused_in_one_sentence(tiny_root, tmp_path, mismatch):
    pair = tiny_pair(str(tiny_root), "qwen2_5_vl", "one-pass")
    count = layer_count(tiny_root, "qwen2_5_vl")
    width, target_width = hidden_width(pair.draft.model), hidden_width(pair.target.model)
    if mismatch == "layer":
        declared, weight = {"layers": [0, count], "file": FILE}, torch.zeros(width, 2 * target_width)
        words = f"reads the target's layer {count} but the target has {count} text layers"
    else:
        declared, weight = {"layers": [0, 1], "file": FILE}, torch.zeros(width, 2 * (target_width + 2))
        words = f"reads layers {target_width + 2} wide but the target's are {target_width}"
    folder = features_draft(tiny_root, tmp_path, "qwen2_5_vl", declared, weight)
    with pytest.raises(PairMismatchError) as caught:
        load_pair(tiny_folder(tiny_root, "qwen2_5_vl", "target"), folder, "cpu", "float32")
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_zero_projection_adds_nothing_and_additions_stay_inside_adding():
    features = new_features((0, 1), 4, 3)
    given = torch.randn(2, 6)
    with feeding(given):
        rows = feature_rows(features, 2, 5)
    assert rows is not None and rows.shape == (5, 4) and not rows.any()
    assert feature_rows(features, 2, 5) is None  # outside `feeding`: nothing given
    with feeding(given):
        assert feature_rows(features, 3, 5) is None  # features for other tokens: not used
        assert feature_rows(None, 2, 5) is None  # a draft that reads none
    embedded = torch.randn(1, 5, 4)
    extra = torch.randn(5, 4)
    assert torch.equal(with_addition(embedded), embedded)
    with adding(extra):
        assert torch.allclose(with_addition(embedded), embedded + extra)
        assert torch.allclose(with_addition(embedded[0]), embedded[0] + extra)  # the merged forward's [n, width]
        assert torch.equal(with_addition(embedded[:, :4]), embedded[:, :4])  # another forward's tokens
    assert torch.equal(with_addition(embedded), embedded)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_features_reach_the_draft_on_every_forward(qwen_pair, image, backend):
    """The same block with the features given and without: different logits (each forward adds them)."""
    from sage_core.backends import open_backend

    one_pass = qwen_pair.draft.one_pass
    inputs = qwen_pair.draft.prepare(image, PROMPTS[0])
    blocks = []
    for given in (torch.randn(2, len(one_pass.features.layers) * one_pass.features.target_width), None):
        draft = open_backend(qwen_pair.draft, backend, draft=True)
        state = draft.prefill(inputs, 64).state
        from sage_core.models.target_features import watch_embeddings

        watch_embeddings(qwen_pair.draft.model)
        with torch.inference_mode(), feeding(given):
            blocks.append(draft_block(draft, state, [11, 12], one_pass))
    assert (blocks[0] - blocks[1]).abs().max() > 1e-3, backend


def test_each_token_gets_the_targets_features_at_the_position_before_it(qwen_pair, image):
    """What the loop feeds the draft equals the target's own layer outputs over the whole sequence."""
    fed: list[tuple[int, torch.Tensor]] = []
    real = feature_rows

    def spy(features, pending, count):
        given = fed_features()
        if given is not None:
            fed.append((pending, given.clone()))
        return real(features, pending, count)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sage_core.drafting.feature_rows", spy)
        run = decode(qwen_pair, image, PROMPTS[0], DecodeConfig("chain", 16))
        tokens = run.run_to_end().token_ids
    inputs = qwen_pair.target.prepare(image, PROMPTS[0])
    prompt = int(inputs["input_ids"].shape[1])
    layers = qwen_pair.draft.one_pass.features.layers
    found: dict[int, list[torch.Tensor]] = {i: [] for i in layers}
    text = qwen_pair.target.spec.language_model(qwen_pair.target.model)
    hooks = [
        decoder_layers(text)[i].register_forward_hook(
            lambda _m, _a, out, i=i: found[i].append(out[0] if isinstance(out, tuple) else out)
        )
        for i in layers
    ]
    try:
        path_logits(qwen_pair.target, inputs, list(tokens))  # transformers' own step-by-step forward
    finally:
        for hook in hooks:
            hook.remove()
    whole = torch.cat([torch.cat(found[i], dim=1)[0] for i in layers], dim=-1)
    assert whole.shape[0] == prompt + len(tokens)
    read = 0  # new tokens the draft has read so far
    assert fed, "the draft was fed the target's features"
    for pending, given in fed:
        expected = whole[prompt - 1 + read : prompt - 1 + read + pending]  # token t's: the target's at t - 1
        assert torch.allclose(given, expected, atol=1e-4), read
        read += pending


def test_every_method_is_lossless_on_every_backend_pruned_or_not(qwen_pair, tiny_root, image):
    expected = greedy_answer(str(tiny_root), "qwen2_5_vl", "image", PROMPTS[1], 16)
    for backend in BACKENDS:
        for prune_ratio in (0.0, 0.5):
            for method in DRAFTING_METHODS:
                config = DecodeConfig(method, 16, prune_ratio=prune_ratio, backend=backend)
                run, summary, calls = draft_calls_per_record(qwen_pair, image, PROMPTS[1], config)
                assert summary.token_ids == expected, (backend, method, prune_ratio)
                assert {calls[r.round] for r in run.records if r.phase == "decode"} == {1}, (backend, method)


def trees(run) -> list[tuple[int, ...]]:
    return [r.tree_tokens for r in run.records if r.phase == "decode"]


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_every_method_is_lossless_with_the_features_on_every_family(tiny_root, tmp_path, image, video, family):
    pair = features_pair(tiny_root, tmp_path, family)
    plain = tiny_pair(str(tiny_root), family, "one-pass")
    off = without_features(pair)
    new = 24 if family in FAMILIES else ADDED_NEW
    changed = 0
    for media in (image, video) if pair.target.spec.video else (image,):
        expected = greedy_answer(str(tiny_root), family, media.kind, PROMPTS[0], new)
        for method in (m for m in METHODS if m != "ar"):
            run, summary, calls = draft_calls_per_record(pair, media, PROMPTS[0], DecodeConfig(method, new))
            assert summary.token_ids == expected, (family, method, media.kind)
            rounds = [r for r in run.records if r.phase == "decode"]
            assert [r.draft_forwards for r in rounds] == [1] * len(rounds), method
            assert [calls[r.round] for r in rounds] == [1] * len(rounds), method  # the model's own calls
            without = decode(plain, media, PROMPTS[0], DecodeConfig(method, new))
            switched_off = decode(off, media, PROMPTS[0], DecodeConfig(method, new))
            assert switched_off.run_to_end().token_ids == expected
            assert without.run_to_end().token_ids == expected
            if method not in TIMED:  # off: the drafts of a draft without them
                assert trees(switched_off) == trees(without), (family, method)
                changed += trees(run) != trees(without)
    assert changed > 0, f"{family}: the features changed some method's drafts"


def test_the_recipes_feature_stages_are_commands_the_trainer_takes(tmp_path):
    from scripts.recipe import FEATURE_STAGES, feature_command
    from scripts.train_target_features import parse_args

    for stage in FEATURE_STAGES:
        args = parse_args(feature_command(stage, tmp_path / "out", tmp_path / "work"))
        assert args.step == "train" and args.draft == tmp_path / "out" / "one-pass-draft"
        assert (args.seed, args.minutes, args.batch) == (stage.seed, stage.minutes, stage.batch)
        assert args.out == tmp_path / "out" / "one-pass-draft" and args.target == str(tmp_path / "out" / "target")


def test_the_speed_commands_methods_are_registered_drafting_methods(capsys):
    """train_target_features speed --methods / --sequential-methods: each name checked against the registry's drafting
    methods, a bad one refused in one sentence naming it."""
    from scripts.train_target_features import parse_args

    args = parse_args(["speed", "--methods", "chain, sage-cost", "--sequential-methods", "static"])
    assert (args.methods, args.sequential_methods) == (("chain", "sage-cost"), ("static",))
    for flag, value, named in (
        ("--methods", "chain,nope", "nope"),
        ("--sequential-methods", "ar", "ar"),
        ("--methods", ",", "(none given)"),
    ):
        with pytest.raises(SystemExit):
            parse_args(["speed", flag, value])
        assert f"not a drafting method: {named} (one of " in capsys.readouterr().err
