"""Lossless is the contract: every method's output equals the target's own
`generate(do_sample=False)`, token for token, in float32, for every family,
images and video, and drafts that agree always, partly and hardly ever, on
every backend (the fast path, with the draft's forward compiled or not, the fast
path with transformers' forward, and transformers' plain cache and masks)."""

from __future__ import annotations

import pytest

from sage_core import METHODS, DecodeConfig, decode
from sage_core.config import BACKENDS
from sage_core.errors import MediaError
from sage_core.methods.builtin import DRAFTING_METHODS
from sage_testkit.pairs import (
    ADDED_NEW,
    DRAFT_KINDS,
    DRAFT_METHODS,
    PROMPTS,
    check_pruned_prompt,
    greedy,
    greedy_answer,
    tiny_pair,
)
from sage_testkit.tiny_models import EXTRA_FAMILIES, FAMILIES

MAX_NEW = 24


def greedy_chain_length(record) -> int:
    """Depth of the path that follows the draft's most likely child from the root."""
    tree, node, length = record.tree, -1, 0
    while True:
        children = tree.children(node)
        if not children:
            return length
        node = max(children, key=lambda i: tree.draft_probs[i])
        length += 1


# (draft kind, draft-side pruning ratio, backend): every draft kind unpruned on every backend, and
# the pruning ratios 0.5, 0.8 and 0.9 spread over the kinds and backends (each family, images and video).
DRAFTS = [(kind, 0.0, backend) for backend in BACKENDS for kind in DRAFT_KINDS] + [
    ("noised", 0.5, "fast"),
    ("copy", 0.8, "fast"),
    ("noised", 0.9, "plain"),
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("draft_kind", "prune_ratio", "backend"), DRAFTS)
def test_every_method_equals_greedy_generate(tiny_root, image, video, family, draft_kind, prune_ratio, backend):
    pair = tiny_pair(str(tiny_root), family, draft_kind)
    cases = [(image, PROMPTS[0]), (image, PROMPTS[1]), (video, PROMPTS[0])]
    methods = METHODS if prune_ratio == 0 else DRAFT_METHODS  # `ar` has no draft to prune
    taus: dict[str, list[float]] = {m: [] for m in methods}
    for media, prompt in cases:
        expected = greedy(pair, media, prompt, MAX_NEW)
        for method in methods:
            config = DecodeConfig(method=method, max_new_tokens=MAX_NEW, prune_ratio=prune_ratio, backend=backend)
            run = decode(pair, media, prompt, config)
            summary = run.run_to_end()
            assert list(summary.token_ids) == expected, (
                f"{family} {draft_kind} {method} {media.kind} {prompt!r} pruning {prune_ratio} {backend}"
            )
            decode_steps = [r for r in run.records if r.phase == "decode"]
            taus[method].extend(r.accepted_length for r in decode_steps)
            if prune_ratio > 0:
                check_pruned_prompt(run.header, prune_ratio)
                continue  # the drafts read other prompts than the target: no acceptance figures to expect
            if draft_kind == "copy":
                # Every draft token is accepted: tau is the depth of the draft's greedy chain
                # (the whole tree depth for the fixed trees) on every step not cut by the end.
                for record in decode_steps:
                    if record.finish_reason is None:
                        assert record.accepted_length == greedy_chain_length(record)
                        if method in ("chain", "static"):
                            assert record.accepted_length == record.depth == 5
            if method == "ar":  # plain decoding: no tree, one target token per forward
                assert all(r.node_count == 0 and len(r.new_tokens) == 1 for r in decode_steps)
    if prune_ratio > 0:
        return
    mean = {m: sum(v) / len(v) for m, v in taus.items() if v}
    if draft_kind == "noised":
        assert 0.2 < mean["static"] < 4.5, mean  # partial acceptance
    if draft_kind == "unrelated":
        assert mean["static"] < 0.5, mean  # almost nothing accepted


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", DRAFTING_METHODS)
def test_limit_and_eos_inside_an_accepted_path(tiny_root, image, family, method, backend):
    pair = tiny_pair(str(tiny_root), family, "copy")
    long = greedy(pair, image, PROMPTS[0], 20)
    # The token limit falls inside the first accepted path (1 prefill token + up to 5 accepted + bonus).
    for limit in (1, 3, 4):
        config = DecodeConfig(method=method, max_new_tokens=limit, backend=backend)
        summary = decode(pair, image, PROMPTS[0], config).run_to_end()
        assert list(summary.token_ids) == greedy(pair, image, PROMPTS[0], limit)
        assert summary.finish_reason == "length"
    # Make a token the target emits mid-answer the end-of-sequence token: both must stop there.
    config = pair.target.model.generation_config
    saved = config.eos_token_id
    stop_token = long[4] if long[4] not in long[:4] else long[2]
    try:
        config.eos_token_id = stop_token
        expected = greedy(pair, image, PROMPTS[0], 20)
        assert expected[-1] == stop_token and len(expected) < 20
        summary = decode(pair, image, PROMPTS[0], DecodeConfig(method, 20, backend=backend)).run_to_end()
        assert list(summary.token_ids) == expected
        assert summary.finish_reason == "eos"
    finally:
        config.eos_token_id = saved


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_padded_draft_vocabulary_uses_the_shared_vocabulary(tiny_root, image, family, backend):
    pair = tiny_pair(str(tiny_root), family, "padded")
    assert pair.draft.vocab_size == pair.target.vocab_size + 5
    assert pair.shared_vocab_size == pair.target.vocab_size
    for method in ("static", "sage", "dynamic"):
        run = decode(pair, image, PROMPTS[0], DecodeConfig(method=method, max_new_tokens=MAX_NEW, backend=backend))
        summary = run.run_to_end()
        assert list(summary.token_ids) == greedy(pair, image, PROMPTS[0], MAX_NEW)
        proposed = {t for r in run.records for t in r.tree_tokens}
        assert max(proposed) < pair.shared_vocab_size


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", ["online", "template"])
@pytest.mark.parametrize("alpha_source", ["root", "path_mean"])
@pytest.mark.parametrize("static_first_round", [True, False])
def test_sage_variants_are_lossless(tiny_root, image, video, shape, alpha_source, static_first_round, backend):
    from sage_core import SageConfig

    pair = tiny_pair(str(tiny_root), "qwen2_5_vl", "noised")
    sage = SageConfig(
        shape=shape, alpha_source=alpha_source, window=3, depth_max=6, static_first_round=static_first_round
    )
    for media in (image, video):
        summary = decode(pair, media, PROMPTS[1], DecodeConfig("sage", 40, sage, backend=backend)).run_to_end()
        assert list(summary.token_ids) == greedy(pair, media, PROMPTS[1], 40)


