"""The one streaming decode loop: every method yields the same step records.

Each round (paper §3.1): 1. draft a tree, 2. verify it in one target
forward under tree attention, 3. accept the longest path the target agrees
with plus its bonus token, 4. commit the path to both caches, 5. adapt
(SAGE: confidence from the draft's entropy reshapes the next tree). Plain
decoding ("ar") is the same loop with an empty tree.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from .adapter import KVState, ModelPair
from .config import CHAIN_TREE, STATIC_TREE, DecodeConfig, SageConfig
from .drafting import DraftedTree, feed_committed, grow_tree, template_chooser, top_k
from .errors import InputError
from .media import Media
from .policy import (
    Candidate,
    DepthWindow,
    Expansion,
    choose_level,
    confidence,
    plan_template,
    planned_depth,
    planned_width,
)
from .prepared import PreparedInputs, prepare_inputs, with_draft_inputs
from .pruning import select_visual_tokens
from .records import FinishReason, RunHeader, RunSummary, StepRecord, summarize
from .timing import Laps
from .trees import EMPTY_TREE, ROOT, Tree
from .verify import verify_greedy

DETOKENIZE_CONTEXT = 6  # tokens of left context when decoding one token's text


class TextStream:
    """Each new token's text, decoded with a little left context so spaces and
    multi-byte characters come out as in the full decode."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []

    def push(self, token: int) -> str:
        start = max(0, len(self.ids) - DETOKENIZE_CONTEXT)
        before = self.tokenizer.decode(self.ids[start:], skip_special_tokens=True)
        self.ids.append(token)
        after = self.tokenizer.decode(self.ids[start:], skip_special_tokens=True)
        return after[len(before) :] if after.startswith(before) else after


class SagePlanner:
    """SAGE's state across rounds: the acceptance window and last round's draft."""

    def __init__(self, config: SageConfig) -> None:
        self.config = config
        self.window = DepthWindow(config.depth_max)
        self.previous: DraftedTree | None = None
        self.previous_accepted: tuple[int, ...] = ()

    def template_alpha(self) -> float:
        """Confidence planned from the previous round (template mode)."""
        if self.previous is None:
            return self.config.initial_alpha
        dists = self.previous.distributions
        if self.config.alpha_source == "root":
            return confidence(dists[ROOT])[1]
        along = [ROOT, *self.previous_accepted]
        return statistics.fmean(confidence(dists[n])[1] for n in along if n in dists)

    def level_probs(self) -> list[tuple[float, ...]]:
        """Mean top-k distribution per level of the previous round's tree."""
        assert self.previous is not None
        tree, dists = self.previous.tree, self.previous.distributions
        by_level: dict[int, list[tuple[float, ...]]] = {0: [dists[ROOT]]}
        for node, dist in dists.items():
            if node != ROOT:
                by_level.setdefault(tree.depths[node], []).append(dist)
        return [tuple(statistics.fmean(col) for col in zip(*by_level[d], strict=True)) for d in sorted(by_level)]

    def after_round(self, drafted: DraftedTree, accepted_nodes: tuple[int, ...]) -> None:
        self.window = self.window.after(len(accepted_nodes), self.config)
        self.previous, self.previous_accepted = drafted, accepted_nodes


