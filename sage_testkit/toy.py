"""A model-free pair that drives the real decode loop (`DecodeRun`) in milliseconds.

In the manner of nanochat's engine tests (a mock model behind the real engine): a `ToyModel` stands
where a `VLM` does and answers the loop's calls (`prepare`, `prefill`, `extend`, `commit`) with
logits that are a function of the prefix alone, the prompt and every token before, so its greedy
answer (`toy_greedy`) is known without the loop, and every method's output can be checked against it.
The draft is the target's function plus `noise` times another one: 0 agrees always, about 1 often,
large values hardly ever. It keeps the tokens it has read as the cache would, and checks what the
loop tells it: each new entry's position and parent, and that a commit keeps scratch entries in
their order; a loop that fed it a wrong prefix would get other logits, and other tokens out.

It has no visual tokens, no pruning hooks and no recurrent state; the loop's "fast" backend takes it
as it is (the other backends wrap transformers' models).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from PIL import Image

from sage_core.backends import Prefilled
from sage_core.media import Media, image_media
from sage_core.models import KVState, ModelPair

EOS = 0  # the toy vocabulary's end-of-sequence token
CONTEXT = 4  # the logits read this many last tokens of the prefix
SCALE = 3.0  # the spread of the logits: a clear favourite at most steps, a close second at some


class ToyTokenizer:
    """Token i reads " t{i}" (the end-of-sequence token: nothing, as a special token skipped)."""

    unk_token = None

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def get_vocab(self) -> dict[str, int]:
        return {f"t{i}": i for i in range(self.size)}

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return "".join(f" t{i}" for i in ids if not (skip_special_tokens and i == EOS))

    def encode(self, text: str) -> list[int]:
        """A prompt's tokens: its bytes, folded into the vocabulary (never the end-of-sequence token)."""
        return [1 + byte % (self.size - 1) for byte in text.encode("utf-8")]


@dataclass
class ToyCache:
    """What the toy model has read: the committed tokens and the scratch entries (token, parent), a
    parent being another scratch entry's index or -1 (the last committed token)."""

    committed: list[int]
    scratch: list[tuple[int, int]] = field(default_factory=list)

    def prefix(self, entry: int) -> list[int]:
        """The tokens scratch entry `entry` reads: the committed ones, then its ancestors and itself."""
        path = []
        while entry >= 0:
            token, parent = self.scratch[entry]
            path.append(token)
            entry = parent
        return self.committed + path[::-1]


def toy_logits(prefix: Sequence[int], vocab: int, salt: int = 0) -> torch.Tensor:
    """Deterministic logits after `prefix` (its last CONTEXT tokens), (vocab,) float32."""
    seed = hash((salt, *prefix[-CONTEXT:])) & 0x7FFF_FFFF
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(vocab, generator=generator) * SCALE


class ToyWeights:
    """Where a VLM has its transformers model: what `max_positions` reads of it, and the (weakly held)
    key of the loop's cost memo (sage-cost)."""

    def __init__(self) -> None:
        text_config = SimpleNamespace(max_position_embeddings=4096)
        self.config = SimpleNamespace(get_text_config=lambda: text_config)


class ToyModel:
    """A stand-in for `VLM` on the loop's "fast" backend (see the module docstring)."""

    family = "toy"
    control_tokens: tuple[str, ...] = ()
    eos_token_ids = (EOS,)
    dtype = torch.float32

    def __init__(self, name: str, vocab_size: int, noise: float = 0.0, tokenizer: ToyTokenizer | None = None) -> None:
        self.name = name
        self.vocab_size = vocab_size
        self.noise = noise
        self.tokenizer = tokenizer or ToyTokenizer(vocab_size)
        self.device = torch.device("cpu")
        self.devices = (self.device,)
        self.spec = SimpleNamespace(prunable=False, video=True, recurrent=False)
        self.model = ToyWeights()
        self.forwards = 0  # prefills and extends, counted

    def logits(self, prefix: Sequence[int]) -> torch.Tensor:
        """This model's logits after `prefix`: the target's function, plus `noise` times another."""
        logits = toy_logits(prefix, self.vocab_size)
        if self.noise:
            logits = logits + self.noise * toy_logits(prefix, self.vocab_size, salt=1)
        return logits

    # -- what the loop calls -------------------------------------------------

    def prepare(self, media: Media, prompt: str) -> dict[str, Any]:
        return {"input_ids": torch.tensor([self.tokenizer.encode(prompt)])}

    def visual_positions(self, inputs: Mapping[str, Any]) -> torch.Tensor:
        return torch.zeros(0, dtype=torch.long)

    def prefill(self, inputs: Mapping[str, Any], reserve: int = 256, **options: Any) -> Prefilled:
        """The backends' one prefill (the toy neither scores nor prunes its visual tokens: it has none)."""
        assert not any(options.values()), "the toy neither scores nor prunes"
        tokens = [int(t) for t in inputs["input_ids"][0]]
        self.forwards += 1
        state = KVState(cache=ToyCache(tokens), committed=len(tokens), position_offset=0)  # type: ignore[arg-type]  # the toy's own cache
        return Prefilled(state, self.logits(tokens))

    def extend(
        self, state: KVState, tokens: Sequence[int], positions: Sequence[int], *, parents: Sequence[int]
    ) -> torch.Tensor:
        cache = _cache(state)
        rows = []
        for token, position, parent in zip(tokens, positions, parents, strict=True):
            assert -1 <= parent < len(cache.scratch), (parent, len(cache.scratch))
            cache.scratch.append((int(token), parent))
            prefix = cache.prefix(len(cache.scratch) - 1)
            assert position == len(prefix) - 1, (position, len(prefix))  # where the entry sits in the sequence
            rows.append(self.logits(prefix))
        state.scratch = len(cache.scratch)
        self.forwards += 1
        return torch.stack(rows)

    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        cache = _cache(state)
        keep = list(keep)
        for before, entry in zip([-1, *keep], keep, strict=False):
            assert cache.scratch[entry][1] == before, (keep, cache.scratch)  # a path, each entry after its parent
        cache.committed += [cache.scratch[entry][0] for entry in keep]
        cache.scratch.clear()
        state.committed, state.scratch = len(cache.committed), 0


def _cache(state: KVState) -> ToyCache:
    cache: object = state.cache
    assert isinstance(cache, ToyCache)
    return cache


def toy_pair(noise: float = 1.0, vocab_size: int = 48, draft_vocab_size: int | None = None) -> ModelPair:
    """A toy target and a toy draft `noise` away from it (`draft_vocab_size`: a padded draft vocabulary)."""
    tokenizer = ToyTokenizer(vocab_size)
    target = ToyModel("toy-target", vocab_size, tokenizer=tokenizer)
    draft = ToyModel(f"toy-draft-{noise}", draft_vocab_size or vocab_size, noise, tokenizer=tokenizer)
    return ModelPair(target, draft, inputs_alike=True)  # type: ignore[arg-type]  # toys where VLMs go


def toy_greedy(model: ToyModel, prompt: str, max_new_tokens: int) -> list[int]:
    """The model's greedy answer, without the loop: argmax after each prefix, to the end token or the limit."""
    prefix = model.tokenizer.encode(prompt)
    out: list[int] = []
    while len(out) < max_new_tokens:
        token = int(model.logits(prefix + out)[: len(model.tokenizer)].argmax())
        out.append(token)
        if token == EOS:
            break
    return out


def toy_media() -> Media:
    """A picture for the run's header (the toy reads no pixels)."""
    return image_media(Image.fromarray(np.zeros((8, 8, 3), dtype="uint8")), "toy.png")
