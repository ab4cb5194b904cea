"""scripts/train_builtin_pair.py, run for a few steps: the recipe that made assets/builtin still
runs end to end (image and video batches, distillation, float16 save) and what it saves loads
through the real path as a pair."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import torch

from sage_core import DecodeConfig, decode, load_media, load_pair
from sage_testkit.references import load_script

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_few_training_steps_save_a_loadable_float16_pair(tmp_path, capsys):
    script = load_script("train_builtin_pair")
    steps = str(script.VIDEO_EVERY)  # so that one of the steps is a batch of clips
    quick = ["--batch-size", "2", "--eval-n", "8", "--eval-tokens", "16", "--threads", "1"]
    args = ["--target-steps", steps, "--draft-steps", steps, *quick]
    args += ["--target-vision-steps", "2", "--draft-vision-steps", "2"]
    script.main(["--out", str(tmp_path), "--checkpoints", str(tmp_path / "checkpoints"), *args])
    torch.set_num_threads(1)
    for name in ("target", "draft"):
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert config["model_type"] == "qwen3_vl"
        assert config["dtype"] == "float16"
        # a Hugging Face Space takes files under 10 MB without LFS: the target is saved in shards
        assert all(f.stat().st_size < 10 * 2**20 for f in (tmp_path / name).iterdir())
    pair = load_pair(str(tmp_path / "target"), str(tmp_path / "draft"), device="cpu", dtype="float32")
    assert type(pair.target.processor).__name__ == "Qwen3VLProcessor"
    target_params = sum(p.numel() for p in pair.target.model.parameters())
    draft_params = sum(p.numel() for p in pair.draft.model.parameters())
    assert target_params >= 4 * draft_params
    clip = load_media(ROOT / "assets" / "examples" / "moving_shape.webm")
    summary = decode(pair, clip, "what happens in the video?", DecodeConfig("sage", 8)).run_to_end()
    assert 1 <= len(summary.token_ids) <= 8
    # The same command run again resumes from the checkpoints: with 2 more target steps it trains
    # exactly those, and the draft, whose budget is spent, trains no further.
    capsys.readouterr()
    more = ["--target-steps", str(int(steps) + 2), "--draft-steps", steps, *quick]
    script.main(["--out", str(tmp_path), "--checkpoints", str(tmp_path / "checkpoints"), *more])
    log = capsys.readouterr().out
    assert f"target: resumed from {tmp_path / 'checkpoints' / 'target.pt'} at step {steps}" in log
    assert f"target: vision tower from {tmp_path / 'checkpoints' / 'target-vision.pt'}" in log
    assert f"target: done, {int(steps) + 2} steps" in log and f"draft: done, {steps} steps" in log


@pytest.mark.parametrize("kind", ["describe", "shape", "chart"])
def test_per_token_labels_name_what_is_drawn_under_each_token(kind):
    """The vision pretraining's labels: a token whose centre pixel shows an object's colour is labelled
    with that object (its colour, and its shape or its bar's value); a background token has colour
    class 0 and, in a shape scene, the 3x3 cell it lies in."""
    import random

    from sage_world.scenes import COLOURS, SHAPES, make_example

    script = load_script("train_builtin_pair")
    colours = list(COLOURS)
    checked = agreeing = background = plain = 0
    for seed in range(12):
        example = make_example(random.Random(seed), kind)
        width, height = example.image.size
        grid_h, grid_w = 6 + seed % 3, 8 - seed % 3
        labels = script.token_labels(example, grid_h, grid_w)
        assert labels.shape == (grid_h * grid_w, len(script.AUX_CLASSES))
        by_colour = {(o[0] if kind == "chart" else o.colour): o for o in example.objects}
        for k in range(grid_h * grid_w):
            i, j = divmod(k, grid_w)
            pixel = example.image.getpixel((int((j + 0.5) * width / grid_w), int((i + 0.5) * height / grid_h)))
            name = next((c for c, rgb in COLOURS.items() if rgb == pixel), None)
            if name is None or name not in by_colour:
                background += 1
                if labels[k, 2] == 0:  # labelled background: no shape, no size; in a scene, its own cell
                    plain += 1
                    assert labels[k, 0] == -100 and labels[k, 3] == -100 and labels[k, 4] == -100
                    if kind != "chart":
                        row, col = min(int((i + 0.5) * 3 / grid_h), 2), min(int((j + 0.5) * 3 / grid_w), 2)
                        assert labels[k, 1] == row * 3 + col
                continue
            checked += 1
            thing = by_colour[name]
            ok = labels[k, 2] == 1 + colours.index(name)
            if kind == "chart":
                ok = ok and labels[k, 4] == thing[1] - 1
            else:
                ok = ok and labels[k, 0] == SHAPES.index(thing.shape) and labels[k, 1] == thing.cell
            agreeing += bool(ok)
    assert checked >= 20
    assert agreeing >= 0.9 * checked, (agreeing, checked)
    # (a chart's bars are narrower than a token: a token partly over a bar is labelled with it)
    assert plain >= (0.5 if kind == "chart" else 0.8) * background, (plain, background)
    # no label map (text, clips): nothing is labelled
    text = make_example(random.Random(0), "text")
    assert (script.token_labels(text, 4, 4) == -100).all()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--aux-weight", "-1"], "--aux-weight must be >= 0"),
        (["--target-vision-steps", "-2"], "--target-vision-steps must be >= 0"),
        (["--draft-vision-minutes", "-0.5"], "--draft-vision-minutes must be >= 0"),
        (["--vision-lr", "0"], "--vision-lr must be > 0"),
        (["--eval-tokens", "0"], "--eval-tokens must be >= 1"),
        (["--reworded", "1.5"], "--reworded must be between 0 and 1"),
        (["--hand-drawn", "-0.1"], "--hand-drawn must be between 0 and 1"),
        (["--free", "1.5"], "--free must be between 0 and 1"),
        (["--visitors", "1.5"], "--visitors must be between 0 and 1"),
        (["--counts", "-0.2"], "--counts must be between 0 and 1"),
        (["--graphs", "1.01"], "--graphs must be between 0 and 1"),
        (["--totals", "-1"], "--totals must be between 0 and 1"),
        (["--decisive-kinds", "chart,colour"], "colour: a kind is one of chart, bar, count"),
        (["--decisive-kinds", "count"], "--decisive-kinds names answers --decision-weight weights"),
        (["--decision-weight", "0"], "--decision-weight must be above 0"),
        (["--decision-weight", "nan"], "--decision-weight must be above 0"),
        (
            ["--checking"],
            "--checking changes the answers --visitors and --counts draw: give one of them a share above 0",
        ),
        (["--looking", "--counts", "0.5"], "unrecognized arguments: --looking"),  # run 14's form, not shipped, gone
    ],
)
def test_bad_vision_stage_settings_are_refused_with_one_message(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_script("train_builtin_pair").main(["--out", str(tmp_path / "out"), *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


#: The shipped pair's 38 commands as scripts/train_builtin_pair_full.sh gave them on 2026-12-05 (its `train` lines,
#: OUT and WORK left as written), frozen: the table must give these, word for word and in this order.
SHIPPED_2026_12_05 = (
    "--out WORK/first --checkpoints WORK/first-checkpoints",
    (
        "--seed 4321 --out WORK/longer --checkpoints WORK/longer-checkpoints --init-target WORK/first/target "
        "--target-vision-minutes 0 --target-minutes 45 --target-lr 1e-4 --init-draft WORK/first/draft "
        "--draft-vision-minutes 0 --draft-minutes 0"
    ),
    (
        "--seed 4321 --out WORK/distilled --checkpoints WORK/distill-checkpoints --init-target WORK/longer/target "
        "--target-vision-minutes 0 --target-minutes 0 --init-draft WORK/first/draft --draft-vision-minutes 0 "
        "--draft-minutes 10 --draft-lr 3e-4"
    ),
    (
        "--seed 5678 --out OUT --checkpoints WORK/run4-checkpoints --lone 0.15 --hand-drawn 0.25 --shifted 0.2 "
        "--reworded 0.5 --eval-n 90 --init-target WORK/distilled/target --target-vision-minutes 0 "
        "--target-minutes 42 --target-lr 1e-4 --init-draft WORK/distilled/draft --draft-vision-minutes 0 "
        "--draft-minutes 7 --draft-lr 2e-4"
    ),
    (
        "--seed 8765 --out OUT --checkpoints WORK/hesitant-checkpoints --lone 0.15 --hand-drawn 0.25 --shifted 0.2 "
        "--reworded 0.5 --eval-n 90 --init-target OUT/target --target-vision-minutes 0 --target-minutes 0 "
        "--init-draft OUT/draft --draft-layers 1 --draft-name hesitant-draft --draft-vision-minutes 0 "
        "--draft-minutes 5 --draft-lr 3e-4"
    ),
    (
        "--seed 9999 --out OUT --checkpoints WORK/redistill-checkpoints --eval-n 90 --init-target OUT/target "
        "--target-vision-minutes 0 --target-minutes 0 --init-draft OUT/draft --draft-vision-minutes 0 "
        "--draft-minutes 10 --draft-lr 2e-4"
    ),
    (
        "--seed 2468 --out WORK/run7 --checkpoints WORK/run7-target-checkpoints --lone 0.15 --hand-drawn 0.35 "
        "--shifted 0.3 --reworded 0.5 --eval-n 90 --init-target OUT/target --target-vision-minutes 0 "
        "--target-minutes 27 --target-lr 1e-4 --init-draft OUT/draft --draft-vision-minutes 0 --draft-minutes 0"
    ),
    (
        "--seed 1357 --out OUT --checkpoints WORK/run7-draft-checkpoints --eval-n 90 "
        "--init-target WORK/run7/target --target-vision-minutes 0 --target-minutes 0 --init-draft OUT/draft "
        "--draft-vision-minutes 0 --draft-minutes 6 --draft-lr 2e-4"
    ),
    (
        "--seed 8642 --out WORK/run8 --checkpoints WORK/run8-target-checkpoints --lone 0.15 --hand-drawn 0.35 "
        "--shifted 0.3 --reworded 0.5 --rows 0.25 --jpeg 0.3 --eval-n 60 --init-target OUT/target "
        "--target-vision-minutes 0 --target-minutes 55 --target-lr 1e-4 --init-draft OUT/draft "
        "--draft-vision-minutes 0 --draft-minutes 0"
    ),
    (
        "--seed 9753 --out OUT --checkpoints WORK/run8-draft-checkpoints --rows 0.25 --jpeg 0.3 --eval-n 60 "
        "--init-target WORK/run8/target --target-vision-minutes 0 --target-minutes 0 --init-draft OUT/draft "
        "--draft-vision-minutes 0 --draft-minutes 10 --draft-lr 2e-4"
    ),
    (
        "--seed 7531 --out OUT --checkpoints WORK/run8-hesitant-checkpoints --rows 0.25 --jpeg 0.3 --eval-n 60 "
        "--init-target WORK/run8/target --target-vision-minutes 0 --target-minutes 0 "
        "--init-draft OUT/hesitant-draft --draft-name hesitant-draft --draft-vision-minutes 0 --draft-minutes 5 "
        "--draft-lr 3e-4"
    ),
    (
        "--seed 1133 --out WORK/run9 --checkpoints WORK/run9-target-checkpoints --lone 0.15 --hand-drawn 0.4 "
        "--shifted 0.3 --reworded 0.5 --rows 0.2 --jpeg 0.3 --eval-n 60 --init-target WORK/run8/target "
        "--target-vision-minutes 0 --target-steps 500 --target-lr 1e-4 --init-draft OUT/draft "
        "--draft-vision-minutes 0 --draft-minutes 0"
    ),
    (
        "--seed 2244 --out OUT --checkpoints WORK/run9-draft-checkpoints --rows 0.25 --jpeg 0.3 --eval-n 60 "
        "--init-target WORK/run9/target --target-vision-minutes 0 --target-minutes 0 --init-draft OUT/draft "
        "--draft-vision-minutes 0 --draft-steps 150 --draft-lr 2e-4"
    ),
    (
        "--seed 3355 --out OUT --checkpoints WORK/run9-hesitant-checkpoints --rows 0.25 --jpeg 0.3 --eval-n 60 "
        "--init-target WORK/run9/target --target-vision-minutes 0 --target-minutes 0 "
        "--init-draft OUT/hesitant-draft --draft-name hesitant-draft --draft-vision-minutes 0 --draft-steps 80 "
        "--draft-lr 3e-4"
    ),
    (
        "--seed 4455 --out WORK/run10 --checkpoints WORK/run10-target-checkpoints --lone 0.15 --hand-drawn 0.4 "
        "--shifted 0.3 --reworded 0.5 --rows 0.2 --jpeg 0.3 --free 0.3 --visitor-words --eval-n 60 "
        "--init-target OUT/target --target-vision-minutes 0 --target-steps 1500 --target-lr 1e-4 "
        "--init-draft OUT/draft --draft-vision-minutes 0 --draft-minutes 0"
    ),
    (
        "--seed 5566 --out OUT --checkpoints WORK/run10-draft-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --eval-n 60 --init-target WORK/run10/target --target-vision-minutes 0 --target-minutes 0 "
        "--init-draft OUT/draft --draft-vision-minutes 0 --draft-steps 300 --draft-lr 2e-4"
    ),
    (
        "--seed 6677 --out OUT --checkpoints WORK/run10-hesitant-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --eval-n 60 --init-target WORK/run10/target --target-vision-minutes 0 --target-minutes 0 "
        "--init-draft OUT/hesitant-draft --draft-name hesitant-draft --draft-vision-minutes 0 --draft-steps 150 "
        "--draft-lr 3e-4"
    ),
    (
        "--seed 7788 --out WORK/run12a --checkpoints WORK/run12a-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --eval-n 60 --one-pass 10 --draft-name one-pass-draft --target-vision-minutes 0 "
        "--target-minutes 0 --draft-vision-minutes 0 --init-target OUT/target --init-draft OUT/draft "
        "--draft-minutes 24 --draft-lr 5e-4"
    ),
    (
        "--seed 8899 --out WORK/run12b --checkpoints WORK/run12b-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --eval-n 60 --one-pass 10 --draft-name one-pass-draft --target-vision-minutes 0 "
        "--target-minutes 0 --draft-vision-minutes 0 --init-target OUT/target "
        "--init-draft WORK/run12a/one-pass-draft --draft-steps 800 --draft-lr 3e-4 --block-copies 2 "
        "--block-weight 2"
    ),
    (
        "--seed 9911 --out OUT --checkpoints WORK/run12c-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --eval-n 60 --one-pass 10 --draft-name one-pass-draft --target-vision-minutes 0 "
        "--target-minutes 0 --draft-vision-minutes 0 --init-target OUT/target "
        "--init-draft WORK/run12b/one-pass-draft --draft-steps 1000 --draft-lr 2e-4 --block-copies 2 "
        "--block-weight 2"
    ),
    (
        "--seed 1313 --out WORK/run13 --checkpoints WORK/run13-target-checkpoints --lone 0.15 --hand-drawn 0.4 "
        "--shifted 0.3 --reworded 0.5 --rows 0.2 --jpeg 0.3 --free 0.3 --visitor-words --visitors 0.3 "
        "--more-visitor-words --eval-n 60 --init-target OUT/target --target-vision-minutes 0 --target-steps 1300 "
        "--target-lr 1e-4 --init-draft OUT/draft --draft-vision-minutes 0 --draft-minutes 0"
    ),
    (
        "--seed 1717 --out WORK/run13b --checkpoints WORK/run13b-target-checkpoints --lone 0.15 --hand-drawn 0.4 "
        "--shifted 0.3 --reworded 0.5 --rows 0.2 --jpeg 0.3 --free 0.3 --visitor-words --visitors 0.3 "
        "--more-visitor-words --counts 0.25 --eval-n 60 --init-target WORK/run13/target --target-vision-minutes 0 "
        "--target-steps 900 --target-lr 1e-4 --init-draft OUT/draft --draft-vision-minutes 0 --draft-minutes 0"
    ),
    (
        "--seed 1414 --out OUT --checkpoints WORK/run13-draft-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --eval-n 60 --init-target WORK/run13b/target "
        "--target-vision-minutes 0 --target-minutes 0 --init-draft OUT/draft --draft-vision-minutes 0 "
        "--draft-steps 300 --draft-lr 2e-4"
    ),
    (
        "--seed 1515 --out OUT --checkpoints WORK/run13-hesitant-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --eval-n 60 --init-target WORK/run13b/target "
        "--target-vision-minutes 0 --target-minutes 0 --init-draft OUT/hesitant-draft --draft-name hesitant-draft "
        "--draft-vision-minutes 0 --draft-steps 150 --draft-lr 3e-4"
    ),
    (
        "--seed 1616 --out OUT --checkpoints WORK/run13-one-pass-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --eval-n 60 --one-pass 10 --draft-name one-pass-draft "
        "--target-vision-minutes 0 --target-minutes 0 --draft-vision-minutes 0 --init-target WORK/run13b/target "
        "--init-draft OUT/one-pass-draft --draft-steps 600 --draft-lr 2e-4 --block-copies 2 --block-weight 2"
    ),
    (
        "--seed 1531 --out WORK/run15 --checkpoints WORK/run15-target-checkpoints --lone 0.15 --hand-drawn 0.4 "
        "--shifted 0.3 --reworded 0.5 --rows 0.2 --jpeg 0.3 --free 0.3 --visitor-words --visitors 0.3 "
        "--more-visitor-words --checking --counts 0.5 --decision-weight 10 --eval-n 60 --init-target OUT/target "
        "--target-vision-minutes 0 --target-steps 1200 --target-lr 3e-4 --init-draft OUT/draft "
        "--draft-vision-minutes 0 --draft-minutes 0"
    ),
    (
        "--seed 1532 --out OUT --checkpoints WORK/run15-draft-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --checking --eval-n 60 "
        "--init-target WORK/run15/target --target-vision-minutes 0 --target-minutes 0 --init-draft OUT/draft "
        "--draft-vision-minutes 0 --draft-steps 300 --draft-lr 2e-4"
    ),
    (
        "--seed 1533 --out OUT --checkpoints WORK/run15-hesitant-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --checking --eval-n 60 "
        "--init-target WORK/run15/target --target-vision-minutes 0 --target-minutes 0 "
        "--init-draft OUT/hesitant-draft --draft-name hesitant-draft --draft-vision-minutes 0 --draft-steps 150 "
        "--draft-lr 3e-4"
    ),
    (
        "--seed 1534 --out OUT --checkpoints WORK/run15-one-pass-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --checking --eval-n 60 --one-pass 10 "
        "--draft-name one-pass-draft --target-vision-minutes 0 --target-minutes 0 --draft-vision-minutes 0 "
        "--init-target WORK/run15/target --init-draft OUT/one-pass-draft --draft-steps 600 --draft-lr 2e-4 "
        "--block-copies 2 --block-weight 2"
    ),
    (
        "--seed 1717 --out WORK/run17 --checkpoints WORK/run17-target-checkpoints --lone 0.15 --hand-drawn 0.4 "
        "--shifted 0.3 --reworded 0.5 --rows 0.2 --jpeg 0.3 --free 0.3 --visitor-words --visitors 0.3 "
        "--more-visitor-words --checking --counts 0.2 --decisive-kinds chart,bar --decision-weight 10 "
        "--graphs 0.25 --eval-n 60 --init-target OUT/target --target-vision-minutes 0 --target-steps 700 "
        "--target-lr 1e-4 --init-draft OUT/draft --draft-vision-minutes 0 --draft-minutes 0"
    ),
    (
        "--seed 1718 --out WORK/run17b --checkpoints WORK/run17b-target-checkpoints --lone 0.15 --hand-drawn 0.4 "
        "--shifted 0.3 --reworded 0.5 --rows 0.2 --jpeg 0.3 --free 0.3 --visitor-words --visitors 0.3 "
        "--more-visitor-words --checking --counts 0.2 --decisive-kinds chart,bar --decision-weight 10 --graphs 0.4 "
        "--eval-n 60 --init-target WORK/run17/target --target-vision-minutes 0 --target-steps 700 --target-lr 1e-4 "
        "--init-draft OUT/draft --draft-vision-minutes 0 --draft-minutes 0"
    ),
    (
        "--seed 1732 --out OUT --checkpoints WORK/run17-draft-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --checking --eval-n 60 "
        "--init-target WORK/run17b/target --target-vision-minutes 0 --target-minutes 0 --init-draft OUT/draft "
        "--draft-vision-minutes 0 --draft-steps 300 --draft-lr 2e-4"
    ),
    (
        "--seed 1733 --out OUT --checkpoints WORK/run17-hesitant-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --checking --eval-n 60 "
        "--init-target WORK/run17b/target --target-vision-minutes 0 --target-minutes 0 "
        "--init-draft OUT/hesitant-draft --draft-name hesitant-draft --draft-vision-minutes 0 --draft-steps 150 "
        "--draft-lr 3e-4"
    ),
    (
        "--seed 1734 --out OUT --checkpoints WORK/run17-one-pass-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --checking --eval-n 60 --one-pass 10 "
        "--draft-name one-pass-draft --target-vision-minutes 0 --target-minutes 0 --draft-vision-minutes 0 "
        "--init-target WORK/run17b/target --init-draft OUT/one-pass-draft --draft-steps 600 --draft-lr 2e-4 "
        "--block-copies 2 --block-weight 2"
    ),
    (
        "--seed 1801 --out WORK/run18 --checkpoints WORK/run18-target-checkpoints --lone 0.15 --hand-drawn 0.4 "
        "--shifted 0.3 --reworded 0.5 --rows 0.2 --jpeg 0.3 --free 0.3 --visitor-words --visitors 0.3 "
        "--more-visitor-words --checking --counts 0.2 --graphs 0.25 --totals 0.3 --decisive-kinds chart,bar,count "
        "--decision-weight 10 --eval-n 60 --init-target OUT/target --target-vision-minutes 0 --target-steps 500 "
        "--target-lr 1e-4 --init-draft OUT/draft --draft-vision-minutes 0 --draft-minutes 0"
    ),
    (
        "--seed 1832 --out OUT --checkpoints WORK/run18-draft-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --checking --eval-n 60 "
        "--init-target WORK/run18/target --target-vision-minutes 0 --target-minutes 0 --init-draft OUT/draft "
        "--draft-vision-minutes 0 --draft-steps 150 --draft-lr 2e-4"
    ),
    (
        "--seed 1833 --out OUT --checkpoints WORK/run18-hesitant-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --checking --eval-n 60 "
        "--init-target WORK/run18/target --target-vision-minutes 0 --target-minutes 0 "
        "--init-draft OUT/hesitant-draft --draft-name hesitant-draft --draft-vision-minutes 0 --draft-steps 80 "
        "--draft-lr 3e-4"
    ),
    (
        "--seed 1834 --out OUT --checkpoints WORK/run18-one-pass-checkpoints --rows 0.25 --jpeg 0.3 --free 0.3 "
        "--visitor-words --visitors 0.3 --more-visitor-words --checking --eval-n 60 --one-pass 10 "
        "--draft-name one-pass-draft --target-vision-minutes 0 --target-minutes 0 --draft-vision-minutes 0 "
        "--init-target WORK/run18/target --init-draft OUT/one-pass-draft --draft-steps 600 --draft-lr 2e-4 "
        "--block-copies 2 --block-weight 2"
    ),
)


def recipe_commands(stages, out: Path = Path("OUT"), work: Path = Path("WORK")) -> dict[str, list[str]]:
    """Each stage's arguments to the training script, by the stage's name."""
    recipe = load_script("recipe")
    return {stage.name: recipe.command(stage, out, work) for stage in stages}


DRAFTS = ("draft", "hesitant-draft", "one-pass-draft")


def of_run(stages, run: int) -> list:
    return [stage for stage in stages if stage.run == run]


def test_the_shipped_pair_remade_from_the_table_is_todays_recipe_word_for_word():
    """The stage table gives the commands scripts/train_builtin_pair_full.sh ran on 2026-12-05, in their order, and
    every stage's name is its checkpoint folder's (so a run of the old script resumes under the runner)."""
    recipe = load_script("recipe")
    commands = recipe_commands(recipe.SHIPPED)
    assert [" ".join(words) for words in commands.values()] == list(SHIPPED_2026_12_05)
    assert all(f"--checkpoints WORK/{name}-checkpoints" in " ".join(words) for name, words in commands.items())
    names = [stage.name for recipe_stages in recipe.RECIPES.values() for stage in recipe_stages]
    assert len(names) == len(set(names)) >= 38
    trains = [stage.trains for stage in recipe.SHIPPED]
    assert (trains[0], trains.count("target"), trains.count("one-pass-draft")) == ("pair", 11, 7)


def test_every_stage_starts_from_what_an_earlier_stage_wrote():
    """The shipped pair is made from scratch: every model a stage starts from is one an earlier stage saved (a
    target stage saves its target and the sure draft it carries; a draft stage the target and its draft); a start
    from a later stage reads what the stages before it left in OUT and WORK."""
    recipe = load_script("recipe")
    assert recipe.missing_starts(recipe.SHIPPED, Path("/nowhere/out"), Path("/nowhere/work")) == []
    missing = recipe.missing_starts(recipe.stages_from("15"), Path("/nowhere/out"), Path("/nowhere/work"))
    assert missing[0] == "run15-target's /nowhere/out/target"  # the pair run 13 left in OUT
    assert {m.split("'s ")[1] for m in missing} == {f"/nowhere/out/{m}" for m in ("target", *DRAFTS)}


def test_run_15_asks_for_the_checked_answers_and_weighted_decisions_in_settings_the_script_takes():
    script, recipe = load_script("train_builtin_pair"), load_script("recipe")
    parsed = [script.parse_args(run) for run in recipe_commands(of_run(recipe.SHIPPED, 15)).values()]
    assert [a.seed for a in parsed] == [1531, 1532, 1533, 1534]
    assert all(a.looking == "checked" and a.more_visitor_words for a in parsed)
    assert (parsed[0].counts, parsed[0].decision_weight, parsed[0].target_steps) == (0.5, 10.0, 1200)
    assert parsed[3].one_pass == 10 and all(a.target_minutes == 0 for a in parsed[1:])


def test_run_17_asks_for_graphs_and_weighted_counts_of_bars_in_settings_the_script_takes(tmp_path):
    script, recipe = load_script("train_builtin_pair"), load_script("recipe")
    commands = recipe_commands(of_run(recipe.SHIPPED, 17), tmp_path / "out", tmp_path / "work")
    parsed = [script.parse_args(run) for run in commands.values()]
    assert [a.seed for a in parsed] == [1717, 1718, 1732, 1733, 1734]
    assert all(a.looking == "checked" and a.more_visitor_words for a in parsed)
    assert [(a.graphs, a.decisive_kinds, a.decision_weight, a.target_steps) for a in parsed[:2]] == [
        (0.25, ("chart", "bar"), 10.0, 700),
        (0.4, ("chart", "bar"), 10.0, 700),
    ]
    assert parsed[1].init_target == str(tmp_path / "work" / "run17" / "target")
    assert all(a.init_target == str(tmp_path / "work" / "run17b" / "target") for a in parsed[2:])
    assert parsed[4].one_pass == 10 and all(a.target_minutes == 0 and not a.graphs for a in parsed[2:])


def test_run_18_asks_how_many_shapes_with_its_count_weighted_in_settings_the_script_takes(tmp_path):
    script, recipe = load_script("train_builtin_pair"), load_script("recipe")
    commands = recipe_commands(of_run(recipe.SHIPPED, 18), tmp_path / "out", tmp_path / "work")
    parsed = [script.parse_args(run) for run in commands.values()]
    assert [a.seed for a in parsed] == [1801, 1832, 1833, 1834]
    assert all(a.looking == "checked" and a.more_visitor_words for a in parsed)
    first = parsed[0]
    assert (first.totals, first.graphs, first.counts, first.target_steps) == (0.3, 0.25, 0.2, 500)
    assert (first.decisive_kinds, first.decision_weight) == (("chart", "bar", "count"), 10.0)
    assert all(a.init_target == str(tmp_path / "work" / "run18" / "target") for a in parsed[1:])
    assert parsed[3].one_pass == 10 and all(a.target_minutes == 0 and not a.totals for a in parsed[1:])
    assert [a.draft_steps for a in parsed[1:]] == [150, 80, 600]


@pytest.mark.slow
@pytest.mark.timeout(2400)  # twenty runs, each loading, saving and evaluating a pair (past 600 s on a busy CPU)
def test_the_full_recipe_chains_its_runs(tmp_path):
    """The shipped pair's stages run by scripts/recipe.py, each stage cut to 2 steps: run 2 trains run 1's target
    on, run 3 distils run 1's draft from run 2's target, run 4 trains that pair on and lands it in
    OUT, the next makes the hesitant draft (one layer) beside it, run 6 distils the sure draft on, and
    run 7 trains the target on (in WORK) and distils the sure draft from it into OUT; run 8 trains
    that target on the world with rows to read and JPEGs (in WORK), and distils both drafts from it
    into OUT; run 9 trains run 8's target on (in WORK) and distils both drafts on from it into OUT; run 10
    grows the three models' vocabulary by the visitor words, trains run 9's target on with free wordings (in
    WORK) and distils both drafts on from it into OUT; run 12 distils the one-pass draft from the sure one in three
    stages (two in WORK, the last into OUT); run 13 grows them all again by the visitors' words, trains the target on
    twice (in WORK) and distils all three drafts on from it into OUT; runs 15, 17 and 18 train the target on and
    distil every draft on from it."""
    from safetensors.torch import load_file

    script, recipe = load_script("train_builtin_pair"), load_script("recipe")
    out, work = tmp_path / "pair", tmp_path / "work"
    runs = recipe_commands(recipe.SHIPPED, out, work)
    assert len(runs) == 38
    tiny = ["--batch-size", "2", "--eval-n", "2", "--eval-tokens", "8", "--threads", "1"]

    def weights(folder: Path) -> dict[str, torch.Tensor]:
        tensors: dict[str, torch.Tensor] = {}
        for f in sorted(folder.glob("*.safetensors")):
            tensors.update(load_file(f))
        return tensors

    def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
        return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    roles = ("target", "draft", "hesitant-draft")
    every = (*roles, "one-pass-draft")
    # stage -> the models in OUT before it
    taken_before = {"redistill": roles[:2], "run7-target": roles, "run8-target": roles, "run9-target": roles}
    taken_before |= {"run10-target": roles, "run13-target": every, "run15-target": every, "run17-target": every}
    taken_before |= {"run18-target": every}
    snapshots: dict[str, dict[str, dict[str, torch.Tensor]]] = {}

    def train(stage, args: list[str]) -> None:
        if stage.name in taken_before:
            snapshots[stage.name] = {role: weights(out / role) for role in taken_before[stage.name]}
        steps = []
        for part in ("target-vision", "target", "draft-vision", "draft"):
            minutes = args[args.index(f"--{part}-minutes") + 1] if f"--{part}-minutes" in args else "1"
            if float(minutes) > 0:  # a part the stage trains: 2 steps instead of its minutes
                steps += [f"--{part}-steps", "2"]
        script.main([*args, *steps, *tiny])

    recipe.run(recipe.SHIPPED, out, work, train)
    assert snapshots.keys() == taken_before.keys()

    before_run_6, before_run_7, after_run_7, after_run_8, after_run_9, after_run_12 = (
        snapshots[name]
        for name in ("redistill", "run7-target", "run8-target", "run9-target", "run10-target", "run13-target")
    )
    first, longer, distilled = work / "first", work / "longer", work / "distilled"
    assert not same(weights(first / "target"), weights(longer / "target"))  # run 2 trained the target
    assert same(weights(first / "draft"), weights(longer / "draft"))  # and left the draft alone
    assert same(weights(longer / "target"), weights(distilled / "target"))  # run 3 kept run 2's target
    assert not same(weights(first / "draft"), weights(distilled / "draft"))  # and trained run 1's draft on
    assert not same(weights(distilled / "target"), weights(out / "target"))  # run 4 trained both on
    assert not same(weights(distilled / "draft"), weights(out / "draft"))
    assert same(before_run_6["target"], before_run_7["target"])  # run 6 kept run 4's target
    assert not same(before_run_6["draft"], before_run_7["draft"])  # and distilled the sure draft on
    run7 = work / "run7"
    assert not same(before_run_7["target"], weights(run7 / "target"))  # run 7 trained the target on
    assert same(before_run_7["draft"], weights(run7 / "draft"))  # its first step left the draft alone
    assert not same(before_run_7["draft"], after_run_7["draft"])  # its second distilled it on
    assert same(before_run_7["hesitant-draft"], after_run_7["hesitant-draft"])  # run 7 kept the hesitant draft
    assert same(weights(run7 / "target"), after_run_7["target"])  # run 7's target landed in OUT
    run8 = work / "run8"
    assert not same(after_run_7["target"], weights(run8 / "target"))  # run 8 trained the target on
    assert same(weights(run8 / "target"), after_run_8["target"])  # which lands in OUT
    assert not same(after_run_7["draft"], after_run_8["draft"])  # and distilled both drafts from it
    assert not same(after_run_7["hesitant-draft"], after_run_8["hesitant-draft"])
    assert "--rows" in runs["run8-target"] and "--jpeg" in runs["run8-target"] and "--rows" in runs["run8-hesitant"]
    run9 = work / "run9"
    assert not same(weights(run8 / "target"), weights(run9 / "target"))  # run 9 trained run 8's target on
    assert same(weights(run9 / "target"), after_run_9["target"])  # which lands in OUT
    assert not same(after_run_8["draft"], after_run_9["draft"])  # and distilled both drafts on from it
    assert not same(after_run_8["hesitant-draft"], after_run_9["hesitant-draft"])
    assert "--target-steps" in runs["run9-target"] and "--hand-drawn" in runs["run9-target"]
    assert "--rows" in runs["run9-hesitant"]
    run10, embed = work / "run10", "model.language_model.embed_tokens.weight"
    assert all("--visitor-words" in runs[s.name] and "--free" in runs[s.name] for s in of_run(recipe.SHIPPED, 10))
    grown = script.build_processor(visitor_words=True).tokenizer
    for role in ("target", "draft", "hesitant-draft"):  # run 10 grew every model to the visitor words
        assert after_run_9[role][embed].shape[0] < len(grown) == after_run_12[role][embed].shape[0]
    assert same(weights(run10 / "target"), after_run_12["target"])  # its trained target lands in OUT
    assert not same(after_run_9["draft"], after_run_12["draft"])
    assert not same(after_run_9["hesitant-draft"], after_run_12["hesitant-draft"])
    pair = load_pair(str(out / "target"), str(out / "draft"), device="cpu", dtype="float32")
    assert type(pair.draft.processor).__name__ == "Qwen3VLProcessor"
    hesitant = load_pair(str(out / "target"), str(out / "hesitant-draft"), device="cpu", dtype="float32")
    assert hesitant.draft.model.config.text_config.num_hidden_layers == 1
    assert pair.draft.model.config.text_config.num_hidden_layers == 2
    # run 12: the one-pass draft, from the sure draft in three stages (in WORK, then OUT), declares its block
    assert all("--one-pass" in runs[s.name] for s in of_run(recipe.SHIPPED, 12)) and "--block-copies" in runs["run12c"]
    one_pass = load_pair(str(out / "target"), str(out / "one-pass-draft"), device="cpu", dtype="float32")
    assert one_pass.draft.one_pass is not None and one_pass.draft.one_pass.block_size == 10
    assert not same(weights(work / "run12b" / "one-pass-draft"), after_run_12["one-pass-draft"])
    # run 13: every model grown again by the visitors' words, the target trained on (13, then 13b with the counts,
    # in WORK) and every draft, the one-pass one too, distilled on from 13b's target into OUT
    run13 = [runs[s.name] for s in of_run(recipe.SHIPPED, 13)]
    assert len(run13) == 5 and all("--more-visitor-words" in args and "--visitors" in args for args in run13)
    assert "--counts" in runs["run13b-target"] and "--one-pass" in runs["run13-one-pass"]
    more = script.build_processor(visitor_words=True, more_visitor_words=True).tokenizer
    for role in every:
        assert after_run_12[role][embed].shape[0] == len(grown) < len(more) == weights(out / role)[embed].shape[0]
        if role != "target":
            assert not same(after_run_12[role], weights(out / role))
    assert not same(weights(work / "run13" / "target"), weights(work / "run13b" / "target"))
    assert same(weights(work / "run13b" / "target"), snapshots["run15-target"]["target"])
    # run 15: 13b's target trained on with the checked answers and the decisions weighted (in WORK), every draft
    # distilled on from it into OUT
    assert all("--checking" in runs[s.name] for s in of_run(recipe.SHIPPED, 15))
    assert "--decision-weight" in runs["run15-target"]
    before_run_15, before_run_17, before_run_18 = (snapshots[f"run{n}-target"] for n in (15, 17, 18))
    assert not same(before_run_15["target"], weights(work / "run15" / "target"))
    assert same(weights(work / "run15" / "target"), before_run_17["target"])
    assert all(not same(before_run_15[role], before_run_17[role]) for role in every if role != "target")
    # run 17: 15's target trained on twice with graphs (17, then 17b, in WORK), every draft distilled on from 17b's
    assert all(
        "--graphs" in runs[name] and "--decisive-kinds" in runs[name] for name in ("run17-target", "run17b-target")
    )
    assert not same(before_run_17["target"], weights(work / "run17" / "target"))
    assert not same(weights(work / "run17" / "target"), weights(work / "run17b" / "target"))
    assert same(weights(work / "run17b" / "target"), before_run_18["target"])
    assert all(not same(before_run_17[role], before_run_18[role]) for role in every if role != "target")
    # run 18: 17b's target trained on with the counts of every shape (in WORK), every draft distilled on from it
    assert "--totals" in runs["run18-target"] and not same(before_run_18["target"], weights(work / "run18" / "target"))
    assert same(weights(work / "run18" / "target"), weights(out / "target"))
    assert all(not same(before_run_18[role], weights(out / role)) for role in every if role != "target")
    one_pass = load_pair(str(out / "target"), str(out / "one-pass-draft"), device="cpu", dtype="float32")
    assert one_pass.draft.one_pass is not None and one_pass.draft.one_pass.block_size == 10


def test_the_decision_weight_is_the_models_own_loss_at_one_and_weights_only_the_decisive_tokens():
    script = load_script("train_builtin_pair")
    torch.manual_seed(0)
    logits = torch.randn(3, 6, 11)
    labels = torch.tensor([[-100, -100, 4, 5, 2, -100], [-100, 7, 7, 2, -100, -100], [-100, -100, -100, 3, 9, 2]])
    reference = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 11), labels[:, 1:].reshape(-1))
    decisive = torch.zeros_like(labels, dtype=torch.bool)
    decisive[1, 2] = decisive[2, 4] = True
    assert torch.allclose(script.weighted_answer_loss(logits, labels, decisive, 1.0), reference)
    ce = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], reduction="none")
    labelled = (labels[:, 1:] != -100).sum()
    by_hand = (ce[labels[:, 1:] != -100].sum() + 4 * (ce[1, 1] + ce[2, 3])) / (labelled + 8)
    assert torch.allclose(script.weighted_answer_loss(logits, labels, decisive, 5.0), by_hand)
    assert not torch.allclose(by_hand, reference)


def test_the_decisive_tokens_are_the_yes_no_and_number_words_of_a_count_or_whether_a_thing_is_there():
    import random

    from transformers import AutoProcessor

    script = load_script("train_builtin_pair")
    processor = AutoProcessor.from_pretrained(ROOT / "assets" / "builtin" / "target")
    rng = random.Random(4)
    conversations = [[script.draw_example(rng, script.DataMix(counts=1.0))] for _ in range(6)]
    conversations.append([script.draw_example(random.Random(1))])  # a question of the default stream
    _, labels = script.make_batch(processor, conversations)
    decisive = script.decisive_tokens(processor, conversations, labels)
    tok = processor.tokenizer
    for turns, row, marks in zip(conversations, labels.tolist(), decisive.tolist(), strict=True):
        said = [tok.convert_ids_to_tokens(t) for t, m in zip(row, marks, strict=True) if m]
        decision = [w for w in turns[0].answer.replace(",", " ").replace(".", " ").split() if w in said]
        assert said == (decision if turns[0].kind in ("count_kind", "exists") else [])
    assert decisive[:6].any(dim=1).all() and not decisive[6].any()


def test_the_graphs_share_asks_charts_as_graphs_and_their_count_of_bars_can_be_weighted():
    import random

    from transformers import AutoProcessor

    from sage_world import visitors

    script = load_script("train_builtin_pair")
    rng = random.Random(17)
    drawn = [script.draw_example(rng, script.DataMix(graphs=1.0)) for _ in range(40)]
    assert {e.kind for e in drawn} == {"chart", "bar"}
    worded = {q.replace("{colour}", "") for pool in visitors.TRAINING.values() for q in pool if "graph" in q}
    assert sum("graph" in e.question.lower() for e in drawn) >= 20 and worded
    processor = AutoProcessor.from_pretrained(ROOT / "assets" / "builtin" / "target")
    conversations = [[e] for e in drawn[:8]]
    _, labels = script.make_batch(processor, conversations)
    assert not script.decisive_tokens(processor, conversations, labels).any()  # run 15's kinds alone
    decisive = script.decisive_tokens(processor, conversations, labels, (*script.LOOKING_KINDS, "chart", "bar"))
    tok = processor.tokenizer
    for turns, row, marks in zip(conversations, labels.tolist(), decisive.tolist(), strict=True):
        said = [tok.convert_ids_to_tokens(t) for t, m in zip(row, marks, strict=True) if m]
        bars = len(turns[0].objects)
        counted = f"{script.NUMBER_WORDS[bars]} bars" in turns[0].answer
        assert said == ([script.NUMBER_WORDS[bars]] if counted else [])
    assert decisive.any()
    args = script.parse_args(["--graphs", "0.25", "--decisive-kinds", "chart,bar,chart", "--decision-weight", "10"])
    assert (args.graphs, args.decisive_kinds) == (0.25, ("chart", "bar")) and script.parse_args([]).decisive_kinds == ()


def test_the_totals_share_asks_how_many_shapes_and_their_count_can_be_weighted():
    import random

    from transformers import AutoProcessor

    script = load_script("train_builtin_pair")
    rng = random.Random(18)
    drawn = [script.draw_example(rng, script.DataMix(totals=1.0)) for _ in range(30)]
    assert {e.kind for e in drawn} == {"count"}
    processor = AutoProcessor.from_pretrained(ROOT / "assets" / "builtin" / "target")
    conversations = [[e] for e in drawn[:6]]
    _, labels = script.make_batch(processor, conversations)
    decisive = script.decisive_tokens(processor, conversations, labels, (*script.LOOKING_KINDS, "count"))
    tok = processor.tokenizer
    for turns, row, marks in zip(conversations, labels.tolist(), decisive.tolist(), strict=True):
        said = [tok.convert_ids_to_tokens(t) for t, m in zip(row, marks, strict=True) if m]
        assert said == [script.NUMBER_WORDS[len(turns[0].objects)]]


def test_the_shipped_examples_still_come_from_the_default_data_stream():
    """Run 4's data options draw nothing when off: the default stream, and with it the shipped
    examples (written from it), is what it was."""
    from sage_world.scenes import example_picks

    shipped = json.loads((ROOT / "assets" / "examples" / "examples.json").read_text())
    answers = {e["file"]: e["answer"] for e in shipped}
    assert all(answers[name] == e.answer for name, e in example_picks() if name in answers)
    assert len(answers) >= 10


def test_the_data_mix_draws_as_before_when_off_and_lone_scenes_when_asked():
    import random

    from sage_world.scenes import make_example

    script = load_script("train_builtin_pair")
    from sage_world.mixing import IMAGE_KINDS, KIND_WEIGHTS

    a, b = random.Random(5), random.Random(5)
    for _ in range(20):  # no form: the world's own weighted draw, from the example's seed
        own = random.Random(b.getrandbits(64))
        assert (
            script.draw_example(a).answer
            == make_example(own, own.choices(IMAGE_KINDS, list(KIND_WEIGHTS.values()))[0]).answer
        )
    rng = random.Random(6)
    drawn = [script.draw_example(rng, script.DataMix(lone=1.0)) for _ in range(60)]
    lone_kinds = [e for e in drawn if e.kind in ("shape", "colour", "size", "position")]
    assert lone_kinds and all(len(e.objects) == 1 for e in lone_kinds)
    reworded = [script.draw_example(rng, script.DataMix(reworded=1.0)) for _ in range(40)]
    from sage_world import scenes

    templates = {t for name in dir(scenes) if name.endswith("_Q") for t in getattr(scenes, name)}
    assert sum(not any(e.question == t.format(**_slots(e)) for t in templates) for e in reworded) >= 25


def _slots(example) -> dict[str, str]:
    """Fill-ins for any training template, taken from the example's answer (enough to compare)."""
    return {"colour": "", "place": "", "shape": "", "n": ""} | {
        k: v for k, v in zip(("colour", "shape", "place"), example.answer.split()[1:4], strict=False)
    }


def test_the_visitor_words_come_after_every_earlier_token_and_a_grown_model_answers_as_before():
    script = load_script("train_builtin_pair")
    before, after = script.build_processor().tokenizer, script.build_processor(visitor_words=True).tokenizer
    assert len(after) > len(before) + 100
    assert all(after.convert_tokens_to_ids(t) == i for t, i in before.get_vocab().items())
    assert after.tokenize("where is the little thing located?") == [
        "where",
        "is",
        "the",
        "little",
        "thing",
        "located",
        "?",
    ]
    assert before.unk_token in before.tokenize("where is the little thing located?")
    model = script.build_model(script.DRAFT_CFG, before, seed=4)
    ids = torch.tensor([[1, 7, 9, 10, 2, 30, 41]])
    greedy = model.generate(input_ids=ids, max_new_tokens=12, do_sample=False)
    old_logits = model(input_ids=ids).logits
    script.grow_vocabulary(model, after)
    assert model.config.text_config.vocab_size == len(after)
    assert torch.equal(model.generate(input_ids=ids, max_new_tokens=12, do_sample=False), greedy)
    assert torch.allclose(model(input_ids=ids).logits[..., : len(before)], old_logits)
    embed = model.get_input_embeddings().weight
    assert torch.equal(embed[after.convert_tokens_to_ids("little")], embed[after.convert_tokens_to_ids("small")])
    script.grow_vocabulary(model, after)  # a model already grown is left as it is
    assert model.get_input_embeddings().weight.shape[0] == len(after)


def test_the_free_share_asks_shape_questions_in_free_wordings():
    import random

    script = load_script("train_builtin_pair")
    rng = random.Random(8)
    drawn = [script.draw_example(rng, script.DataMix(free=1.0, reworded=1.0)) for _ in range(60)]
    from sage_world import asking

    assert {e.kind for e in drawn} == {"shape", "colour", "count", "position", "size", "describe"}
    assert all(asking.question_fit(e.question, "shapes").taught for e in drawn)
    assert 20 <= sum(len(e.objects) == 1 for e in drawn) <= 50


def test_a_smaller_draft_keeps_the_first_layers_and_still_runs():
    script = load_script("train_builtin_pair")
    processor = script.build_processor()
    draft = script.build_model(script.DRAFT_CFG, processor.tokenizer, seed=3)
    first_layer = draft.model.language_model.layers[0]
    script.keep_layers(draft, 1)
    assert len(draft.model.language_model.layers) == 1
    assert draft.model.language_model.layers[0] is first_layer
    assert draft.config.text_config.num_hidden_layers == 1
    ids = torch.tensor([[1, 7, 9, 10, 2]])
    assert draft(input_ids=ids).logits.shape == (1, 5, len(processor.tokenizer))
    with pytest.raises(SystemExit):
        script.keep_layers(draft, 2)


RUN13 = ["1313", "1717", "1414", "1515", "1616"]
RUN15 = ["1531", "1532", "1533", "1534"]
RUN17 = ["1717", "1718", "1732", "1733", "1734"]
RUN18 = ["1801", "1832", "1833", "1834"]
FEATURES = ["6606", "6607"]  # run 19: the one-pass draft reads the target's features (scripts/train_target_features.py)
RUN8_TO_12 = ["8642", "9753", "7531", "1133", "2244", "3355", "4455", "5566", "6677", "7788", "8899", "9911"]


@pytest.mark.parametrize(
    ("start", "seeds"),
    [
        ("8", [*RUN8_TO_12, *RUN13, *RUN15, *RUN17, *RUN18]),
        ("9", [*RUN8_TO_12[3:], *RUN13, *RUN15, *RUN17, *RUN18]),
        ("10", [*RUN8_TO_12[6:], *RUN13, *RUN15, *RUN17, *RUN18]),
        ("12", [*RUN8_TO_12[9:], *RUN13, *RUN15, *RUN17, *RUN18]),
        ("13", [*RUN13, *RUN15, *RUN17, *RUN18]),
        ("15", [*RUN15, *RUN17, *RUN18]),
        ("17", [*RUN17, *RUN18]),
        ("18", RUN18),
    ],
)
def test_a_run_number_starts_where_the_old_script_did(start, seeds):
    """`--from 8` runs the continuation stages (runs 8-10, then 12, 13, 15, 17 and 18) on the pair in OUT, `--from
    9` runs 9, 10 and those after, `--from 10` runs 10, 12, 13, 15, 17 and 18, `--from 12` the one-pass draft, then
    runs 13, 15, 17 and 18, `--from 13` runs 13, 15, 17 and 18, `--from 15` runs 15, 17 and 18, `--from 17` runs 17
    and 18, `--from 18` run 18 alone: as scripts/train_builtin_pair_full.sh did before the table. The tried run 14
    (its answer form gone from the data) is no run of the table, like run 11."""
    recipe = load_script("recipe")
    assert [str(stage.seed) for stage in recipe.stages_from(start)] == [*seeds, *FEATURES]
    assert recipe.stages_from(None) == (*recipe.SHIPPED, *recipe.FEATURE_STAGES)
    for gone in ("11", "14", "run14-target"):
        with pytest.raises(ValueError, match="neither a stage's name nor a run's number"):
            recipe.stages_from(gone)


def every_stage() -> list[str]:
    recipe = load_script("recipe")
    return [stage.name for stages in recipe.RECIPES.values() for stage in stages]


@pytest.mark.parametrize("name", every_stage())
def test_the_runner_starts_at_every_stage_and_goes_to_the_end_of_its_recipe(name, tmp_path, capsys):
    """`python scripts/recipe.py --from STAGE --dry-run OUT WORK` prints the commands of that stage and of every one
    after it in its recipe, and nothing else."""
    recipe = load_script("recipe")
    (stages,) = [stages for stages in recipe.RECIPES.values() if name in [stage.name for stage in stages]]
    after = stages[[stage.name for stage in stages].index(name) :]
    out, work = tmp_path / "out", tmp_path / "work"
    recipe.main(["--from", name, "--dry-run", str(out), str(work)])
    printed = [line.split(" ", 2)[2] for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
    assert printed == [shlex.join(recipe.words_of(stage, out, work)) for stage in after]
    assert after[0].name == name and after[-1] is stages[-1]


def test_the_runner_resumes_after_the_last_finished_stage_and_refuses_a_start_that_is_not_there(tmp_path, capsys):
    """A stage that stops (here: its training fails) stops the run; the same command run again skips the stages
    marked done and begins with the one that stopped. `--from` a stage whose starting models nothing before it
    writes, and which are not there, is refused before anything trains."""
    recipe = load_script("recipe")
    out, work = tmp_path / "out", tmp_path / "work"
    stages = recipe.stages_from("15")
    trained: list[str] = []
    stops = ["run17-draft"]  # once

    def train(stage, args: list[str]) -> None:
        if stage.name in stops:
            stops.remove(stage.name)
            raise RuntimeError("stopped")
        trained.append(stage.name)

    with pytest.raises(RuntimeError, match="stopped"):
        recipe.run(stages, out, work, train)
    assert stages[6].name == "run17-draft" and trained == [stage.name for stage in stages[:6]]
    recipe.run(stages, out, work, train)
    assert trained[6:] == [stage.name for stage in stages[6:]] and trained[-2:] == ["features-a", "features-b"]
    assert "run15-target (run 15, trains target): done, skipped" in capsys.readouterr().out
    recipe.main(["--from", "15", "--dry-run", str(out), str(work)])
    assert capsys.readouterr().out.count(", done)") == len(stages)
    with pytest.raises(SystemExit):
        recipe.main(["--from", "run9-target", str(out), str(work)])
    assert f"not there: run9-target's {work / 'run8' / 'target'}" in capsys.readouterr().err


def test_the_old_script_runs_the_runner(tmp_path):
    """scripts/train_builtin_pair_full.sh, kept for the commands the docs name, is the runner: `--from 13 --dry-run
    OUT WORK` prints run 13's and the later runs' commands."""
    import subprocess

    out, work = tmp_path / "out", tmp_path / "work"
    args = [
        "bash",
        str(ROOT / "scripts" / "train_builtin_pair_full.sh"),
        "--from",
        "13",
        "--dry-run",
        str(out),
        str(work),
    ]
    printed = subprocess.run(args, check=True, capture_output=True, text=True, timeout=60).stdout.splitlines()
    recipe = load_script("recipe")
    commands = [recipe.said(s, out, work) for s in recipe.stages_from("13")]
    assert commands[-1].startswith("python scripts/train_target_features.py train ")
    assert [line for line in printed if not line.startswith("#")] == commands
    assert printed[0] == "# run13-target (run 13, trains target)"


@pytest.mark.slow
def test_the_runner_makes_the_feature_stage_and_its_draft_reads_the_targets_features(tmp_path, capsys):
    """Run 19's stage, run by the runner's own process call on the shipped target and a copy of the shipped one-pass
    draft (cut to a few seconds of training, a batch of 2): the draft folder it writes over declares the features,
    loads as a pair with them and decodes losslessly in one draft forward a round."""
    import dataclasses
    import shutil

    recipe = load_script("recipe")
    out, work = tmp_path / "out", tmp_path / "work"
    shutil.copytree(ROOT / "assets" / "builtin" / "one-pass-draft", out / "one-pass-draft")
    (out / "target").symlink_to(ROOT / "assets" / "builtin" / "target")
    before = (out / "one-pass-draft" / "model.safetensors").read_bytes()
    stage = recipe.FEATURE_STAGES[0]
    quick = dataclasses.replace(stage, minutes=0.05, batch=2)
    recipe.run([quick], out, work)
    assert "features-a (run 19, trains one-pass-draft): python scripts/train_target_features.py train" in (
        capsys.readouterr().out
    )
    assert (out / "one-pass-draft" / "model.safetensors").read_bytes() != before  # trained and written over
    torch.set_num_threads(1)
    pair = load_pair(str(out / "target"), str(out / "one-pass-draft"), device="cpu", dtype="float32")
    assert pair.draft.one_pass is not None and pair.draft.one_pass.features is not None
    media = load_media(ROOT / "assets" / "examples" / "count.png")
    plain = decode(pair, media, "How many shapes are there?", DecodeConfig("ar", 24)).run_to_end()
    run = decode(pair, media, "How many shapes are there?", DecodeConfig("sage-cost", 24)).run_to_end()
    assert run.token_ids == plain.token_ids
    assert run.draft_forwards == run.rounds
    recipe.run([quick], out, work)  # done: skipped
    assert "done, skipped" in capsys.readouterr().out
