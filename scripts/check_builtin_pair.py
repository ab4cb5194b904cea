"""Quality check of the built-in model pair on freshly generated scenes.

Greedy answers (``generate(do_sample=False)``, inputs built like the app's, by sage_core/models/prompts.py) from the
target and the draft on N examples from a seed the training never used; prints accuracy per
kind and overall for both, and the draft's next-token agreement with the target (teacher-forced
on the target's answers) with simulated tokens per target pass for greedy speculation.

    python scripts/check_builtin_pair.py [--n 300] [--seed 20250] [--dir assets/builtin]
    python scripts/check_builtin_pair.py --style shifted   # other scales, offsets and canvas sizes
    python scripts/check_builtin_pair.py --style hand      # shape scenes drawn as by hand
    python scripts/check_builtin_pair.py --style paraphrased  # questions worded as no training template
    python scripts/check_builtin_pair.py --style unseen   # hand-written questions about one shape, no template's
    python scripts/check_builtin_pair.py --style blind    # 48 more, written by a helper who saw no training question
    python scripts/check_builtin_pair.py --style plain    # the blind ones about a shape drawn with plain PIL calls
    python scripts/check_builtin_pair.py --draft-dir assets/builtin/hesitant-draft  # another draft
    python scripts/check_builtin_pair.py --style rows     # two rows of shapes to read (scenes.ROW_KIND)
    python scripts/check_builtin_pair.py --jpeg 85        # every picture saved as a JPEG of quality 85 first
    python scripts/check_builtin_pair.py --style visitors --target-only  # questions visitors ask (run 13)
    python scripts/check_builtin_pair.py --style graphs --n 120 --target-only  # their charts asked as graphs

Accuracy is per fact: a long answer (a detailed description, a chart, a narrated video) states
several facts (each object with its size, colour, shape and place; the count; each bar's value;
the highest and lowest bar; what happens in a clip), each graded on its own; a short answer is
one fact. The share of answers with every fact right is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch

from sage_world import visitors
from sage_world.quality import agreement, evaluate
from sage_world.scenes import (
    DEFAULT,
    HAND_DRAWN,
    ROW_KIND,
    SHAPES,
    SHIFTED,
    Thing,
    ask_scene,
    jpeg,
    make_examples,
)
from sage_world.wording import BLIND, held_out_examples, unseen_examples

ROOT = Path(__file__).resolve().parents[1]

#: Colours as PIL names them (not the world's own shades): ``--style plain`` draws with these.
PLAIN_COLOURS = {
    "red": (255, 0, 0), "green": (0, 160, 0), "blue": (0, 0, 255), "yellow": (255, 215, 0), "purple": (128, 0, 128),
    "orange": (255, 140, 0),
}  # fmt: skip


def plain_picture(rng: random.Random):
    """One shape drawn with plain PIL calls, as a visitor renders one (white or near-white ground, a common
    canvas size, the shape centred in one of the nine cells): no drawing code of the world's."""
    from PIL import Image, ImageDraw

    w, h = rng.choice([(256, 256), (320, 240), (200, 200), (400, 300)])
    image = Image.new("RGB", (w, h), rng.choice([(255, 255, 255), (245, 245, 245)]))
    draw = ImageDraw.Draw(image)
    thing = Thing(rng.choice(list(PLAIN_COLOURS)), rng.choice(SHAPES), rng.choice(["small", "large"]), rng.randrange(9))
    row, col = divmod(thing.cell, 3)
    cx, cy = (col + 0.5) * w / 3, (row + 0.5) * h / 3
    r, fill = min(w, h) / 6 * (0.85 if thing.size == "large" else 0.4), PLAIN_COLOURS[thing.colour]
    if thing.shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=fill)
    elif thing.shape == "square":
        draw.rectangle((cx - r, cy - r, cx + r, cy + r), fill=fill)
    elif thing.shape == "triangle":
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=fill)
    else:
        t = r / 3
        draw.rectangle((cx - r, cy - t, cx + r, cy + t), fill=fill)
        draw.rectangle((cx - t, cy - r, cx + t, cy + r), fill=fill)
    return image, (thing,)


def plain_examples(seed: int, n: int) -> list:
    """``n`` of the ``BLIND`` questions in turn, each about a fresh :func:`plain_picture`."""
    rng = random.Random(seed)
    wordings = [(kind, question) for kind, pool in BLIND.items() for question in pool]
    out = []
    for i in range(n):
        kind, question = wordings[i % len(wordings)]
        image, things = plain_picture(rng)
        out.append(replace(ask_scene(rng, kind, image, things, "white"), question=question))
    return out


#: The styles that ask hand-written questions about a picture of one shape (graded also by the asking rule's verdict).
ONE_SHAPE_STYLES = ("unseen", "blind", "plain")


