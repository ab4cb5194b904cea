"""The one streaming decode loop: every method yields the same round records.

Each round (paper §3.1): 1. draft a tree, 2. verify it in one target
forward under tree attention, 3. accept the longest path the target agrees
with plus its bonus token, 4. commit the path to the target's cache (the
draft dropped its tree and reads the path next round), 5. adapt
(SAGE: confidence from the draft's entropy reshapes the next tree). The
loop names no method: step 1 and step 5 are the proposer's (proposers.py:
plain decoding drafts the empty tree), step 3 (and the first token) the
verifier's: greedy, or rejection sampling when the settings sample
(verify.py, sampling.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from .backends import BackendChoice, ModelBackend, open_backend
from .config import DecodeConfig
from .drafting import DraftedTree
from .errors import ConfigError, InputError, kind_of
from .media import Media, check_is_media
from .methods import MethodSpec, method_spec
from .models import KVState, ModelPair
from .models.one_pass import OnePass
from .models.pair import check_method
from .models.target_features import TargetFeatures, feeding, recorded, recording, watch_embeddings, watch_layers
from .policy import topk_entropy
from .prepared import PreparedInputs, check_vocabulary, prepare_inputs, with_draft_inputs
from .proposers import Drafter, PlainProposer, Proposer, RunStart, TemplateProposer
from .pruning import select_visual_tokens
from .records import NO_TREE, FinishReason, RoundRecord, RunHeader, RunSummary, summarize
from .sampling import make_verifier, resolve_seed
from .timing import Laps, synchronize
from .trees import EMPTY_TREE, ROOT
from .verify import Verifier, Warp, verify_forward

__all__ = ["DecodeRun", "TextStream", "decode"]

DETOKENIZE_CONTEXT = 6  # tokens of left context when decoding one token's text


class TextStream:
    """Each new token's text, decoded with a little left context so spaces and
    multi-byte characters come out as in the full decode."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []

    def push(self, tokens: Sequence[int]) -> tuple[str, ...]:
        """The texts of a round's new tokens: one decode per token (and one for the context),
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


class DecodeRun:
    """A streaming run of one method: iterate it for `RoundRecord`s.

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
        check_decode_arguments(pair, media, prompt, config, prepared)  # each of its type, or one sentence
        check_vocabulary(pair.target, prompt, f"the model {pair.target.name}")  # unknown words named
        check_method(pair, config.method, config.prune_ratio)  # what a family cannot run, refused
        self.backend = BackendChoice.of(config.backend, config.cache, config.forward)  # an unknown name refused
        spec = method_spec(config.method)  # the run's registry entry, looked up once
        uses_draft = spec.drafts
        self.proposer = make_proposer(config, spec)  # the run's one proposer (SAGE's window lives in it)
        top = self.proposer.candidates
        if top > pair.shared_vocab_size:
            raise InputError(
                f"{top} draft candidates per node are more than the {pair.shared_vocab_size} tokens of the vocabulary"
            )
        self.pair = pair
        self.media = media
        self.prompt = prompt
        self.config = config
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
        one_pass = one_pass_of_draft(pair) if uses_draft else None
        self.draft_block = one_pass.block_size if one_pass is not None else 0
        self.features = one_pass.features if one_pass is not None else None  # the target's, read by the draft
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
            settings=config.settings_record(),
            prepare_seconds=self.prepare_seconds,
            prepare_shared=shared,
            prune_ratio=config.prune_ratio,
            visual_tokens=visual_tokens,
            draft_prompt_tokens=int(self.draft_inputs["input_ids"].shape[1]) if self.draft_inputs is not None else None,
            sampling={**asdict(config.sampling), "seed": self.seed},
            draft_block=self.draft_block,
            threads=torch.get_num_threads(),
        )
        self.records: list[RoundRecord] = []
        self._steps = self._run()
        self._broken: str | None = None  # what stopped a round half-way (the run cannot go on)

    def __iter__(self) -> Iterator[RoundRecord]:
        return self

    def __next__(self) -> RoundRecord:
        if self._broken is not None:
            raise InputError(
                f"this run stopped in the middle of round {len(self.records)} ({self._broken}), so its caches are "
                "half-updated and it cannot go on: start a new run with decode(...)"
            )
        try:
            record = next(self._steps)
        except StopIteration:
            raise
        except BaseException as error:  # KeyboardInterrupt too: the generator is dead, its caches half-written
            self._broken = type(error).__name__
            raise
        self.records.append(record)
        return record

    @property
    def broken(self) -> bool:
        """Whether a round stopped half-way (an error or an interrupt inside it): the run cannot be used again."""
        return self._broken is not None

    def run_to_end(self) -> RunSummary:
        for _ in self:
            pass
        return summarize(self.records)

    # -- the loop ------------------------------------------------------------

    def _run(self) -> Iterator[RoundRecord]:
        loop, first = self._prefill()
        yield first
        step = 0
        while loop.finish is None:
            step += 1
            yield self._round(loop, step)

    def _round(self, loop: _Loop, step: int) -> RoundRecord:
        """One round: draft, verify, accept, commit, adapt."""
        # The round runs in inference mode, entered once here (not per forward and commit).
        with torch.inference_mode():
            # Timing: the draft and the verification each end with a device-to-host copy,
            # so the laps need no synchronisation; the step's end has the only one.
            laps = Laps(self.pair.devices)
            # 1. Draft the tree (SAGE: its shape follows the draft's confidence; a one-pass draft: one forward).
            forwards_before = loop.drafter.forwards[0] if loop.drafter is not None else 0
            with feeding(loop.pending_features):  # the pending tokens' target features, where the draft reads them
                proposal = loop.proposer.propose(loop.drafter, loop.pending)
            draft_forwards = loop.drafter.forwards[0] - forwards_before if loop.drafter is not None else 0
            tree = proposal.tree
            draft_seconds = laps.lap()
            # 2. Verify: one target forward over the root and every node.
            with recording(loop.feature_layers) as found:  # the chosen layers' outputs, where the draft reads them
                target_logits = verify_forward(loop.target, loop.target_state, loop.pending[-1], tree)
            # 3. Accept a path and add the bonus token (greedy: the longest path the
            #    target's argmax agrees with; sampling: rejection sampling).
            verdict = loop.verifier.verify(tree, target_logits)
            verify_seconds = laps.lap()
            # 4. Commit: the root and the accepted path stay in the target's cache.
            loop.target.commit(loop.target_state, [0, *(1 + n for n in verdict.accepted_nodes)])
            new_tokens = loop.emit([*verdict.accepted_tokens, verdict.bonus_token])
            loop.pending = [*verdict.accepted_tokens, verdict.bonus_token]
            # each pending token's features: the target's at the root and the accepted nodes (the token before it)
            rows = [0, *(1 + n for n in verdict.accepted_nodes)]
            loop.pending_features = _features_at(found, loop.feature_layers, rows)
            # 5. Adapt: the proposer takes in the verdict (SAGE: the window moves D_max).
            adaptation = loop.proposer.observe(proposal, verdict)
            round_seconds = laps.stop()
        loop.total_seconds += round_seconds
        return loop.record(
            self.config.method,
            step,
            new_tokens,
            phase="decode",
            tree_tokens=tree.tokens,
            tree_parents=tree.parents,
            tree_draft_probs=tree.draft_probs,
            accepted_nodes=verdict.accepted_nodes,
            accepted_tokens=verdict.accepted_tokens,
            bonus_token=verdict.bonus_token,
            tried_nodes=verdict.tried_nodes,
            accept_probs=verdict.accept_probs,
            draft_seconds=draft_seconds,
            verify_seconds=verify_seconds,
            round_seconds=round_seconds,
            target_choices=verdict.target_choices,
            window_mean=adaptation.window_mean,
            next_depth_max=adaptation.next_depth_max,
            path_entropies=_path_entropies(proposal.drafted, verdict.accepted_nodes),
            draft_forwards=draft_forwards,
            **proposal.shape.record_fields(),
        )

    def _prefill(self) -> tuple[_Loop, RoundRecord]:
        """Step 0: the target (and the draft) read the prompt; the target's choice after it (argmax,
        or a sample) is the first new token. The record splits its time: target prefill (as
        "verify"), draft prefill (as "draft"), and the processors' preparation (only in the total)."""
        pair, config = self.pair, self.config
        target = open_backend(pair.target, self.backend)
        verifier = make_verifier(config.sampling, self.seed)  # greedy or sampling: the loop does not ask
        reserve = _cache_reserve(config.max_new_tokens, self.proposer, self.draft_block)
        layers = _watched(pair, self.features)
        laps = Laps(pair.devices)
        # With pruning the target's prefill also scores the visual tokens, and the draft reads only
        # the kept ones (pruning.py).
        with recording(layers) as found:  # the first new token's target features: the prompt's last position's
            prefilled = target.prefill(self.target_inputs, reserve, scored=config.prune_ratio > 0)
        target_state, logits, scores = prefilled.state, prefilled.logits, prefilled.visual_scores
        first = verifier.verify(EMPTY_TREE, logits[None]).bonus_token  # waits for the target
        verify_seconds = laps.lap()
        drafter = self._prefill_draft(scores, reserve, verifier.warp)
        prefill_seconds = laps.stop()
        proposer = self.proposer
        if drafter is not None:  # the proposer's start-of-run hook (sage-cost, SMART: their cost curve)
            # Off the prefill's clock: the first run of a pair measures the pair's curve here (hundreds of ms),
            # a cost of the pair's, as its loading is, not of this run's prefill. It ends synchronised (its
            # timings do), so the first round's clock starts on an idle device as every round's does.
            proposer.start_run(RunStart(pair, self.backend.label, target, target_state, drafter, first))
            for device in dict.fromkeys(pair.devices):
                synchronize(device)
        loop = _Loop(
            target,
            target_state,
            drafter,
            proposer,
            verifier,
            TextStream(pair.target.tokenizer),
            frozenset(pair.target.eos_token_ids),
            config.max_new_tokens,
            pending=[first],
            feature_layers=layers,
            pending_features=_features_at(found, layers, [-1]),
        )
        new_tokens = loop.emit([first])
        seconds = self.prepare_seconds + prefill_seconds
        loop.total_seconds += seconds
        record = loop.record(
            config.method,
            0,
            new_tokens,
            **NO_TREE,
            bonus_token=first,
            draft_seconds=prefill_seconds - verify_seconds,
            verify_seconds=verify_seconds,
            round_seconds=seconds,
        )
        return loop, record

    def _prefill_draft(self, scores: torch.Tensor | None, reserve: int, warp: Warp | None) -> Drafter | None:
        """The draft reads its prompt (pruned, when the target's prefill scored the visual tokens)."""
        if self.draft_inputs is None:
            return None
        pair, config = self.pair, self.config
        draft = open_backend(pair.draft, self.backend, draft=True)
        kept = None
        if scores is not None:
            kept = select_visual_tokens(scores.tolist(), config.prune_ratio, config.prune_attention_share)
        state = draft.prefill(self.draft_inputs, reserve, kept_visual=kept).state
        if kept is not None:
            self.header = replace(self.header, draft_prompt_tokens=state.committed, kept_visual_indices=kept)
        eos = frozenset(pair.target.eos_token_ids)
        return Drafter(draft, state, pair.shared_vocab_size, warp, eos, one_pass_of_draft(pair))