class DecodeRun:
    """A streaming run of one method: iterate it for `StepRecord`s.

    The prompt is prepared (and checked) when the run is made, unless
    `prepared` brings the processors' tensors made once for several runs
    (`prepare_inputs`); the prefill happens on the first `next()`, one round
    per `next()` after that, so two runs can be stepped alternately (the
    app's race). With pruning, `header` gains the kept visual tokens and the
    draft's pruned prompt length at the prefill (they come from the target's
    prefill).
    """

    def __init__(
        self, pair: ModelPair, media: Media, prompt: str, config: DecodeConfig, prepared: PreparedInputs | None = None
    ) -> None:
        if not prompt or not prompt.strip():
            raise InputError("the prompt is empty")
        self.pair = pair
        self.media = media
        self.prompt = prompt
        self.config = config
        uses_draft = config.method != "ar"
        shared = prepared is not None
        if prepared is None:
            prepared = prepare_inputs(pair, media, prompt, with_draft=uses_draft)
        elif not prepared.matches(media, prompt):
            raise InputError("the prepared inputs are for another prompt or medium")
        if uses_draft:
            prepared = with_draft_inputs(pair, prepared)
        self.target_inputs = prepared.target
        self.draft_inputs = prepared.draft if uses_draft else None
        self.prepare_seconds = prepared.seconds_for(uses_draft)
        visual_tokens = int(pair.target.visual_positions(self.target_inputs).numel())
        if config.prune_ratio > 0:
            _check_prunable(self.target_inputs, self.draft_inputs, visual_tokens)
        self.header = RunHeader(
            method=config.method,
            target=pair.target.name,
            draft=pair.draft.name if uses_draft else "",
            prompt=prompt,
            media=media.describe(),
            max_new_tokens=config.max_new_tokens,
            prompt_tokens=int(self.target_inputs["input_ids"].shape[1]),
            device=str(pair.device),
            dtype=str(pair.target.dtype).removeprefix("torch."),
            sage=asdict(config.sage),
            prepare_seconds=self.prepare_seconds,
            prepare_shared=shared,
            prune_ratio=config.prune_ratio,
            visual_tokens=visual_tokens,
            draft_prompt_tokens=int(self.draft_inputs["input_ids"].shape[1]) if self.draft_inputs is not None else None,
        )
        self.records: list[StepRecord] = []
        self._steps = self._run()

    def __iter__(self) -> Iterator[StepRecord]:
        return self

    def __next__(self) -> StepRecord:
        record = next(self._steps)
        self.records.append(record)
        return record

    def run_to_end(self) -> RunSummary:
        for _ in self:
            pass
        return summarize(self.records)

    # -- the loop ------------------------------------------------------------

    def _run(self) -> Iterator[StepRecord]:
        pair, config = self.pair, self.config
        target, draft = pair.target, pair.draft
        eos = set(target.eos_token_ids)
        text = TextStream(target.tokenizer)
        planner = SagePlanner(config.sage)
        produced = 0
        total_seconds = 0.0

        def emit(candidates: Sequence[int]) -> tuple[tuple[int, ...], FinishReason | None]:
            out: list[int] = []
            for token in candidates:
                out.append(token)
                if token in eos:
                    return tuple(out), "eos"
                if produced + len(out) >= config.max_new_tokens:
                    return tuple(out), "length"
            return tuple(out), None

        # 0. Prefill: the target (and the draft) read the prompt; the target's
        #    argmax after it is the first new token.
        #    The record splits its time: target prefill (as "verify"), draft prefill
        #    (as "draft"), and the processors' preparation (only in the step's total).
        reserve = _cache_reserve(config)
        laps = Laps(pair.devices)
        #    With pruning the target's prefill also scores the visual tokens, and the
        #    draft reads only the kept ones (pruning.py).
        scores = None
        if config.prune_ratio > 0:
            target_state, logits, scores = target.prefill_scored(self.target_inputs, reserve)
        else:
            target_state, logits = target.prefill(self.target_inputs, reserve)
        first = int(logits.argmax())  # waits for the target
        verify_seconds = laps.lap()
        draft_state = None
        if self.draft_inputs is not None and scores is not None:
            kept = select_visual_tokens(scores.tolist(), config.prune_ratio, config.prune_attention_share)
            draft_state = draft.prefill_pruned(self.draft_inputs, kept, reserve)[0]
            self.header = replace(self.header, draft_prompt_tokens=draft_state.committed, kept_visual_indices=kept)
        elif self.draft_inputs is not None:
            draft_state = draft.prefill(self.draft_inputs, reserve)[0]
        prefill_seconds = laps.stop()
        draft_seconds = prefill_seconds - verify_seconds
        new_tokens, finish = emit([first])
        produced += len(new_tokens)
        seconds = self.prepare_seconds + prefill_seconds
        total_seconds += seconds
        yield StepRecord(
            method=config.method, step=0, phase="prefill",
            tree_tokens=(), tree_parents=(), tree_draft_probs=(),
            entropy=None, alpha=None, depth_max=None, planned_depth=None, planned_width=None,
            accepted_nodes=(), accepted_tokens=(), bonus_token=first,
            new_tokens=new_tokens, new_token_texts=tuple(text.push(t) for t in new_tokens),
            draft_seconds=draft_seconds, verify_seconds=verify_seconds, step_seconds=seconds,
            total_tokens=produced, total_seconds=total_seconds, finish_reason=finish,
        )  # fmt: skip
        pending = [first]  # committed tokens the draft has not read yet; the last is the root
        step = 0
        while finish is None:
            step += 1
            # Timing: the draft and the verification each end with a device-to-host copy,
            # so the laps need no synchronisation; the step's end has the only one.
            laps = Laps(pair.devices)
            # 1. Draft the tree (SAGE: its shape follows the draft's confidence).
            if draft_state is None:
                drafted, shape = DraftedTree(EMPTY_TREE, {}), _Shape()
            else:
                drafted, shape = self._draft(draft_state, pending, planner, step)
            tree = drafted.tree
            draft_seconds = laps.lap()
            # 2. Verify: one target forward over the root and every node.
            target_argmax = _verify_forward(target, target_state, pending[-1], tree)
            verify_seconds = laps.lap()
            # 3. Accept the longest agreeing path, plus the bonus token.
            verdict = verify_greedy(tree, target_argmax)
            # 4. Commit: the root and the accepted path stay in the target's cache.
            target.commit(target_state, [0, *(1 + n for n in verdict.accepted_nodes)])
            new_tokens, finish = emit([*verdict.accepted_tokens, verdict.bonus_token])
            produced += len(new_tokens)
            pending = [*verdict.accepted_tokens, verdict.bonus_token]
            # 5. Adapt: the acceptance window moves SAGE's D_max.
            if config.method == "sage":
                planner.after_round(drafted, verdict.accepted_nodes)
            step_seconds = laps.stop()
            total_seconds += step_seconds
            yield StepRecord(
                method=config.method, step=step, phase="decode",
                tree_tokens=tree.tokens, tree_parents=tree.parents, tree_draft_probs=tree.draft_probs,
                entropy=shape.entropy, alpha=shape.alpha, depth_max=shape.depth_max,
                planned_depth=shape.planned_depth, planned_width=shape.planned_width,
                accepted_nodes=verdict.accepted_nodes, accepted_tokens=verdict.accepted_tokens,
                bonus_token=verdict.bonus_token,
                new_tokens=new_tokens, new_token_texts=tuple(text.push(t) for t in new_tokens),
                draft_seconds=draft_seconds, verify_seconds=verify_seconds, step_seconds=step_seconds,
                total_tokens=produced, total_seconds=total_seconds, finish_reason=finish,
            )  # fmt: skip

    def _draft(
        self, state: KVState, pending: Sequence[int], planner: SagePlanner, step: int
    ) -> tuple[DraftedTree, _Shape]:
        config = self.config
        draft, vocab = self.pair.draft, self.pair.shared_vocab_size
        root_logits = feed_committed(draft, state, pending)
        sage = config.sage
        if config.method in ("chain", "static"):
            template = CHAIN_TREE if config.method == "chain" else STATIC_TREE
            choose, expand, depth = template_chooser(template)
            root = top_k(root_logits, config.template_top_k, vocab)[0]
            return grow_tree(draft, state, root, choose, depth, config.template_top_k, vocab, expand), _Shape()
        root = top_k(root_logits, sage.top_k, vocab)[0]
        depth_max = planner.window.depth_max
        no_history = sage.shape == "template" and planner.previous is None
        if (step == 1 and sage.static_first_round) or no_history:
            choose, expand, depth = template_chooser(STATIC_TREE)
            drafted = grow_tree(draft, state, root, choose, depth, sage.top_k, vocab, expand)
            entropy, alpha = confidence(drafted.distributions[ROOT])
            return drafted, _Shape(entropy, alpha, depth_max)
        if sage.shape == "template":
            alpha = planner.template_alpha()
            template = plan_template(alpha, depth_max, planner.level_probs(), sage)
            choose, expand, depth = template_chooser(template)
            drafted = grow_tree(draft, state, root, choose, depth, sage.top_k, vocab, expand)
            entropy = confidence(drafted.distributions[ROOT])[0]
            return drafted, _Shape(
                entropy, alpha, depth_max, depth, planned_width(alpha, sage.width_min, sage.width_max)
            )
        # Online (default): alpha from this round's root distribution shapes the tree as it grows.
        entropy, alpha = confidence(root[1])
        depth = planned_depth(alpha, sage.depth_min, depth_max)
        width = planned_width(alpha, sage.width_min, sage.width_max)

        def grow_online(level: int, frontier: Sequence[Expansion], count: int) -> list[Candidate]:
            return choose_level(frontier, level, width, depth, sage.node_budget - count, sage.expansion_threshold)

        drafted = grow_tree(draft, state, root, grow_online, depth, sage.top_k, vocab, lambda node, level: True)
        return drafted, _Shape(entropy, alpha, depth_max, depth, width)