def note_breakdown(examples: list, answers: list[str]) -> dict[str, dict[str, float]]:
    """Facts right split by what the app's asking rule (`sage_world.asking`) says of each question: no
    note, a note for words the pair cannot read, or another note; printed and returned per verdict."""
    from sage_world import asking
    from sage_world.scenes import fact_score

    tally: dict[str, list[int]] = {}
    for example, answer in zip(examples, answers, strict=True):
        fit = asking.question_fit(example.question, "shapes")
        verdict = "no note" if fit.taught else "note: unknown words" if "cannot read" in fit.reason else "note: other"
        right, total = fact_score(example, answer)
        counts = tally.setdefault(verdict, [0, 0, 0])
        counts[0], counts[1], counts[2] = counts[0] + right, counts[1] + total, counts[2] + 1
    out = {v: {"facts": r / max(t, 1), "questions": n} for v, (r, t, n) in sorted(tally.items())}
    for verdict, figures in out.items():
        print(f"  {verdict:<20} facts {figures['facts']:.3f} over {figures['questions']} questions asked")
    return out


def visitor_breakdown(examples: list, answers: list[str], tokenizer) -> dict[str, dict[str, float]]:
    """Questions answered right (every fact, and read: a question with a word the tokenizer cannot read is
    declined by the app, so counted wrong) per source (as visitors asked, held-out wordings) and per kind;
    printed and returned."""
    from sage_world.scenes import grade

    sources = [visitors.check_source(i) for i in range(len(examples))]
    tally: dict[str, list[int]] = {}
    for example, answer, source in zip(examples, answers, sources, strict=True):
        read = tokenizer.unk_token_id not in tokenizer(example.question)["input_ids"]
        right = int(read and grade(example, answer))
        for key in (source, f"{source}: {example.kind}", "all"):
            counts = tally.setdefault(key, [0, 0, 0])
            counts[0], counts[1], counts[2] = counts[0] + right, counts[1] + 1, counts[2] + (not read)
    out = {k: {"right": r / n, "questions": n, "declined": d} for k, (r, n, d) in sorted(tally.items())}
    for key, figures in out.items():
        print(
            f"  {key:<24} answered right {figures['right']:.3f} of {figures['questions']}"
            f" ({figures['declined']} declined: words it cannot read)"
        )
    return out


#: What --style takes.
STYLES = ("default", "shifted", "hand", "paraphrased", "unseen", "blind", "plain", "rows", "visitors", "graphs")
#: The kinds of a shape scene (what a hand-drawn picture is asked).
SCENE_KINDS = ("shape", "colour", "count", "position", "size", "describe")


def check_examples(style: str, seed: int, n: int) -> list:
    """The examples a style grades: fresh scenes, shifted ones, hand-drawn shape scenes, questions in
    held-out wordings, hand-written questions about one shape (``UNSEEN``, or ``BLIND``), or rows to read."""
    if style == "hand":
        return make_examples(seed, n, kinds=SCENE_KINDS, style=HAND_DRAWN)
    if style == "paraphrased":
        return held_out_examples(seed, n)
    if style == "unseen":
        return unseen_examples(seed, n)
    if style == "blind":
        return unseen_examples(seed, n, questions=BLIND)
    if style == "plain":
        return plain_examples(seed, n)
    if style == "rows":
        return make_examples(seed, n, kinds=(ROW_KIND,))
    if style == "visitors":
        return visitors.check_examples(seed, n)[0]
    if style == "graphs":
        return visitors.graph_check_examples(seed, n)
    return make_examples(seed, n, style=SHIFTED if style == "shifted" else DEFAULT)


def parse_check_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=str(ROOT / "assets" / "builtin"))
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=20250)
    ap.add_argument(
        "--style",
        choices=STYLES,
        default="default",
        help="drawing ranges, hand-drawn shapes, held-out question wordings, "
        "hand-written questions about one shape (no template's; blind: written unseen by anyone training; "
        "plain: the blind ones about a shape drawn with plain PIL calls), rows to read, or the questions visitors "
        "asked (visitors: half as they asked, half in held-out wordings; a question the tokenizer cannot read "
        "counts as answered wrong, as the app declines it; graphs: their charts asked about as graphs alone, as many "
        "as --n)",
    )
    ap.add_argument("--jpeg", type=int, default=0, help="save every picture as a JPEG of this quality first (1-100)")
    ap.add_argument("--draft-dir", help="the draft's folder (default DIR/draft)")
    ap.add_argument("--target-only", action="store_true", help="grade the target alone (no draft, no agreement)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--show", type=int, default=0, help="print this many example answers")
    args = ap.parse_args(argv)
    if not 0 <= args.jpeg <= 100:
        ap.error("--jpeg must be a quality between 1 and 100 (0: no JPEG)")
    return args