@dataclass
class _Loop:
    """The loop's state between rounds (one per run): the caches, the proposer and the verifier,
    the tokens the draft has not read yet (the last is the root), the running totals."""

    target: ModelBackend
    target_state: KVState
    drafter: Drafter | None
    proposer: Proposer
    verifier: Verifier
    text: TextStream
    eos: frozenset[int]
    max_new_tokens: int
    pending: list[int] = field(default_factory=list)
    # the target layers the draft reads (none: it reads no features) and the pending tokens' features
    feature_layers: tuple[int, ...] = ()
    pending_features: torch.Tensor | None = None
    produced: int = 0
    total_seconds: float = 0.0
    finish: FinishReason | None = None

    def emit(self, candidates: Sequence[int]) -> tuple[int, ...]:
        """The tokens a round appends: cut after an end-of-sequence token or at the token limit."""
        out: list[int] = []
        for token in candidates:
            out.append(token)
            if token in self.eos:
                self.finish = "eos"
                break
            if self.produced + len(out) >= self.max_new_tokens:
                self.finish = "length"
                break
        self.produced += len(out)
        return tuple(out)

    def record(self, method: str, step: int, new_tokens: tuple[int, ...], **fields: Any) -> RoundRecord:
        """The round's record: what it appended with each token's text, and the running totals after it."""
        return RoundRecord(
            method=method,
            round=step,
            new_tokens=new_tokens,
            new_token_texts=self.text.push(new_tokens),
            total_tokens=self.produced,
            total_seconds=self.total_seconds,
            finish_reason=self.finish,
            **fields,
        )


