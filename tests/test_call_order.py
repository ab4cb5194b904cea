"""Lossless in every order of calls: one model object answers an image prompt, then a text prompt, a video
prompt and the image again, every registered method through `decode` and through transformers'
`generate(custom_generate=...)`, each equal to the target's own `generate(do_sample=False)` (float32).

Why: transformers keeps per-call state on the model (the M-RoPE delta of the last prompt with media, on
`model.model.rope_deltas`) and does not reset it for a prompt without media. A run that read it gave a
text prompt after an image one the image's positions. The sequence below puts every kind of prompt after
another kind, and a plain `generate()` between them; the model is then checked to carry nothing of the
runs (no hook, no attribute, no changed weight).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
import torch

from sage_core import decode, load_pair
from sage_core.config import DecodeConfig
from sage_core.errors import InputError, ModelLoadError
from sage_core.media import Media
from sage_core.methods import method_names
from sage_core.models import VLM, ModelPair
from sage_core.prepared import PreparedInputs, prepare_inputs
from sage_testkit.pairs import PROMPTS, builtin_pair, tiny_pair
from sage_testkit.references import through_entry
from sage_testkit.toy import ToyModel, toy_greedy, toy_media, toy_pair

PROMPT = PROMPTS[1]  # in the built-in pair's vocabulary
MAX_NEW = 6  # short answers: the positions go wrong from the first new token when they go wrong at all
ORDER = ("image", "text", "video", "image")


def text_only(vlm: VLM, prompt: str) -> dict[str, Any]:
    """The processor's tensors for a prompt without media (the chat template's one user turn)."""
    turn = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    text = vlm.processor.apply_chat_template(turn, tokenize=False, add_generation_prompt=True)
    return dict(vlm.processor(text=[text], return_tensors="pt"))


def prompt_inputs(pair: ModelPair, kind: str, media: Mapping[str, Media]) -> PreparedInputs:
    """Each model's tensors for the prompt about `kind` ("text": none), made once and shared by the runs."""
    if kind != "text":
        return prepare_inputs(pair, media[kind], PROMPT)
    draft = text_only(pair.draft, PROMPT)
    return PreparedInputs(media["image"], PROMPT, text_only(pair.target, PROMPT), draft, 0.0, 0.0)


def greedy(pair: ModelPair, inputs: Mapping[str, Any]) -> list[int]:
    """The target's own `generate(do_sample=False)`: the new tokens."""
    with torch.no_grad():
        output = pair.target.model.generate(**inputs, do_sample=False, max_new_tokens=MAX_NEW)
    return output[0, inputs["input_ids"].shape[1] :].tolist()


def through_decode(pair: ModelPair, prepared: PreparedInputs, method: str) -> list[int]:
    run = decode(pair, prepared.media, prepared.prompt, DecodeConfig(method, MAX_NEW), prepared)
    return [token for record in run for token in record.new_tokens]


def through_generate(pair: ModelPair, inputs: Mapping[str, Any], method: str) -> list[int]:
    output = through_entry(pair, inputs, method=method, max_new_tokens=MAX_NEW)
    return output[0, inputs["input_ids"].shape[1] :].tolist()


def fingerprint(model: Any) -> dict[str, Any]:
    """What a run could leave on a model: each module's attributes and hooks, and the weights' values."""
    return {
        "attributes": {name: sorted(vars(module)) for name, module in model.named_modules()},
        "hooks": {
            name: [len(getattr(module, hooks)) for hooks in ("_forward_hooks", "_forward_pre_hooks")]
            for name, module in model.named_modules()
        },
        "weights": {name: float(p.detach().double().sum()) for name, p in model.named_parameters()},
        "training": model.training,
    }


PAIRS: dict[str, Callable[[str], ModelPair]] = {
    "builtin-qwen3_vl": lambda root: builtin_pair(),
    "tiny-qwen2_5_vl": lambda root: tiny_pair(root, "qwen2_5_vl", "noised"),
}


