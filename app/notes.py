"""Notes shown before a race: plain sentences about what the visitor is about to see.

With the built-in pair a picture from outside its synthetic world gets a note
(`sage_world.world.outside_world`): what the pair knows, that the race
stays lossless but the answer will be nonsense, and that the GPU pairs read
photos. A question the pair was not taught for its picture gets one too
(`sage_world.asking.question_note`: why, and which questions to ask).
The `/race` answer carries the same sentences as `notes`.
"""

from __future__ import annotations

import html

from sage_core.media import Media
from sage_world.asking import question_note
from sage_world.world import outside_world

from .render import wrap

#: A note's mark: an "i" in a ring drawn by the page's CSS (`.sage-i`), not the ⓘ character (a box where the font
#: has no such glyph).
INFO_MARK = "<span class='sage-i' aria-hidden='true'>i</span> "

#: The target name of the built-in pairs (app/models.py's presets).
BUILTIN_TARGET = "builtin"
OUTSIDE_WORLD_NOTE = (
    "This picture does not look like the built-in pair's world: the pair was trained only on flat shapes and bars "
    "in six colours on a plain canvas, and short clips of such shapes.",
    "The race stays lossless (every method still gives the target's own answer), but that answer will be nonsense.",
    "The GPU pairs (Qwen2.5-VL, LLaVA-OneVision) read photos; pick one where a GPU is available, or draw shapes in "
    "the Draw tab.",
)


def race_notes(target: str, media: Media, prompt: str = "") -> list[str]:
    """The sentences to show before a race of `media` and `prompt` on the pair whose target is `target`:
    for the built-in pair, the photo note, else the untaught question's note (or none)."""
    if target != BUILTIN_TARGET:
        return []
    if outside_world(media):
        return list(OUTSIDE_WORLD_NOTE)
    return list(question_note(prompt, media))


def notes_html(notes: list[str]) -> str:
    """The notes as a status block above the race's own status line (empty when there are none)."""
    if not notes:
        return ""
    style = "background:#fff7ed;color:#7c2d12;border:1px solid #fdba74;margin-bottom:6px"
    said = html.escape(" ".join(notes))
    return wrap(f"<div class='sage-status note' id='race-note' style='{style}'>{INFO_MARK}{said}</div>")
