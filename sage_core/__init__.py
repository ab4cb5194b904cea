"""sage_core: SAGE, entropy-guided adaptive speculative decoding for VLMs.

Paper: "SAGE: Accelerating Vision-Language Models via Entropy-Guided
Adaptive Speculative Decoding", arXiv 2602.00523. A small draft VLM proposes
a tree of tokens; the target VLM checks the whole tree in one forward; the
output equals the target's own greedy decoding.

    pair = load_pair("builtin", "builtin")
    run = decode(pair, load_media("assets/examples/count.png"), "how many shapes are there?", DecodeConfig("sage"))
    for record in run:            # one RoundRecord per target forward
        print("".join(record.new_token_texts), end="")
"""

__version__ = "0.1.0"

from . import compat  # noqa: F401  (first: a VersionError sentence when torch or transformers is out of range)
from .config import DecodeConfig
from .decode import DecodeRun, decode
from .errors import BackendError, InputError, MediaError, ModelLoadError, PairMismatchError, SageError, VersionError
from .media import Media, image_media, load_media
from .method_settings import DynamicConfig, SageConfig
from .methods.builtin import METHODS
from .models import VLM, ModelPair, check_pair, load_pair
from .prepared import PreparedInputs, prepare_inputs
from .records import RoundRecord, RunHeader, RunSummary, save_trace, summarize
from .trace_check import load_trace, parse_trace
from .trees import CHAIN_TREE, STATIC_TREE, Tree

__all__ = [
    "CHAIN_TREE",
    "METHODS",
    "STATIC_TREE",
    "VLM",
    "BackendError",
    "DecodeConfig",
    "DecodeRun",
    "DynamicConfig",
    "InputError",
    "Media",
    "MediaError",
    "ModelLoadError",
    "ModelPair",
    "PairMismatchError",
    "PreparedInputs",
    "RoundRecord",
    "RunHeader",
    "RunSummary",
    "SageConfig",
    "SageError",
    "Tree",
    "VersionError",
    "__version__",
    "check_pair",
    "decode",
    "image_media",
    "load_media",
    "load_pair",
    "load_trace",
    "parse_trace",
    "prepare_inputs",
    "save_trace",
    "summarize",
]
