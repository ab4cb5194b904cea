"""`python -m sage_core generate ...`: decode one prompt from the command line.

Without --json the text streams to stdout; with --json one JSON object is
printed at the end. The loading stages are printed to stderr. Any failure
exits with status 2 and one `error: ...` line on stderr (an unexpected one
says so; SAGE_DEBUG=1 prints its traceback too).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import torch

from .config import BACKENDS, DecodeConfig, SamplingConfig, check_max_new_tokens
from .errors import InputError, SageError
from .media import DEFAULT_FRAMES, load_media
from .methods import method_names, specs
from .models.caches import CACHE_STRATEGIES
from .models.forwards import FORWARDS
from .models.presets import GPU_PRESETS
from .models.prompts import check_prompt
from .records import record_to_dict, save_trace, summarize
from .studies.acceptance import acceptance_stats
from .studies.account import no_tree_note
from .threads import ThreadChoice, choose_threads, current_choice

if TYPE_CHECKING:
    from .decode import DecodeRun
    from .records import RunSummary


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one `error: ...` line (status 2) like every other failure."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see --help)\n")


#: Flags renamed (one word for one thing) and their names now. They are no longer read, but stay known, hidden:
#: argparse would otherwise take `--top-k` for an abbreviation of `--top-k-sampling`.
RENAMED_FLAGS = {"--top-k": "--candidates", "--dynamic-top-k": "--dynamic-candidates"}


class RenamedFlag(argparse.Action):
    """A flag under its old name: refused, in one sentence naming the new one."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        new = RENAMED_FLAGS[str(option)]
        parser.error(f"{option} is the old name of {new}, no longer read: use {new}")


