"""The library checks its arguments at the door: a wrong type is one `SageError` sentence naming the
argument and what it takes, never an AttributeError from inside; the built-in pair's unknown words are
named by `decode()` itself, as the app and the CLI name them; a model folder without its tokenizer
files is refused at load, naming the folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from sage_core import DecodeConfig, SageConfig, SageError, decode, load_pair
from sage_core.config import SamplingConfig
from sage_core.errors import ConfigError, InputError, ModelLoadError
from sage_core.method_settings import DynamicConfig
from sage_testkit.pairs import tiny_folder

ROOT = Path(__file__).resolve().parent.parent
BUILTIN = ROOT / "assets" / "builtin"


def one_sentence(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert isinstance(error.value, SageError) and "\n" not in text and len(text) < 300, text
    return text


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        (
            {"sage": {"depth_max": 5}},
            "DecodeConfig's sage must be a sage_core SageConfig, not a dict: pass SageConfig(**",
        ),
        ({"sampling": {"temperature": 0.7}}, "DecodeConfig's sampling must be a sage_core SamplingConfig, not a dict"),
        (
            {"sampling": 0.7},
            "sampling must be a sage_core SamplingConfig, not a float: pass SamplingConfig(temperature",
        ),
        ({"dynamic": "deep"}, "DecodeConfig's dynamic must be a sage_core DynamicConfig, not a str"),
        ({"prune_ratio": "0.5"}, "prune_ratio must be a number in [0, 1), not '0.5'"),
        ({"prune_ratio": True}, "prune_ratio must be a number"),
    ],
)
def test_decode_config_refuses_wrong_parts_by_name(settings: dict, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        DecodeConfig(**settings)
    assert said in one_sentence(refused)
    # the right types pass
    DecodeConfig(sage=SageConfig(depth_max=5), sampling=SamplingConfig(), dynamic=DynamicConfig(), prune_ratio=0.5)


def test_decode_refuses_wrong_argument_types_by_name(tiny_pair, image) -> None:
    pair, config, picture = tiny_pair("qwen2_vl"), DecodeConfig(max_new_tokens=4), ROOT / "assets" / "examples"
    path = str(picture / "describe_five.png")
    cases = [
        ((pair, path, "describe it", config), f"Media, not a str: call sage_core.load_media('{path}')"),
        ((pair, Path(path), "describe it", config), "not a PosixPath: call sage_core.load_media("),
        ((pair, Image.new("RGB", (8, 8)), "describe it", config), "call sage_core.image_media(picture)"),
        ((pair, None, "describe it", config), "media must be a sage_core Media, not None"),
        ((None, image, "describe it", config), "pair must be a sage_core ModelPair, not None: call sage_core.load_pa"),
        ((pair, image, "describe it", None), "config must be a sage_core DecodeConfig, not None: pass DecodeConfig("),
        ((pair, image, 123, config), "the prompt must be text (a str), not an int: pass a str"),
        ((pair, image, b"describe it", config), "not a bytes: decode it first (prompt.decode('utf-8'))"),
    ]
    for arguments, said in cases:
        with pytest.raises((InputError, ConfigError)) as refused:
            decode(*arguments)
        assert said in one_sentence(refused), arguments[1:]
    assert len(decode(pair, image, "describe it", config).run_to_end().token_ids) >= 1  # the right types decode


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ((None, "builtin"), "the target must be a hub id or a folder (a str or a Path), not None"),
        (("builtin", 3), "the draft must be a hub id or a folder (a str or a Path), not an int"),
        (("builtin", "builtin", None), "device must be a name (a str such as 'auto'), not None"),
    ],
)
def test_load_pair_refuses_wrong_argument_types_by_name(arguments: tuple, said: str) -> None:
    with pytest.raises(InputError) as refused:
        load_pair(*arguments)
    assert said in one_sentence(refused)


def test_load_pair_takes_its_placement_as_keywords_only() -> None:
    """accelerate's placement (`Placement`: device_map, max_memory, offload_folder) travels as keywords, checked by
    name before anything loads: a misspelt one, or one passed by position, is refused as Python refuses one."""
    with pytest.raises(TypeError, match="unexpected keyword argument 'device_mapp'"):
        load_pair("builtin", "builtin", "cpu", device_mapp="auto")  # misspelt
    with pytest.raises(TypeError, match="positional arguments"):
        load_pair("builtin", "builtin", "cpu", "float32", "auto")  # by position


@pytest.mark.skipif(not (BUILTIN / "target" / "config.json").is_file(), reason="the built-in pair is not trained")
def test_decode_names_the_built_in_pairs_unknown_words(image, builtin_pair) -> None:
    pair = builtin_pair
    with pytest.raises(InputError) as refused:
        decode(pair, image, "describe the zebra and the xylophone.", DecodeConfig(max_new_tokens=4))
    said = one_sentence(refused)  # in the asking note's words (issue 44), not a tokenizer's
    assert "was not taught “zebra”, “xylophone”, so the question is declined" in said and "token" not in said
    assert "“describe the image in detail.”" in said


@pytest.mark.skipif(not (BUILTIN / "target" / "config.json").is_file(), reason="the built-in pair is not trained")
def test_a_long_unknown_word_is_quoted_cut_not_whole(image, builtin_pair) -> None:
    """The "not taught" sentence quoted a 4,000-character word in full: a word is quoted to 40 characters, cut
    with "…"."""
    from sage_core.prepared import listed_words

    word = "zebra" * 790  # 3,950 characters, one word
    with pytest.raises(InputError) as refused:
        decode(builtin_pair, image, f"describe the {word}.", DecodeConfig(max_new_tokens=4))
    said = str(refused.value)  # (the asking note is under 300 characters with short words; 40 add a few)
    assert f"was not taught “{word[:39]}…”, so the question is declined" in said and len(said) < 400, said
    assert "\n" not in said and word[:41] not in said
    assert listed_words(["a" * 40, "b" * 41]) == f"“{'a' * 40}”, “{'b' * 39}…”"


@pytest.mark.skipif(not (BUILTIN / "target" / "config.json").is_file(), reason="the built-in pair is not trained")
def test_the_asking_note_is_the_folders_and_the_world_wrote_it(image, tmp_path) -> None:
    """The library reads a model folder's asking note (models.loading.ASKING_NOTE) and knows no world: the built-in
    pair's folders ship the note the world writes (sage_world.asking); copied without it, or with one that is no
    note, the pair's unknown words get the library's own sentence."""
    from sage_core.models.loading import ASKING_NOTE
    from sage_world.asking import asking_note, asking_notes

    for role in ("target", "draft", "hesitant-draft"):
        shipped = json.loads((BUILTIN / role / ASKING_NOTE).read_text(encoding="utf-8"))
        assert shipped == asking_notes() and shipped["note"] == asking_note()
    for name, note in (
        ("none", None),
        ("no words", {"note": "not taught"}),
        ("a list", ["x"]),
        ("a brace", {"note": "{words} {0}"}),
    ):
        folder = tmp_path / name.replace(" ", "-")
        shutil.copytree(BUILTIN / "target", folder)
        (folder / ASKING_NOTE).unlink()
        if note is not None:
            (folder / ASKING_NOTE).write_text(json.dumps(note), encoding="utf-8")
        pair = load_pair(str(folder), str(BUILTIN / "draft"), "cpu", "float32")
        assert pair.target.asking_note is None and pair.draft.asking_note == asking_note()
        with pytest.raises(InputError) as refused:
            decode(pair, image, "describe the zebra.", DecodeConfig(max_new_tokens=4))
        said = one_sentence(refused)
        assert "has no token for 'zebra'" in said and "was not taught" not in said, said


@pytest.mark.parametrize("role", ["target", "draft"])
def test_a_folder_without_tokenizer_files_is_refused_at_load_naming_it(tiny_root, tmp_path, role: str) -> None:
    """Transformers would load an empty one-token tokenizer from it in silence."""
    folders = {
        role: tiny_folder(tiny_root, "qwen2_vl", kind) for role, kind in (("target", "target"), ("draft", "noised"))
    }
    bare = tmp_path / f"{role}-copied-without-tokenizer"
    shutil.copytree(folders[role], bare)
    removed = [f.name for f in bare.iterdir() if f.name.startswith(("tokenizer", "vocab", "merges"))]
    assert "tokenizer.json" in removed
    for name in removed:
        (bare / name).unlink()
    folders[role] = str(bare)
    with pytest.raises(ModelLoadError) as refused:
        load_pair(folders["target"], folders["draft"], "cpu", "float32")
    said = one_sentence(refused)
    assert f"the {role} model folder {bare} has no tokenizer: it lacks tokenizer.json" in said
