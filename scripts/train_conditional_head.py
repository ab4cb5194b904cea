"""Distil a one-pass draft's conditional head (sage_core/models/conditional_head.py) from the frozen built-in pair.

    nice -n 10 python scripts/train_conditional_head.py record                   # the data (resumable)
    nice -n 10 python scripts/train_conditional_head.py train --out /tmp/conditional-head   # the head (resumable)
    nice -n 10 python scripts/train_conditional_head.py measure                  # with and without, fresh scenes

Neither model is retrained. Three steps, each resumable from `--work` (default /tmp/conditional-head):

- record: sage_world training scenes (a seed the studies never use; the long kinds most often, hand-drawn ones,
  rows and the short kinds too); per scene the target's greedy answer y_0 .. y_{T-1} (plain decoding), the
  target's log-probabilities along it (teacher-forced: its soft labels), and at every round start t the
  one-pass draft's block after y_0 .. y_t (`drafting.draft_block`, exactly as a round drafts it: every cut);
  saved in shards of 50 scenes (float16).
- train: the head reads depth d's block logits and the token at d - 1 (teacher-forced: y_{t+d-1}) for d = 2 .. K
  (depth 1 read the root itself) and is trained with 0.5 cross-entropy on y_{t+d} + 0.5 KL(target || head),
  each depth weighted by the running estimate of the chance its prefix survives (a chain from the head's
  top-1 accepts depths 1 .. d - 1: PARD-2 / D-PACE), not a fixed schedule. Adam, checkpoints every minute.
- measure: fresh scenes of each kind (depth_study's seed 424242; hand-drawn 424243), per depth the top-1
  agreement and how often a chain reaches depth d, with the head and without (the block's marginals).

`--out DIR` (train) saves `conditional_head.safetensors` there; declaring it in a one-pass draft's config
(`one_pass_draft.conditional_head`) is what makes a draft use it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch
import torch.nn.functional as F

from sage_core import load_pair
from sage_core.backends import open_backend
from sage_core.drafting import draft_block, feed_chain
from sage_core.models import ModelPair
from sage_core.models.conditional_head import ConditionalHead, load_head, new_head
from sage_core.models.loading import BUILTIN_ONE_PASS_DRAFT
from sage_core.prepared import prepare_inputs, with_draft_inputs
from sage_core.studies.depth_rules import target_answer
from sage_world.quality import example_media
from sage_world.scenes import HAND_DRAWN, KINDS, ROW_KIND, Example, make_example

HEAD_FILE = "conditional_head.safetensors"
SHARD = 50
#: The training scenes' kinds and their shares ("hand" = a hand-drawn description; the rest as drawn).
MIX = {"describe": 0.22, "chart": 0.14, "narrate": 0.14, ROW_KIND: 0.12, "hand": 0.12, "short": 0.26}
SHORT_KINDS = tuple(k for k in KINDS if k not in ("describe", "chart", "narrate"))
STUDY_SEED = 424242  # scripts/depth_study.py's fresh scenes (and + 1: its hand-drawn ones)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- record ----------------------------------------------------------------------------------------------------


def training_scene(rng: random.Random) -> Example:
    kind = rng.choices(list(MIX), list(MIX.values()))[0]
    if kind == "hand":
        return make_example(rng, "describe", HAND_DRAWN)
    if kind == "short":
        return make_example(rng, rng.choice(SHORT_KINDS))
    return make_example(rng, kind)


def record_scene(pair: ModelPair, example: Example, max_new: int) -> dict[str, torch.Tensor] | None:
    """The target's answer, its log-probabilities along it and the draft's block at every round start."""
    media = example_media(example)
    tokens = list(target_answer(pair, media, example.question, max_new))
    if len(tokens) < 3:
        return None
    prepared = with_draft_inputs(pair, prepare_inputs(pair, media, example.question, with_draft=True))
    assert prepared.draft is not None and pair.draft.one_pass is not None
    one_pass = pair.draft.one_pass
    target = open_backend(pair.target, "fast")
    state = target.prefill(prepared.target, len(tokens) + 8).state
    target_logp = F.log_softmax(
        feed_chain(target, state, tokens[:-1], len(tokens) - 1).float(), -1
    )  # row j predicts y_{j+1}
    draft = open_backend(pair.draft, "fast", draft=True)
    state = draft.prefill(prepared.draft, len(tokens) + one_pass.block_size + 8).state
    blocks = torch.stack([draft_block(draft, state, [token], one_pass) for token in tokens[:-1]])
    return {
        "tokens": torch.tensor(tokens),
        "target_logp": target_logp.half(),
        "blocks": blocks.half(),  # [T - 1, K, V]: round start t's depths 1 .. K
    }


def record(args: argparse.Namespace) -> None:
    pair = load_pair(args.target, args.draft, "cpu", "float32")
    rng = random.Random(args.seed)
    scenes = [training_scene(rng) for _ in range(args.examples)]
    started = time.perf_counter()
    with torch.inference_mode():
        for first in range(0, len(scenes), SHARD):
            path = args.work / f"data-{first // SHARD:04d}.pt"
            if path.exists():
                continue
            rows = [record_scene(pair, e, args.max_new_tokens) for e in scenes[first : first + SHARD]]
            kinds = [e.kind for e in scenes[first : first + SHARD]]
            torch.save({"rows": [r for r in rows if r is not None], "kinds": kinds}, path)
            log(f"recorded {first + SHARD} / {len(scenes)} scenes in {time.perf_counter() - started:.0f} s")


# -- train -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Samples:
    """Every (round start, depth) pair of the recorded scenes, depths 1 .. K per round start, flattened: the
    block's logits, the previous token (teacher-forced), the depth, the label and the target's log-probs."""

    logits: torch.Tensor  # [N, K, V] float16
    tokens: torch.Tensor  # [N, K + 1]: y_t .. y_{t+K} (-1 past the answer's end)
    target_logp: torch.Tensor  # [N, K, V] float16 (zeros past the end)

    @property
    def size(self) -> int:
        return int(self.logits.shape[0])


def scene_samples(row: dict[str, torch.Tensor], depths: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    tokens, blocks, logp = row["tokens"], row["blocks"], row["target_logp"]
    starts, vocab = blocks.shape[0], blocks.shape[-1]
    padded = torch.cat((tokens, torch.full((depths,), -1)))
    windows = torch.stack([padded[t : t + depths + 1] for t in range(starts)])
    logp_padded = torch.cat((logp, torch.zeros(depths, vocab, dtype=logp.dtype)))
    target = torch.stack([logp_padded[t : t + depths] for t in range(starts)])
    return blocks[:, :depths], windows, target


def load_samples(work: Path, depths: int) -> Samples:
    parts = [scene_samples(r, depths) for p in sorted(work.glob("data-*.pt")) for r in torch.load(p)["rows"]]
    return Samples(*(torch.cat([p[i] for p in parts]) for i in range(3)))


def head_losses(head: ConditionalHead, batch: Samples) -> tuple[torch.Tensor, torch.Tensor]:
    """Per (row, depth 2 .. K): the loss (0.5 CE + 0.5 KL to the target) and whether the head's top-1 is right."""
    rows, depths, vocab = batch.logits.shape
    logits = batch.logits[:, 1:].reshape(-1, vocab)
    prev = batch.tokens[:, 1:depths].clamp(min=0).reshape(-1)
    depth = torch.arange(2, depths + 1).repeat(rows)
    out = head.apply(logits, prev, depth)
    label = batch.tokens[:, 2:].reshape(-1)
    target = batch.target_logp[:, 1:].reshape(-1, vocab).float()
    ce = F.cross_entropy(out, label.clamp(min=0), reduction="none")
    kl = F.kl_div(F.log_softmax(out, -1), target, log_target=True, reduction="none").sum(-1)
    hit = out.argmax(-1) == label
    return (0.5 * ce + 0.5 * kl).view(rows, depths - 1), hit.view(rows, depths - 1)


