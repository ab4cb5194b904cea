"""The built-in model pair: a tiny Qwen3-VL target and draft trained on synthetic scenes.

``scenes`` makes the data (``make_example``, ``grade``); ``quality`` measures accuracy and
draft/target agreement. The weights live in ``assets/builtin/{target,draft}`` and are
made by ``scripts/train_builtin_pair.py``.
"""

from .scenes import KINDS, Example, grade, make_example, make_examples

__all__ = ["KINDS", "Example", "grade", "make_example", "make_examples"]
