"""scripts/train_builtin_pair.py, run for a few steps: the recipe that made assets/builtin still
runs end to end (image and video batches, distillation, float16 save) and what it saves loads
through the real path as a pair."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from sage_core import DecodeConfig, decode, load_media, load_pair

ROOT = Path(__file__).resolve().parent.parent


def load_script():
    spec = importlib.util.spec_from_file_location("train_builtin_pair", ROOT / "scripts" / "train_builtin_pair.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_few_training_steps_save_a_loadable_float16_pair(tmp_path, capsys):
    script = load_script()
    steps = str(script.VIDEO_EVERY)  # so that one of the steps is a batch of clips
    args = f"--target-steps {steps} --draft-steps {steps} --batch-size 2 --eval-n 8 --threads 1".split()
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
    clip = load_media(ROOT / "assets" / "examples" / "moving_shape.mp4")
    summary = decode(pair, clip, "what happens in the video?", DecodeConfig("sage", 8)).run_to_end()
    assert 1 <= len(summary.token_ids) <= 8
    # The same command run again resumes from the checkpoints: with 2 more target steps it trains
    # exactly those, and the draft, whose budget is spent, trains no further.
    capsys.readouterr()
    more = f"--target-steps {int(steps) + 2} --draft-steps {steps} --batch-size 2 --eval-n 8 --threads 1".split()
    script.main(["--out", str(tmp_path), "--checkpoints", str(tmp_path / "checkpoints"), *more])
    log = capsys.readouterr().out
    assert f"target: resumed from {tmp_path / 'checkpoints' / 'target.pt'} at step {steps}" in log
    assert f"target: done, {int(steps) + 2} steps" in log and f"draft: done, {steps} steps" in log
