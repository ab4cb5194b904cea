"""The model menu offers the built-in target with its hesitant draft, and with its one-pass draft, each as a
pair of its own, shown by name (never by its server path)."""

from __future__ import annotations

import pytest

from app import models
from app.handlers import Handlers, Settings
from app.inputs import Limits, RaceForm, load_examples

pytestmark = pytest.mark.skipif(
    not (models.HESITANT_DRAFT_DIR / "config.json").is_file(), reason="the hesitant draft is not trained"
)


def test_the_menu_offers_the_hesitant_pair_after_the_built_in_one():
    keys = [p.key for p in models.presets()]
    assert keys.index(models.BUILTIN_HESITANT.key) == keys.index(models.BUILTIN.key) + 1
    target, draft = models.resolve_pair(models.BUILTIN_HESITANT.key, models.presets(), "", "")
    assert target == "builtin" and draft == str(models.HESITANT_DRAFT_DIR)
    assert keys.index(models.BUILTIN_ONE_PASS.key) == keys.index(models.BUILTIN_HESITANT.key) + 1


@pytest.mark.parametrize(
    ("preset", "shown"),
    [(models.BUILTIN_HESITANT, "builtin-hesitant"), (models.BUILTIN_ONE_PASS, "builtin-one-pass")],
)
def test_a_race_with_it_names_its_draft_without_the_path(preset, shown):
    example = next(e for e in load_examples() if not e.is_video)
    settings = Settings(Limits(), models.presets(), "builtin", models.CustomModels(), load_examples())
    handlers = Handlers(None, settings)  # a request draws no page
    form = RaceForm(
        image=example.file,
        prompt=example.prompt,
        pair=preset.key,
        methods=["sage", "static"],
        max_new_tokens=8,
    )
    request = handlers.request(form)
    choice = request.pair
    assert choice.shown == ("builtin", shown)
    assert request.max_new_tokens == 8
