"""Test support for sage_core, kept out of the wheel (`pip install .` installs `sage_core` only).

- `tiny_models`: tiny random-weight VLMs of every family, one builder per family in one table.
- `pairs`: tiny pairs saved to folders (a target and its drafts), the built-in pair, the test media, the
  target's greedy answer.
- `references`: what the tests compare with, computed another way (step-by-step decoding, plain `generate`,
  the exact sampling distribution and its chi-square test), a round record of a known shape, a script loader.
- `layout`: checks of a laid-out slide or page: texts over one another, outside their frame, cut by overflow.
- `toy`: a model-free pair whose logits are a function of the prefix, to drive `DecodeRun` in milliseconds.

The tests import it (pytest puts the checkout on the path); the scripts import it from a checkout
(`PYTHONPATH=.`, or a script that puts the repository on its path).
"""
