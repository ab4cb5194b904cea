"""A method is one registry entry end to end: a toy method defined here, and nowhere else, runs through the
command line, the /race API and the explainer.

The toy drafts a chain whose length is its one setting (`toy_length`, in [1, 5]), and keeps its own record of
each round with one number of its own (`ToyRecord.chain_mass`: the chain's draft probability). Nothing outside
this module names it: its settings class, its own record, its proposer and its registry entry are below, and
the CLI flag, the API field, the page's control, the refusal of a bad value, the cache reserve, the explainer's
sentence and its own number in the trace, the explainer and the /race answer all come from them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from PIL import Image

from sage_core import SageConfig
from sage_core.cli import main
from sage_core.drafting import template_chooser
from sage_core.errors import ConfigError
from sage_core.methods import MethodSpec, Setting, registered
from sage_core.models import load_pair
from sage_core.proposers import Adaptation, Drafter, Proposal, Proposer, RoundShape
from sage_core.records import OwnRecord, RoundRecord
from sage_core.studies.explain import explain_round
from sage_core.verify import Verdict
from sage_testkit.pairs import tiny_folder
from sage_testkit.seams import generate_argv

TOKENS = 10


@dataclass(frozen=True)
class ToyRecord(OwnRecord):
    """The toy's own record of a round: one number, the drafted chain's probability (its draft probabilities
    multiplied)."""

    chain_mass: float = 0.0

    def problem(self, record: RoundRecord) -> str | None:
        return None if 0.0 <= self.chain_mass <= 1.0 else "the toy chain's mass must lie in [0, 1]"

    def words(self, record: RoundRecord) -> str:
        return f"Its own number, the chain mass: {self.chain_mass:.4f}."


@dataclass(frozen=True)
class ToySettings:
    length: int = 2

    def __post_init__(self) -> None:
        if not (isinstance(self.length, int) and 1 <= self.length <= 5):
            raise ConfigError(f"the toy chain's length must be a whole number in [1, 5], not {self.length!r}")


class ToyProposer(Proposer):
    """A chain of `length` draft tokens, the draft's best at each level."""

    candidates = 4

    def __init__(self, settings: ToySettings) -> None:
        self.template = tuple((0,) * level for level in range(1, settings.length + 1))
        self.max_nodes = self.max_depth = settings.length

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        assert drafter is not None
        root = drafter.root(pending, self.candidates)
        choose, expand, depth = template_chooser(self.template)
        drafted = drafter.grow(root, choose, depth, self.candidates, expand)
        own = ToyRecord(math.prod(drafted.tree.draft_probs))
        return Proposal(drafted, RoundShape(root_top=root, own_record=own))

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation:
        return Adaptation()


TOY = MethodSpec(
    "toy-chain",
    "Toy chain",
    "Toy",
    "a chain of toy_length draft tokens",
    "#111827",
    9,
    drafts=True,
    proposer=lambda settings, config: ToyProposer(settings),
    settings=ToySettings,
    controls=(Setting("toy_length", "length", "Toy chain: length", "the toy chain's length, in [1, 5].", 1, 5),),
    describe=lambda record, settings: (
        f"The toy drafted a chain of {len(record.tree)} (its setting: {settings.length if settings else '?'})."
    ),
    record=ToyRecord,
)


@pytest.fixture(scope="module")
def toy() -> Iterator[MethodSpec]:
    with registered(TOY) as spec:
        yield spec


@pytest.fixture(scope="module")
def pair_folders(tiny_root: Path) -> tuple[str, str]:
    return tiny_folder(tiny_root, "qwen2_vl", "target"), tiny_folder(tiny_root, "qwen2_vl", "noised")


