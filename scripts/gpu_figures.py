"""The sections of scripts/gpu_check.py: each measures one figure on the GPU (or on tiny models under --smoke).

A section is an estimate of its seconds and a function that emits rows (plain numbers) as it
measures; what one section measures that a later one needs (costs, τ) it leaves in the Context.
Every time is a median of synchronised runs after a warm-up (CUDA events on a GPU).
"""

from __future__ import annotations

import copy
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from sage_core import DecodeConfig, SageError, decode, load_media, load_pair
from sage_core.config import Backend
from sage_core.methods.builtin import BUILTIN, DRAFTING_METHODS, METHODS
from sage_core.models import VLM, KVState, check_pair
from sage_core.models.forwards import COMPILED, FUSED, LEAN, TRANSFORMERS
from sage_core.models.presets import gpu_preset
from sage_core.studies.predict import PAPER_TAUS, CostPoints, RoundShape, predict, shapes_of
from sage_core.timing import median_ms, synchronize
from sage_core.trees import RankPath

ROOT = Path(__file__).resolve().parent.parent
Emit = Callable[..., None]

VISION = {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16}
SHAPES: dict[str, dict[str, Any]] = {
    "7b-shaped": {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
                  "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064},
    "3b-shaped": {"hidden_size": 2048, "num_hidden_layers": 36, "num_attention_heads": 16,
                  "num_key_value_heads": 2, "intermediate_size": 11008, "vocab_size": 151936,
                  "tie_word_embeddings": True},
    "72b-shaped": {"hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64,
                   "num_key_value_heads": 8, "intermediate_size": 29568, "vocab_size": 152064},
    "0.5b-shaped": {"hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
                    "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936,
                    "tie_word_embeddings": True},
}  # fmt: skip
# the GPU preset (sage_core/models/presets.py) whose target or draft each shape stands for
PRESET_OF = {"72b-shaped": ("qwen2.5-vl-72b", "target"), "7b-shaped": ("qwen2.5-vl-7b", "target"),
             "3b-shaped": ("qwen2.5-vl-7b", "draft"),
             "0.5b-shaped": ("llava-ov-7b", "draft")}  # fmt: skip
SMOKE_SIZES = {"tiny-target-big": "small", "tiny-target": "small", "tiny-draft": "smaller", "tiny-draft-b": "smaller"}
SIZES = (1, 2, 4, 8, 16, 32, 64)  # tree nodes (verify) and level widths (draft)
# SAGE-shaped: depth 8, 11 nodes (a confident round: a deep chain, a few siblings near the root)
SAGE_SHAPED: tuple[RankPath, ...] = (*((0,) * d for d in range(1, 9)), (1,), (2,), (0, 1))
# the fixed trees of the registry (the chain, the static tree), then SAGE-shaped
NAMED_TREES: dict[str, tuple[RankPath, ...]] = {
    **{spec.name: spec.template for spec in BUILTIN if spec.template is not None},
    "sage-shaped": SAGE_SHAPED,
}
#: The smoke run's race: plain decoding, the smallest fixed tree and SAGE (each kind of round once).
SMOKE_METHODS = (
    next(spec.name for spec in BUILTIN if not spec.drafts),
    min((spec for spec in BUILTIN if spec.template), key=lambda spec: len(spec.template or ())).name,
    "sage",
)
# a 72B-shaped target does not fit one GPU: timed with this many layers, then extrapolated to all of them
BIG_LAYERS = ((4, 8), 80)
SMOKE_BIG_LAYERS = ((1, 2), 4)
TAU_SEED = 4242  # fresh scenes (the τ study's own seed is 31337)
BF16_LAYERS = 4  # the bf16 check's real-width target: 3,584 wide, this many layers
NOISE = 0.1


@dataclass
class Context:
    """What the sections share: the device, the sizes, the models built, the costs and τ measured."""

    device: torch.device
    smoke: bool
    repeats: int
    compile: bool
    models: dict[str, VLM] = field(default_factory=dict)
    costs: dict[tuple[str, int], tuple[float, CostPoints]] = field(default_factory=dict)
    shapes: dict[str, list[RoundShape]] = field(default_factory=dict)
    tau_prompts: int = 0

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def contexts(self) -> tuple[int, ...]:
        return (64, 160) if self.smoke else (1024, 4096, 16384)

    @property
    def sizes(self) -> tuple[int, ...]:
        return SIZES[:4] if self.smoke else SIZES

    @property
    def target_shape(self) -> str:
        return "tiny-target" if self.smoke else "7b-shaped"

    @property
    def draft_shapes(self) -> tuple[str, ...]:
        return ("tiny-draft", "tiny-draft-b") if self.smoke else ("0.5b-shaped", "3b-shaped")

    @property
    def big_target_shape(self) -> str:
        return "tiny-target-big" if self.smoke else "72b-shaped"

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """(target, draft) shapes to predict for: the 7B-shaped target with each draft, and the 72B-shaped
        target with the 7B-shaped one as its draft (the paper's pairs)."""
        return [*((self.target_shape, d) for d in self.draft_shapes), (self.big_target_shape, self.target_shape)]

    def model(self, shape: str) -> VLM:
        if shape not in self.models:
            self.models[shape] = build(shape, self.device)
        return self.models[shape]

    def release(self) -> None:
        if self.cuda:
            torch.cuda.empty_cache()


def build(shape: str, device: torch.device, layers: int | None = None) -> VLM:
    """A Qwen2.5-VL-shaped model with random weights (bfloat16 on a GPU; the tests' tiny config under --smoke),
    with only `layers` of its text layers where given."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    if shape in SMOKE_SIZES:
        from sage_testkit.tiny_models import build_config

        config: Any = build_config("qwen2_5_vl", SMOKE_SIZES[shape])
        if layers is not None:
            settings = config.to_dict()
            settings["text_config"].update(num_hidden_layers=layers, layer_types=["full_attention"] * layers)
            config = Qwen2_5_VLConfig.from_dict(settings)
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    else:
        text = {**SHAPES[shape], "max_position_embeddings": 32768, "rope_theta": 1000000.0}
        if layers is not None:
            text["num_hidden_layers"] = layers
        config = Qwen2_5_VLConfig(text_config=text, vision_config={**VISION, "out_hidden_size": text["hidden_size"]})
        dtype = torch.bfloat16
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2_5_VLForConditionalGeneration._from_config(config, dtype=dtype)
    model.eval()
    return VLM(shape, model, None, device)


def timed(fn: Callable[[], Any], repeats: int) -> float:
    """Median milliseconds of `fn` over `repeats` runs after one warm-up, as the library times (`median_ms`)."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return median_ms(fn, [device], repeats, warmup=1)


def prompt(length: int, vocab: int, device: torch.device) -> dict[str, torch.Tensor]:
    low, high = min(100, vocab // 4), vocab - min(1000, vocab // 4)
    ids = torch.randint(low, high, (1, length), generator=torch.Generator().manual_seed(length)).to(device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def weights_gib(vlm: VLM) -> float:
    return round(sum(p.numel() * p.element_size() for p in vlm.model.parameters()) / 2**30, 2)


def weights_row(vlm: VLM) -> dict[str, Any]:
    """The weights' memory, measured, beside what the preset this shape stands for writes down."""
    row: dict[str, Any] = {"model": vlm.name, "context": 0, "weights_gib": weights_gib(vlm)}
    if vlm.name in PRESET_OF:
        key, role = PRESET_OF[vlm.name]
        row.update(preset=f"{key} ({role})", preset_memory_written=gpu_preset(key).memory)
    return row


def peak_gib(context: Context) -> float | None:
    return round(torch.cuda.max_memory_allocated(context.device) / 2**30, 2) if context.cuda else None


def bushy_parents(size: int) -> list[int]:
    """The root (entry 0) and `size` nodes under it, 4 children per node: node i's parent is (i - 1) // 4."""
    return [-1] + [(i - 1) // 4 for i in range(1, size + 1)]


def parents_of(paths: Sequence[RankPath]) -> list[int]:
    """The root (entry 0) and the rank paths' nodes, each after its parent."""
    ordered = sorted(paths, key=len)
    index = {path: i + 1 for i, path in enumerate(ordered)}
    return [-1] + [index.get(path[:-1], 0) for path in ordered]


def verify_ms(vlm: VLM, state: KVState, parents: list[int], repeats: int) -> float:
    """One tree verification as a round runs it: the forward over root + nodes, the argmax to the host, the drop."""
    depth: list[int] = []
    for parent in parents:
        depth.append(0 if parent < 0 else depth[parent] + 1)
    base = min(1000, vlm.vocab_size // 2)
    tokens = [base + i for i in range(len(parents))]
    positions = [state.committed + d for d in depth]

    def once() -> None:
        vlm.extend(state, tokens, positions, parents=parents).argmax(dim=-1).tolist()
        vlm.commit(state, [])

    return timed(once, repeats)


def level_ms(vlm: VLM, state: KVState, width: int, repeats: int, compiled: bool = False) -> float:
    """A draft level as the fast backend runs it: the fused lean forward (compiled: through torch.compile), top-10."""
    base = min(1000, vlm.vocab_size // 2)

    def once() -> None:
        tokens, positions = [base] * width, [state.committed] * width
        logits = vlm.extend(state, tokens, positions, parents=[-1] * width, forward=COMPILED if compiled else FUSED)
        logits.softmax(-1).topk(10).values.tolist()
        vlm.commit(state, [])

    return timed(once, repeats)


# -- sections -------------------------------------------------------------------------------------


def versions(context: Context, emit: Emit, left: Callable[[], float]) -> str | None:
    import platform

    import transformers

    import sage_core
    from sage_core.compat import cache_keyword

    name = torch.cuda.get_device_name(context.device) if context.cuda else "cpu"
    emit(
        sage_core=str(Path(sage_core.__file__).parent),
        python=platform.python_version(),
        torch=torch.__version__,
        transformers=transformers.__version__,
        device=name,
        cuda=torch.version.cuda,
        smoke=context.smoke,
        cache_keyword=cache_keyword(context.model(context.target_shape).model),
    )
    return None


def target_costs(context: Context, target: VLM, length: int, emit: Emit) -> tuple[float, CostPoints]:
    """After a prompt of `length` tokens: the one-token step, bushy trees of every size, the named trees."""
    if context.cuda:
        torch.cuda.reset_peak_memory_stats(context.device)
    with torch.inference_mode():
        state, _ = target.prefill(prompt(length, target.vocab_size, context.device), reserve=128)
        one = verify_ms(target, state, [-1], context.repeats)
        emit(model=target.name, context=length, tree="one-token", nodes=0, depth=0, ms=round(one, 3), x_one=1.0)
        points = []
        for size in context.sizes:
            ms = verify_ms(target, state, bushy_parents(size), context.repeats)
            points.append(ms)
            emit(model=target.name, context=length, tree="bushy", nodes=size, ms=round(ms, 3), x_one=ms / one)
        for name, paths in NAMED_TREES.items():
            ms = verify_ms(target, state, parents_of(paths), context.repeats)
            depth = max(len(p) for p in paths)
            emit(
                model=target.name,
                context=length,
                tree=name,
                nodes=len(paths),
                depth=depth,
                ms=round(ms, 3),
                x_one=ms / one,
                peak_gib=peak_gib(context),
            )
    del state
    context.release()
    return one, CostPoints(context.sizes, tuple(points))


def verify(context: Context, emit: Emit, left: Callable[[], float]) -> str | None:
    """The target's one-token step and verify cost per tree, at each context length."""
    target = context.model(context.target_shape)
    emit(**weights_row(target), tree="weights")
    for length in context.contexts:
        if left() < (5 if context.smoke else 20):
            return f"stopped before context {length}: budget"
        context.costs[(target.name, length)] = target_costs(context, target, length, emit)
    return None


def verify_big(context: Context, emit: Emit, left: Callable[[], float]) -> str | None:
    """A 72B-shaped target (it does not fit one GPU): timed with a few of its layers and with twice as many,
    then extrapolated linearly in the layer count to all of them (the embedding and head are in both)."""
    (low, high), full = SMOKE_BIG_LAYERS if context.smoke else BIG_LAYERS
    shape = context.big_target_shape
    measured: dict[tuple[int, int], tuple[float, CostPoints]] = {}
    weights: dict[int, float] = {}
    for layers in (low, high):
        vlm = build(shape, context.device, layers)
        vlm.name = f"{shape} ({layers} layers)"
        weights[layers] = weights_gib(vlm)
        for length in context.contexts:
            if left() < (5 if context.smoke else 20):
                break
            measured[(layers, length)] = target_costs(context, vlm, length, emit)
        del vlm
        context.release()
    scale = (full - high) / (high - low)
    name = f"{shape} (extrapolated to {full} layers)"
    row: dict[str, Any] = {
        "model": name,
        "tree": "weights",
        "weights_gib": round(weights[high] + scale * (weights[high] - weights[low]), 2),
    }
    if shape in PRESET_OF:
        row.update(
            preset=f"{PRESET_OF[shape][0]} (target)", preset_memory_written=gpu_preset(PRESET_OF[shape][0]).memory
        )
    emit(**row)
    for length in context.contexts:
        if (low, length) not in measured or (high, length) not in measured:
            return f"stopped before context {length}: budget"
        (one_low, low_points), (one_high, high_points) = measured[(low, length)], measured[(high, length)]
        # more layers never cost less: a timing's noise must not extrapolate below the measured model
        one = one_high + scale * max(0.0, one_high - one_low)
        points = tuple(h + scale * max(0.0, h - lo) for lo, h in zip(low_points.ms, high_points.ms, strict=True))
        emit(model=name, context=length, tree="one-token", nodes=0, ms=round(one, 3), x_one=1.0)
        for size, ms in zip(context.sizes, points, strict=True):
            emit(model=name, context=length, tree="bushy", nodes=size, ms=round(ms, 3), x_one=ms / one)
        context.costs[(shape, length)] = (one, CostPoints(context.sizes, points))
    return None


def draft(context: Context, emit: Emit, left: Callable[[], float]) -> str | None:
    """Each draft's cost per level (fused forward) at each context; the first draft compiled too."""
    for index, shape in enumerate(context.draft_shapes):
        vlm = context.model(shape)
        emit(**weights_row(vlm), kind="weights")
        for length in context.contexts:
            if left() < (5 if context.smoke else 15):
                return f"stopped before {shape} at context {length}: budget"
            if context.cuda:
                torch.cuda.reset_peak_memory_stats(context.device)
            with torch.inference_mode():
                state, _ = vlm.prefill(prompt(length, vlm.vocab_size, context.device), reserve=128)
                points = []
                for width in context.sizes:
                    ms = level_ms(vlm, state, width, context.repeats)
                    points.append(ms)
                    emit(
                        model=shape,
                        context=length,
                        kind="level",
                        nodes=width,
                        ms=round(ms, 3),
                        peak_gib=peak_gib(context),
                    )
                first = context.compile and index == 0 and length == context.contexts[0]
                compilable = vlm.lean is not None and vlm.lean.compilable
                if first and compilable and left() > (30 if context.smoke else 150):
                    compiled_levels(context, vlm, state, emit)
            context.costs[(shape, length)] = (0.0, CostPoints(context.sizes, tuple(points)))
            del state
            context.release()
    return None


def compiled_levels(context: Context, vlm: VLM, state: KVState, emit: Emit) -> None:
    first = time.perf_counter()
    level_ms(vlm, state, 1, 1, compiled=True)  # the first compiled forward compiles
    emit(model=vlm.name, context=state.committed, kind="compile", seconds=round(time.perf_counter() - first, 1))
    for width in context.sizes[:4]:
        ms = level_ms(vlm, state, width, context.repeats, compiled=True)
        emit(model=vlm.name, context=state.committed, kind="level_compiled", nodes=width, ms=round(ms, 3))


def tau(context: Context, emit: Emit, left: Callable[[], float]) -> str | None:
    """τ and tree shapes of every drafting method on the built-in pair, fresh long answers, each checked lossless."""
    from sage_world.quality import example_media
    from sage_world.scenes import LONG_KINDS, make_examples

    pair = load_pair("builtin", "builtin", context.device.type, "float32")
    count, max_new = (1, 16) if context.smoke else (6, 128)
    examples = [(example_media(e), e.question) for e in make_examples(TAU_SEED, count, kinds=LONG_KINDS)]
    references = [decode(pair, m, q, DecodeConfig("ar", max_new)).run_to_end().token_ids for m, q in examples]
    context.tau_prompts = count
    for method in DRAFTING_METHODS:
        if left() < (3 if context.smoke else 20):
            return f"stopped before {method}: budget"
        shapes, mismatches = [], 0
        try:
            for (media, question), reference in zip(examples, references, strict=True):
                run = decode(pair, media, question, DecodeConfig(method, max_new))
                mismatches += run.run_to_end().token_ids != reference
                shapes += shapes_of(run.records)
        except SageError as error:  # a method that needs what this pair or run lacks: said, the others still run
            emit(method=method, error=str(error))
            continue
        context.shapes[method] = shapes
        emit(
            method=method,
            prompts=count,
            rounds=len(shapes),
            tau=_mean(s.accepted for s in shapes),
            nodes=_mean(s.nodes for s in shapes),
            depth=_mean(len(s.level_widths) for s in shapes),
            lossless=mismatches == 0,
        )
    return None


def _mean(values: Any) -> float | None:
    values = list(values)
    return round(statistics.fmean(values), 2) if values else None


def predicted(context: Context, emit: Emit, left: Callable[[], float]) -> str | None:
    """Predicted decode-only speedup per method, target/draft shape and context (sage_core/studies/predict.py)."""
    rows = 0
    for target, shape in context.pairs:
        draft_costs = "its verify curve" if shape == context.target_shape else "its fused draft levels"
        for length in context.contexts:
            if (target, length) not in context.costs or (shape, length) not in context.costs:
                continue
            one, verify_points = context.costs[(target, length)]
            level_points = context.costs[(shape, length)][1]
            source = f"built-in pair, {context.tau_prompts} fresh long answers (this run)"
            cases = [(m, source, s) for m, s in context.shapes.items() if s]
            cases += [(m, src, [RoundShape(t, w)]) for m, src, t, w in PAPER_TAUS]
            for method, tau_source, rounds in cases:
                p = predict(method, tau_source, rounds, one, verify_points, level_points)
                emit(
                    target=target,
                    draft=shape,
                    context=length,
                    method=method,
                    tau=round(p.tau, 2),
                    nodes=round(p.nodes, 1),
                    draft_ms_per_round=round(p.draft_ms_per_round, 3),
                    verify_ms_per_round=round(p.verify_ms_per_round, 3),
                    draft_ms_per_token=round(p.draft_ms_per_token, 3),
                    speedup=float(f"{p.speedup:.3g}"),
                    tau_source=tau_source,
                    draft_costs=draft_costs,
                )
                rows += 1
    return None if rows else "nothing to predict: the verify, draft or tau section did not run"


def bf16_pair(context: Context, kind: str) -> Any:
    """A real-width (hidden 3,584, BF16_LAYERS layers, Qwen2.5-VL-7B's initializer range: logits of a real
    model's spread, near-ties included) Qwen2.5-VL target with the tests' tiny processor and vision tower, in
    bfloat16, and a draft that is a copy of it (`copy`) or a copy with noised weights (`noised`)."""
    from transformers import GenerationConfig, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    from sage_testkit.tiny_models import SPECIAL_TOKENS, build_config, build_processor

    config: Any = build_config("qwen2_5_vl", "small")
    if not context.smoke:
        settings = config.to_dict()
        settings["text_config"].update(
            hidden_size=3584,
            num_attention_heads=28,
            num_key_value_heads=4,
            intermediate_size=18944,
            num_hidden_layers=BF16_LAYERS,
            layer_types=["full_attention"] * BF16_LAYERS,
            initializer_range=0.02,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]},
        )
        settings["vision_config"]["out_hidden_size"] = 3584
        config = Qwen2_5_VLConfig.from_dict(settings)
    torch.manual_seed(0)
    with torch.device(context.device):
        model = Qwen2_5_VLForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
    special = SPECIAL_TOKENS["qwen2_5_vl"]
    model.generation_config = GenerationConfig(
        bos_token_id=None, eos_token_id=special["<|im_end|>"], pad_token_id=special["<|endoftext|>"]
    )
    model.eval()
    other = copy.deepcopy(model)
    if kind == "noised":
        generator = torch.Generator(device=context.device).manual_seed(7)
        with torch.no_grad():
            for param in other.parameters():
                noise = torch.randn(param.shape, generator=generator, device=param.device, dtype=torch.float32)
                param.add_((noise * param.float().std() * NOISE).to(param.dtype))
    processor = build_processor("qwen2_5_vl")
    return check_pair(
        VLM("bf16-target", model, processor, context.device), VLM(f"bf16-{kind}", other, processor, context.device)
    )


def bf16(context: Context, emit: Emit, left: Callable[[], float]) -> str | None:
    """Every method against `generate(do_sample=False)` in bfloat16: identical, or its first divergence and margin."""
    import numpy as np
    from PIL import Image

    from sage_core import image_media

    media = image_media(Image.fromarray((np.random.RandomState(0).rand(56, 56, 3) * 255).astype("uint8")), "noise.png")
    question, max_new = "Describe the picture.", (12 if context.smoke else 64)
    for kind in ("copy", "noised"):
        if left() < (5 if context.smoke else 30):
            return f"stopped before the {kind} draft: budget"
        pair = bf16_pair(context, kind)
        inputs = pair.target.prepare(media, question)
        with torch.inference_mode():
            out = pair.target.model.generate(
                **inputs, do_sample=False, max_new_tokens=max_new, return_dict_in_generate=True, output_logits=True
            )
        expected = out.sequences[0, inputs["input_ids"].shape[1] :].tolist()
        for method in METHODS:
            got = list(decode(pair, media, question, DecodeConfig(method, max_new)).run_to_end().token_ids)
            first = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), None)
            if first is None and len(got) != len(expected):
                first = min(len(got), len(expected))
            row: dict[str, Any] = {"draft": kind, "method": method, "tokens": len(got), "identical": first is None}
            if first is not None and first < len(out.logits):
                top = out.logits[first][0].float().topk(2).values.tolist()
                row.update(
                    first_divergence=first,
                    margin=round(top[0] - top[1], 4),
                    ours=got[first] if first < len(got) else None,
                    generate=expected[first] if first < len(expected) else None,
                )
            emit(**row)
        del pair, out
        context.release()
    return None


def plain(context: Context, emit: Emit, left: Callable[[], float]) -> str | None:
    """Plain decoding through the library (lean forward, transformers' forward) against `generate()`."""
    target = context.model(context.target_shape)
    length, new_tokens = context.contexts[0], (8 if context.smoke else 128)
    inputs = prompt(length, target.vocab_size, context.device)
    made: dict[str, list[int]] = {}

    def ours(lean: bool) -> Callable[[], None]:
        def run() -> None:
            with torch.inference_mode():
                state, logits = target.prefill(inputs, reserve=new_tokens + 8)
                tokens = [int(logits.argmax())]
                for _ in range(new_tokens - 1):
                    forward = LEAN if lean else TRANSFORMERS
                    logits = target.extend(state, [tokens[-1]], [state.committed], parents=[-1], forward=forward)
                    tokens.append(int(logits[0].argmax()))
                    target.commit(state, [0])
            made["lean" if lean else "transformers"] = tokens

        return run

    def theirs() -> None:
        with torch.inference_mode():
            out = target.model.generate(**inputs, do_sample=False, max_new_tokens=new_tokens, min_new_tokens=new_tokens)
        made["generate"] = out[0, length:].tolist()

    for name, fn in (
        ("library, lean forward", ours(True)),
        ("library, transformers' forward", ours(False)),
        ("generate()", theirs),
    ):
        if left() < (3 if context.smoke else 20):
            return f"stopped before {name}: budget"
        ms = timed(fn, 3)
        emit(
            model=target.name,
            context=length,
            decoder=name,
            new_tokens=new_tokens,
            ms=round(ms, 1),
            ms_per_token=round(ms / new_tokens, 3),
        )
    same = made.get("lean") == made.get("generate") == made.get("transformers")
    emit(model=target.name, context=length, decoder="tokens equal generate()'s", same=same)
    return None


def race(context: Context, emit: Emit, left: Callable[[], float]) -> str | None:
    """The built-in pair's race on this device: every method, eager (fast) and compiled backends, one example."""
    pair = load_pair("builtin", "builtin", context.device.type, "float32")
    media = load_media(ROOT / "assets" / "examples" / "describe_five.png")
    question, max_new = "describe the image in detail.", (12 if context.smoke else 128)
    methods = SMOKE_METHODS if context.smoke else METHODS
    backends: tuple[Backend, ...] = ("fast", "compiled") if context.compile and not context.smoke else ("fast",)
    for backend in backends:
        plain_rate = None
        for method in methods:
            if left() < (3 if context.smoke else (60 if backend == "compiled" and method == methods[0] else 10)):
                return f"stopped before {method} on {backend}: budget"
            config = DecodeConfig(method, max_new, backend=backend)
            decode(pair, media, question, config).run_to_end()  # warm-up (and the compile)
            synchronize(context.device)
            started = time.perf_counter()
            summary = decode(pair, media, question, config).run_to_end()
            synchronize(context.device)
            seconds = time.perf_counter() - started
            rate = len(summary.token_ids) / seconds
            plain_rate = plain_rate or (rate if method == "ar" else None)
            emit(
                backend=backend,
                method=method,
                tokens=len(summary.token_ids),
                seconds=round(seconds, 3),
                tokens_per_s=round(rate, 1),
                x_plain=round(rate / plain_rate, 2) if plain_rate else None,
                tau=round(summary.mean_accepted, 2),
            )
    return None


def budget_sweep(context: Context, emit: Emit, left: Callable[[], float]) -> str | None:
    """The node-budget sweep (sage_core.studies.sweep, as `benchmark.py --sweep`) on the built-in pair: τ, tokens per
    target forward and decode-only speedup per budget for SAGE, the dynamic tree and a best-first tree, and
    sage-cost's own choices (the mean node count it chose, marked `chosen`)."""
    from sage_core.prepared import prepare_inputs
    from sage_core.studies.sweep import sweep

    if left() < (5 if context.smoke else 45):
        return "skipped: budget"
    pair = load_pair("builtin", "builtin", context.device.type, "float32")
    examples = ("describe_five.png", "describe the image in detail."), ("chart.png", "describe the chart.")
    cases = [
        (name, prepare_inputs(pair, load_media(ROOT / "assets" / "examples" / name), prompt))
        for name, prompt in examples[: 1 if context.smoke else 2]
    ]
    budgets = (4, 12) if context.smoke else (4, 8, 12, 16, 24, 32, 48, 64)
    result = sweep(pair, cases, budgets, max_new_tokens=12 if context.smoke else 128, repeats=1)
    for point in (*result.points, *result.chosen):
        emit(
            method=point.method,
            budget=round(point.budget, 1),
            chosen=point in result.chosen,
            tau=round(point.tau, 2),
            tokens_per_forward=round(point.tokens_per_forward, 2),
            nodes=round(point.nodes, 1),
            decode_speedup=round(point.speedup, 2),
        )
    return None


def memory(context: Context, emit: Emit, left: Callable[[], float]) -> str | None:
    """Issue 9's memory case (scripts/memory_check.py): Qwen's vocabulary, a short and a long prompt."""
    from scripts import memory_check as check  # (its pair builder and measurement; it loads models when called)

    pads, max_new = ([0, 40], 4) if context.smoke else ([0, 1940], 32)
    with tempfile.TemporaryDirectory() as folder:
        small_target, small_draft = check.build_pair(Path(folder))
        rows = check.measure(small_target, small_draft, context.device.type, pads, max_new, "sage")
    for row in rows:
        emit(**{k: v for k, v in row.items() if isinstance(v, int | float | str | bool) or v is None})
    return None


@dataclass(frozen=True)
class Section:
    run: Callable[[Context, Emit, Callable[[], float]], str | None]
    full_s: float  # about this long at real sizes on one H200 (a guess until the first run)
    smoke_s: float

    def estimate_s(self, context: Context) -> float:
        return self.smoke_s if context.smoke else self.full_s


SECTIONS: dict[str, Section] = {
    "versions": Section(versions, 30, 1),
    "verify": Section(verify, 45, 5),
    "verify_72b": Section(verify_big, 60, 8),
    "draft": Section(draft, 60, 10),
    "tau": Section(tau, 60, 10),
    "predict": Section(predicted, 1, 0),
    "bf16": Section(bf16, 45, 5),
    "plain": Section(plain, 45, 3),
    "race": Section(race, 90, 5),
    "budget_sweep": Section(budget_sweep, 90, 30),
    "memory": Section(memory, 60, 20),
}
