"""References the tests compare the project's outputs with, each computed another way: a tree forward
against plain step-by-step decoding, the transformers entry point against plain `generate`, sampled
runs against the target's exact distribution (chi-square), and a round record of a known shape."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from sage_core.config import SamplingConfig
from sage_core.media import Media
from sage_core.models import VLM, KVState, ModelPair
from sage_core.records import RoundRecord
from sage_core.sampling import Warper
from sage_core.trees import Tree

ROOT = Path(__file__).resolve().parent.parent  # the checkout

# -- tree attention ----------------------------------------------------------------------------

# root -> 0 -> 2 -> 5
#      -> 1 -> 3
#           -> 4 -> 6
TREE = Tree(tokens=(40, 41, 42, 43, 44, 45, 46), parents=(-1, -1, 0, 1, 1, 2, 4), draft_probs=(0.5,) * 7)
ROOT_TOKEN = 39


def tree_logits(
    vlm: VLM, state: KVState, tree: Tree, parents: Sequence[int] | None = None, depths: Sequence[int] | None = None
) -> torch.Tensor:
    """The tree forward decoding runs (`extend` with parent indices) over [root, *nodes]
    (optionally with broken parents or positions)."""
    start = state.committed
    depths = tree.depths if depths is None else depths
    if parents is None:
        parents = [-1] + [1 + p for p in tree.parents]
    return vlm.extend(state, [ROOT_TOKEN, *tree.tokens], [start] + [start + d for d in depths], parents=parents)


def path_logits(vlm: VLM, inputs: Mapping[str, Any], path_tokens: Sequence[int]) -> torch.Tensor:
    """Plain step-by-step decoding with the model's own positions and causal mask: the logits after the
    prompt and `path_tokens`."""
    from transformers import DynamicCache

    cache = DynamicCache(config=vlm.model.config)
    with torch.no_grad():
        logits = vlm.model(**inputs, **{vlm.cache_keyword: cache}, use_cache=True).logits[0, -1]
        for token in path_tokens:  # no mask: causal; positions from the cache length (+ rope_deltas)
            step = vlm.model(input_ids=torch.tensor([[token]]), **{vlm.cache_keyword: cache}, use_cache=True)
            logits = step.logits[0, -1]
    return logits


# -- transformers' entry point (custom_generate/) ----------------------------------------------

ENTRY_MAX_NEW = 24


def through_entry(pair: ModelPair, inputs: Mapping[str, Any], **settings: object) -> torch.Tensor:
    """The target's `generate(custom_generate=<this checkout>, assistant_model=<the draft>)`."""
    settings = {"do_sample": False, "max_new_tokens": ENTRY_MAX_NEW, **settings}
    with torch.no_grad():
        return pair.target.model.generate(
            **inputs, assistant_model=pair.draft.model, custom_generate=str(ROOT), trust_remote_code=True, **settings
        )


def plain(pair: ModelPair, inputs: Mapping[str, Any]) -> torch.Tensor:
    """The target's own greedy `generate`, as transformers runs it."""
    with torch.no_grad():
        return pair.target.model.generate(**inputs, do_sample=False, max_new_tokens=ENTRY_MAX_NEW)


# -- sampling: the exact distribution and the chi-square test -------------------------------------

ALPHA = 1e-4  # a sampling test fails when its p-value is below this
SAMPLING_PROMPT = "What colour is it?"
DECODE_SETTINGS: dict[str, Any] = {"temperature": 0.8, "top_k": 4, "top_p": 0.95}
Tokens = tuple[int, ...]