def add_method_settings(gen: argparse.ArgumentParser) -> None:
    """One flag per setting of every registered method (`MethodSpec.controls`), at the settings' defaults;
    the renamed flags refuse, unlisted in --help."""
    for spec in specs():
        if not spec.controls:
            continue
        group = gen.add_argument_group(spec.settings_title or f"{spec.short}, --method {spec.name}")
        defaults = spec.default_settings()
        for setting in spec.controls:
            kind = str if setting.choices else int if setting.whole else float
            group.add_argument(
                "--" + setting.name.replace("_", "-"),
                type=kind,
                choices=setting.choices or None,
                default=getattr(defaults, setting.field),
                help=setting.help,
            )
    for old in RENAMED_FLAGS:
        gen.add_argument(old, action=RenamedFlag, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def method_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Every registered method's settings from the command line (method name -> its settings object)."""
    return {
        spec.name: spec.settings_from({s.name: getattr(args, s.name) for s in spec.controls})
        for spec in specs()
        if spec.settings is not None
    }


def build_parser() -> argparse.ArgumentParser:
    prog = "sage" if Path(sys.argv[0]).name == "sage" else "python -m sage_core"  # the console script, or -m
    parser = Parser(prog=prog, description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    add_stats(commands)
    gen = commands.add_parser("generate", help="decode one prompt about an image or a video")
    gen.add_argument("--target", default="builtin", help="hub id or local folder (default: the built-in pair)")
    gen.add_argument("--draft", default="builtin", help="hub id or local folder (default: the built-in pair)")
    gen.add_argument(
        "--preset",
        help="a GPU pair by name (target, draft and placement): "
        + ", ".join(p.key if p.single_gpu else f"{p.key} (several GPUs)" for p in GPU_PRESETS),
    )
    media = gen.add_mutually_exclusive_group(required=True)
    media.add_argument("--image", help="an image file")
    media.add_argument("--video", help="a video file (mp4, webm, avi, mov)")
    gen.add_argument("--frames", type=int, default=DEFAULT_FRAMES, help="video frames to sample (default 8)")
    gen.add_argument("--prompt", required=True)
    gen.add_argument("--method", choices=method_names(), default="sage")
    gen.add_argument("--max-new-tokens", type=int, default=128)
    gen.add_argument("--device", default="auto", help="auto | cpu | cuda")
    gen.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")
    gen.add_argument(
        "--threads",
        type=int,
        help="CPU threads torch runs on (default: SAGE_THREADS, OMP_NUM_THREADS or MKL_NUM_THREADS if set, "
        "else chosen for the pair by timing its one-token step: 1 for a tiny pair on a small CPU)",
    )
    gen.add_argument(
        "--backend",
        choices=BACKENDS,
        default="fast",
        help="a preset of --cache and --forward: fast (in-place, fused: the lean text forward, exact for the "
        "target, fused for the draft), compiled (in-place, compiled: the draft's forward through torch.compile; "
        "the first rounds compile), fast-hf (in-place, transformers) or plain (growing, transformers)",
    )
    gen.add_argument(
        "--cache",
        choices=tuple(CACHE_STRATEGIES),
        help="the cache strategy instead of the preset's: in-place (buffers sized at the prefill, commits that move "
        "only the accepted rows) or growing (transformers' DynamicCache)",
    )
    gen.add_argument(
        "--forward",
        choices=tuple(FORWARDS),
        help="the forward instead of the preset's: transformers, lean (transformers' bit for bit), fused or "
        "compiled (a draft's only: the target then runs lean)",
    )
    place = gen.add_argument_group("placement of a target that does not fit one device (accelerate)")
    place.add_argument("--device-map", help="auto | balanced | sequential: spread the target over the GPUs (and CPU)")
    place.add_argument("--max-memory", type=parse_max_memory, help="per device, e.g. 0=70GiB,1=70GiB,cpu=200GiB")
    place.add_argument("--offload-folder", help="where accelerate may offload target weights to disk")
    place.add_argument("--draft-device", help="the draft's device (default: --device)")
    gen.add_argument(
        "--prune-ratio",
        type=float,
        default=0.0,
        help="share of the visual tokens the draft does not read (SpecVLM pruning; 0 = off, the paper: "
        "0.8 for images, 0.9 for video); the target reads them all",
    )
    sampling = gen.add_argument_group(
        "sampling (exact in distribution: the output is distributed as the target's own "
        "generate(do_sample=True, temperature, top_k, top_p))"
    )
    sampling.add_argument(
        "--temperature", type=float, default=0.0, help="0 = greedy, lossless token for token (default)"
    )
    sampling.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling, in (0, 1] (default 1: off)")
    sampling.add_argument(
        "--top-k-sampling",
        type=int,
        default=50,
        help="sample from the k most likely tokens (default 50 as generate; 0: off)",
    )
    sampling.add_argument("--seed", type=int, help="makes a sampled run reproducible (default: a fresh one, recorded)")
    gen.add_argument("--trace", help="write the per-round records here as JSON lines")
    gen.add_argument("--json", action="store_true", help="print one JSON object with the text and figures")
    add_method_settings(gen)
    return parser


def add_stats(commands: Any) -> None:
    """`stats TRACE`: a saved run's figures and its acceptance figures as engines report them."""
    stats = commands.add_parser("stats", help="a saved trace's figures and acceptance figures (vLLM's names)")
    stats.add_argument("trace", help="a trace written by generate --trace")
    stats.add_argument("--json", action="store_true", help="print one JSON object")


def stats(args: argparse.Namespace) -> int:
    """A trace's summary: its run's figures, the threads it ran on, and its acceptance figures."""
    from .trace_check import load_trace

    header, records = load_trace(args.trace)
    summary, accepted = summarize(records), acceptance_stats(records)
    if args.json:
        result = {key: value for key, value in asdict(summary).items() if key not in ("token_ids", "text")}
        print(json.dumps({**result, "threads": header.threads, "acceptance": accepted.as_dict()}))
        return 0
    rates = ", ".join(f"{rate:.2f}" for rate in accepted.acceptance_rate_per_pos) or "none"
    threads = f", {header.threads} thread{'s' * (header.threads != 1)}" if header.threads else ""
    print(
        f"{header.method} on {header.device}, {header.dtype}{threads}: {len(summary.token_ids)} tokens in "
        f"{summary.seconds:.2f} s ({summary.tokens_per_second:.1f} tokens/s)\n"
        f"drafts {accepted.num_drafts}, draft tokens {accepted.num_draft_tokens}, "
        f"accepted {accepted.num_accepted_tokens}; mean acceptance length {accepted.mean_acceptance_length:.2f}, "
        f"draft acceptance rate {accepted.draft_acceptance_rate:.2f}\nacceptance rate per position: {rates}\n"
        f"accepted lengths (0, 1, 2, ...): {list(accepted.accepted_length_histogram)}; draft forwards "
        f"{accepted.draft_forwards} ({accepted.draft_forwards_per_round:.1f} a round)"
    )
    return 0


def parse_max_memory(text: str) -> dict[str, str]:
    """ "0=70GiB,1=70GiB,cpu=200GiB" -> {"0": "70GiB", "1": "70GiB", "cpu": "200GiB"}."""
    memory = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise argparse.ArgumentTypeError(f"expected DEVICE=SIZE[,DEVICE=SIZE...], got {text!r}")
        memory[key.strip()] = value.strip()
    return memory


def apply_preset(args: argparse.Namespace) -> None:
    """--preset fills the target, draft and placement the command line leaves at their defaults."""
    from .models.presets import gpu_preset

    preset = gpu_preset(args.preset)
    if args.target == "builtin" and args.draft == "builtin":
        args.target, args.draft = preset.target, preset.draft
    args.device_map = args.device_map or preset.device_map
    args.max_memory = args.max_memory or (dict(preset.max_memory) or None)
    args.draft_device = args.draft_device or preset.draft_device


def generate(args: argparse.Namespace) -> int:
    from .decode import decode
    from .models import load_pair
    from .prepared import check_vocabulary

    check_prompt(args.prompt)
    sampling = SamplingConfig(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k_sampling, seed=args.seed)
    config = DecodeConfig(
        method=args.method,
        max_new_tokens=check_max_new_tokens(args.max_new_tokens),
        backend=args.backend,
        cache=args.cache,
        forward=args.forward,
        prune_ratio=args.prune_ratio,
        sampling=sampling,
    ).with_settings(method_settings(args))
    if args.trace and not Path(args.trace).resolve().parent.is_dir():
        raise InputError(f"--trace {args.trace}: the folder {Path(args.trace).parent} does not exist")
    media = load_media(args.image or args.video, frames=args.frames)
    if args.preset is not None:
        apply_preset(args)
    if args.max_memory is not None and args.device_map is None:
        raise InputError("--max-memory needs --device-map")
    pair = load_pair(
        args.target,
        args.draft,
        device=args.device,
        dtype=args.dtype,
        device_map=args.device_map,
        max_memory=args.max_memory,
        offload_folder=args.offload_folder,
        draft_device=args.draft_device,
        report=lambda stage: print(f"[{stage}]", file=sys.stderr, flush=True),
    )
    check_vocabulary(pair.target, args.prompt, f"the model {args.target}")
    threads = choose_threads(pair, args.threads)
    print(f"[threads: {threads.describe()}]", file=sys.stderr, flush=True)
    run = decode(pair, media, args.prompt, config)
    for record in run:
        if not args.json:
            print("".join(record.new_token_texts), end="", flush=True)
    summary = summarize(run.records)
    if args.trace:
        try:
            save_trace(args.trace, run.header, run.records)
        except OSError as error:
            raise InputError(f"cannot write the trace to {args.trace}: {error.strerror or error}") from error
    _report(args, run, summary, config, threads)
    return 0


def _report(
    args: argparse.Namespace,
    run: DecodeRun,
    summary: RunSummary,
    config: DecodeConfig,
    threads: ThreadChoice | None = None,
) -> None:
    """The run's result: one JSON line (`--json`), or the figures on stderr after the streamed text (`threads`:
    the count it ran on, as chosen; default: torch's count now)."""
    threads = threads or current_choice()
    sampling = config.sampling
    if args.json:
        result = asdict(summary)
        result["token_ids"] = list(summary.token_ids)
        result["prompt_tokens"] = run.header.prompt_tokens  # the target's
        result["draft_prompt_tokens"] = run.header.draft_prompt_tokens  # after pruning; null without a draft
        result["sampling"] = run.header.sampling
        result["trace"] = [record_to_dict(r) for r in run.records]
        result["note"] = no_tree_note(config.method, run.records)
        result["threads"] = threads.as_dict()
        result["acceptance"] = acceptance_stats(run.records).as_dict()
        print(json.dumps(result))
    else:
        print(
            f"\n[{config.method}] {len(summary.token_ids)} tokens in {summary.seconds:.2f} s "
            f"({summary.tokens_per_second:.1f} tokens/s), {summary.target_forwards} target forwards, "
            f"tau {summary.mean_accepted:.2f}, {summary.tokens_per_forward:.2f} tokens per forward"
            f", {threads.threads} thread{'s' * (threads.threads != 1)}"
            + _drafting(run, summary)
            + ("" if sampling.greedy else f"; sampled at temperature {sampling.temperature}, seed {run.seed}"),
            file=sys.stderr,
        )
        if note := no_tree_note(config.method, run.records):
            print(note, file=sys.stderr)


def _drafting(run: DecodeRun, summary: RunSummary) -> str:
    """The draft forwards a round (a one-pass draft's block named), or "" without a draft."""
    if not summary.rounds or not summary.draft_forwards:
        return ""
    block = f" (one-pass draft, block {run.header.draft_block})" if run.header.draft_block else ""
    return f", {summary.draft_forwards / summary.rounds:.1f} draft forwards a round{block}"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return stats(args) if args.command == "stats" else generate(args)
    except SageError as error:
        print(f"error: {error}", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    except (MemoryError, torch.OutOfMemoryError):
        print("error: not enough memory: try fewer new tokens, a smaller input, or --device-map", file=sys.stderr)
    except Exception as error:  # a bug: say so in one line (the traceback on demand)
        if os.environ.get("SAGE_DEBUG"):
            traceback.print_exc()
        message = (str(error).strip().splitlines() or [""])[0][:200]
        print(
            f"error: internal error ({type(error).__name__}: {message}); SAGE_DEBUG=1 shows the traceback",
            file=sys.stderr,
        )
    return 2
