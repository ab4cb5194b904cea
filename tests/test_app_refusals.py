"""What a custom pair's models cannot run, refused by the app in one sentence, and the app goes on.

The same refusals the CLI answers with exit 2 and the library with a `SageError`
(tests/test_fastpath.py, tests/test_records_and_cli.py, tests/test_lossless.py): a video on an
image-only family, a draft of another tokenizer, and pruning where the draft's prompt does not
tokenize like the target's. Each
reaches the visitor through the custom-model path (the operator's models folder) as its sentence,
never a traceback, and the next race is served. A hybrid (linear-attention) pair, once refused trees,
races them.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest
from app_server import form_values, running_app
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from app.models import CustomModels
from sage_core import DecodeConfig, SageError, decode, load_media, load_pair
from sage_core.cli import main
from sage_testkit.pairs import tiny_folder
from sage_testkit.seams import generate_argv

EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"
IMAGE = str(next(EXAMPLES.glob("*.png")))
VIDEO = str(next(EXAMPLES.glob("*.webm")))
PRUNING = "visual token pruning needs the draft's prompt to tokenize like the target's"


def other_image_size(folder: Path) -> None:
    """The draft's image processor reads images at four times the pixels: more visual tokens than the target's."""
    path = folder / "processor_config.json"
    settings = json.loads(path.read_text())
    size = settings["image_processor"]["size"]
    settings["image_processor"]["size"] = {key: 4 * value for key, value in size.items()}
    path.write_text(json.dumps(settings))


@pytest.fixture(scope="module")
def models_folder(tiny_root, tmp_path_factory) -> Path:
    """The operator's models folder: tiny pairs of a hybrid and an image-only family, a draft of another
    tokenizer, and a draft whose image processor differs from its target's."""
    folder = tmp_path_factory.mktemp("operator-models")
    for name, (family, kind) in {
        "hybrid-target": ("qwen3_5", "target"),
        "hybrid-draft": ("qwen3_5", "noised"),
        "gemma-target": ("gemma3", "target"),
        "gemma-draft": ("gemma3", "noised"),
        "qwen-target": ("qwen2_vl", "target"),
        "qwen-draft": ("qwen2_vl", "noised"),
        "llava-draft": ("llava", "noised"),
    }.items():
        shutil.copytree(tiny_folder(tiny_root, family, kind), folder / name)
    shutil.copytree(folder / "qwen-draft", folder / "qwen-draft-other-size")
    other_image_size(folder / "qwen-draft-other-size")
    return folder


@pytest.fixture(scope="module")
def client(tiny_root, models_folder):
    pair = (tiny_folder(tiny_root, "qwen2_vl", "target"), tiny_folder(tiny_root, "qwen2_vl", "noised"))
    with running_app(*pair, custom=CustomModels(folder=models_folder)) as url:
        yield Client(url, verbose=False)


def race(client: Client, target: str, draft: str, **inputs) -> dict:
    media = {"video": handle_file(VIDEO)} if inputs.pop("video", False) else {"image": handle_file(IMAGE)}
    request = {
        "prompt": "Describe it.",
        "max_new_tokens": 4,
        "pair": "custom",
        "custom_target": target,
        "custom_draft": draft,
        **media,
        **inputs,
    }
    return client.predict(**request, api_name="/race")


REFUSALS = [
    ("a video on an image-only family", ("gemma-target", "gemma-draft"), {"video": True},
     r"reads images only \(gemma3\); give a still image instead of a video"),
    ("a draft of another tokenizer", ("qwen-target", "llava-draft"), {},
     "use different tokenizers; speculative decoding needs a draft of the same tokenizer"),
    ("pruning with a draft that reads the image otherwise", ("qwen-target", "qwen-draft-other-size"),
     {"prune_choice": "paper"}, PRUNING),
]  # fmt: skip


@pytest.mark.parametrize(("case", "pair", "inputs", "message"), REFUSALS, ids=[c[0] for c in REFUSALS])
def test_a_refusal_is_one_sentence_and_the_app_goes_on(client, models_folder, case, pair, inputs, message):
    with pytest.raises(AppError, match=message) as refused:
        race(client, *pair, **inputs)
    sentence = str(refused.value)
    assert "Traceback" not in sentence and "\n" not in sentence.strip()
    assert str(models_folder) not in sentence  # no server path
    # the same pair runs what it can: the image-only family's image, an unpruned race
    if case != "a draft of another tokenizer":
        answer = race(client, *pair)
        assert answer["lossless"]["identical"] and all(answer["texts"].values())


def test_a_hybrid_pair_races_trees_in_the_app(client):
    """Qwen3.5's linear-attention layers verify trees: the custom pair's tree race is served, lossless."""
    answer = race(client, "hybrid-target", "hybrid-draft", methods=["sage", "static", "dynamic", "ar"])
    assert answer["lossless"]["identical"] and all(answer["texts"].values())


def test_the_streamed_race_shows_the_refusal_in_its_status_line(client):
    values = form_values(
        video=handle_file(VIDEO),
        prompt="Describe it.",
        pair="custom",
        custom_target="gemma-target",
        custom_draft="gemma-draft",
        max_new_tokens=4,
    )
    job = client.submit(*values, None, api_name="/race_live")
    assert "give a still image instead of a video" in html.unescape(job.result()[0])  # the status line


def test_the_library_and_the_cli_refuse_the_same_pruning_in_one_sentence(models_folder, capsys):
    target, draft = str(models_folder / "qwen-target"), str(models_folder / "qwen-draft-other-size")
    pair = load_pair(target, draft, "cpu", "float32")
    with pytest.raises(SageError, match=PRUNING):
        decode(pair, load_media(IMAGE), "Describe it.", DecodeConfig("sage", 4, prune_ratio=0.5))
    argv = generate_argv(target, draft, IMAGE, "Describe it.", "--prune-ratio", "0.5", "--max-new-tokens", "4")
    assert main(argv) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error: ") and PRUNING in error
