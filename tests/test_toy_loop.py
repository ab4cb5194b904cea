"""The real decode loop (`DecodeRun`) on a model-free toy pair (sage_testkit/toy.py): every method, drafts
that agree always, often and hardly ever, each run in milliseconds, against the toy target's own greedy
answer computed without the loop. The losslessness suite (test_lossless.py) holds the same contract on
tiny real models of every family; this one checks the loop alone, quickly, over many more prompts."""

from __future__ import annotations

import pytest

from sage_core import METHODS, DecodeConfig, decode
from sage_core.errors import InputError
from sage_testkit.toy import EOS, ToyModel, toy_greedy, toy_media, toy_pair

PROMPTS = ("a", "Describe the picture.", "What colour is it?", "one two three four five six")
MAX_NEW = 40


@pytest.mark.parametrize("noise", [0.0, 1.0, 8.0])
@pytest.mark.parametrize("method", METHODS)
def test_every_method_equals_the_toy_targets_greedy_answer(method, noise):
    pair = toy_pair(noise)
    media = toy_media()
    for prompt in PROMPTS:
        expected = toy_greedy(pair.target, prompt, MAX_NEW)
        run = decode(pair, media, prompt, DecodeConfig(method, MAX_NEW))
        summary = run.run_to_end()
        assert list(summary.token_ids) == expected, (method, noise, prompt)
        assert summary.finish_reason == ("eos" if expected[-1] == EOS else "length")
        decoded = [r for r in run.records if r.phase == "decode"]
        if method != "ar" and noise == 0.0:  # a draft that agrees always: every round keeps a whole path
            assert all(r.accepted_length >= 1 for r in decoded if r.finish_reason is None and r.node_count), method


def test_a_draft_that_agrees_takes_fewer_target_forwards_than_one_that_does_not():
    forwards = {}
    for noise in (0.0, 8.0):
        pair = toy_pair(noise)
        assert isinstance(pair.target, ToyModel)
        decode(pair, toy_media(), PROMPTS[1], DecodeConfig("static", MAX_NEW)).run_to_end()
        forwards[noise] = pair.target.forwards
    assert forwards[0.0] < forwards[8.0], forwards


def test_a_padded_draft_vocabulary_is_cut_to_the_shared_one():
    pair = toy_pair(1.0, draft_vocab_size=53)
    expected = toy_greedy(pair.target, PROMPTS[2], MAX_NEW)
    for method in ("chain", "static", "sage", "dynamic"):
        assert list(decode(pair, toy_media(), PROMPTS[2], DecodeConfig(method, MAX_NEW)).run_to_end().token_ids) == (
            expected
        ), method


def test_the_toy_catches_a_wrong_prefix():
    """The toy's logits follow the prefix it is fed: a loop that fed another prefix would see other tokens."""
    target = toy_pair().target
    assert isinstance(target, ToyModel)
    one, other = target.logits([3, 4, 5]), target.logits([3, 4, 6])
    assert not bool((one == other).all())
    assert bool((target.logits([3, 4, 5]) == one).all())  # and the same prefix gives the same logits


def test_more_candidates_than_the_toy_vocabulary_is_one_sentence():
    pair = toy_pair(vocab_size=8)  # SAGE's default: 10 candidates per node
    with pytest.raises(InputError, match="more than the 8 tokens"):
        decode(pair, toy_media(), "a", DecodeConfig("sage", 5))
