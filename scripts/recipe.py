"""The built-in pair's recipe as data: every call of scripts/train_builtin_pair.py that made assets/builtin, one
`Stage` each, then run 19's call of scripts/train_target_features.py (a `FeatureStage`: the one-pass draft reads the
target's features), and the runner that makes them in order.

A stage names what it starts from, what it trains and where it writes. Places are written with two roots:
``OUT`` is the pair being made (assets/builtin by default), which the shipped stages leave their models in one after
another, and ``WORK/<folder>`` is a stage's own output (a target trained on, or a draft's intermediate stage).
``OUT/target`` is therefore whatever target the stages before left in OUT (or the pair OUT held when a run starts
``--from`` a later stage). A target stage trains the target alone and carries the sure draft along untrained; a
draft stage distils one draft from a frozen target. The history of each run, its figures and why it was made:
docs/training-history.md.

    python scripts/recipe.py [--from STAGE|RUN] [--dry-run] [OUT [WORK]]

OUT defaults to assets/builtin, WORK to OUT-work. Without ``--from`` it makes the shipped pair from scratch (every
stage of `SHIPPED`); ``--from`` starts at a stage (``run13-target``) or at a numbered run's first stage (``13``) and
goes to the end of the recipe that holds it.
``--dry-run`` prints each stage's command instead of running it. Each stage checkpoints as it trains, and the runner
marks a finished stage in its checkpoint folder (``WORK/<stage>-checkpoints/done``): the same command run again
skips the finished stages and resumes the one that stopped. `bash scripts/train_builtin_pair_full.sh` runs this.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "scripts" / "train_builtin_pair.py"
FEATURES = ROOT / "scripts" / "train_target_features.py"

Share = float | str | bool  # a flag's value; True: a switch given alone
Mix = dict[str, Share]  # the data a stage draws and its loss weights: scripts/train_builtin_pair.py's flags

SURE, HESITANT, ONE_PASS = "draft", "hesitant-draft", "one-pass-draft"  # the drafts' folders in OUT
ONE_PASS_BLOCK = 10  # the one-pass draft predicts 10 tokens a forward (PARD's block)


@dataclass(frozen=True)
class Budget:
    """How long one model trains: `steps`, or `minutes` of training (runs 1-8 gave minutes; 0: not at all), at the
    learning rate `lr` (as the command line writes it; None: the script's default)."""

    steps: int | None = None
    minutes: float | None = None
    lr: str | None = None

    def words(self, side: str) -> list[str]:
        length = ["--" + side + "-steps", str(self.steps)] if self.steps else [f"--{side}-minutes", str(self.minutes)]
        return length + ([] if self.lr is None else [f"--{side}-lr", self.lr])


FROZEN = Budget(minutes=0)


def minutes(length: float, lr: str) -> Budget:
    return Budget(minutes=length, lr=lr)


def steps(length: int, lr: str) -> Budget:
    return Budget(steps=length, lr=lr)


@dataclass(frozen=True)
class Stage:
    """One call of scripts/train_builtin_pair.py. `name` is also its checkpoint folder, WORK/<name>-checkpoints;
    `run` the numbered run of docs/training-history.md it belongs to. `target_from` and `draft_from`: the saved
    models it starts from (None: built from scratch); `target` and `draft`: how long each trains (None: the
    script's defaults, the second recipe's four stages; `FROZEN`: not at all). `draft_name`: the draft's folder
    (SURE, HESITANT or ONE_PASS); `keep_layers`: the draft cut to its first text layers; `block_copies` and
    `block_weight`: a one-pass draft's cuts a row and the weight of its deeper depths."""

    name: str
    run: int
    writes: str  # "OUT" or "WORK/<folder>"
    seed: int | None = None  # None: the script's default, 1234
    mix: Mix = field(default_factory=dict)
    eval_n: int | None = 60
    target_from: str | None = "OUT/target"
    draft_from: str | None = "OUT/draft"
    target: Budget | None = FROZEN
    draft: Budget | None = FROZEN
    draft_name: str = SURE
    keep_layers: int | None = None
    block_copies: int = 1
    block_weight: float = 1

    @property
    def script(self) -> Path:
        return TRAIN

    @property
    def trains(self) -> str:
        """ "pair" (both models), "target", or the draft's folder name (SURE, HESITANT, ONE_PASS)."""
        target, draft = self.target not in (None, FROZEN), self.draft not in (None, FROZEN)
        if target == draft:
            return "pair"
        return "target" if target else self.draft_name


def flags(settings: Mapping[str, Share | None]) -> list[str]:
    """`{"rows": 0.25, "visitor-words": True}` as ["--rows", "0.25", "--visitor-words"] (None: left out)."""
    words: list[str] = []
    for name, value in settings.items():
        if value is not None:
            words += [f"--{name}"] if value is True else [f"--{name}", str(value)]
    return words


def resolve(where: str, out: Path, work: Path) -> Path:
    """A place of the table ("OUT", "OUT/target", "WORK/run8/target") with OUT and WORK filled in."""
    root, _, rest = where.partition("/")
    base = {"OUT": out, "WORK": work}[root]
    return base / rest if rest else base


def command(stage: Stage, out: Path, work: Path) -> list[str]:
    """The stage's arguments to scripts/train_builtin_pair.py, with OUT and WORK filled in."""
    one_pass = stage.draft_name == ONE_PASS
    checkpoints = work / f"{stage.name}-checkpoints"
    words = flags({"seed": stage.seed, "out": str(resolve(stage.writes, out, work)), "checkpoints": str(checkpoints)})
    words += flags(stage.mix) + flags({"eval-n": stage.eval_n})
    if one_pass:  # both models' other stages off, before the models are named
        frozen = {"target-vision-minutes": 0, "target-minutes": 0, "draft-vision-minutes": 0}
        words += flags({"one-pass": ONE_PASS_BLOCK, "draft-name": ONE_PASS, **frozen})
    if stage.target_from is not None and stage.target is not None:
        words += ["--init-target", str(resolve(stage.target_from, out, work))]
        words += [] if one_pass else ["--target-vision-minutes", "0", *stage.target.words("target")]
    if stage.draft_from is not None and stage.draft is not None:
        words += ["--init-draft", str(resolve(stage.draft_from, out, work))]
        named = stage.draft_name if stage.draft_name == HESITANT else None  # the sure draft's is the default
        words += flags({"draft-layers": stage.keep_layers, "draft-name": named})
        words += [] if one_pass else ["--draft-vision-minutes", "0"]
        words += stage.draft.words("draft")
        if (stage.block_copies, stage.block_weight) != (1, 1):
            words += flags({"block-copies": stage.block_copies, "block-weight": stage.block_weight})
    return words


# -- the data mixes (each stage below names the ones it draws from) ------------------------------------------------

#: Run 4's: 15 % of the short questions about a scene of one object, a quarter of the pictures drawn as by hand, a
#: fifth of the rest at shifted scales, half of the questions in other words.
RUN4: Mix = {"lone": 0.15, "hand-drawn": 0.25, "shifted": 0.2, "reworded": 0.5}
RUN7: Mix = RUN4 | {"hand-drawn": 0.35, "shifted": 0.3}  # more drawings and shifted scenes
ROWS: Mix = {"rows": 0.25, "jpeg": 0.3}  # run 8's: two rows of shapes to read, pictures saved as JPEGs
RUN9: Mix = RUN4 | {"hand-drawn": 0.4, "shifted": 0.3, "rows": 0.2, "jpeg": 0.3}  # run 7's, more drawings, rows, JPEGs
FREE: Mix = {"free": 0.3, "visitor-words": True}  # run 10's: free wordings and the words visitors ask with
VISITORS: Mix = {"visitors": 0.3, "more-visitor-words": True}  # run 13's: the questions visitors asked, and their words
CHECKED: Mix = VISITORS | {"checking": True}  # run 15's: a count or whether a thing is there after checking every shape
RUN13: Mix = RUN9 | FREE | VISITORS  # the target's mix from run 13 on
RUN15: Mix = RUN9 | FREE | CHECKED  # and from run 15 on
WEIGHED: Mix = {"decision-weight": 10}  # the yes, no and number words of those answers weighted 10 (run 15)
#: Run 17's: a chart asked about as a graph, its count of bars weighted 10 too (with a fifth of the pictures asked
#: run 15's two questions).
GRAPHS: Mix = {"counts": 0.2, "decisive-kinds": "chart,bar", **WEIGHED}
#: Run 18's: "how many shapes are there?" in three tenths of the pictures, its number word weighted 10 too.
TOTALS: Mix = {"counts": 0.2, "graphs": 0.25, "totals": 0.3, "decisive-kinds": "chart,bar,count", **WEIGHED}


def every_draft(run: int, teacher: str, mix: Mix, seeds: Sequence[int], lengths: Sequence[int]) -> tuple[Stage, ...]:
    """The drafts in OUT distilled on from the target `teacher`, each back into OUT, `lengths` steps each: the sure
    draft (lr 2e-4), the hesitant one (3e-4) and the one-pass one (2e-4, two cuts a row, its deeper depths weighted
    2), as many as `seeds` names."""
    kinds = (("draft", SURE, "2e-4"), ("hesitant", HESITANT, "3e-4"), ("one-pass", ONE_PASS, "2e-4"))
    return tuple(
        Stage(
            f"run{run}-{short}",
            run,
            "OUT",
            seed,
            mix,
            target_from=teacher,
            draft_from=f"OUT/{folder}",
            draft=steps(length, lr),
            draft_name=folder,
            block_copies=1 + (folder == ONE_PASS),
            block_weight=1 + (folder == ONE_PASS),
        )
        for (short, folder, lr), seed, length in zip(kinds, seeds, lengths, strict=False)
    )


#: The shipped pair (assets/builtin since 2026-12-05): runs 1-4, 6-10, 12, 13, 15, 17 and 18 in 38 stages (run 14
#: was tried and not shipped; its answer form is gone from the data: docs/training-history.md, "Run 14").
SHIPPED: tuple[Stage, ...] = (
    # runs 1-3: the second recipe from scratch (the script's defaults: 80 minutes of training), its target 45
    # minutes more, its draft distilled 10 minutes more from that target
    Stage("first", 1, "WORK/first", eval_n=None, target_from=None, draft_from=None, target=None, draft=None),
    Stage(
        "longer",
        2,
        "WORK/longer",
        4321,
        eval_n=None,
        target_from="WORK/first/target",
        draft_from="WORK/first/draft",
        target=minutes(45, "1e-4"),
    ),
    Stage(
        "distill",
        3,
        "WORK/distilled",
        4321,
        eval_n=None,
        target_from="WORK/longer/target",
        draft_from="WORK/first/draft",
        draft=minutes(10, "3e-4"),
    ),
    # run 4: questions in other words, drawings and shifted scenes; then the hesitant draft, the sure one cut to
    # its first text layer
    Stage(
        "run4",
        4,
        "OUT",
        5678,
        RUN4,
        90,
        "WORK/distilled/target",
        "WORK/distilled/draft",
        minutes(42, "1e-4"),
        minutes(7, "2e-4"),
    ),
    Stage("hesitant", 4, "OUT", 8765, RUN4, 90, draft=minutes(5, "3e-4"), draft_name=HESITANT, keep_layers=1),
    # run 6: the sure draft distilled on, on the first runs' mix; run 7: more drawings and shifted scenes
    Stage("redistill", 6, "OUT", 9999, eval_n=90, draft=minutes(10, "2e-4")),
    Stage("run7-target", 7, "WORK/run7", 2468, RUN7, 90, target=minutes(27, "1e-4")),
    Stage("run7-draft", 7, "OUT", 1357, eval_n=90, target_from="WORK/run7/target", draft=minutes(6, "2e-4")),
    # run 8: a world with rows to read and JPEGs; run 9: its drawings won back; run 10: visitors' wordings
    Stage("run8-target", 8, "WORK/run8", 8642, RUN7 | ROWS, target=minutes(55, "1e-4")),
    Stage("run8-draft", 8, "OUT", 9753, ROWS, target_from="WORK/run8/target", draft=minutes(10, "2e-4")),
    Stage(
        "run8-hesitant",
        8,
        "OUT",
        7531,
        ROWS,
        target_from="WORK/run8/target",
        draft_from="OUT/hesitant-draft",
        draft=minutes(5, "3e-4"),
        draft_name=HESITANT,
    ),
    Stage("run9-target", 9, "WORK/run9", 1133, RUN9, target_from="WORK/run8/target", target=steps(500, "1e-4")),
    *every_draft(9, "WORK/run9/target", ROWS, seeds=(2244, 3355), lengths=(150, 80)),
    Stage("run10-target", 10, "WORK/run10", 4455, RUN9 | FREE, target=steps(1500, "1e-4")),
    *every_draft(10, "WORK/run10/target", ROWS | FREE, seeds=(5566, 6677), lengths=(300, 150)),
    # run 12: the one-pass draft, from the sure draft, in three stages
    Stage("run12a", 12, "WORK/run12a", 7788, ROWS | FREE, draft=minutes(24, "5e-4"), draft_name=ONE_PASS),
    Stage(
        "run12b",
        12,
        "WORK/run12b",
        8899,
        ROWS | FREE,
        draft_from="WORK/run12a/one-pass-draft",
        draft=steps(800, "3e-4"),
        draft_name=ONE_PASS,
        block_copies=2,
        block_weight=2,
    ),
    Stage(
        "run12c",
        12,
        "OUT",
        9911,
        ROWS | FREE,
        draft_from="WORK/run12b/one-pass-draft",
        draft=steps(1000, "2e-4"),
        draft_name=ONE_PASS,
        block_copies=2,
        block_weight=2,
    ),
    # run 13: the questions visitors asked (13b: more counts of a shape and whether a thing is there)
    Stage("run13-target", 13, "WORK/run13", 1313, RUN13, target=steps(1300, "1e-4")),
    Stage(
        "run13b-target",
        13,
        "WORK/run13b",
        1717,
        RUN13 | {"counts": 0.25},
        target_from="WORK/run13/target",
        target=steps(900, "1e-4"),
    ),
    *every_draft(13, "WORK/run13b/target", ROWS | FREE | VISITORS, seeds=(1414, 1515, 1616), lengths=(300, 150, 600)),
    # run 15: counts and whether a thing is there answered after checking every shape, those decisions weighted
    Stage(
        "run15-target",
        15,
        "WORK/run15",
        1531,
        RUN15 | {"counts": 0.5} | WEIGHED,
        target=steps(1200, "3e-4"),
    ),
    *every_draft(15, "WORK/run15/target", ROWS | FREE | CHECKED, seeds=(1532, 1533, 1534), lengths=(300, 150, 600)),
    # run 17: a chart asked about as a graph (17b: more of them)
    Stage(
        "run17-target",
        17,
        "WORK/run17",
        1717,
        RUN15 | GRAPHS | {"graphs": 0.25},
        target=steps(700, "1e-4"),
    ),
    Stage(
        "run17b-target",
        17,
        "WORK/run17b",
        1718,
        RUN15 | GRAPHS | {"graphs": 0.4},
        target_from="WORK/run17/target",
        target=steps(700, "1e-4"),
    ),
    *every_draft(17, "WORK/run17b/target", ROWS | FREE | CHECKED, seeds=(1732, 1733, 1734), lengths=(300, 150, 600)),
    # run 18: how many shapes there are; the sure and hesitant drafts distilled half as long
    Stage("run18-target", 18, "WORK/run18", 1801, RUN15 | TOTALS, target=steps(500, "1e-4")),
    *every_draft(18, "WORK/run18/target", ROWS | FREE | CHECKED, seeds=(1832, 1833, 1834), lengths=(150, 80, 600)),
)


#: Run 19 (shipped 2026-12-06, docs/one-pass.md "The target's features, on and off"): the one-pass draft distilled on
#: from the frozen target while learning to read the target's own features (PARD-2). Another script trains it
#: (scripts/train_target_features.py), so it is a `FeatureStage`; the runner makes these after the shipped stages.
@dataclass(frozen=True)
class FeatureStage:
    """One call of scripts/train_target_features.py train: the draft it starts from, where its draft folder goes,
    its seed, its minutes of training, the draft's and the projection's peak learning rates and its batch. The
    target is OUT/target, frozen."""

    name: str
    run: int
    draft_from: str
    writes: str
    seed: int
    minutes: float
    lr: str
    proj_lr: str
    batch: int = 16
    trains: str = ONE_PASS
    target_from: str = "OUT/target"

    @property
    def script(self) -> Path:
        return FEATURES


AnyStage = Stage | FeatureStage

FEATURE_STAGES: tuple[FeatureStage, ...] = (
    FeatureStage("features-a", 19, "OUT/one-pass-draft", "OUT/one-pass-draft", 6606, 45, "1e-4", "1e-3"),
    # trained on from features-a's draft and its projection, at half the draft's learning rate
    FeatureStage("features-b", 19, "OUT/one-pass-draft", "OUT/one-pass-draft", 6607, 60, "5e-5", "1e-3"),
)
#: Every recipe the runner knows, by name: the shipped pair's stages, then the one-pass draft's reading of features.
RECIPES: dict[str, tuple[AnyStage, ...]] = {"shipped": (*SHIPPED, *FEATURE_STAGES)}


def feature_command(stage: FeatureStage, out: Path, work: Path) -> list[str]:
    """The stage's arguments to scripts/train_target_features.py."""
    return [
        "train",
        *flags({"target": str(resolve(stage.target_from, out, work))}),
        *flags({"draft": str(resolve(stage.draft_from, out, work))}),
        *flags({"work": str(work / f"{stage.name}-checkpoints"), "out": str(resolve(stage.writes, out, work))}),
        *flags({"seed": stage.seed, "minutes": stage.minutes, "lr": stage.lr, "proj-lr": stage.proj_lr}),
        *flags({"batch": stage.batch}),
    ]


def words_of(stage: AnyStage, out: Path, work: Path) -> list[str]:
    """A stage's arguments to its script."""
    return feature_command(stage, out, work) if isinstance(stage, FeatureStage) else command(stage, out, work)


def said(stage: AnyStage, out: Path, work: Path) -> str:
    """A stage as a command line (as --dry-run prints it and a done mark holds it, less the interpreter)."""
    return f"python scripts/{stage.script.name} {shlex.join(words_of(stage, out, work))}"


# -- the runner ------------------------------------------------------------------------------------------------------


def stages_from(start: str | None) -> tuple[AnyStage, ...]:
    """The stages a run makes: from the stage named `start`, or from the first stage of the run numbered `start`, to
    the end of the recipe that holds it; every shipped stage when `start` is None."""
    if start is None:
        return RECIPES["shipped"]
    for recipe in RECIPES.values():
        for index, stage in enumerate(recipe):
            if start in (stage.name, str(stage.run)):
                return recipe[index:]
    runs = sorted({stage.run for recipe in RECIPES.values() for stage in recipe})
    raise ValueError(f"{start}: neither a stage's name nor a run's number (runs {', '.join(map(str, runs))})")


def written_by(stage: AnyStage) -> set[str]:
    """The models a stage saves, as places of the table: a feature stage its draft, another its target and draft."""
    if isinstance(stage, FeatureStage):
        return {stage.writes}
    return {f"{stage.writes}/target", f"{stage.writes}/{stage.draft_name}"}


def missing_starts(stages: Sequence[AnyStage], out: Path, work: Path) -> list[str]:
    """What `stages` start from that no stage before it among them writes and that is not there (a run started
    `--from` a later stage needs what the stages before left in OUT and WORK)."""
    written: set[str] = set()
    missing = []
    for stage in stages:
        for start in (stage.target_from, stage.draft_from):
            if start is not None and start not in written and not resolve(start, out, work).exists():
                missing.append(f"{stage.name}'s {resolve(start, out, work)}")
        written |= written_by(stage)
    return missing


def done_mark(stage: AnyStage, work: Path) -> Path:
    """Written when the stage finishes, holding its command: a rerun skips a stage whose mark holds its command."""
    return work / f"{stage.name}-checkpoints" / "done"


def is_done(stage: AnyStage, out: Path, work: Path) -> bool:
    mark = done_mark(stage, work)
    return mark.exists() and mark.read_text() == shlex.join(words_of(stage, out, work)) + "\n"


def train_in_a_process(stage: AnyStage, args: list[str]) -> None:
    """The stage's script with ARGS in a process of its own, on this checkout's packages."""
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    environment = {**os.environ, "PYTHONPATH": path}
    subprocess.run([sys.executable, str(stage.script), *args], check=True, cwd=ROOT, env=environment)


def run(
    stages: Sequence[AnyStage], out: Path, work: Path, train: Callable[[AnyStage, list[str]], None] | None = None
) -> None:
    """Make `stages` in order, each by `train(stage, its arguments)` (default: the training script in a process of
    its own), skipping those already done and marking each as it finishes."""
    for number, stage in enumerate(stages, 1):
        args = words_of(stage, out, work)
        where = f"[recipe] stage {number}/{len(stages)}, {stage.name} (run {stage.run}, trains {stage.trains})"
        if is_done(stage, out, work):
            print(f"{where}: done, skipped", flush=True)
            continue
        print(f"{where}: {said(stage, out, work)}", flush=True)
        (train or train_in_a_process)(stage, args)
        done_mark(stage, work).parent.mkdir(parents=True, exist_ok=True)
        done_mark(stage, work).write_text(shlex.join(args) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--from", dest="start", metavar="STAGE|RUN", help="start at this stage, or this run's first")
    ap.add_argument("--dry-run", action="store_true", help="print each stage's command instead of running it")
    ap.add_argument("out", nargs="?", default=str(ROOT / "assets" / "builtin"), help="the pair (assets/builtin)")
    ap.add_argument("work", nargs="?", help="the stages' own folders and checkpoints (default OUT-work)")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    work = Path(args.work).resolve() if args.work else out.parent / f"{out.name}-work"
    try:
        stages = stages_from(args.start)
    except ValueError as error:
        ap.error(f"--from {error}")
    if args.dry_run:
        for stage in stages:
            state = ", done" if is_done(stage, out, work) else ""
            print(f"# {stage.name} (run {stage.run}, trains {stage.trains}{state})")
            print(said(stage, out, work))
        return
    if missing := missing_starts(stages, out, work):
        ap.error(f"not there: {', '.join(missing)}; start --from the stage that writes it, or give OUT and WORK")
    try:
        run(stages, out, work)
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"[recipe] a stage failed (exit {error.returncode}); the same command resumes it") from None


if __name__ == "__main__":
    main()