def load_models(args: argparse.Namespace):
    """The target, the draft and the processor of ``args.dir`` (the draft from ``--draft-dir``), their sizes
    printed."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    d = Path(args.dir)
    processor = AutoProcessor.from_pretrained(d / "target")
    draft_dir = Path(args.draft_dir) if args.draft_dir else d / "draft"
    draft_processor = AutoProcessor.from_pretrained(draft_dir)
    assert processor.tokenizer.get_vocab() == draft_processor.tokenizer.get_vocab(), "tokenizers differ"
    target = AutoModelForImageTextToText.from_pretrained(d / "target").eval()
    draft = AutoModelForImageTextToText.from_pretrained(draft_dir).eval()
    n_t = sum(p.numel() for p in target.parameters())
    n_d = sum(p.numel() for p in draft.parameters())
    print(f"target {n_t:,} params, draft {n_d:,} params ({n_t / n_d:.1f}x)")
    return target, draft, processor, (n_t, n_d)


def target_figures(args: argparse.Namespace, res_t: dict, by_note: dict, seconds: float) -> dict:
    """``--target-only``'s table printed, and its figures."""
    print(f"{'kind':<10} {'target':>7}")
    for k, v in res_t["per_kind"].items():
        print(f"{k:<10} {v:>7.3f}")
    jpeg_note = f", JPEG {args.jpeg}" if args.jpeg else ""
    print(f"{'facts':<10} {res_t['accuracy']:>7.3f}   (n={args.n}, seed={args.seed}, {args.style}{jpeg_note})")
    print(f"{'answers':<10} {res_t['answer_accuracy']:>7.3f}   (every fact right)")
    print(f"check took {seconds:.0f} s")
    figures = {
        "n": args.n,
        "seed": args.seed,
        "style": args.style,
        "jpeg": args.jpeg,
        "target": {k: res_t[k] for k in ("accuracy", "answer_accuracy", "per_kind")},
    }
    figures["by_note"] = by_note
    return figures


def pair_figures(args: argparse.Namespace, examples: list, results: tuple[dict, dict, dict], sizes, t0: float) -> dict:
    """The target's and the draft's table and their agreement printed (``results``: the target's, the draft's and
    the agreement; ``sizes``: their parameters), with ``--show``'s answers; their figures."""
    res_t, res_d, agr = results
    print(f"{'kind':<10} {'target':>7} {'draft':>7}")
    for k in res_t["per_kind"]:
        print(f"{k:<10} {res_t['per_kind'][k]:>7.3f} {res_d['per_kind'][k]:>7.3f}")
    where = f"n={args.n}, seed={args.seed}, {args.style}" + (f", JPEG {args.jpeg}" if args.jpeg else "")
    print(f"{'facts':<10} {res_t['accuracy']:>7.3f} {res_d['accuracy']:>7.3f}   ({where})")
    print(f"{'answers':<10} {res_t['answer_accuracy']:>7.3f} {res_d['answer_accuracy']:>7.3f}   (every fact right)")
    print("draft/target next-token agreement (teacher-forced on the target's answers):")
    for k in ("all", "first", "content", "template"):
        print(f"  {k:<9} {agr['agree_' + k]:.3f}  ({agr['n_' + k]} tokens)")
    print(
        f"  simulated tokens per target pass: {agr['tokens_per_pass_k2']:.2f} (2 draft tokens), "
        f"{agr['tokens_per_pass_k4']:.2f} (4 draft tokens)"
    )
    print(f"check took {time.time() - t0:.0f} s")
    for e, a, b in list(zip(examples, res_t["answers"], res_d["answers"], strict=True))[: args.show]:
        print(f"[{e.kind}] {e.question} | truth: {e.answer} | target: {a} | draft: {b}")
    return {
        "n": args.n,
        "seed": args.seed,
        "target_params": sizes[0],
        "draft_params": sizes[1],
        "style": args.style,
        "target": {k: res_t[k] for k in ("accuracy", "answer_accuracy", "per_kind")},
        "draft": {k: res_d[k] for k in ("accuracy", "answer_accuracy", "per_kind")},
        "agreement": agr,
    }


def main(argv=None) -> dict:
    args = parse_check_args(argv)
    torch.set_num_threads(args.threads)
    target, draft, processor, sizes = load_models(args)
    examples = check_examples(args.style, args.seed, args.n)
    if args.jpeg:  # pictures only: a clip's frames stay as drawn
        examples = [e if e.frames else replace(e, image=jpeg(e.image, args.jpeg)) for e in examples]
    t0 = time.time()
    res_t = evaluate(target, processor, examples)
    by_note = note_breakdown(examples, res_t["answers"]) if args.style in ONE_SHAPE_STYLES else {}
    if args.style in ("visitors", "graphs"):
        by_note = visitor_breakdown(examples, res_t["answers"], processor.tokenizer)
    if args.target_only:
        figures = target_figures(args, res_t, by_note, time.time() - t0)
    else:
        res_d = evaluate(draft, processor, examples)
        agr = agreement(target, draft, processor, examples, res_t["answer_ids"])
        figures = pair_figures(args, examples, (res_t, res_d, agr), sizes, t0)
        figures["by_note"] = by_note
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