def _watched(pair: ModelPair, features: TargetFeatures | None) -> tuple[int, ...]:
    """The target layers a run records for its draft (none when the draft reads no features), its target's layers
    and its draft's embeddings hooked where transformers' forward runs (`target_features.watch_layers`)."""
    if features is None:
        return ()
    watch_layers(pair.target.spec.language_model(pair.target.model))
    watch_embeddings(pair.draft.model)
    return features.layers


def _features_at(found: dict[int, list[torch.Tensor]], layers: tuple[int, ...], rows: list[int]) -> torch.Tensor | None:
    """The recorded forward's features at `rows` (None: nothing recorded)."""
    return recorded(found, layers)[rows] if layers else None


def _path_entropies(drafted: DraftedTree, accepted_nodes: Sequence[int]) -> tuple[float, ...]:
    """The draft's entropy after the root and after each accepted node, while it drafted there."""
    entropies = []
    for node in (ROOT, *accepted_nodes):
        top = drafted.distributions.get(node)
        if top is None:
            break
        entropies.append(topk_entropy(top))
    return tuple(entropies)


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


def _cache_reserve(max_new_tokens: int, proposer: Proposer, block: int = 0) -> int:
    """Cache entries a run adds after its prompt, at most: its new tokens, then the scratch of a round
    (the root and the proposer's largest tree, and its depth in tokens the draft reads; a one-pass
    draft's masks too)."""
    return max_new_tokens + proposer.max_nodes + 1 + proposer.max_depth + 1 + block


