"""transformers' entry point: `target.generate(..., assistant_model=draft, custom_generate=<this repository>,
trust_remote_code=True)` runs SAGE from custom_generate/generate.py and returns what plain greedy
`generate()` returns, token for token (float32, every family, image and video)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
import torch

from sage_core.media import Media
from sage_testkit.pairs import tiny_pair
from sage_testkit.references import ENTRY_MAX_NEW, plain, through_entry
from sage_testkit.tiny_models import FAMILIES

ROOT = Path(__file__).resolve().parent.parent
MAX_NEW = ENTRY_MAX_NEW


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    """transformers checks custom_generate/requirements.txt against the installed distributions."""
    try:
        importlib.metadata.version("sage-demo")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("the package is not installed: `pip install -e .` (requirements-dev.txt does it)")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", ["image", "video"])
def test_entry_point_equals_plain_greedy_generate(tiny_root, image: Media, video: Media, family: str, kind: str):
    pair = tiny_pair(str(tiny_root), family, "noised")
    inputs = pair.target.prepare(image if kind == "image" else video, "Describe the picture.")
    expected = plain(pair, inputs)
    for method in ("sage", "static"):
        got = through_entry(pair, inputs, method=method)
        assert isinstance(got, torch.Tensor) and got.dtype == expected.dtype
        assert got.tolist() == expected.tolist(), (family, kind, method)


def test_entry_point_runs_sage_and_takes_its_settings(tiny_root, image: Media):
    """With the target itself as draft every drafted token is accepted: far fewer target forwards than
    tokens, which plain decoding cannot do; SAGE's settings arrive (a bad one is refused by SAGE's checks)."""
    pair = tiny_pair(str(tiny_root), "qwen2_5_vl", "copy")
    inputs = pair.target.prepare(image, "Describe the picture.")
    expected = plain(pair, inputs)
    forwards = [0]
    hook = pair.target.model.register_forward_pre_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    try:
        got = through_entry(pair, inputs, sage_depth_max=6, sage_width_max=4, return_dict_in_generate=True)
    finally:
        hook.remove()
    assert got.sequences.tolist() == expected.tolist()
    new = expected.shape[1] - inputs["input_ids"].shape[1]
    assert 1 <= forwards[0] <= new // 2, (forwards[0], new)
    with pytest.raises(ValueError, match="depth_min <= depth_max"):
        through_entry(pair, inputs, sage_depth_max=2)
    with pytest.raises(ValueError, match="unknown SAGE setting 'sage_depth'"):
        through_entry(pair, inputs, sage_depth=6)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"do_sample": True}, "do_sample=False"),
        ({"num_beams": 2}, "num_beams=2"),
        ({"repetition_penalty": 1.2}, "repetition_penalty=1.2"),
        ({"method": "beam"}, "unknown method 'beam'"),
    ],
)
def test_entry_point_refuses_what_would_not_be_greedy(tiny_root, image: Media, settings: dict, message: str):
    pair = tiny_pair(str(tiny_root), "qwen2_vl", "noised")
    inputs = pair.target.prepare(image, "Describe the picture.")
    with pytest.raises(ValueError, match=message):
        through_entry(pair, inputs, **settings)


def test_a_generation_config_object_is_read_as_generate_reads_it(tiny_root, image: Media):
    """Its unset fields are unset (the checkpoint's end of sequence stays), as plain generate() has it."""
    from transformers import GenerationConfig

    pair = tiny_pair(str(tiny_root), "qwen2_vl", "noised")
    inputs = pair.target.prepare(image, "Describe the picture.")
    config = GenerationConfig(max_new_tokens=8, do_sample=False)
    with torch.no_grad():
        expected = pair.target.model.generate(**inputs, generation_config=config)
        got = pair.target.model.generate(
            **inputs,
            generation_config=config,
            assistant_model=pair.draft.model,
            custom_generate=str(ROOT),
            trust_remote_code=True,
        )
    assert got.tolist() == expected.tolist() and got.shape[1] - inputs["input_ids"].shape[1] <= 8


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"output_scores": True, "return_dict_in_generate": True}, "not output_scores: call plain generate"),
        ({"output_logits": True, "return_dict_in_generate": True}, "not output_logits: call plain generate"),
        ({"output_attentions": True}, "not output_attentions"),
        ({"past_key_values": "cache"}, "builds its own caches from the prompt: leave past_key_values unset"),
        ({"generation_config": {"max_new_tokens": 8}}, "must be a transformers GenerationConfig, not dict"),
        ({"eos_token_id": 5}, "leave eos_token_id unset"),
    ],
)
def test_outputs_and_caches_sage_does_not_keep_are_refused_in_one_sentence(tiny_root, image, settings, message):
    from sage_core.errors import GenerateError

    if settings.get("past_key_values") == "cache":
        from transformers import DynamicCache

        settings = {"past_key_values": DynamicCache()}
    pair = tiny_pair(str(tiny_root), "qwen2_vl", "noised")
    inputs = pair.target.prepare(image, "Describe the picture.")
    with pytest.raises(GenerateError, match=message) as refused:
        through_entry(pair, inputs, **settings)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 300


