"""Distil the one-pass draft's second version: the shipped draft taught to read the target's own features (PARD-2).

    nice -n 10 python scripts/train_target_features.py train --work /work/tmp66 --minutes 40   # resumable
    python scripts/train_target_features.py export --work /work/tmp66 --out /work/tmp66/draft   # a checkpoint's draft
    python scripts/train_target_features.py measure --draft /work/tmp66/draft --n 24 --held-out 24

The target is not retrained. The draft starts from the shipped one-pass draft (assets/builtin/one-pass-draft) and
its projection (sage_core/models/target_features.py) from zero, so it starts at today's figures. Each batch: the
target reads the real rows once (its logits the soft labels, the outputs of its layers `--layers` the features);
the draft reads PARD's masks after a random cut (two cuts a row) with the features of the position before each
real answer token added to its embeddings (0.02 x the projection; masks and prompt none), the features dropped
for 10 % of the rows (one checkpoint drafts with them or without). Loss: 0.5 cross-entropy + 0.5 KL(target ||
draft), each depth d of the block weighted by the running chance a chain survives depths 1 .. d - 1 (PARD-2,
D-PACE; scripts/train_conditional_head.py's weighting), depth 1 (every real answer position) weighted 1.
Checkpoints every two minutes in `--work`; `--out` saves the draft folder with the declaration in its config.

measure: the fresh scenes of scripts/train_conditional_head.py's measure (depth_study's seeds), per kind and depth
the top-1 agreement and how often a chain reaches depth d, features on and off (and `--baseline`'s draft), along
the target's greedy answer, each block drafted as a round drafts it (`drafting.draft_block`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch
import torch.nn.functional as F

from sage_core.models.target_features import (
    FEATURES_FILE,
    FEATURES_KEY,
    TargetFeatures,
    decoder_layers,
    hidden_width,
    load_features,
)

LAYERS = (1, 3, 5, 7)  # four of the target's eight text layers, the last among them (PARD-2: -1, -8, -16, -24)
BLOCK = 10
DROP = 0.1  # the share of rows trained without the features
ROOT = Path(__file__).resolve().parent.parent
BUILTIN = ROOT / "assets" / "builtin"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- train -------------------------------------------------------------------------------------------------------------


def cut_rows(ids: torch.Tensor, labels: torch.Tensor, block: int, rng: random.Random):
    """PARD's collator (scripts/train_builtin_pair.py `one_pass_block`) with each kept position's depth: the
    draft's ids, the positions that count [rows, length - 1], their depth (1: a real prefix position or the cut,
    d: the block's depth d) and the mask positions [rows, length]."""
    from scripts.train_builtin_pair import MASK_TOKEN_ID

    student = ids.clone()
    keep = torch.zeros(ids.shape[0], ids.shape[1] - 1, dtype=torch.bool)
    depth = torch.ones(ids.shape[0], ids.shape[1] - 1, dtype=torch.long)
    masked = torch.zeros_like(ids, dtype=torch.bool)
    cuts = [-1] * ids.shape[0]
    for r in range(ids.shape[0]):
        answer = (labels[r] != -100).nonzero().flatten().tolist()
        if not answer:
            continue
        first, last = answer[0], answer[-1]
        cut = cuts[r] = rng.randint(first - 1, last - 1)
        student[r, cut + 1 : cut + block] = MASK_TOKEN_ID
        masked[r, cut + 1 : cut + block] = True
        for p in range(first - 1, min(cut + block, last)):
            keep[r, p] = labels[r, p + 1] != -100
            depth[r, p] = max(1, p - cut + 1)
    return student, keep, depth, masked, cuts