def chi_square_p_value(counts: Counter[Tokens], probs: Mapping[Tokens, float]) -> float:
    """p-value of the counts under the exact distribution `probs` (chi-square, small cells pooled)."""
    if any(probs.get(outcome, 0.0) <= 0.0 for outcome in counts):
        return 0.0  # an outcome of probability 0 was produced
    n = sum(counts.values())
    cells = sorted((p, outcome) for outcome, p in probs.items() if p > 0)[::-1]
    observed = [float(counts[o]) for p, o in cells if p * n >= 5]
    expected = [p * n for p, o in cells if p * n >= 5]
    rest_observed = sum(counts[o] for p, o in cells if p * n < 5)
    rest_expected = sum(p * n for p, o in cells if p * n < 5)
    if rest_expected >= 5:
        observed.append(rest_observed)
        expected.append(rest_expected)
    else:  # too small to be a cell of its own
        observed[-1] += rest_observed
        expected[-1] += rest_expected
    assert len(observed) >= 3, "too few cells for a meaningful test"
    statistic = sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))
    dof = torch.tensor((len(observed) - 1) / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(dof, torch.tensor(statistic / 2, dtype=torch.float64)))


def full_forward_logits(pair: ModelPair, media: Media, tokens: Tokens, prompt: str = SAMPLING_PROMPT) -> torch.Tensor:
    """The target's logits after prompt + tokens, by one plain forward of the whole sequence (no cache)."""
    inputs = dict(pair.target.prepare(media, prompt))
    extra = torch.tensor([tokens], dtype=torch.long)
    for key in ("input_ids", "attention_mask", "mm_token_type_ids", "token_type_ids"):  # those the family has
        if key in inputs:
            tail = extra if key == "input_ids" else (torch.ones_like(extra) if key == "attention_mask" else 0 * extra)
            inputs[key] = torch.cat((inputs[key], tail), dim=1)
    with torch.no_grad():
        return pair.target.model(**inputs).logits[0, -1].float()


def target_sampling_distribution(pair: ModelPair, media: Media, steps: int) -> dict[Tokens, float]:
    """The exact distribution of the target's first `steps` sampled tokens (a sequence ends early at eos),
    under DECODE_SETTINGS, after SAMPLING_PROMPT."""
    warp = Warper(SamplingConfig(**DECODE_SETTINGS))
    eos = set(pair.target.eos_token_ids)
    done: dict[Tokens, float] = {}
    frontier: dict[Tokens, float] = {(): 1.0}
    for _ in range(steps):
        grown: dict[Tokens, float] = {}
        for prefix, mass in frontier.items():
            probs = torch.softmax(warp(full_forward_logits(pair, media, prefix)), dim=-1)[0].double()
            for token in probs.nonzero().flatten().tolist():
                (done if token in eos else grown)[(*prefix, token)] = mass * float(probs[token])
        frontier = grown
    return {**done, **frontier}


# -- records and scripts ----------------------------------------------------------------------------


def chain_record(step: int, alpha: float | None, entropy: float | None, accepted: int) -> RoundRecord:
    """A SAGE round (the prefill when `step` is 0) whose tree is a chain of `accepted` nodes, all accepted."""
    tokens = tuple(range(10, 10 + accepted))
    return RoundRecord(
        method="sage",
        round=step,
        phase="decode" if step else "prefill",
        tree_tokens=tokens,
        tree_parents=tuple(range(-1, accepted - 1)),
        tree_draft_probs=(0.5,) * accepted,
        entropy=entropy,
        alpha=alpha,
        depth_max=8,
        planned_depth=5,
        planned_width=3,
        accepted_nodes=tuple(range(accepted)),
        accepted_tokens=tokens,
        bonus_token=1,
        new_tokens=(*tokens, 1),
        new_token_texts=("x",) * (accepted + 1),
        draft_seconds=0.0,
        verify_seconds=0.0,
        round_seconds=0.0,
        total_tokens=0,
        total_seconds=0.0,
    )


def load_script(name: str) -> ModuleType:
    """scripts/<name>.py as a module (registered under its name: its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def files_naming(name: str) -> list[str]:
    """The checkout's files (tracked or not, but not ignored) that name `name`: what a seam test's toy needed."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    return sorted(
        path for path in listed if (ROOT / path).is_file() and name in (ROOT / path).read_text(errors="ignore")
    )