@pytest.fixture(scope="module")
def picture(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("toy") / "picture.png"
    pixels = (torch.Generator().manual_seed(3), None)[0]
    values = torch.rand(48, 48, 3, generator=pixels).mul(255).to(torch.uint8).numpy()
    Image.fromarray(values).save(path)
    return str(path)


def greedy_ids(pair_folders: tuple[str, str], picture: str, prompt: str) -> list[int]:
    from sage_core import load_media

    pair = load_pair(*pair_folders, "cpu")
    inputs = pair.target.prepare(load_media(picture), prompt)
    with torch.no_grad():
        out = pair.target.model.generate(**inputs, do_sample=False, max_new_tokens=TOKENS)
    return out[0, inputs["input_ids"].shape[1] :].tolist()


def test_the_cli_runs_the_toy_with_its_flag_and_refuses_a_bad_value(toy, pair_folders, picture, capsys, tmp_path):
    target, draft = pair_folders
    common = generate_argv(
        target, draft, picture, "What is it?", "--method", "toy-chain", "--max-new-tokens", str(TOKENS)
    )
    trace = tmp_path / "toy.jsonl"
    assert main([*common, "--toy-length", "3", "--json", "--trace", str(trace)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["token_ids"] == greedy_ids(pair_folders, picture, "What is it?")  # lossless
    trees = [len(r["tree_tokens"]) for r in result["trace"] if r["phase"] == "decode"]
    assert trees and set(trees) == {3}  # its setting shaped every round
    from sage_core import load_trace

    header, records = load_trace(trace)  # its settings are in the trace, and it replays
    assert header.settings_of("toy-chain") == {"length": 3} and records[-1].total_tokens == len(result["token_ids"])
    decoded = [r for r in result["trace"] if r["phase"] == "decode"]  # its own number, in the trace and back
    masses = [r.own.chain_mass for r in records if isinstance(r.own, ToyRecord)]
    assert masses == [r["own"]["chain_mass"] for r in decoded] and all(0 < m <= 1 for m in masses)
    assert all(r["own"] == {"type": "ToyRecord", "chain_mass": r["own"]["chain_mass"]} for r in decoded)
    assert all(r.own is None for r in records if r.phase == "prefill")
    assert (
        f"Its own number, the chain mass: {masses[0]:.4f}."
        in explain_round(records[1], SageConfig(), ToySettings(3)).description
    )
    assert main([*common, "--toy-length", "9"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == ["error: the toy chain's length must be a whole number in [1, 5], not 9"]


@pytest.fixture(scope="module")
def client(toy, pair_folders) -> Iterator[Client]:
    from app.serving import running_app

    with running_app(*pair_folders) as url:
        yield Client(url, verbose=False)


def test_the_race_api_takes_the_toys_setting_and_the_explainer_describes_its_rounds(toy, client, picture):
    from app.explain_view import explain_html
    from app.race_trace import parse_race

    raced = client.predict(
        image=handle_file(picture),
        prompt="What is it?",
        methods=["toy-chain", "ar"],
        max_new_tokens=TOKENS,
        toy_length=2,
        api_name="/race",
    )
    assert raced["methods"] == ["ar", "toy-chain"]  # its column order (9) after plain decoding's (4)
    assert raced["lossless"]["identical"] and raced["token_ids"]["toy-chain"] == raced["token_ids"]["ar"]
    data = parse_race(raced["trace"].splitlines())
    lane = data.lane("toy-chain")
    assert lane is not None and lane.header is not None and lane.header.settings_of("toy-chain") == {"length": 2}
    decoded = [r for r in lane.records if r.phase == "decode"]
    assert decoded and all(len(r.tree) == 2 for r in decoded)
    own = decoded[0].own  # its own number reached the answer's trace, and reads back as its own record
    assert isinstance(own, ToyRecord) and 0 < own.chain_mass <= 1
    answered = [json.loads(line) for line in raced["trace"].splitlines()]
    assert {"type": "ToyRecord", "chain_mass": own.chain_mass} in [row.get("own") for row in answered]
    explained = explain_round(decoded[0], SageConfig(), ToySettings(2))
    said = f"The toy drafted a chain of 2 (its setting: 2). Its own number, the chain mass: {own.chain_mass:.4f}."
    assert explained.kind == "tree" and explained.description == said
    page = explain_html(lane.records, decoded[0].round, data.token_texts, "toy-chain", settings=ToySettings(2))
    assert said in page and "SAGE's first round" not in page
    with pytest.raises(AppError, match=r"the toy chain's length must be a whole number in \[1, 5\], not 7"):
        client.predict(
            image=handle_file(picture),
            prompt="What is it?",
            methods=["toy-chain", "ar"],
            max_new_tokens=TOKENS,
            toy_length=7,
            api_name="/race",
        )


def test_one_request_from_the_page_to_the_race_and_no_long_parameter_lists():
    """The /race API's parameters are the race's field list (then the settings' old names), and no function
    of the handlers or the race takes more than 8 parameters: the request travels whole."""
    import ast
    import inspect

    from app.handlers import Handlers, race_api_function
    from app.inputs import race_fields

    api = inspect.signature(race_api_function(Handlers(None, None)))
    assert tuple(api.parameters) == race_fields()
    root = Path(__file__).resolve().parent.parent / "app"
    long = []
    for name in ("handlers.py", "race.py", "inputs.py", "ui.py"):
        for node in ast.walk(ast.parse((root / name).read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                count = len(node.args.posonlyargs) + len(node.args.args) + len(node.args.kwonlyargs)
                count -= bool(node.args.args and node.args.args[0].arg in ("self", "cls"))
                if count > 8:
                    long.append(f"{name}:{node.name} ({count})")
    assert long == []


def test_a_registered_methods_setting_is_a_race_field_and_a_page_control(toy):
    from app.inputs import RaceForm, race_fields

    assert "toy_length" in race_fields()
    assert RaceForm(toy_length=4).toy_length == 4 and RaceForm().toy_length == 2
    with pytest.raises(Exception, match="unknown race input 'toy_size'"):
        RaceForm(toy_size=4)