def teacher_pass(target, enc, layers) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's logits and its layers' outputs concatenated [rows, length, len(layers) x width]."""
    found: dict[int, torch.Tensor] = {}
    handles = [
        decoder_layers(target.model.language_model)[i].register_forward_hook(
            lambda _m, _a, out, i=i: found.__setitem__(i, out[0] if isinstance(out, tuple) else out)
        )
        for i in layers
    ]
    try:
        with torch.no_grad():
            logits = target(**enc).logits
    finally:
        for handle in handles:
            handle.remove()
    return logits, torch.cat([found[i] for i in layers], dim=-1)


def shifted_features(features: torch.Tensor, labels: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """Each real answer token's features: the target's at the position before it (zero elsewhere)."""
    out = torch.zeros_like(features)
    out[:, 1:] = features[:, :-1]
    wanted = (labels != -100) & ~masked
    return out * wanted[..., None]


def batch_loss(draft, proj, target, enc, labels, reach: torch.Tensor, rng: random.Random, copies: int = 2):
    """The batch's loss (survival-weighted) and its chains' reach per depth 1 .. BLOCK (features on rows only)."""
    from scripts.train_builtin_pair import repeated

    t_logits, features = teacher_pass(target, enc, LAYERS)
    many, many_labels = repeated(enc, copies), torch.cat([labels] * copies)
    student, keep, depth, masked, cuts = cut_rows(many["input_ids"], many_labels, BLOCK, rng)
    feats = shifted_features(torch.cat([features] * copies), many_labels, masked)
    on = torch.tensor([rng.random() >= DROP for _ in range(student.shape[0])])
    addition = 0.02 * proj(feats) * on[:, None, None].float()
    hook = draft.get_input_embeddings().register_forward_hook(lambda _m, _a, out: out + addition)
    try:
        logits = draft(**dict(many, input_ids=student)).logits[:, :-1]
    finally:
        hook.remove()
    teacher = torch.cat([t_logits] * copies)[:, :-1]
    label = many["input_ids"][:, 1:]
    ce = F.cross_entropy(logits[keep], label[keep], reduction="none")
    kl = F.kl_div(
        F.log_softmax(logits[keep], -1), F.log_softmax(teacher[keep], -1), log_target=True, reduction="none"
    ).sum(-1)
    d = depth[keep]
    weights = torch.where(d > 1, reach.clamp(min=0.05)[(d - 2).clamp(min=0)], torch.ones_like(d, dtype=torch.float))
    loss = ((0.5 * ce + 0.5 * kl) * weights).sum() / weights.sum()
    return loss, chain_reach(logits.detach(), label, keep, cuts, on)


def chain_reach(logits, label, keep, cuts, on) -> torch.Tensor:
    """Per depth 1 .. BLOCK: the share of features-on rows whose block's top-1 is right at every depth up to it."""
    right = (logits.argmax(-1) == label) & keep
    hits, valid = torch.zeros(logits.shape[0], BLOCK), torch.zeros(logits.shape[0], BLOCK)
    for r, cut in enumerate(cuts):
        for d in range(BLOCK if on[r] and cut >= 0 else 0):
            if cut + d >= keep.shape[1] or not keep[r, cut + d]:
                break
            hits[r, d], valid[r, d] = float(right[r, cut + d]), 1.0
    chain = hits.cumprod(dim=1) * valid
    return chain.sum(0) / valid.sum(0).clamp(min=1)


def mix():
    """The shipped one-pass draft's last stages' data (scripts/recipe.py: ROWS | FREE | CHECKED)."""
    from sage_world.mixing import DataMix

    return DataMix(rows=0.25, jpeg=0.3, free=0.3, visitors=0.3, looking="checked")


def conversations(rng: random.Random, step: int, size: int, data) -> list:
    """Training step `step`'s conversations (one example each), drawn as the training script draws them."""
    from sage_world.mixing import batch_examples

    return [[example] for example in batch_examples(rng, step, size, data)]


def load_models(args: argparse.Namespace):
    from transformers import AutoProcessor

    from scripts.train_builtin_pair import load_model

    target, draft = load_model(args.target), load_model(args.draft)
    target.eval()
    for p in target.parameters():
        p.requires_grad_(False)
    processor = AutoProcessor.from_pretrained(args.draft)
    return target, draft, processor


