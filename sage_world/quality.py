"""Quality checks for the built-in model pair (accuracy and draft/target agreement).

Inputs are built by the model package's own functions (``chat_prompt``, ``processor_inputs`` of
sage_core/models/prompts.py), so they are exactly what the app feeds the models, batched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sage_core.media import DEFAULT_FRAMES, Media, image_media, sample_indices
from sage_core.models import chat_prompt, processor_inputs

from .scenes import CONTENT_WORDS, VIDEO_FPS, Example, fact_score


def example_media(example: Example) -> Media:
    """The example's image, or its clip as the app reads a file: DEFAULT_FRAMES evenly spaced
    frames (``sample_indices``) of a clip at VIDEO_FPS."""
    if not example.frames:
        return image_media(example.image, example.kind)
    count = len(example.frames)
    indices = sample_indices(count, min(DEFAULT_FRAMES, count))
    return Media(
        kind="video",
        name=example.kind,
        frames=np.stack([np.asarray(example.frames[i]) for i in indices]),
        fps=VIDEO_FPS,
        total_frames=count,
        frame_indices=indices,
    )


@torch.no_grad()
def generate_answers(
    model: Any, processor: Any, examples: Sequence[Example], max_new_tokens: int = 32, batch_size: int = 32
) -> tuple[list[str], list[list[int]]]:
    """Greedy answers (decoded text, and generated token ids up to and including eos)."""
    eos = model.generation_config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos
    texts: list[str] = [""] * len(examples)
    ids_out: list[list[int]] = [[] for _ in examples]
    media = [example_media(e) for e in examples]
    for kind in ("image", "video"):
        order = [i for i, m in enumerate(media) if m.kind == kind]
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            prompts = [chat_prompt(processor, kind, examples[i].question) for i in chunk]
            enc = processor_inputs(processor, prompts, [media[i] for i in chunk])
            out = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens)
            gen = out[:, enc["input_ids"].shape[1] :].tolist()
            for i, row in zip(chunk, gen, strict=True):
                row = row[: row.index(eos) + 1] if eos in row else row
                ids_out[i] = row
                texts[i] = processor.tokenizer.decode(row, skip_special_tokens=True).strip()
    return texts, ids_out


def evaluate(
    model: Any, processor: Any, examples: Sequence[Example], max_new_tokens: int = 128, batch_size: int = 32
) -> dict:
    """Greedy-decode every example and grade it fact by fact (:func:`fact_score`).

    Returns ``{"accuracy": facts right / facts, "per_kind": {kind: facts right / facts},
    "answer_accuracy": answers with every fact right / answers, "n": int, "answers": [str],
    "answer_ids": [[int]], "correct": [bool]}``.
    """
    model.eval()
    answers, answer_ids = generate_answers(model, processor, examples, max_new_tokens, batch_size)
    scores = [fact_score(e, a) for e, a in zip(examples, answers, strict=True)]
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e, (right, total) in zip(examples, scores, strict=True):
        by_kind[e.kind][0] += right
        by_kind[e.kind][1] += total
    facts_right, facts = sum(r for r, _ in scores), sum(t for _, t in scores)
    correct = [r == t for r, t in scores]
    return {
        "accuracy": facts_right / max(facts, 1),
        "per_kind": {k: r / t for k, (r, t) in sorted(by_kind.items())},
        "answer_accuracy": sum(correct) / max(len(correct), 1),
        "n": len(examples),
        "answers": answers,
        "answer_ids": answer_ids,
        "correct": correct,
    }


def _tokens_per_pass(matches: list[bool], k: int) -> float:
    """Greedy speculative decoding with ``k`` draft tokens: answer tokens emitted per target pass."""
    i = passes = 0
    while i < len(matches):
        run = 0
        while run < k and i + run < len(matches) and matches[i + run]:
            run += 1
        i += run + 1  # accepted draft tokens + the target's own token
        passes += 1
    return len(matches) / max(passes, 1)


@torch.no_grad()
def teacher_forced_feed(processor: Any, example: Any, answer: list[int]) -> tuple[int, dict]:
    """The prompt's length and one forward's inputs: the example's prompt followed by `answer` (teacher forcing),
    so logits[0, n - 1 : -1] predict the answer's tokens."""
    medium = example_media(example)
    enc = processor_inputs(processor, [chat_prompt(processor, medium.kind, example.question)], [medium])
    n = enc["input_ids"].shape[1]
    ids = torch.cat([enc["input_ids"], torch.tensor([answer])], dim=1)
    extra = torch.zeros(1, len(answer), dtype=torch.long)
    feed = dict(
        enc,
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        mm_token_type_ids=torch.cat([enc["mm_token_type_ids"], extra], 1),
    )
    return n, feed


def agreement(
    target: Any, draft: Any, processor: Any, examples: Sequence[Example], target_answer_ids: Sequence[list[int]]
) -> dict:
    """How often the draft's greedy next token equals the target's, teacher-forced on the target's answers.

    Reports overall agreement, on the first answer token, on content words (colours,
    shapes, sizes, places, counts, rendered words, digits, events) and on the other (template) tokens,
    plus simulated tokens per target pass for greedy speculation with 2 and 4 draft tokens.
    """
    target.eval()
    draft.eval()
    tok = processor.tokenizer
    content_ids = {tok.convert_tokens_to_ids(w) for w in CONTENT_WORDS}
    content_ids |= {i for t, i in tok.get_vocab().items() if t.strip("#").isdigit()}
    stats = {"all": [0, 0], "first": [0, 0], "content": [0, 0], "template": [0, 0]}
    tpp2, tpp4 = [], []
    for e, ans in zip(examples, target_answer_ids, strict=True):
        if not ans:
            continue
        n, feed = teacher_forced_feed(processor, e, ans)
        t_pred = target(**feed).logits[0, n - 1 : -1].argmax(-1)
        d_pred = draft(**feed).logits[0, n - 1 : -1].argmax(-1)
        match = (t_pred == d_pred).tolist()
        for j, (m, a) in enumerate(zip(match, ans, strict=True)):
            cats = ["all", "first" if j == 0 else ("content" if a in content_ids else "template")]
            for c in cats:
                stats[c][0] += int(m)
                stats[c][1] += 1
        tpp2.append(_tokens_per_pass(match, 2))
        tpp4.append(_tokens_per_pass(match, 4))
    out = {f"agree_{k}": (v[0] / v[1] if v[1] else float("nan")) for k, v in stats.items()}
    out.update({f"n_{k}": v[1] for k, v in stats.items()})
    out["tokens_per_pass_k2"] = sum(tpp2) / max(len(tpp2), 1)
    out["tokens_per_pass_k4"] = sum(tpp4) / max(len(tpp4), 1)
    return out