@pytest.mark.parametrize("name", PAIRS)
def test_every_method_is_lossless_in_every_order_of_calls(name: str, tiny_root, image: Media, video: Media):
    pair = PAIRS[name](str(tiny_root))
    media = {"image": image, "video": video}
    prepared = {kind: prompt_inputs(pair, kind, media) for kind in ("text", "video", "image")}
    # the references, the image's last: its M-RoPE delta is what the model holds when the sequence starts
    expected = {kind: greedy(pair, prepared[kind].target) for kind in ("text", "video", "image")}
    before = (fingerprint(pair.target.model), fingerprint(pair.draft.model))
    wrong = []
    for step, kind in enumerate(ORDER):
        if step:  # a plain generate() of the kind before, right before this kind's runs: still its own answer
            assert greedy(pair, prepared[ORDER[step - 1]].target) == expected[ORDER[step - 1]], (step, kind)
        for method in method_names():
            got = {
                "decode": through_decode(pair, prepared[kind], method),
                "custom_generate": through_generate(pair, prepared[kind].target, method),
            }
            wrong += [(kind, method, route, tokens) for route, tokens in got.items() if tokens != expected[kind]]
    assert not wrong, (expected, wrong)
    assert (fingerprint(pair.target.model), fingerprint(pair.draft.model)) == before


def test_the_text_prompt_after_an_image_prompt_is_the_failure_this_guards(tiny_root, image: Media):
    """The negative control: after an image prompt the model holds a nonzero M-RoPE delta that a text prompt's
    positions must not take (with it, the text prompt's answer changes)."""
    pair = tiny_pair(str(tiny_root), "qwen2_5_vl", "noised")
    text = prompt_inputs(pair, "text", {"image": image})
    expected = greedy(pair, text.target)
    greedy(pair, pair.target.prepare(image, PROMPT))
    left = pair.target.model.model.rope_deltas
    assert left is not None and int(left.reshape(-1)[0]) != 0
    assert through_decode(pair, text, "ar") == expected
    assert pair.target.spec.position_offset(pair.target.model, text.target) == 0
    state, _ = pair.target.prefill(text.target)
    assert state.position_offset == 0
    # the library's forwards with this prompt's offset give generate()'s answer; with the stale one, another
    assert _greedy_with_offset(pair.target, text.target, 0)[: len(expected)] == expected
    assert _greedy_with_offset(pair.target, text.target, int(left.reshape(-1)[0]))[: len(expected)] != expected


def _greedy_with_offset(vlm: VLM, inputs: Mapping[str, Any], offset: int) -> list[int]:
    """Plain decoding through the library's forwards with the positions shifted by `offset`."""
    state, logits = vlm.prefill(inputs)
    state.position_offset = offset
    tokens = [int(logits.argmax())]
    while len(tokens) < MAX_NEW:
        logits = vlm.extend(state, [tokens[-1]], [state.committed], parents=[-1])
        vlm.commit(state, [0])
        tokens.append(int(logits[-1].argmax()))
    return tokens


# -- a run or a pair used again after something went wrong ---------------------------------------------


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_a_run_stopped_mid_round_says_so_when_used_again(stop: type[BaseException]):
    """An interrupt inside a round leaves the caches half-updated: the run refuses to go on in one sentence
    (it used to return the tokens so far as if finished, with no finish reason)."""
    pair, media = toy_pair(1.0), toy_media()
    assert isinstance(pair.target, ToyModel)
    expected = toy_greedy(pair.target, PROMPT, 24)
    run = decode(pair, media, PROMPT, DecodeConfig("sage", 24))
    propose = run.proposer.propose
    calls = []

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise stop("stopped")
        return propose(*args, **kwargs)

    run.proposer.propose = interrupted  # the interrupt inside round 2
    with pytest.raises(stop):
        run.run_to_end()
    assert run.broken and len(run.records) == 2  # the prefill and round 1
    for again in (run.run_to_end, lambda: next(run)):
        with pytest.raises(InputError, match=r"^this run stopped in the middle of round 2 \(" + stop.__name__):
            again()
    summary = decode(pair, media, PROMPT, DecodeConfig("sage", 24)).run_to_end()  # a new run: the whole answer
    assert list(summary.token_ids) == expected and summary.finish_reason is not None


@pytest.mark.parametrize("moved", ["draft", "target"])
def test_a_pair_whose_weights_were_moved_to_meta_is_refused_in_one_sentence(moved: str, image: Media):
    pair = load_pair("builtin", "builtin", device="cpu", dtype="float32")  # its own: the weights go
    getattr(pair, moved).model.to("meta")
    for method in ("sage", "ar") if moved == "target" else ("sage", "static"):
        with pytest.raises(ModelLoadError, match=rf"^the {moved} 'builtin' has weights on the meta device"):
            decode(pair, image, PROMPT, DecodeConfig(method, MAX_NEW))
    if moved == "draft":  # plain decoding does not read the draft
        assert len(decode(pair, image, PROMPT, DecodeConfig("ar", MAX_NEW)).run_to_end().token_ids) >= 1
