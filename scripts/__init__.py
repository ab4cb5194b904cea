"""The project's scripts: each runs as `python -m scripts.NAME` from the repository root (and, as the docs quote
them, as `python scripts/NAME.py`); a script that needs another imports it as `scripts.NAME`."""
