"""A family is one class and its registration: a family the project does not ship, defined here and nowhere
else, loads through `load_pair` and decodes losslessly.

The toy is VIP-LLaVA (transformers' `VipLlavaForConditionalGeneration`, model_type "vipllava"): LLaVA's
layout (a CLIP tower, a LLaMA text model, `<image>` tokens expanded by `LlavaProcessor`) whose projector
reads several vision layers. `Llava`'s family class describes it; `register_family` offers it to
`load_pair`. Its tiny random checkpoint is built here from the tiny LLaVA's text and vision settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import transformers
from transformers import GenerationConfig

from sage_core import DecodeConfig, decode, load_pair
from sage_core.errors import SageError
from sage_core.models import ModelPair
from sage_core.models.llava import Llava
from sage_core.models.registry import FAMILIES, register_family, unregister_family
from sage_testkit.pairs import NOISE, greedy
from sage_testkit.seams import files_needing, lent
from sage_testkit.tiny_models import SPECIAL_TOKENS, build_config, build_processor

MODEL_TYPE = "vipllava"
TOKENS = 16
PROMPT = "Describe the picture."

VIP_LLAVA = Llava(MODEL_TYPE, "VipLlavaForConditionalGeneration")


def build_vipllava(folder: Path, noise: float) -> str:
    """A tiny random VIP-LLaVA (its real config class) with LLaVA's tiny processor; `noise`: the share of
    each weight's spread added as Gaussian noise (a draft that differs from the target)."""
    llava = build_config("llava")
    config = transformers.VipLlavaConfig(
        text_config=llava.text_config.to_dict(),
        vision_config=llava.vision_config.to_dict(),
        image_token_index=llava.image_token_index,
        image_seq_length=llava.image_seq_length,
        vision_feature_layers=[-1, -2],  # the tiny tower has two layers (5.24 also reads it as vision_feature_layer)
        tie_word_embeddings=False,
    )
    config.initializer_range = llava.initializer_range
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = transformers.VipLlavaForConditionalGeneration._from_config(config, dtype=torch.float32)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * param.std() * noise)
    specials = SPECIAL_TOKENS["llava"]
    model.generation_config = GenerationConfig(
        bos_token_id=None, eos_token_id=specials["<|im_end|>"], pad_token_id=specials["<|endoftext|>"]
    )
    model.save_pretrained(folder)
    build_processor("llava").save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def toy() -> Iterator[Llava]:
    assert MODEL_TYPE not in FAMILIES  # the project does not ship it
    with lent(VIP_LLAVA, register_family, lambda: unregister_family(MODEL_TYPE)):
        yield VIP_LLAVA


@pytest.fixture(scope="module")
def pair(toy, tmp_path_factory) -> ModelPair:
    root = tmp_path_factory.mktemp("vipllava")
    target = build_vipllava(root / "target", 0.0)
    draft = build_vipllava(root / "noised", NOISE)
    return load_pair(target, draft, "cpu")


def test_the_toy_family_needs_this_module_only(toy):
    assert files_needing("the toy family", toy.model_type) == ["tests/test_family_seam.py"]


def test_the_toy_family_loads_as_itself(pair, image):
    assert type(pair.target.model).__name__ == "VipLlavaForConditionalGeneration"
    assert pair.target.spec is VIP_LLAVA and pair.draft.spec is VIP_LLAVA
    assert greedy(SimpleNamespace(target=pair.draft), image, PROMPT, TOKENS) != greedy(
        pair, image, PROMPT, TOKENS
    )  # the draft is not the target


@pytest.mark.parametrize("method", ["sage", "chain"])
def test_a_decode_on_the_toy_family_equals_greedy_generate(pair, image, method):
    """The draft differs from the target (a noised copy), and the output is the target's own."""
    summary = decode(pair, image, PROMPT, DecodeConfig(method, TOKENS)).run_to_end()
    assert list(summary.token_ids) == greedy(pair, image, PROMPT, TOKENS)
    assert summary.rounds < TOKENS  # the draft's tokens were accepted somewhere, so the tree was verified


def test_an_unknown_model_type_gets_one_sentence(tmp_path):
    folder = build_vipllava(tmp_path / "unregistered", 0.0)
    registered = FAMILIES.get(MODEL_TYPE)  # the module's toy, when an earlier test registered it
    unregister_family(MODEL_TYPE)
    try:
        with pytest.raises(SageError) as refused:
            load_pair(folder, folder, "cpu")
    finally:
        if registered is not None:
            register_family(registered)
    message = str(refused.value)
    assert "'vipllava' model; supported families:" in message and "\n" not in message