def test_a_checkpoint_that_samples_is_told_the_two_arguments_and_the_readme_snippet_works(tiny_root, image):
    """A real checkpoint's generation_config.json (Qwen2.5-VL's: do_sample true, repetition_penalty 1.05)."""
    from sage_core.errors import GenerateError

    pair = tiny_pair(str(tiny_root), "qwen2_5_vl", "noised")
    inputs = pair.target.prepare(image, "Describe the picture.")
    config = pair.target.model.generation_config
    saved = (config.do_sample, config.repetition_penalty)
    config.do_sample, config.repetition_penalty = True, 1.05
    try:
        for settings in ({}, {"do_sample": False}):
            told = r"checkpoint's generation config sets .*: pass do_sample=False, repetition_penalty=1\.0"
            with pytest.raises(GenerateError, match=told), torch.no_grad():
                pair.target.model.generate(
                    **inputs,
                    assistant_model=pair.draft.model,
                    custom_generate=str(ROOT),
                    trust_remote_code=True,
                    max_new_tokens=MAX_NEW,
                    **settings,
                )
        # the README's snippet, as written
        options = dict(custom_generate=str(ROOT), trust_remote_code=True, max_new_tokens=MAX_NEW)
        with torch.no_grad():
            out = pair.target.model.generate(
                **inputs, assistant_model=pair.draft.model, do_sample=False, repetition_penalty=1.0, **options
            )
            expected = pair.target.model.generate(
                **inputs, do_sample=False, repetition_penalty=1.0, max_new_tokens=MAX_NEW
            )
    finally:
        config.do_sample, config.repetition_penalty = saved
    assert out.tolist() == expected.tolist()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"foo": 1}, r"^generate\(\) does not take 'foo' \(neither generate\(\) nor the model reads it"),
        ({"depth_max": 5}, r"^SAGE's settings are passed with a 'sage_' prefix: pass sage_depth_max$"),
        ({"frozen_alpha": 0.5}, r"^'frozen_alpha' is a setting of method 'sage-frozen', and this call runs 'sage'"),
        ({"method": "static", "dynamic_depth": 3}, r"^'dynamic_depth' is a setting of method 'dynamic'"),
        ({"sage_config": 5}, r"^sage_config must be a sage_core SageConfig or a dict of its fields, not an int"),
        ({"sage_config": "depth_max=5"}, r"^sage_config must be a sage_core SageConfig or a dict of its fields"),
        ({"sage_config": {"depth": 5}}, r"^unknown SAGE setting 'depth' in sage_config; the settings are "),
        ({"sage_config": {1: 5}}, r"^unknown SAGE setting 1 in sage_config"),
        ({"sage_config": {"top_k": 5}}, r"^'top_k' in sage_config is the old name of SAGE's 'candidates'"),
        ({"method": 5}, r"^unknown method 5; choose one of "),
    ],
)
def test_unknown_keywords_and_wrong_sage_settings_are_refused_as_generate_refuses_them(
    tiny_root, image: Media, settings: dict, message: str
):
    """Plain generate() refuses a keyword neither it nor the model reads (a typo is never dropped in silence);
    the entry point does too, in one sentence, naming the right spelling where there is one."""
    from sage_core.errors import GenerateError

    pair = tiny_pair(str(tiny_root), "qwen2_vl", "noised")
    inputs = pair.target.prepare(image, "Describe the picture.")
    if "foo" in settings:  # plain generate() refuses it too
        with pytest.raises(ValueError, match="not used by the model: \\['foo'\\]"), torch.no_grad():
            pair.target.model.generate(**inputs, do_sample=False, max_new_tokens=2, **settings)
    with pytest.raises(GenerateError, match=message) as refused:
        through_entry(pair, inputs, **settings)
    assert isinstance(refused.value, ValueError) and "\n" not in str(refused.value)


def test_sage_settings_arrive_as_a_dict_a_sage_config_or_prefixed_keywords(tiny_root, image: Media):
    """`sage_config` as documented: a SageConfig or a dict of its fields (it used to be an AttributeError),
    the `sage_*` keywords over it; another method's settings by their command-line names."""
    from sage_core import SageConfig

    pair = tiny_pair(str(tiny_root), "qwen2_5_vl", "noised")
    inputs = pair.target.prepare(image, "Describe the picture.")
    expected = plain(pair, inputs).tolist()
    for settings in (
        {"sage_config": {"depth_max": 5}},
        {"sage_config": SageConfig(depth_max=5)},
        {"sage_config": {"depth_min": 2}, "sage_depth_max": 2},  # the dict's depth_min makes depth_max=2 legal
        {"method": "sage-frozen", "frozen_alpha": 0.25},
        {"method": "dynamic", "dynamic_depth": 2},
    ):
        assert through_entry(pair, inputs, **settings).tolist() == expected, settings
    # each arrives: SAGE's own checks refuse what the defaults would not
    with pytest.raises(ValueError, match="depth_min <= depth_max"):
        through_entry(pair, inputs, sage_config={"depth_max": 2})
    with pytest.raises(ValueError, match="depth_min <= depth_max"):
        through_entry(pair, inputs, sage_config={"depth_min": 2}, sage_depth_max=1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        through_entry(pair, inputs, method="sage-frozen", frozen_alpha=5)
