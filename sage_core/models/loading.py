"""Loading and placement: devices, dtypes, the built-in pair's folders, accelerate's device maps,
and the one `from_pretrained` path for targets and drafts (by hub id or local folder)."""

from __future__ import annotations

import gc
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoProcessor

from ..errors import InputError, ModelLoadError
from .family import Family
from .registry import FAMILIES

# A checkout keeps assets/ beside the package; `pip install .` puts it inside as sage_core/assets.
_CHECKOUT_ASSETS = Path(__file__).resolve().parent.parent.parent / "assets"
ASSETS = (
    _CHECKOUT_ASSETS if (_CHECKOUT_ASSETS / "builtin").is_dir() else Path(__file__).resolve().parent.parent / "assets"
)
BUILTIN_TARGET = ASSETS / "builtin" / "target"
BUILTIN_DRAFT = ASSETS / "builtin" / "draft"
#: The built-in pair's other drafts, loaded by folder: a weaker one, and one that drafts a block in one pass.
BUILTIN_HESITANT_DRAFT = ASSETS / "builtin" / "hesitant-draft"
BUILTIN_ONE_PASS_DRAFT = ASSETS / "builtin" / "one-pass-draft"


#: A model folder may ship a note on what it was taught (the built-in pair's does): {"note": "... {words} ..."},
#: the sentence a prompt with words it has no token for gets, `{words}` naming them (prepared.check_vocabulary);
#: and {"other_language": "... {words} ..."}, the sentence for a question that looks written in another language.
ASKING_NOTE = "asking_note.json"


def asking_note_of(folder: str, key: str = "note") -> str | None:
    """A sentence a local model folder's asking note ships (`ASKING_NOTE`) under `key`, or None (none,
    unreadable, or no `{words}`)."""
    path = Path(folder) / ASKING_NOTE if folder else None
    if path is None or not path.is_file():
        return None
    try:
        note = json.loads(path.read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(note, str) or "{words}" not in note:
        return None
    try:
        note.format(words="")
    except (IndexError, KeyError, ValueError):  # a brace the format cannot read: not a note to show
        return None
    return note


def resolve_device(device: str) -> torch.device:
    """'auto' picks CUDA when it is there, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError("--device cuda was asked for, but no CUDA GPU is available")
    if device != "cpu" and not device.startswith("cuda"):
        raise InputError(f"unknown device {device!r}; use auto, cpu or cuda")
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """'auto' is float32 on the CPU and bfloat16 on CUDA."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    choices = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in choices:
        raise InputError(f"unknown dtype {dtype!r}; use auto, float32, bfloat16 or float16")
    return choices[dtype]


def resolve_name(name: str, role: str) -> str:
    """'builtin' names the project's own trained pair under assets/builtin."""
    if name == "builtin":
        return str(BUILTIN_TARGET if role == "target" else BUILTIN_DRAFT)
    return name


def family_of(config: Any, name: str, role: str) -> Family:
    """The family of a loaded config, or one sentence naming the supported ones."""
    family = FAMILIES.get(config.model_type)
    if family is None:
        raise ModelLoadError(
            f"the {role} model {name!r} is a {config.model_type!r} model; supported families: {', '.join(FAMILIES)}"
        )
    return family


def load_model(
    name: str,
    role: str,
    device: str,
    dtype: str,
    device_map: str | None,
    max_memory: Mapping[str, str] | None,
    offload_folder: str | None,
) -> tuple[Any, Any, torch.device]:
    """The model (in eval mode), its processor, and the device its inputs go to (see `VLM.load`)."""
    import transformers

    path = resolve_name(name, role)
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    placement: dict[str, Any] = {"device_map": str(torch_device)}
    if device_map is not None:
        placement = {"device_map": device_map, "max_memory": memory_map(max_memory), "offload_folder": offload_folder}
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"cannot load the {role} model {name!r}: {first_line(error)}") from error
    family = family_of(config, name, role)
    check_tokenizer_files(path, role)
    model_class = getattr(transformers, family.model_class)
    try:
        model = model_class.from_pretrained(path, dtype=torch_dtype, **placement)
        processor = AutoProcessor.from_pretrained(path)
    except torch.OutOfMemoryError as error:
        gc.collect()
        raise ModelLoadError(f"not enough memory to load the {role} model {name!r}") from error
    except (OSError, ValueError, RuntimeError, ImportError) as error:
        raise ModelLoadError(f"cannot load the {role} model {name!r}: {first_line(error)}") from error
    check_tokenizer_loaded(processor, name, role)
    model.eval()
    return model, processor, input_device(model) if device_map is not None else torch_device


#: A folder holds a tokenizer when it has one of these (sets of) files.
TOKENIZER_FILES = (("tokenizer.json",), ("vocab.json", "merges.txt"), ("tokenizer.model",), ("vocab.txt",))
MISSING_TOKENIZER = (
    "the {role} model folder {folder} has no tokenizer: it lacks tokenizer.json (or vocab.json and merges.txt, or "
    "tokenizer.model); copy them from the checkpoint"
)


def check_tokenizer_files(path: str, role: str) -> None:
    """A local model folder without tokenizer files is refused here: transformers would load an empty
    one-token tokenizer from it in silence, and the decoding would then blame something else."""
    folder = Path(path)
    if not folder.is_dir() or not (folder / "config.json").is_file():
        return  # a hub id, or not a model folder: the loader says what is wrong
    if not any(all((folder / name).is_file() for name in files) for files in TOKENIZER_FILES):
        raise ModelLoadError(MISSING_TOKENIZER.format(role=role, folder=str(folder)))


def check_tokenizer_loaded(processor: Any, name: str, role: str) -> None:
    """A tokenizer of one token or none (files present but empty or broken) is refused as missing."""
    tokenizer = getattr(processor, "tokenizer", processor)
    if len(tokenizer) <= 1:
        raise ModelLoadError(MISSING_TOKENIZER.format(role=role, folder=name))


def memory_map(max_memory: Mapping[str, str] | None) -> dict[int | str, str] | None:
    """accelerate's max_memory: GPU indices as ints, "cpu" and "disk" as they are."""
    if max_memory is None:
        return None
    return {int(key) if key.isdigit() else key: value for key, value in max_memory.items()}


def input_device(model: Any) -> torch.device:
    """Where a model placed by accelerate takes its inputs: where its token embedding runs."""
    embedding = model.get_input_embeddings()
    hook_device = getattr(getattr(embedding, "_hf_hook", None), "execution_device", None)
    return torch.device(hook_device) if hook_device is not None else embedding.weight.device


def first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]


def source(name: str, role: str) -> str:
    """Where a model comes from, for progress messages: a local folder, or the hub (downloaded on first use)."""
    return "local folder" if Path(resolve_name(name, role)).is_dir() else "from the hub, downloaded on first use"