# The families added to the first four (the time budget of the suite): on "fast" every draft kind, on the
# other backends the noised draft (partial acceptance: every kind of commit); pruning on "fast".
ADDED_DRAFTS = {"fast": DRAFT_KINDS, "compiled": ("noised",), "fast-hf": ("noised",), "plain": ("noised",)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("family", EXTRA_FAMILIES)
def test_added_family_every_method_equals_greedy_generate(tiny_root, image, video, family, backend):
    for draft_kind in ADDED_DRAFTS[backend]:
        pair = tiny_pair(str(tiny_root), family, draft_kind)
        for media in (image, video) if pair.target.spec.video else (image,):
            expected = list(greedy_answer(str(tiny_root), family, media.kind, PROMPTS[0], ADDED_NEW))
            ratios = (0.0, 0.5) if backend == "fast" and draft_kind == "noised" else (0.0,)
            for method, prune_ratio in [(m, r) for r in ratios for m in METHODS if r == 0 or m != "ar"]:
                config = DecodeConfig(method=method, max_new_tokens=ADDED_NEW, prune_ratio=prune_ratio, backend=backend)
                run = decode(pair, media, PROMPTS[0], config)
                summary = run.run_to_end()
                assert list(summary.token_ids) == expected, f"{family} {draft_kind} {method} {media.kind} {prune_ratio}"
                if prune_ratio > 0:
                    check_pruned_prompt(run.header, prune_ratio)
                elif draft_kind == "copy":  # every draft token accepted
                    for record in run.records:
                        if record.phase == "decode" and record.finish_reason is None:
                            assert record.accepted_length == greedy_chain_length(record)
        if not pair.target.spec.video:  # an image-only family refuses a video in one sentence
            with pytest.raises(MediaError, match="reads images only"):
                decode(pair, video, PROMPTS[0], DecodeConfig("sage", ADDED_NEW, backend=backend)).run_to_end()


@pytest.mark.parametrize("family", FAMILIES)
def test_nothing_is_drafted_below_an_end_of_sequence_token(tiny_root, image, family):
    """A drafted end-of-sequence token ends the sequence if accepted: no method drafts below it."""
    pair = tiny_pair(str(tiny_root), family, "copy")
    long = greedy(pair, image, PROMPTS[0], 24)
    config = pair.target.model.generation_config
    saved = config.eos_token_id
    proposed = 0
    try:
        for stop_token in [t for k, t in enumerate(long) if k >= 2 and t not in long[:k]][:4]:
            config.eos_token_id = stop_token
            expected = greedy(pair, image, PROMPTS[0], 24)
            for method in DRAFT_METHODS:
                run = decode(pair, image, PROMPTS[0], DecodeConfig(method, 24))
                assert list(run.run_to_end().token_ids) == expected, method
                trees = [r.tree for r in run.records if r.phase == "decode"]
                drafted_stop = [(t, n) for t in trees for n, token in enumerate(t.tokens) if token == stop_token]
                proposed += len(drafted_stop)
                for tree, node in drafted_stop:
                    assert not tree.children(node), f"{method} drafted below an end-of-sequence token"
    finally:
        config.eos_token_id = saved
    assert proposed, "the copy draft never proposed the end-of-sequence token"
