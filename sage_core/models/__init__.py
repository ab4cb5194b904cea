"""The model seam: everything model-specific, split by concern.

- `loading.py`: devices, dtypes, placement (accelerate's device maps), the `from_pretrained` path;
- `prompts.py`: the chat template, the processor's tensors and the media limits;
- `visual.py`: the visual tokens, their attention scores and the pruned prefill (pruning's hooks);
- `masks.py`: tree masks from parent indices;
- `vlm.py`: the forwards (`prefill`, `extend`, `commit`) of a loaded model;
- `caches.py`: the cache strategies (in place, growing, the hybrid family's recurrent state) and `KVState`;
  `kvcache.py` their layers and row moves; `recurrent.py` the linear-attention layers' tree forward;
- `forwards.py`: the forwards after the prefill (transformers', lean, fused, compiled); `lean.py`,
  `lean_merged.py` and `lean_weights.py` the lean ones;
- `pair.py`: a target and its draft;
- `family.py` and the family modules (`qwen.py`, `llava.py`, ...; related families share one), registered
  in `registry.py`: what differs between families (positions, visual token ids, boxes, processor inputs,
  refusals, the cache strategy).
"""

from .family import Family, VisualBox
from .loading import BUILTIN_DRAFT, BUILTIN_TARGET, resolve_device, resolve_dtype, resolve_name
from .pair import ModelPair, check_pair, load_pair, processors_alike, with_draft
from .prompts import MAX_ASPECT_RATIO, chat_prompt, check_media, processor_inputs
from .registry import FAMILIES
from .vlm import VLM, KVState, inference

__all__ = [
    "BUILTIN_DRAFT",
    "BUILTIN_TARGET",
    "FAMILIES",
    "MAX_ASPECT_RATIO",
    "VLM",
    "Family",
    "KVState",
    "ModelPair",
    "VisualBox",
    "chat_prompt",
    "check_media",
    "check_pair",
    "inference",
    "load_pair",
    "processor_inputs",
    "processors_alike",
    "resolve_device",
    "resolve_dtype",
    "resolve_name",
    "with_draft",
]
