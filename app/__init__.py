"""The Gradio app: SAGE racing its baselines live, with panels that explain every round.

`app.ui.build_demo()` builds the Blocks app; `app.py` at the repository root
launches it. The app renders `sage_core` round records and wires events; it
holds no decoding logic of its own.
"""
