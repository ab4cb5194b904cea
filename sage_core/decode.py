"""The one streaming decode loop: every method yields the same step records.

Each round (paper §3.1): 1. draft a tree, 2. verify it in one target
forward under tree attention, 3. accept the longest path the target agrees
with plus its bonus token, 4. commit the path to both caches, 5. adapt
(SAGE: confidence from the draft's entropy reshapes the next tree). Plain
decoding ("ar") is the same loop with an empty tree. Step 3 (and the first
token) is the verifier's: greedy, or rejection sampling when the settings
sample (verify.py, sampling.py); the loop is the same for both.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from .adapter import KVState, ModelPair
from .backends import ModelBackend, open_backend
from .config import CHAIN_TREE, STATIC_TREE, DecodeConfig, SageConfig
from .drafting import DraftedTree, TopK, feed_committed, grow_tree, template_chooser, top_k
from .errors import InputError
from .media import Media
from .models.pair import check_method
from .policy import (
    Candidate,
    DepthWindow,
    Expansion,
    LevelDecision,
    confidence,
    expansion_threshold,
    judge_level,
    plan_template,
    planned_depth,
    planned_width,
)
from .prepared import PreparedInputs, prepare_inputs, with_draft_inputs
from .pruning import select_visual_tokens
from .records import FinishReason, RunHeader, RunSummary, StepRecord, summarize
from .sampling import make_verifier, resolve_seed
from .timing import Laps
from .trees import EMPTY_TREE, ROOT, Tree
from .verify import Warp

DETOKENIZE_CONTEXT = 6  # tokens of left context when decoding one token's text


class TextStream:
    """Each new token's text, decoded with a little left context so spaces and
    multi-byte characters come out as in the full decode."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []

    def push(self, tokens: Sequence[int]) -> tuple[str, ...]:
        """The texts of a step's new tokens: one decode per token (and one for the context),
        each token's text what its decode adds to the one before."""
        start = max(0, len(self.ids) - DETOKENIZE_CONTEXT)
        before = self.tokenizer.decode(self.ids[start:], skip_special_tokens=True)
        texts = []
        for token in tokens:
            self.ids.append(token)
            after = self.tokenizer.decode(self.ids[start:], skip_special_tokens=True)
            texts.append(after[len(before) :] if after.startswith(before) else after)
            before = after
        return tuple(texts)


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

    def after_round(self, drafted: DraftedTree, accepted_nodes: tuple[int, ...]) -> float | None:
        """Take in a verified round; returns the window's mean acceptance if the window closed."""
        recent = (*self.window.recent, len(accepted_nodes))
        closing = len(recent) >= self.config.window
        self.window = self.window.after(len(accepted_nodes), self.config)
        self.previous, self.previous_accepted = drafted, accepted_nodes
        return statistics.fmean(recent) if closing else None


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
        check_method(pair, config.method, config.prune_ratio)  # what a family cannot run, refused
        if config.method != "ar" and config.sage.top_k > pair.shared_vocab_size:
            raise InputError(
                f"top-k is {config.sage.top_k}, more than the {pair.shared_vocab_size} tokens of the vocabulary"
            )
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
        self.seed = resolve_seed(config.sampling)  # None when greedy
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
            sampling={**asdict(config.sampling), "seed": self.seed},
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
        target, draft = open_backend(pair.target, config.backend), open_backend(pair.draft, config.backend, draft=True)
        eos = set(pair.target.eos_token_ids)
        text = TextStream(pair.target.tokenizer)
        planner = SagePlanner(config.sage)
        verifier = make_verifier(config.sampling, self.seed)  # greedy or sampling: the loop does not ask
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
        #    choice after it (argmax, or a sample) is the first new token.
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
        first = verifier.verify(EMPTY_TREE, logits[None]).bonus_token  # waits for the target
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
            new_tokens=new_tokens, new_token_texts=text.push(new_tokens),
            draft_seconds=draft_seconds, verify_seconds=verify_seconds, step_seconds=seconds,
            total_tokens=produced, total_seconds=total_seconds, finish_reason=finish,
        )  # fmt: skip
        pending = [first]  # committed tokens the draft has not read yet; the last is the root
        step = 0
        while finish is None:
            step += 1
            # The round runs in inference mode, entered once here (not per forward and commit).
            with torch.inference_mode():
                # Timing: the draft and the verification each end with a device-to-host copy,
                # so the laps need no synchronisation; the step's end has the only one.
                laps = Laps(pair.devices)
                # 1. Draft the tree (SAGE: its shape follows the draft's confidence).
                if draft_state is None:
                    drafted, shape = DraftedTree(EMPTY_TREE, {}), _Shape()
                else:
                    drafted, shape = self._draft(draft, draft_state, pending, planner, step, verifier.warp)
                tree = drafted.tree
                draft_seconds = laps.lap()
                # 2. Verify: one target forward over the root and every node.
                target_logits = _verify_forward(target, target_state, pending[-1], tree)
                # 3. Accept a path and add the bonus token (greedy: the longest path the
                #    target's argmax agrees with; sampling: rejection sampling).
                verdict = verifier.verify(tree, target_logits)
                verify_seconds = laps.lap()
                # 4. Commit: the root and the accepted path stay in the target's cache.
                target.commit(target_state, [0, *(1 + n for n in verdict.accepted_nodes)])
                new_tokens, finish = emit([*verdict.accepted_tokens, verdict.bonus_token])
                produced += len(new_tokens)
                pending = [*verdict.accepted_tokens, verdict.bonus_token]
                # 5. Adapt: the acceptance window moves SAGE's D_max.
                window_mean, next_depth_max = None, None
                if config.method == "sage":
                    window_mean = planner.after_round(drafted, verdict.accepted_nodes)
                    next_depth_max = planner.window.depth_max
                step_seconds = laps.stop()
            total_seconds += step_seconds
            yield StepRecord(
                method=config.method, step=step, phase="decode",
                tree_tokens=tree.tokens, tree_parents=tree.parents, tree_draft_probs=tree.draft_probs,
                entropy=shape.entropy, alpha=shape.alpha, depth_max=shape.depth_max,
                planned_depth=shape.planned_depth, planned_width=shape.planned_width,
                accepted_nodes=verdict.accepted_nodes, accepted_tokens=verdict.accepted_tokens,
                bonus_token=verdict.bonus_token,
                tried_nodes=verdict.tried_nodes, accept_probs=verdict.accept_probs,
                new_tokens=new_tokens, new_token_texts=text.push(new_tokens),
                draft_seconds=draft_seconds, verify_seconds=verify_seconds, step_seconds=step_seconds,
                total_tokens=produced, total_seconds=total_seconds, finish_reason=finish,
                target_choices=verdict.target_choices, window_mean=window_mean, next_depth_max=next_depth_max,
                **shape.teaching_fields(),
            )  # fmt: skip

    def _draft(
        self,
        draft: ModelBackend,
        state: KVState,
        pending: Sequence[int],
        planner: SagePlanner,
        step: int,
        warp: Warp | None,
    ) -> tuple[DraftedTree, _Shape]:
        config = self.config
        vocab = self.pair.shared_vocab_size
        root_logits = feed_committed(draft, state, pending)
        sage = config.sage
        if config.method in ("chain", "static"):
            template = CHAIN_TREE if config.method == "chain" else STATIC_TREE
            choose, expand, depth = template_chooser(template)
            root = top_k(root_logits, config.template_top_k, vocab, warp)[0]
            drafted = grow_tree(draft, state, root, choose, depth, config.template_top_k, vocab, expand, warp)
            return drafted, _Shape(root_top=root)
        root = top_k(root_logits, sage.top_k, vocab, warp)[0]
        depth_max = planner.window.depth_max
        no_history = sage.shape == "template" and planner.previous is None
        if (step == 1 and sage.static_first_round) or no_history:
            choose, expand, depth = template_chooser(STATIC_TREE)
            drafted = grow_tree(draft, state, root, choose, depth, sage.top_k, vocab, expand, warp)
            entropy, alpha = confidence(drafted.distributions[ROOT])
            return drafted, _Shape(entropy, alpha, depth_max, root_top=root)
        if sage.shape == "template":
            alpha = planner.template_alpha()
            template = plan_template(alpha, depth_max, planner.level_probs(), sage)
            choose, expand, depth = template_chooser(template)
            drafted = grow_tree(draft, state, root, choose, depth, sage.top_k, vocab, expand, warp)
            entropy = confidence(drafted.distributions[ROOT])[0]
            return drafted, _Shape(
                entropy, alpha, depth_max, depth, planned_width(alpha, sage.width_min, sage.width_max), root_top=root
            )
        # Online (default): alpha from this round's root distribution shapes the tree as it grows.
        entropy, alpha = confidence(root[1])
        depth = planned_depth(alpha, sage.depth_min, depth_max)
        width = planned_width(alpha, sage.width_min, sage.width_max)

        decisions: list[LevelDecision] = []

        def grow_online(level: int, frontier: Sequence[Expansion], count: int) -> list[Candidate]:
            decision = judge_level(frontier, level, width, depth, sage.node_budget - count, sage.expansion_threshold)
            decisions.append(decision)
            return list(decision.kept)

        def worth_expanding(node: int, level: int, cumulative: float) -> bool:
            # A child's cumulative probability is at most its parent's: below the next level's
            # threshold no child could be kept, so the node needs no draft forward (the tree is
            # the same; a round whose tree ends before D saves its last draft level).
            return cumulative > expansion_threshold(level + 1, depth, sage.expansion_threshold)

        drafted = grow_tree(draft, state, root, grow_online, depth, sage.top_k, vocab, worth_expanding, warp)
        return drafted, _Shape(entropy, alpha, depth_max, depth, width, root, tuple(decisions))


