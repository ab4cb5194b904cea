"""The built-in model pair's world: a tiny Qwen3-VL target and its drafts trained on synthetic scenes.

``scenes`` draws the pictures, clips and questions (``make_example``, ``grade``); ``wording`` asks them in other
words and ``visitors`` as visitors asked; ``vocabulary`` holds every word the pair's tokenizer has; ``mixing``
draws a training stream from a mix of those forms, a seed per example; ``quality`` measures accuracy and
draft/target agreement; ``asking`` says whether a question is one the pair was taught; ``world`` whether a
picture is from its world. The weights live in ``assets/builtin`` and are made by ``scripts/recipe.py``.
"""

from .scenes import KINDS, Example, grade, make_example, make_examples

__all__ = ["KINDS", "Example", "grade", "make_example", "make_examples"]
