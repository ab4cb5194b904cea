"""A one-pass draft's conditional head (models/conditional_head.py, drafting.ConditionalOffers).

Checked:
- an untrained head (W_out zero) changes nothing; a trained one changes each row by its previous token, and
  columns past its vocabulary pass unchanged;
- trees from conditional tables: siblings get children of their own (a hand-built head), with no draft
  forward and the head's calls counted apart; without a head, the block's marginal as before;
- declared by the draft's config and loaded with it; a malformed declaration is refused in one sentence;
- lossless: every method with a head-equipped one-pass draft equals the target's greedy output token for
  token, image and video, in one draft forward a round (counted from the draft model's own calls), and the
  head was called and changed the trees.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from sage_core import DecodeConfig, ModelLoadError, decode, load_pair
from sage_core.drafting import BlockOffers, ConditionalOffers, block_offers, grow_tree, template_chooser
from sage_core.methods.registry import method_names
from sage_core.models.conditional_head import ConditionalHead, new_head
from sage_core.models.one_pass import HEAD_KEY, ONE_PASS_KEY
from sage_core.policy import Candidate
from sage_testkit.pairs import ONE_PASS_BLOCK, PROMPTS, greedy_answer, tiny_folder, tiny_pair
from sage_testkit.seams import draft_calls_per_record

HEAD_FILE = "conditional_head.safetensors"
FAMILY = "qwen2_5_vl"


def shifting_head(vocab: int, depths: int, strength: float = 50.0) -> ConditionalHead:
    """A hand-built head whose correction makes token (prev + 1) mod V the top of every row."""
    shift = torch.zeros(vocab, vocab)
    shift[torch.arange(vocab), (torch.arange(vocab) + 1) % vocab] = strength
    return ConditionalHead(
        embed=torch.eye(vocab),
        w_prev=torch.eye(vocab),
        w_logits=torch.zeros(vocab, vocab),
        depth_bias=torch.zeros(depths, vocab),
        w_out=shift,
        b_out=torch.zeros(vocab),
    )


def random_head(vocab: int, depths: int, seed: int = 5) -> ConditionalHead:
    """A random head strong enough to reorder the block's candidates."""
    head = new_head(vocab, depths, embed=8, hidden=16, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    return ConditionalHead(**(head.tensors() | {"w_out": torch.randn(16, vocab, generator=generator) * 3.0}))


def test_an_untrained_head_changes_nothing_and_a_trained_one_reads_the_previous_token():
    logits = torch.randn(3, 12)
    prev = torch.tensor([1, 2, 3])
    assert torch.equal(new_head(10, 4).apply(logits, prev, 2)[:, :10], logits[:, :10])
    shifted = shifting_head(10, 4).apply(logits, prev, 2)
    assert shifted[:, :10].argmax(-1).tolist() == [2, 3, 4]
    assert torch.equal(shifted[:, 10:], logits[:, 10:])  # past the head's vocabulary: unchanged
    per_row = shifting_head(10, 4).apply(logits, prev, torch.tensor([2, 3, 4]))
    assert torch.allclose(per_row, shifted)  # no depth bias: the depth changes nothing here
    shared = shifting_head(10, 4).apply(logits[:1], prev, 2)  # one row for every node
    assert torch.allclose(shared, shifting_head(10, 4).apply(logits[:1].expand(3, -1), prev, 2))
    assert shared.shape == (3, 12)


def grown(offers, block_depths: int = 4):
    """A tree of two siblings at level 1, each with one child, then one grandchild each."""
    side = SimpleNamespace(stop=frozenset(), vocab=10, warp=None)
    choose, expand, depth = template_chooser([(0,), (1,), (0, 0), (1, 0), (0, 0, 0), (1, 0, 0)])
    root = ((5, 6, 7), (0.5, 0.3, 0.2))
    return grow_tree(side, root, choose, min(depth, block_depths), 3, expand, offers)


def test_siblings_get_children_of_their_own_from_the_head_with_no_forward():
    block = torch.randn(4, 10)
    side = SimpleNamespace(vocab=10, warp=None)
    root = ((5, 6, 7), (0.5, 0.3, 0.2))
    drafted = grown(block_offers(block, root, shifting_head(10, 4), 3, side))
    tokens, parents = drafted.tree.tokens, drafted.tree.parents
    assert tokens[:2] == (5, 6)
    assert [tokens[i] for i in range(2, len(tokens))] == [(tokens[p] + 1) % 10 for p in parents[2:]]
    assert drafted.level_forwards == 0 and drafted.head_calls == 2 and drafted.head_seconds > 0
    plain = grown(block_offers(block, root, None, 3, side))
    assert isinstance(block_offers(block, root, None, 3, side), BlockOffers)
    assert plain.tree.tokens[2] == plain.tree.tokens[3]  # the marginal: both siblings' children the same
    assert plain.head_calls == 0 and plain.head_seconds == 0.0


def test_the_head_offers_each_node_at_its_own_depth():
    """The node expanded at level l gets the block's depth l + 1 with its own token (depth biases by row)."""
    head = shifting_head(10, 4)
    biased = ConditionalHead(**(head.tensors() | {"depth_bias": torch.full((4, 10), 0.5)}))
    offers = ConditionalOffers(torch.randn(4, 10), biased, 2, 10, None)
    nodes = [Candidate(-1, 3, 0.5, 0.5), Candidate(-1, 8, 0.4, 0.4)]
    offered = offers.offer(2, nodes, [0, 1])
    assert [o[0][0] for o in offered] == [4, 9] and offers.head_calls == 1


def head_draft(tiny_root: Path, where: Path, declared, head: ConditionalHead | None = None) -> str:
    """A copy of the family's tiny one-pass draft with `declared` as its head's declaration (and `head` saved)."""
    folder = where / "head-draft"
    if not folder.exists():
        shutil.copytree(tiny_folder(tiny_root, FAMILY, "one-pass"), folder)
    if head is not None:
        head.save(folder / HEAD_FILE)
    config = json.loads((folder / "config.json").read_text())
    config[ONE_PASS_KEY][HEAD_KEY] = declared
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def draft_rows(tiny_root: Path) -> int:
    """The tiny one-pass draft's token table (its input embedding's rows)."""
    draft = tiny_pair(str(tiny_root), FAMILY, "one-pass").draft
    return int(draft.model.get_input_embeddings().weight.shape[0])


@pytest.fixture(scope="module")
def head_pair(tiny_root, tmp_path_factory):
    """The family's tiny target and its one-pass draft with a random head declared and saved beside it."""
    where = tmp_path_factory.mktemp("head")
    rows = draft_rows(tiny_root)
    folder = head_draft(tiny_root, where, HEAD_FILE, random_head(rows, ONE_PASS_BLOCK))
    return load_pair(tiny_folder(tiny_root, FAMILY, "target"), folder, "cpu", "float32")


def test_a_declared_head_loads_with_its_draft(head_pair, tiny_root):
    one_pass = head_pair.draft.one_pass
    assert one_pass is not None and one_pass.head is not None
    assert one_pass.block_size == ONE_PASS_BLOCK and one_pass.head.vocab == head_pair.draft.vocab_size
    plain = tiny_pair(str(tiny_root), FAMILY, "one-pass")
    assert plain.draft.one_pass is not None and plain.draft.one_pass.head is None


@pytest.mark.parametrize(
    ("declared", "tensors", "words"),
    [
        (7, None, "not the name of a .safetensors file"),
        ("head.bin", None, "not the name of a .safetensors file"),
        ("sub/conditional_head.safetensors", None, "not the name of a .safetensors file"),
        ("absent.safetensors", None, "is not beside its config"),
        (HEAD_FILE, "garbage", "cannot be read"),
        (HEAD_FILE, "other vocabulary", "tokens, not the draft's"),
        (HEAD_FILE, "shallow", "fewer than the block's"),
        (HEAD_FILE, "no w_out", "lacks the tensors w_out"),
        (HEAD_FILE, "contradicting", "contradict"),
    ],
)
def test_a_malformed_head_is_refused_in_one_sentence(tiny_root, tmp_path, declared, tensors, words):
    rows = draft_rows(tiny_root)
    folder = Path(head_draft(tiny_root, tmp_path, declared))
    good = new_head(rows, ONE_PASS_BLOCK).tensors()
    broken = {
        "other vocabulary": new_head(rows + 1, ONE_PASS_BLOCK).tensors(),
        "shallow": new_head(rows, ONE_PASS_BLOCK - 1).tensors(),
        "no w_out": {k: v for k, v in good.items() if k != "w_out"},
        "contradicting": good | {"b_out": torch.zeros(rows + 2)},
    }
    if tensors == "garbage":
        (folder / HEAD_FILE).write_bytes(b"not a safetensors file")
    elif tensors is not None:
        from safetensors.torch import save_file

        save_file(broken[tensors], str(folder / HEAD_FILE))
    with pytest.raises(ModelLoadError, match="declares a conditional head") as caught:
        load_pair(tiny_folder(tiny_root, FAMILY, "target"), str(folder), "cpu", "float32")
    assert words in str(caught.value) and "\n" not in str(caught.value)


def trees(run) -> list[tuple[int, ...]]:
    return [r.tree_tokens for r in run.records if r.phase == "decode"]


def test_every_method_is_lossless_with_the_head_in_one_draft_forward_a_round(head_pair, tiny_root, image, video):
    plain = tiny_pair(str(tiny_root), FAMILY, "one-pass")
    changed: Counter[str] = Counter()
    for media in (image, video):
        expected = greedy_answer(str(tiny_root), FAMILY, media.kind, PROMPTS[0], 20)
        for method in (m for m in method_names() if m != "ar"):
            with pytest.MonkeyPatch.context() as patch:
                head_calls: Counter[str] = Counter()
                real_offer = ConditionalOffers.offer

                def offer(self, *args, _real=real_offer, _calls=head_calls):
                    _calls["calls"] += 1
                    return _real(self, *args)

                patch.setattr(ConditionalOffers, "offer", offer)
                run, summary, calls = draft_calls_per_record(head_pair, media, PROMPTS[0], DecodeConfig(method, 20))
            assert summary.token_ids == expected, (method, media.kind)
            rounds = [r for r in run.records if r.phase == "decode"]
            assert [r.draft_forwards for r in rounds] == [1] * len(rounds), method
            assert [calls[r.round] for r in rounds] == [1] * len(rounds), method  # the model's own calls
            assert head_calls["calls"] > 0 or max(r.depth for r in rounds) <= 1, method
            without = decode(plain, media, PROMPTS[0], DecodeConfig(method, 20))
            assert without.run_to_end().token_ids == expected
            changed[method] += trees(run) != trees(without)
    assert sum(changed.values()) > 0, "the head changed some method's trees"


def test_sampling_with_the_head_is_seeded_and_its_rounds_are_one_forward(head_pair, image):
    """Under sampling each node's distribution from the head is its proposal (the verifier reads the same)."""
    from sage_core.config import SamplingConfig

    for method in ("sage", "chain", "static"):
        config = DecodeConfig(method, 12, sampling=SamplingConfig(temperature=1.0, seed=3))
        first, second = (decode(head_pair, image, PROMPTS[0], config) for _ in range(2))
        assert first.run_to_end().token_ids == second.run_to_end().token_ids, method
        assert {r.draft_forwards for r in first.records if r.phase == "decode"} == {1}, method