def one_pass_of_draft(pair: ModelPair) -> OnePass | None:
    """The pair's draft's one-pass settings (None: it drafts one level per forward; a stand-in model
    without them is sequential)."""
    one_pass = getattr(pair.draft, "one_pass", None)
    return one_pass if isinstance(one_pass, OnePass) else None


def make_proposer(config: DecodeConfig, spec: MethodSpec | None = None) -> Proposer:
    """The proposer of the settings' method, fresh for one run (SAGE's window starts anew), as its registry
    entry (`spec`, when the caller has it) makes it: plain decoding for a method without a draft, a template
    for a fixed tree, else its own factory with its settings (`DecodeConfig.settings_for`)."""
    spec = spec if spec is not None else method_spec(config.method)
    if not spec.drafts:
        return PlainProposer()
    if spec.template is not None:
        return TemplateProposer(spec.template, config.template_candidates)
    assert spec.proposer is not None  # `register` refuses a drafting method with neither
    return spec.proposer(config.settings_for(spec.name), config)


def decode(
    pair: ModelPair, media: Media, prompt: str, config: DecodeConfig, prepared: PreparedInputs | None = None
) -> DecodeRun:
    """Start a streaming run; iterate the result for per-round records."""
    return DecodeRun(pair, media, prompt, config, prepared)


def check_prompt_type(prompt: object) -> None:
    if isinstance(prompt, str):
        return
    how = "decode it first (prompt.decode('utf-8'))" if isinstance(prompt, bytes | bytearray) else "pass a str"
    raise InputError(f"the prompt must be text (a str), not {kind_of(prompt)}: {how}")


def check_decode_arguments(pair: object, media: object, prompt: object, config: object, prepared: object) -> None:
    """`decode()` and `DecodeRun`'s arguments, each of its type."""
    if not isinstance(pair, ModelPair):
        raise InputError(f"pair must be a sage_core ModelPair, not {kind_of(pair)}: call sage_core.load_pair(...)")
    check_is_media(media)
    check_prompt_type(prompt)
    if not isinstance(config, DecodeConfig):
        raise ConfigError(f"config must be a sage_core DecodeConfig, not {kind_of(config)}: pass DecodeConfig(...)")
    if prepared is not None and not isinstance(prepared, PreparedInputs):
        raise InputError(
            f"prepared must be None or what sage_core.prepare_inputs returns, not {kind_of(prepared)}: leave it out"
        )