def train(args: argparse.Namespace) -> None:
    from scripts.train_builtin_pair import make_batch

    target, draft, processor = load_models(args)
    width = hidden_width(draft)
    proj = torch.nn.Linear(len(LAYERS) * hidden_width(target), width, bias=False)
    start_projection(proj, args.draft, width)
    opt = torch.optim.AdamW(
        [{"params": list(draft.parameters()), "lr": args.lr}, {"params": list(proj.parameters()), "lr": args.proj_lr}],
        betas=(0.9, 0.98),
        weight_decay=0.01,
    )
    checkpoint = args.work / "checkpoint.pt"
    rng, step, spent, reach = random.Random(args.seed), 0, 0.0, torch.ones(BLOCK)
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False)
        draft.load_state_dict(state["draft"])
        proj.load_state_dict(state["proj"])
        opt.load_state_dict(state["opt"])
        rng.setstate(state["rng"])
        step, spent, reach = state["step"], state["spent"], state["reach"]
        log(f"resumed at step {step}, {spent / 60:.1f} min")
    data, budget, ema = mix(), args.minutes * 60, None
    started, saved = time.perf_counter() - spent, time.perf_counter()
    draft.train()
    while time.perf_counter() - started < budget:
        frac = (time.perf_counter() - started) / budget
        for group, peak in zip(opt.param_groups, (args.lr, args.proj_lr), strict=True):
            group["lr"] = peak * min(1.0, (step + 1) / 30) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        enc, labels = make_batch(processor, conversations(rng, step, args.batch, data))
        loss, batch_reach = batch_loss(draft, proj, target, enc, labels, reach, rng)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([*draft.parameters(), *proj.parameters()], 1.0)
        opt.step()
        reach = 0.95 * reach + 0.05 * batch_reach
        ema = float(loss) if ema is None else 0.95 * ema + 0.05 * float(loss)
        step += 1
        if step % 10 == 0:
            took = (time.perf_counter() - started) / 60
            log(f"step {step} loss {ema:.4f} {took:.1f} min reach " + " ".join(f"{r:.2f}" for r in reach.tolist()))
        if time.perf_counter() - saved > 120:
            save_checkpoint(checkpoint, draft, proj, opt, rng, step, time.perf_counter() - started, reach)
            saved = time.perf_counter()
    save_checkpoint(checkpoint, draft, proj, opt, rng, step, time.perf_counter() - started, reach)
    log(f"done: {step} steps")
    if args.out:
        export_draft(args.out, draft, proj, processor, args.draft)


def start_projection(proj: torch.nn.Linear, draft: Path, width: int) -> None:
    """The projection a stage starts from: the draft's own where it already reads the target's features at LAYERS
    (a stage that trains it on), else zero (the draft drafts as before until it learns to read them)."""
    declared = json.loads((draft / "config.json").read_text(encoding="utf-8")).get("one_pass_draft", {})
    reads = declared.get(FEATURES_KEY) if isinstance(declared, dict) else None
    if not reads or tuple(reads.get("layers", ())) != LAYERS:
        torch.nn.init.zeros_(proj.weight)
        return
    loaded = load_features(draft / reads["file"], LAYERS, width)
    if isinstance(loaded, str):
        raise SystemExit(f"{draft}: {loaded}")
    with torch.no_grad():
        proj.weight.copy_(loaded.weight)
    log(f"the projection starts from {draft / reads['file']} (mean |w| {loaded.weight.abs().mean():.4f})")


def save_checkpoint(path: Path, draft, proj, opt, rng, step: int, spent: float, reach: torch.Tensor) -> None:
    state = {"draft": draft.state_dict(), "proj": proj.state_dict(), "opt": opt.state_dict(), "rng": rng.getstate()}
    torch.save(dict(state, step=step, spent=spent, reach=reach), str(path) + ".tmp")
    os.replace(str(path) + ".tmp", path)
    log(f"checkpoint at step {step}")


def export_draft(out: Path, draft, proj, processor, source: Path) -> None:
    """The draft folder: the draft (float16, as shipped), its projection and the declaration in its config."""
    from scripts.train_builtin_pair import save

    declared = dict(draft.config.one_pass_draft)
    declared[FEATURES_KEY] = {"layers": list(LAYERS), "file": FEATURES_FILE}
    draft.config.one_pass_draft = declared
    save(draft, processor, out, "float16")
    TargetFeatures(LAYERS, proj.weight.detach().float().clone()).save(out / FEATURES_FILE)
    for extra in ("asking_note.json",):
        if (source / extra).exists() and not (out / extra).exists():
            shutil.copy(source / extra, out / extra)
    log(f"exported {out}")


def export(args: argparse.Namespace) -> None:
    target, draft, processor = load_models(args)
    state = torch.load(args.work / "checkpoint.pt", weights_only=False)
    draft.load_state_dict(state["draft"])
    proj = torch.nn.Linear(len(LAYERS) * hidden_width(target), hidden_width(draft), bias=False)
    proj.load_state_dict(state["proj"])
    log(f"checkpoint at step {state['step']} ({state['spent'] / 60:.1f} min)")
    export_draft(args.out, draft, proj, processor, args.draft)


# -- measure -----------------------------------------------------------------------------------------------------------


