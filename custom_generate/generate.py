"""SAGE for transformers' `generate()`: entropy-guided adaptive speculative decoding for VLMs.

    output = target.generate(**inputs, assistant_model=draft, custom_generate="<this repository>",
                             trust_remote_code=True, do_sample=False, max_new_tokens=64)

returns what greedy `generate()` returns, equal to it token for token. Keyword arguments with the
paper's defaults: method (a registered method: "sage", "static", "chain", "ar", ...), backend ("fast",
"compiled", "fast-hf", "plain"), prune_ratio (0: off), sage_config (a sage_core.SageConfig, or a dict
of its fields) and its fields as sage_<name> (sage_depth_max=8, sage_width_max=10, sage_candidates=10,
...); another method's settings by their command-line names (method="sage-frozen", frozen_alpha=0.5);
tokenizer and assistant_tokenizer when the models' folders do not hold theirs. An unknown keyword is
refused, as plain generate() refuses it. The work is sage_core's (`sage_core.hf_generate`);
custom_generate/requirements.txt names the package.
"""

from typing import Any

from sage_core.hf_generate import generate as sage_generate


def generate(model: Any, **kwargs: Any) -> Any:
    """transformers calls this with the target as `model` and generate()'s own arguments."""
    return sage_generate(model, **kwargs)
