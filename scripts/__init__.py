"""The project's scripts: each runs as `PYTHONPATH=. python scripts/NAME.py` from the repository root (the form the
docs quote; `python -m scripts.NAME` works too); a script that needs another imports it as `scripts.NAME`."""