def measure_scene(pair, example, max_new: int, features_on: bool) -> torch.Tensor | None:
    """[round starts, depths] the target's token's rank in the draft's block at each depth (-1: past the end)."""
    from sage_core.backends import open_backend
    from sage_core.drafting import draft_block, feed_chain
    from sage_core.models.target_features import feeding, recorded, recording, watch_layers
    from sage_core.prepared import prepare_inputs, with_draft_inputs
    from sage_core.studies.depth_rules import target_answer
    from sage_world.quality import example_media

    media = example_media(example)
    tokens = list(target_answer(pair, media, example.question, max_new))
    if len(tokens) < 3:
        return None
    prepared = with_draft_inputs(pair, prepare_inputs(pair, media, example.question, with_draft=True))
    one_pass = pair.draft.one_pass
    assert prepared.draft is not None and one_pass is not None
    declared = one_pass.features if features_on else None
    target = open_backend(pair.target, "fast")
    features = None
    if declared is not None:
        watch_layers(pair.target.spec.language_model(pair.target.model))
        with recording(declared.layers) as found:
            state = target.prefill(prepared.target, len(tokens) + 8).state
        last = recorded(found, declared.layers)[-1:]
        with recording(declared.layers) as found:
            feed_chain(target, state, tokens[:-1], len(tokens) - 1)
        features = torch.cat((last, recorded(found, declared.layers)))  # row t: y_t's features
    draft = open_backend(pair.draft, "fast", draft=True)
    state = draft.prefill(prepared.draft, len(tokens) + one_pass.block_size + 8).state
    rows = []
    for t, token in enumerate(tokens[:-1]):
        with feeding(features[t : t + 1] if features is not None else None):  # y_t's: the target's before it
            rows.append(draft_block(draft, state, [token], one_pass))
    blocks = torch.stack(rows).float()  # [T - 1, K, V]
    padded = torch.tensor([*tokens, *([-1] * one_pass.block_size)])
    labels = torch.stack([padded[t + 1 : t + 1 + one_pass.block_size] for t in range(len(tokens) - 1)])
    ranks = (blocks > blocks.gather(2, labels.clamp(min=0)[..., None])).sum(-1)
    return torch.where(labels >= 0, ranks, torch.full_like(ranks, -1))


def measure(args: argparse.Namespace) -> None:
    from sage_core import load_pair
    from scripts.train_conditional_head import per_depth, study_groups

    lanes = [("features on", args.draft, True), ("features off", args.draft, False)]
    if args.baseline:  # as it drafts in a race: with the features it declares (none for a draft that reads none)
        lanes.append(("shipped", args.baseline, True))
    figures: dict[str, dict[str, list[float]]] = {}
    pairs = {str(path): load_pair(args.target, str(path), "cpu", "float32") for _, path, _ in lanes}
    with torch.inference_mode():
        for group, examples in study_groups(args.n, args.held_out).items():
            for name, path, on in lanes:
                pair = pairs[str(path)]
                ranks = [r for e in examples if (r := measure_scene(pair, e, args.max_new_tokens, on)) is not None]
                right, chain = per_depth(torch.cat(ranks))
                figures[f"{group}, {name}"] = {"right": right, "chain": chain}
                log(f"{group:24} {name:13} " + " ".join(f"{a:.2f}/{c:.2f}" for a, c in zip(right, chain, strict=True)))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")


# -- speed -------------------------------------------------------------------------------------------------------------


def speed_lanes(one_pass: tuple[str, ...], sequential: tuple[str, ...]) -> tuple[tuple[str, str, str], ...]:
    """The decoding lanes: (name, which pair, method). "on": the new draft reading the target's features; "off": the
    same checkpoint with them off; "shipped": the shipped one-pass draft; "sure": the sure sequential draft. The
    methods are the command line's (--methods, --sequential-methods), each checked against the registry."""
    return (
        ("plain", "on", "ar"),
        *((f"{method}, one-pass, features {lane}", lane, method) for lane in ("on", "off") for method in one_pass),
        *((f"{method}, shipped one-pass", "shipped", method) for method in one_pass),
        *((f"{method}, sure draft", "sure", method) for method in sequential),
    )


def method_list(text: str) -> tuple[str, ...]:
    """A comma-separated list of registered drafting methods (argparse's type: an unknown name is its error)."""
    from sage_core.methods import drafting_methods

    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in drafting_methods()]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"not a drafting method: {', '.join(unknown) or '(none given)'} (one of {', '.join(drafting_methods())})"
        )
    return names


def speed_scenes(n: int) -> dict[str, list]:
    """Fresh scenes for decoding (the conditional head's decoding seeds, 515151-3): describe, chart, hand-drawn."""
    from sage_world.scenes import HAND_DRAWN, make_examples

    return {
        "describe": make_examples(515151, n, kinds=("describe",)),
        "chart": make_examples(515152, n, kinds=("chart",)),
        "hand-drawn": make_examples(515153, n, kinds=("describe",), style=HAND_DRAWN),
    }