@dataclass(frozen=True)
class _Shape:
    """What the policy decided for a round (None for the fixed trees)."""

    entropy: float | None = None
    alpha: float | None = None
    depth_max: int | None = None
    planned_depth: int | None = None
    planned_width: int | None = None
    root_top: TopK | None = None  # the draft's top-k after the root
    levels: tuple[LevelDecision, ...] = ()  # SAGE's online rule, level by level

    def teaching_fields(self) -> dict[str, Any]:
        """The record fields the teaching mode explains a round from."""
        levels = self.levels
        shown = [cut for level in levels for cut in level.cut]
        offers = [(parent, width) for level in levels for parent, _, width in level.widths]
        return {
            "root_top_tokens": self.root_top[0] if self.root_top else (),
            "root_top_probs": self.root_top[1] if self.root_top else (),
            "level_thresholds": tuple(level.threshold for level in levels),
            "cut_by_width": tuple(level.cut_count("width") for level in levels),
            "cut_by_threshold": tuple(level.cut_count("threshold") for level in levels),
            "cut_by_budget": tuple(level.cut_count("budget") for level in levels),
            "offer_parents": tuple(parent for parent, _ in offers),
            "offer_widths": tuple(width for _, width in offers),
            "cut_parents": tuple(c.candidate.parent for c in shown),
            "cut_tokens": tuple(c.candidate.token for c in shown),
            "cut_probs": tuple(c.candidate.prob for c in shown),
            "cut_rules": tuple(c.rule for c in shown),
        }


def _verify_forward(target: ModelBackend, state: KVState, root: int, tree: Tree) -> torch.Tensor:
    """One target forward over [root, *nodes]; the logits after each of them, (1 + N, vocab)."""
    start, scratch = state.committed, state.scratch
    logits = target.extend(
        state,
        [root, *tree.tokens],
        positions=[start] + [start + d for d in tree.depths],
        parents=[-1] + [scratch + 1 + p for p in tree.parents],  # node i is entry 1 + i; the root is entry 0
    )
    return logits


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
