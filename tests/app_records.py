"""Hand-built step records of a small race, for the app's pure tests (no model)."""

from __future__ import annotations

from dataclasses import replace

from app.race import Lane, RaceData
from sage_core import RoundRecord, RunHeader
from sage_core.methods import drafts
from sage_core.methods.registry import method_names

# The output both methods must produce, with each token's text.
TOKENS = (10, 11, 12, 13, 14, 15, 16, 2)
TEXTS = ("the", " red", " <circle>", " is", " on", " the", " left", ".")
EOS = 2


def header(method: str) -> RunHeader:
    return RunHeader(
        method=method,
        target="tiny-target",
        draft="tiny-draft" if method != "ar" else "",
        prompt="where is it?",
        media="image shapes.png (112x112)",
        max_new_tokens=16,
        prompt_tokens=30,
        device="cpu",
        dtype="float32",
        settings={},
    )


def record(
    method: str, step: int, start: int, accepted: int, seconds: float, total_seconds: float, **tree
) -> RoundRecord:
    """Step `step` emits TOKENS[start : start + accepted + 1]: `accepted` draft tokens, then the bonus."""
    new = TOKENS[start : start + accepted + 1]
    texts = TEXTS[start : start + accepted + 1]
    finish = "eos" if new and new[-1] == EOS else None
    base = dict(
        method=method,
        round=step,
        phase="decode" if step else "prefill",
        tree_tokens=(),
        tree_parents=(),
        tree_draft_probs=(),
        entropy=None,
        alpha=None,
        depth_max=None,
        planned_depth=None,
        planned_width=None,
        accepted_nodes=(),
        accepted_tokens=new[:accepted],
        bonus_token=new[-1],
        new_tokens=new,
        new_token_texts=texts,
        draft_seconds=seconds / 2,
        verify_seconds=seconds / 2,
        round_seconds=seconds,
        total_tokens=start + len(new),
        total_seconds=total_seconds,
        finish_reason=finish,
    )
    base.update(tree)
    return RoundRecord(**base)


def chain_tree(tokens: tuple[int, ...], extra: tuple[int, ...] = ()) -> dict:
    """A chain of `tokens` from the root plus `extra` siblings at depth 1; the chain is accepted."""
    parents = tuple(range(-1, len(tokens) - 1)) + (-1,) * len(extra)
    return dict(
        tree_tokens=tokens + extra,
        tree_parents=parents,
        tree_draft_probs=(0.9,) * len(tokens) + (0.05,) * len(extra),
        accepted_nodes=tuple(range(len(tokens))),
    )


def sage_records() -> list[RoundRecord]:
    return [
        record("sage", 0, 0, 0, 0.5, 0.5),
        record(
            "sage",
            1,
            1,
            3,
            0.2,
            0.7,
            entropy=0.4,
            alpha=0.8,
            depth_max=8,
            planned_depth=7,
            planned_width=4,
            **chain_tree((11, 12, 13), (40, 41)),
        ),
        record(
            "sage",
            2,
            5,
            2,
            0.2,
            0.9,
            entropy=1.5,
            alpha=0.3,
            depth_max=8,
            planned_depth=5,
            planned_width=7,
            **chain_tree((15, 16), (42,)),
        ),
    ]


def static_records() -> list[RoundRecord]:
    return [
        record("static", 0, 0, 0, 0.5, 0.5),
        record("static", 1, 1, 1, 0.3, 0.8, **chain_tree((11,), (43, 44, 45))),
        record("static", 2, 3, 1, 0.3, 1.1, **chain_tree((13,), (46, 47, 48))),
        record("static", 3, 5, 2, 0.3, 1.4, **chain_tree((15, 16), (49, 50))),
    ]


def ar_records() -> list[RoundRecord]:
    records = [record("ar", 0, 0, 0, 0.5, 0.5)]
    for step in range(1, len(TOKENS)):
        records.append(record("ar", step, step, 0, 0.15, 0.5 + 0.15 * step))
    return records


def synthetic_race(with_ar: bool = False) -> RaceData:
    lanes = [Lane("sage", header("sage"), sage_records()), Lane("static", header("static"), static_records())]
    if with_ar:
        lanes.append(Lane("ar", header("ar"), ar_records()))
    texts = dict(zip(TOKENS, TEXTS, strict=True)) | {t: f"w{t}" for t in range(40, 51)}
    return RaceData(lanes=lanes, token_texts=texts)


def with_changed_token(
    records: list[RoundRecord], step: int, position: int, token: int, text: str
) -> list[RoundRecord]:
    """A copy of `records` where one emitted token differs (a lossy run)."""
    changed = list(records)
    r = changed[step]
    new = list(r.new_tokens)
    texts = list(r.new_token_texts)
    new[position], texts[position] = token, text
    changed[step] = replace(r, new_tokens=tuple(new), new_token_texts=tuple(texts))
    return changed


#: Words of the built-in pair's answers (a large race's token texts: ids 100 on).
WORDS = (" the", " red", " circle", " is", " on", " left", " of", " blue", " square", ".", " and", " there")


def large_race(tokens: int = 512, sampled: bool = False) -> RaceData:
    """A race of every method on both drafts (17 lanes), each `tokens` long (3 draft tokens and the bonus a
    round on a 20-node tree): the largest answer the app can make. `sampled`: at temperature 0.8, every lane's
    tokens its own (the lanes differ as samples do); else every lane the same greedy answer."""
    keys = [(m, d) for m in method_names() for d in ("", "one-pass") if d == "" or drafts(m)]
    lanes = [
        Lane(m, _large_header(m, d, tokens, sampled), _large_records(m, tokens, seed * sampled), d)
        for seed, (m, d) in enumerate(keys)
    ]
    texts = {100 + i: word for i, word in enumerate(WORDS)} | {EOS: "."}
    return RaceData(lanes=lanes, token_texts=texts)


def _large_header(method: str, draft: str, tokens: int, sampled: bool) -> RunHeader:
    sampling = {"temperature": 0.8, "top_p": 1.0, "top_k": 50, "seed": 4} if sampled else None
    made = replace(header(method), max_new_tokens=tokens, sampling=sampling)
    return replace(made, draft_block=8) if draft else made


def _large_records(method: str, tokens: int, seed: int) -> list[RoundRecord]:
    ids = [100 + (7 * i + seed * (i % 5)) % len(WORDS) for i in range(tokens - 1)] + [EOS]
    step = 4 if drafts(method) else 1
    records = [_large_round(method, 0, ids[:1], 1, 0.0, False)]
    done = 1
    while done < tokens:
        new = ids[done : done + step]
        records.append(_large_round(method, len(records), new, done + len(new), 0.05 * len(records), step > 1))
        done += len(new)
    return records


def _large_round(method: str, step: int, new: list[int], total: int, before: float, tree: bool) -> RoundRecord:
    texts = tuple(WORDS[t - 100] if t != EOS else "." for t in new)
    base = record(method, 0, 0, 0, 0.05, before + 0.05)
    shape = chain_tree(tuple(new[:-1]), tuple(range(120, 120 + 20 - len(new) + 1))) if tree and step else {}
    return replace(
        base,
        round=step,
        phase="decode" if step else "prefill",
        accepted_tokens=tuple(new[:-1]),
        bonus_token=new[-1],
        new_tokens=tuple(new),
        new_token_texts=texts,
        total_tokens=total,
        finish_reason="eos" if new[-1] == EOS else None,
        **shape,
    )