def speed(args: argparse.Namespace) -> None:
    """Every lane on the same scenes, interleaved scene by scene: tau, x plain end to end and decode only (median of
    the per-scene ratios), lossless checked against plain decoding; the one-token step and the thread count."""

    from sage_core import DecodeConfig, decode, load_pair
    from sage_core.models.one_pass import without_features
    from sage_core.models.pair import with_draft
    from sage_world.quality import example_media

    on = load_pair(args.target, str(args.draft), "cpu", "float32")
    pairs = {"on": on, "off": without_features(on), "sure": with_draft(on, str(BUILTIN / "draft"))}
    pairs["shipped"] = with_draft(on, str(args.baseline or BUILTIN / "one-pass-draft"))
    log(f"threads {torch.get_num_threads()}; {args.max_new_tokens} new tokens; {args.n} scenes a kind")
    lanes = speed_lanes(args.methods, args.sequential_methods)
    for kind, examples in speed_scenes(args.n).items():
        runs: dict[str, list] = {name: [] for name, _, _ in lanes}
        for example in examples:
            media = example_media(example)
            for name, lane, method in lanes:
                runs[name].append(
                    decode(pairs[lane], media, example.question, DecodeConfig(method, args.max_new_tokens)).run_to_end()
                )
        report_lanes(kind, runs)


def report_lanes(kind: str, runs: dict[str, list]) -> None:
    """Each lane's tau and speed over plain decoding (lossless checked), then the best one-pass lane of each
    draft over the best sequential lane (median of the per-scene ratios of seconds, end to end)."""
    import statistics

    plain = runs["plain"]
    step = statistics.median(r.decode_seconds / max(r.rounds, 1) * 1000 for r in plain)
    log(f"{kind}: one-token step (plain decoding's round) {step:.2f} ms, {torch.get_num_threads()} thread(s)")
    e2e = {}
    for name in runs:
        lossless = sum(r.token_ids == p.token_ids for r, p in zip(runs[name], plain, strict=True))
        e2e[name] = statistics.median(p.seconds / r.seconds for r, p in zip(runs[name], plain, strict=True))
        dec = statistics.median(p.decode_seconds / r.decode_seconds for r, p in zip(runs[name], plain, strict=True))
        tau = statistics.fmean(r.mean_accepted for r in runs[name])
        log(
            f"{kind:10} {name:34} tau {tau:5.2f}  x plain {e2e[name]:4.2f} e2e {dec:4.2f} decode  "
            f"lossless {lossless}/{len(plain)}"
        )
    sure = max((n for n in e2e if n.endswith("sure draft")), key=e2e.__getitem__)
    for draft in ("features on", "features off", "shipped"):
        best = max((n for n in e2e if draft in n), key=e2e.__getitem__)
        ratio = statistics.median(s.seconds / r.seconds for r, s in zip(runs[best], runs[sure], strict=True))
        log(f"{kind:10} best one-pass ({best}) over best sequential ({sure}): {ratio:.2f}x end to end")


# -- command line ------------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("train", "export", "measure", "speed"))
    parser.add_argument("--target", default=str(BUILTIN / "target"))
    parser.add_argument("--draft", type=Path, default=BUILTIN / "one-pass-draft", help="train: the draft to start from")
    parser.add_argument("--work", type=Path, default=Path("/tmp/target-features"), help="checkpoints")
    parser.add_argument("--out", type=Path, help="train, export: save the draft folder here")
    parser.add_argument("--seed", type=int, default=6606)
    parser.add_argument("--minutes", type=float, default=40.0, help="training time")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-4, help="the draft's peak learning rate")
    parser.add_argument("--proj-lr", type=float, default=1e-3, help="the projection's peak learning rate")
    parser.add_argument("--baseline", type=Path, help="measure: another draft to measure beside (the shipped one)")
    parser.add_argument("--n", type=int, default=24, help="measure: fresh scenes a kind")
    parser.add_argument("--held-out", type=int, default=24, help="measure: hand-drawn scenes")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--json", type=Path, help="measure: write the figures here")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--methods", type=method_list, default="chain,best-first,sage-cost", help="speed: the one-pass lanes' methods"
    )
    parser.add_argument(
        "--sequential-methods", type=method_list, default="sage-cost,chain", help="speed: the sure draft's methods"
    )
    args = parser.parse_args(argv)
    if args.step == "export" and args.out is None:
        parser.error("export needs --out")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    {"train": train, "export": export, "measure": measure, "speed": speed}[args.step](args)


if __name__ == "__main__":
    main()
