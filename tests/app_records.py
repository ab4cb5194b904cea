"""Hand-built step records of a small race, for the app's pure tests (no model)."""

from __future__ import annotations

from dataclasses import replace

from app.race import Lane, RaceData
from sage_core import RoundRecord, RunHeader

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