@dataclass(frozen=True)
class _Shape:
    """What the policy decided for a round (None for the fixed trees)."""

    entropy: float | None = None
    alpha: float | None = None
    depth_max: int | None = None
    planned_depth: int | None = None
    planned_width: int | None = None


def _verify_forward(target: Any, state: KVState, root: int, tree: Tree) -> list[int]:
    """One target forward over [root, *nodes]; the argmax after each of them."""
    start, scratch = state.committed, state.scratch
    logits = target.extend(
        state,
        [root, *tree.tokens],
        positions=[start] + [start + d for d in tree.depths],
        parents=[-1] + [scratch + 1 + p for p in tree.parents],  # node i is entry 1 + i; the root is entry 0
    )
    return logits.argmax(dim=-1).tolist()


def _check_prunable(target_inputs: Any, draft_inputs: Any, visual_tokens: int) -> None:
    """Pruning maps the target's visual tokens onto the draft's: their prompts must tokenize alike."""
    if visual_tokens == 0:
        raise InputError("visual token pruning needs an image or a video with visual tokens")
    if draft_inputs is None or not bool(
        target_inputs["input_ids"].shape == draft_inputs["input_ids"].shape
        and (target_inputs["input_ids"].cpu() == draft_inputs["input_ids"].cpu()).all()
    ):
        raise InputError(
            "visual token pruning needs the draft's prompt to tokenize like the target's "
            "(same image/video processor settings); turn pruning off for this pair"
        )


def _cache_reserve(config: DecodeConfig) -> int:
    """Cache entries a run adds after its prompt, at most: its new tokens, then the scratch of a round."""
    nodes = max(config.sage.node_budget, len(STATIC_TREE)) + 1
    return config.max_new_tokens + nodes + config.sage.depth_max_limit + 1


def decode(
    pair: ModelPair, media: Media, prompt: str, config: DecodeConfig, prepared: PreparedInputs | None = None
) -> DecodeRun:
    """Start a streaming run; iterate the result for per-step records."""
    return DecodeRun(pair, media, prompt, config, prepared)
