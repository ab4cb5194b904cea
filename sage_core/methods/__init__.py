"""The decoding methods: their registry (`registry.py`, re-exported here: what the library, the app, the
benchmark and the studies read) and the methods themselves (`builtin.py` registers the built-in ones;
`ablations.py`, `sage_cost.py`, `smart.py`, with `budget.py`'s cost model and `run_costs.py`'s curve measured
on a run's caches).

A method is one `MethodSpec`: nothing else names it; a new one is a registry entry (`register`), a proposer
and their tests. This package's door names only the registry, so that importing it (the configuration does)
reaches nothing above it.
"""

from .registry import (
    METHOD_LABELS,
    PRUNED_METHOD_LABELS,
    ByMethod,
    Explainer,
    Holds,
    Look,
    Method,
    MethodSpec,
    ProposerFactory,
    RunConfig,
    Setting,
    colour,
    drafting_methods,
    drafts,
    form_settings,
    holder,
    holding,
    in_order,
    is_method,
    look,
    method_label,
    method_names,
    method_spec,
    register,
    registered,
    registered_names,
    short_name,
    specs,
    unregister,
)

__all__ = [
    "METHOD_LABELS",
    "PRUNED_METHOD_LABELS",
    "ByMethod",
    "Explainer",
    "Holds",
    "Look",
    "Method",
    "MethodSpec",
    "ProposerFactory",
    "RunConfig",
    "Setting",
    "colour",
    "drafting_methods",
    "drafts",
    "form_settings",
    "holder",
    "holding",
    "in_order",
    "is_method",
    "look",
    "method_label",
    "method_names",
    "method_spec",
    "register",
    "registered",
    "registered_names",
    "short_name",
    "specs",
    "unregister",
]