def survival(batch: Samples, hits: torch.Tensor) -> torch.Tensor:
    """Per depth 1 .. K: the share of rows whose chain accepts every depth up to it (past the end: not counted)."""
    first = (batch.logits[:, 0].float().argmax(-1) == batch.tokens[:, 1])[:, None]
    chain = torch.cat((first, hits), dim=1).cumprod(dim=1).float()
    valid = (batch.tokens[:, 1:] >= 0).float()
    return (chain * valid).sum(0) / valid.sum(0).clamp(min=1)


def train_step(head, params, opt, batch: Samples, reach: torch.Tensor) -> tuple[float, torch.Tensor]:
    """One step, each depth d weighted by the running chance its prefix survives (`reach` at d - 1)."""
    loss, hits = head_losses(head, batch)
    valid = (batch.tokens[:, 2:] >= 0).float()
    weights = reach[:-1].clamp(min=0.05)[None, :] * valid
    total = (loss * weights).sum() / weights.sum()
    opt.zero_grad(set_to_none=True)
    total.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return float(total.detach()), survival(batch, hits.detach())


def train(args: argparse.Namespace) -> None:
    samples = load_samples(args.work, args.depths)
    held = max(1, samples.size // 20)
    order = torch.randperm(samples.size, generator=torch.Generator().manual_seed(1))
    val, fit = order[:held], order[held:]
    log(f"{samples.size} round starts ({fit.numel()} to fit, {held} held out), depths 2 .. {args.depths}")
    checkpoint = args.work / "head-checkpoint.pt"
    state = torch.load(checkpoint) if checkpoint.exists() else None
    head = ConditionalHead(**state["head"]) if state else new_head(samples.logits.shape[-1], args.depths)
    params = [t.requires_grad_() for t in head.tensors().values()]
    opt = torch.optim.Adam(params, lr=args.lr)
    step, reach, spent = (state["step"], state["reach"], state["spent"]) if state else (0, torch.ones(args.depths), 0.0)
    if state:
        opt.load_state_dict(state["opt"])
    log(f"head: {head.parameters} parameters; from step {step}")
    rng = torch.Generator().manual_seed(step + 2)
    started, saved = time.perf_counter() - spent, time.perf_counter()
    while time.perf_counter() - started < args.minutes * 60:
        frac = (time.perf_counter() - started) / (args.minutes * 60)
        for group in opt.param_groups:
            group["lr"] = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        rows = fit[torch.randint(fit.numel(), (args.batch,), generator=rng)]
        loss, batch_reach = train_step(head, params, opt, subset(samples, rows), reach)
        reach = 0.95 * reach + 0.05 * batch_reach
        step += 1
        if step % 100 == 0:
            log(f"step {step} loss {loss:.4f} reach {' '.join(f'{r:.2f}' for r in reach.tolist())}")
        if time.perf_counter() - saved > 60:
            save_checkpoint(checkpoint, head, opt, step, reach, time.perf_counter() - started)
            saved = time.perf_counter()
    save_checkpoint(checkpoint, head, opt, step, reach, time.perf_counter() - started)
    report_held_out(head, subset(samples, val))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        head.save(args.out / HEAD_FILE)
        log(f"saved {args.out / HEAD_FILE}")


def subset(samples: Samples, rows: torch.Tensor) -> Samples:
    return Samples(samples.logits[rows], samples.tokens[rows], samples.target_logp[rows])


def save_checkpoint(path: Path, head: ConditionalHead, opt, step: int, reach: torch.Tensor, spent: float) -> None:
    tensors = {k: v.detach().clone() for k, v in head.tensors().items()}
    torch.save({"head": tensors, "opt": opt.state_dict(), "step": step, "reach": reach, "spent": spent}, path)


@torch.no_grad()
def report_held_out(head: ConditionalHead, val: Samples) -> None:
    _, hits = head_losses(head, val)
    valid = (val.tokens[:, 2:] >= 0).float()
    marginal = (val.logits[:, 1:].float().argmax(-1) == val.tokens[:, 2:]).float()
    with_head = (hits.float() * valid).sum(0) / valid.sum(0)
    without = (marginal * valid).sum(0) / valid.sum(0)
    log("held-out round starts, top-1 right per depth 2 ..: head " + " ".join(f"{v:.3f}" for v in with_head))
    log("                                           marginal " + " ".join(f"{v:.3f}" for v in without))


# -- measure ---------------------------------------------------------------------------------------------------


def study_groups(n: int, held_out: int) -> dict[str, list[Example]]:
    """depth_study's fresh scenes per kind and its hand-drawn ones (the same seeds and order)."""
    from sage_world.scenes import LONG_KINDS, make_examples

    kinds = (*LONG_KINDS, ROW_KIND)
    fresh = make_examples(STUDY_SEED, n * len(kinds), kinds=kinds)
    groups = {kind: [e for e in fresh if e.kind == kind] for kind in kinds}
    groups["hand-drawn (held out)"] = make_examples(STUDY_SEED + 1, held_out, kinds=("describe",), style=HAND_DRAWN)
    return groups


def token_ranks(row: dict[str, torch.Tensor], head: ConditionalHead | None, depths: int) -> torch.Tensor:
    """[round starts, depths] the target's token's rank at depth d (0: the top; -1: past the end), the head's
    read along the target's answer (a chain's own tokens up to its first miss; an accepted node's children)."""
    blocks, windows, _ = scene_samples(row, depths)
    scores = blocks.float()
    if head is not None:
        rows = blocks.shape[0]
        prev = windows[:, 1:depths].clamp(min=0).reshape(-1)
        out = head.apply(blocks[:, 1:].reshape(-1, blocks.shape[-1]), prev, torch.arange(2, depths + 1).repeat(rows))
        scores = torch.cat((scores[:, :1], out.view(rows, depths - 1, -1)), dim=1)
    labels = windows[:, 1:]
    ranks = (scores > scores.gather(2, labels.clamp(min=0)[..., None])).sum(-1)
    return torch.where(labels >= 0, ranks, torch.full_like(ranks, -1))


def per_depth(ranks: torch.Tensor, width: int = 1) -> tuple[list[float], list[float]]:
    """The target's token among the top `width` at depth d, and at every depth up to d (width 1: a chain
    accepting at least d; width 2: a tree giving each accepted node two children), over the round starts
    that reach d."""
    valid = ranks >= 0
    right = (valid & (ranks < width)).float()
    chain = right.cumprod(dim=1)
    seen = valid.float().sum(0).clamp(min=1)
    return ((right * valid).sum(0) / seen).tolist(), ((chain * valid).sum(0) / seen).tolist()


def measure(args: argparse.Namespace) -> None:
    pair = load_pair(args.target, args.draft, "cpu", "float32")
    head = load_head(args.head, pair.draft.vocab_size, args.depths)
    if isinstance(head, str):
        raise SystemExit(f"{args.head}: {head}")
    figures: dict[str, dict[str, list[float]]] = {}
    with torch.inference_mode():
        for group, examples in study_groups(args.n, args.held_out).items():
            rows = [r for e in examples if (r := record_scene(pair, e, args.max_new_tokens)) is not None]
            for name, used in (("without", None), ("with", head)):
                ranks = torch.cat([token_ranks(r, used, args.depths) for r in rows])
                right, chain = per_depth(ranks)
                in_two, tree = per_depth(ranks, 2)
                figures[f"{group}, {name} the head"] = {"right": right, "chain": chain, "top2": in_two, "tree2": tree}
                log(f"{group:24} {name:7} " + " ".join(f"{a:.2f}/{c:.2f}" for a, c in zip(right, chain, strict=True)))
                log(f"{'':24} {'top-2':7} " + " ".join(f"{a:.2f}/{c:.2f}" for a, c in zip(in_two, tree, strict=True)))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")


# -- command line ----------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("record", "train", "measure"))
    parser.add_argument("--target", default="builtin")
    parser.add_argument("--draft", default=str(BUILTIN_ONE_PASS_DRAFT))
    parser.add_argument("--work", type=Path, default=Path("/tmp/conditional-head"))
    parser.add_argument("--examples", type=int, default=1200, help="training scenes to record")
    parser.add_argument("--seed", type=int, default=66066, help="the training scenes' seed")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--depths", type=int, default=10, help="the block's depths the head is trained for")
    parser.add_argument("--minutes", type=float, default=6.0, help="training time")
    parser.add_argument("--batch", type=int, default=256, help="round starts a step (each with every depth)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--out", type=Path, help="train: save the head here")
    parser.add_argument("--head", type=Path, default=Path("/tmp/conditional-head") / HEAD_FILE, help="measure")
    parser.add_argument("--n", type=int, default=24, help="measure: fresh scenes a kind")
    parser.add_argument("--held-out", type=int, default=24, help="measure: hand-drawn scenes")
    parser.add_argument("--json", type=Path, help="measure: write the figures here")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.examples < 1 or args.depths < 2 or args.minutes <= 0 or args.batch < 1:
        parser.error("--examples and --batch must be at least 1, --depths at least 2, --minutes above 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    {"record": record, "train": train, "measure": measure}[args.step](args)


if __name__ == "__main__":
    main()
