"""Train the built-in Qwen3-VL model pair (target + draft) from scratch on synthetic scenes.

Recipe (generation 2, second recipe; the defaults; CPU, float32, ``torch.set_num_threads(2)``;
80 minutes of training on 2 cores, 81.5 wall with the progress evaluations on an idle machine).
This run is the first stage of the shipped pair's recipe; the 37 stages after it continue it with the
options below: the table and its runner are scripts/recipe.py (``python scripts/recipe.py``), each
run's history docs/training-history.md.

* Data: ``sage_world.scenes`` drawn by ``sage_world.mixing``, fresh examples every step, a seed each from
  ``random.Random(seed)`` (so that a form added to the mix changes no example it does not take):
  1-6 shapes anywhere on canvases of varied size and aspect (places named on a 3x3 grid), bar
  charts of 3-6 bars, rendered words and numbers, 8-16-frame clips; short questions and long
  answers (detailed descriptions, chart readings, narrated videos). Image kinds are drawn with
  the weights ``mixing.KIND_WEIGHTS`` (the long answers most often); every ``VIDEO_EVERY``-th (6th) step
  is a batch of clips (half one-sentence answers, half narrated), fed as the app feeds a file:
  8 evenly spaced frames with their metadata.
* Stage 0, each model's vision tower alone (``pretrain_vision``; target 10 minutes, draft 3;
  lr 1e-3, batch 32 pictures): a throw-away linear head on the merged visual tokens predicts,
  per token, the shape, 3x3 cell, colour and size of the object drawn there, or a bar's colour
  and value (``token_labels``, from the label map the scene generator draws beside each
  picture). Through the answer tokens alone a vision tower this small learned colours and sizes
  but shapes and places stayed at chance after 68 minutes (the first recipe); per-token labels
  teach both in minutes. The same loss, at weight 0.5 (``--aux-weight``), stays on while the
  whole model trains.
* Tokenizer: word-level (``tokenizers`` WordPiece model whose vocabulary holds whole words,
  punctuation, digits ``0-9`` and continuation digits ``##0-##9``), lower-casing, BERT
  pre-tokenizer (whitespace + punctuation split), WordPiece decoder with cleanup so
  ``decode`` reads "the red circle is in the top left." and "it says 42.". Special tokens
  ``<|endoftext|>`` (pad, id 0) ``<|im_start|>`` (1) ``<|im_end|>`` (2, eos)
  ``<|vision_start|>`` (3) ``<|vision_end|>`` (4) ``<|image_pad|>`` (5) ``<|video_pad|>`` (6),
  and ``"\\n"`` (7) as a normal added token; ``<``, ``>`` and ``seconds`` for the timestamps
  Qwen3-VL writes before each pair of video frames. Saved as a ``PreTrainedTokenizerFast``.
* Processor: ``Qwen3VLProcessor`` (``Qwen2VLImageProcessor`` with 8 px patches and a budget of
  128*128 pixels per image, aspect ratio kept: 64 visual tokens for a square picture;
  ``Qwen3VLVideoProcessor`` with a budget of 8 frames of 80*80 per clip: 4 groups of 25 tokens)
  and a chat template that renders one user turn as
  ``<|im_start|>user\\n<|vision_start|><|image_pad|><|vision_end|>QUESTION<|im_end|>\\n<|im_start|>assistant\\n``.
* Training sequence = that prompt + answer + ``<|im_end|>``; loss only on the answer and its
  closing ``<|im_end|>``; batch 16, left padding (as in batched generation).
* Target: Qwen3VLForConditionalGeneration, text hidden 256, **8 layers**, 4 heads (2 KV), head dim
  64, FFN 704, interleaved M-RoPE (theta 1e4); vision hidden 128, depth 3, 4 heads, 8 px patches,
  a learned 16x16 position table, DeepStack from vision layer 1. After stage 0, 54 minutes:
  AdamW(lr 3e-4, betas 0.9/0.98, wd 0.01), 100 warm-up steps, learning rate held until 65 % of
  the budget then cosine-decayed to 5 %; grad clip 1.
* Draft: text hidden 128, **2 layers**, 2 heads (1 KV), FFN 352; vision hidden 96, depth 2, 2 heads,
  no DeepStack (its vision tower runs once per prompt, so a better one costs no decode time);
  after stage 0, 13 minutes: AdamW lr 8e-4, same schedule; loss = 0.5 * cross-entropy on the
  data + 0.5 * KL(target || draft) on the answer positions (distillation from the frozen,
  finished target, which raises agreement) + the auxiliary loss.
* The budget is wall-clock minutes of training (``--target-vision-minutes`` 10,
  ``--target-minutes`` 54, ``--draft-vision-minutes`` 3, ``--draft-minutes`` 13); the schedule
  follows the elapsed fraction. For an exactly repeatable run pass the ``--*-steps`` options (the
  log prints the step counts a timed run reached).
* Resumable: every 5 minutes of training (and at the end of each model) the model, optimiser,
  data rng and clock go to ``--checkpoints`` (default ``OUT-checkpoints`` beside ``OUT``); the
  same command run again continues where it stopped.
* Both models are saved in float16 (``--save-dtype``) with ``save_pretrained`` in shards of at
  most 8 MB (a Space takes files under 10 MB without LFS), together with the processor, to
  ``OUT/target`` and ``OUT/draft``, and evaluated on fresh examples as saved (the draft is
  distilled from the saved, float16-rounded target).

Usage::

    python scripts/train_builtin_pair.py                       # 10 + 54 + 3 + 13 minutes of training
    python scripts/train_builtin_pair.py --target-vision-steps 5 --draft-vision-steps 5 \
        --target-steps 6 --draft-steps 6 --out /tmp/smoke
    # run 4's data (docs/training-history.md): shares of lone, hand-drawn, shifted and reworded examples
    python scripts/train_builtin_pair.py --init-target assets/builtin/target --target-minutes 42 \
        --lone 0.15 --hand-drawn 0.25 --shifted 0.2 --reworded 0.5 ...
    # a smaller draft from a trained one's first text layer, saved as OUT/hesitant-draft:
    python scripts/train_builtin_pair.py --init-draft assets/builtin/draft --draft-layers 1 \
        --draft-name hesitant-draft --target-minutes 0 --init-target assets/builtin/target ...
    # continue training saved models (a minutes/steps value of 0 skips that model's training):
    python scripts/train_builtin_pair.py --init-target assets/builtin/target --target-lr 1e-4 \\
        --target-minutes 30 --init-draft assets/builtin/draft --draft-minutes 0 --checkpoints /tmp/more
"""

from __future__ import annotations

import argparse
import math
import os
import random
import time
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

# Passive OpenMP waiting: on a shared 2-core machine, spinning worker threads make every
# step several times slower as soon as another process runs (measured 7-10 s vs 2.8 s).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch
import torch.nn.functional as F

from sage_core.models import processor_inputs
from sage_core.models.qwen import QWEN_SPECIAL_TOKENS
from sage_world.asking import write_asking_note
from sage_world.mixing import FORMS, DataMix, batch_examples
from sage_world.mixing import VIDEO_EVERY as VIDEO_EVERY  # re-exported: scripts that draw as training does
from sage_world.mixing import draw_example as draw_example  # re-exported likewise
from sage_world.quality import agreement, evaluate, example_media
from sage_world.scenes import COLOURS, NUMBER_WORDS, ROW_KIND, SHAPES, SIZES, make_example, make_examples
from sage_world.visitors import LOOKING_KINDS, visitor_example
from sage_world.vocabulary import SYNONYMS, token_words

ROOT = Path(__file__).resolve().parents[1]

#: Vision patches of 8 px (not the hub models' 16): the shapes are drawn anywhere at any scale, and
#: finer patches let a vision tower this small tell a cross from a square at any offset.
PATCH = 8
#: Pixel budget of an image (the processor keeps the aspect ratio): 128*128 -> 16x16 patches of
#: 8 px -> 8x8 = 64 visual tokens for a square picture.
IMAGE_PIXELS = 128 * 128
#: Pixel budget of one video frame (a clip of 8 frames: 4 groups of 2 -> 4 x 25 tokens).
FRAME_PIXELS = 80 * 80
#: The kinds ``--decisive-kinds`` may add to those whose decisions ``--decision-weight`` weights: a chart's, whose
#: decision is how many bars it has (run 17), and a count of every shape (run 18).
DECISIVE_EXTRA = ("chart", "bar", "count")
CHECKPOINT_EVERY_S = 300.0
EVAL_EVERY_S = 600.0
SPECIALS = list(QWEN_SPECIAL_TOKENS)  # the built-in pair is a Qwen3-VL pair: the family's own table

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' or 'image' in item -%}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif item['type'] == 'video' or 'video' in item -%}{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{%- elif item['type'] == 'text' -%}{{ item['text'] }}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)

TARGET_CFG = {
    "hidden": 256, "layers": 8, "heads": 4, "kv": 2, "ffn": 704,
    "v_embed": 128, "v_depth": 3, "v_heads": 4, "deepstack": [1],
}  # fmt: skip
DRAFT_CFG = {
    "hidden": 128, "layers": 2, "heads": 2, "kv": 1, "ffn": 352,
    "v_embed": 96, "v_depth": 2, "v_heads": 2, "deepstack": [],
}  # fmt: skip


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- tokenizer / processor
def build_processor(visitor_words: bool = False, more_visitor_words: bool = False):
    """The pair's processor, its tokenizer's words `vocabulary.token_words`; ``visitor_words`` (run 10 on):
    `vocabulary.VISITOR_WORDS` appended after every earlier token, so that the ids of a pair trained before stay as
    they were; ``more_visitor_words`` (run 13 on): `vocabulary.MORE_VISITOR_WORDS` appended after those."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2VLImageProcessor

    vocab_list = [*SPECIALS, "\n", *token_words(visitor_words, more_visitor_words)]
    vocab = {t: i for i, t in enumerate(dict.fromkeys(vocab_list))}
    tk = Tokenizer(models.WordPiece(vocab=vocab, unk_token="<|endoftext|>", continuing_subword_prefix="##"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    tk.add_tokens([AddedToken("\n", special=False, normalized=False)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        padding_side="left",
        model_max_length=1024,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    from transformers import Qwen3VLProcessor, Qwen3VLVideoProcessor

    common: dict[str, Any] = {
        "patch_size": PATCH,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5] * 3,
        "image_std": [0.5] * 3,
    }
    budget = {"shortest_edge": IMAGE_PIXELS, "longest_edge": IMAGE_PIXELS}
    image_processor = Qwen2VLImageProcessor(size=budget, **common)
    # Qwen3-VL bounds the pixels of the whole clip (frames x height x width): the app's 8 frames
    # at FRAME_PIXELS each; more frames share the same budget.
    video_processor = Qwen3VLVideoProcessor(
        size={"shortest_edge": 2 * FRAME_PIXELS, "longest_edge": 8 * FRAME_PIXELS},
        fps=2,
        cap_pixels_per_frame=False,
        **common,
    )
    return Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )


def text_config(cfg: dict, vocab_size: int, ids: dict[str, int]) -> dict[str, Any]:
    """The language model's settings from ``cfg`` (`TARGET_CFG`, `DRAFT_CFG`) and the special tokens' ``ids``."""
    head_dim = cfg["hidden"] // cfg["heads"]
    half = head_dim // 2
    return {
        "vocab_size": vocab_size,
        "hidden_size": cfg["hidden"],
        "intermediate_size": cfg["ffn"],
        "num_hidden_layers": cfg["layers"],
        "num_attention_heads": cfg["heads"],
        "num_key_value_heads": cfg["kv"],
        "max_position_embeddings": 2048,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "head_dim": head_dim,
        # Interleaved M-RoPE (t, h, w take turns along the frequencies, so each axis gets fast and
        # slow ones): what makes places, bar heights and digit order learnable at this size.
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": [half - 2 * (half * 5 // 16), half * 5 // 16, half * 5 // 16],
            "mrope_interleaved": True,
        },
    }


def vision_config(cfg: dict) -> dict[str, Any]:
    """The vision tower's settings from ``cfg``."""
    grid = int(IMAGE_PIXELS**0.5) // PATCH
    return {
        "depth": cfg["v_depth"],
        "hidden_size": cfg["v_embed"],
        "intermediate_size": 4 * cfg["v_embed"],
        "num_heads": cfg["v_heads"],
        "out_hidden_size": cfg["hidden"],
        "patch_size": PATCH,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        # a learned grid x grid position table, interpolated to other grids (other aspect ratios)
        "num_position_embeddings": grid * grid,
        "deepstack_visual_indexes": cfg["deepstack"],
    }


def build_model(cfg: dict, tokenizer, seed: int):
    import transformers

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    config = transformers.Qwen3VLConfig(
        text_config=text_config(cfg, len(tokenizer), ids),
        vision_config=vision_config(cfg),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    model_class = transformers.Qwen3VLForConditionalGeneration
    config.bos_token_id = ids["<|endoftext|>"]
    config.eos_token_id = ids["<|im_end|>"]
    config.pad_token_id = ids["<|endoftext|>"]
    torch.manual_seed(seed)
    model = model_class._from_config(config, attn_implementation="sdpa", dtype=torch.float32)
    gc = model.generation_config
    gc.eos_token_id = ids["<|im_end|>"]
    gc.pad_token_id = ids["<|endoftext|>"]
    gc.bos_token_id = ids["<|endoftext|>"]
    gc.do_sample = False
    gc.max_new_tokens = 128
    return model


# --------------------------------------------------------------------------- batches
def conversation_text(processor, turns) -> str:
    """One image, then ``turns`` (examples about that image) as consecutive question/answer turns."""
    messages = []
    for i, e in enumerate(turns):
        content = [{"type": "text", "text": e.question}]
        messages.append(
            {"role": "user", "content": ([{"type": "video" if e.frames else "image"}] if i == 0 else []) + content}
        )
        messages.append({"role": "assistant", "content": e.answer})
    return processor.apply_chat_template(messages, tokenize=False).rstrip("\n")


def make_batch(processor, conversations):
    """Processor inputs + labels: every answer and its closing <|im_end|>; prompts and padding masked."""
    texts = [conversation_text(processor, turns) for turns in conversations]
    enc = processor_inputs(processor, texts, [example_media(turns[0]) for turns in conversations])
    ids = enc["input_ids"]
    tok = processor.tokenizer
    im_start, im_end = tok.convert_tokens_to_ids("<|im_start|>"), tok.convert_tokens_to_ids("<|im_end|>")
    assistant = tok.convert_tokens_to_ids("assistant")
    labels = torch.full_like(ids, -100)
    for r, row in enumerate(ids.tolist()):
        inside = False
        for j, t in enumerate(row):
            if j >= 2 and row[j - 2] == im_start and row[j - 1] == assistant:
                inside = True  # row[j] is the "\n" after "assistant"; the answer starts after it
                continue
            if inside:
                labels[r, j] = t
                inside = t != im_end
    return enc, labels


#: Classes of the auxiliary per-token labels: shape (object tokens only), 3x3 cell (of the object,
#: or of a background token itself; shape scenes only), colour (background + 6), size (object tokens
#: only), a bar's value 1-5 (bar tokens only).
AUX_CLASSES = (len(SHAPES), 9, len(COLOURS) + 1, len(SIZES), 5)


def token_labels(example, grid_h: int, grid_w: int) -> torch.Tensor:
    """Per merged visual token (row-major over a ``grid_h`` x ``grid_w`` grid), from the example's
    label map: the shape, 3x3 cell, colour and size of the object drawn there (background: colour
    class 0 and the token's own cell), or a bar's colour and value; -100 (no label) where a head
    does not apply, and everywhere for an example without a label map (text, clips)."""
    import numpy as np
    from PIL import Image

    out = torch.full((grid_h * grid_w, len(AUX_CLASSES)), -100, dtype=torch.long)
    if example.labels is None:
        return out
    sub = 4  # 4x4 samples per token
    lab = np.asarray(example.labels.resize((grid_w * sub, grid_h * sub), Image.Resampling.NEAREST))
    lab = lab.reshape(grid_h, sub, grid_w, sub).transpose(0, 2, 1, 3).reshape(grid_h * grid_w, sub * sub)
    things = example.objects
    charts = example.kind in ("bar", "chart")
    colours = list(COLOURS)
    for k in range(grid_h * grid_w):
        counts = np.bincount(lab[k], minlength=len(things) + 1)
        counts[0] = 0
        obj = int(counts.argmax())
        i, j = divmod(k, grid_w)
        out[k, 2] = 0
        if counts[obj] >= 3 and charts:
            colour, value = things[obj - 1]
            out[k, 2], out[k, 4] = 1 + colours.index(colour), value - 1
        elif counts[obj] >= 3:
            t = things[obj - 1]
            out[k, :4] = torch.tensor([SHAPES.index(t.shape), t.cell, 1 + colours.index(t.colour), SIZES.index(t.size)])
        elif not charts:
            out[k, 1] = min(int((i + 0.5) * 3 / grid_h), 2) * 3 + min(int((j + 0.5) * 3 / grid_w), 2)
    return out


def batch_token_labels(examples, grid_thw: torch.Tensor) -> torch.Tensor:
    """`token_labels` of each picture of a batch, in the order the vision tower emits its tokens."""
    grids = grid_thw.tolist()
    return torch.cat([token_labels(e, h // 2, w // 2) for e, (_, h, w) in zip(examples, grids, strict=True)])


def attach_aux_head(visual: Any) -> tuple[torch.nn.Linear, list[torch.Tensor], torch.utils.hooks.RemovableHandle]:
    """A throw-away linear head for the per-token labels, and the vision tower's merged tokens,
    captured by a hook on each forward (remove the returned hook when done)."""
    head = torch.nn.Linear(visual.merger.linear_fc2.out_features, sum(AUX_CLASSES))
    captured: list[torch.Tensor] = []
    hook = visual.merger.register_forward_hook(lambda _m, _i, out: captured.append(out))
    return head, captured, hook


def aux_loss(head: torch.nn.Module, features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the auxiliary heads over the labelled tokens."""
    logits = head(features)
    losses, start = [], 0
    for c, n in enumerate(AUX_CLASSES):
        y = labels[:, c]
        if (y != -100).any():
            losses.append(F.cross_entropy(logits[:, start : start + n], y, ignore_index=-100))
        start += n
    return torch.stack(losses).mean() if losses else features.sum() * 0.0


@dataclass(frozen=True)
class Block:
    """A one-pass draft's training: its block (0: a sequential draft), cuts a row (`--block-copies`: each its own
    copy of the row in the draft's batch; the teacher reads the row once), and the weight of the block's depths
    2 .. K against depth 1 (`--block-weight`)."""

    size: int = 0
    copies: int = 1
    weight: float = 1.0


@dataclass(frozen=True)
class Stage:
    """One training stage of a model: its name in the log, its schedule (the peak learning rate; minutes
    of training time, or a fixed step count instead when `steps` > 0; the batch size) and the file it
    checkpoints to (a rerun resumes from there)."""

    name: str
    lr: float
    minutes: float
    steps: int
    batch_size: int
    checkpoint: Path
    block: Block = Block()  # a one-pass draft's training; size 0: a sequential model
    decision_weight: float = 1.0  # the weight of decisive_tokens in a target's loss (1: the model's own loss)
    decisive_kinds: tuple[str, ...] = LOOKING_KINDS  # whose answers' decisions decision_weight weights


def pretrain_vision(stage: Stage, model, processor, rng):
    """Stage 0: the vision tower alone, with the auxiliary per-token heads, on shape scenes and charts.

    The answer tokens carry a shape or a place once per object, so a vision tower trained from
    scratch through the language model learns colours quickly and shapes and places hardly at all
    (the first run of this generation: shape and place questions at chance after 68 minutes);
    per-token labels teach it both in minutes (about 1 s a step). ``stage.steps``: a fixed step count
    instead of ``stage.minutes``. Resumes: skipped when ``stage.checkpoint`` exists."""
    name, lr, minutes, steps, batch_size, checkpoint, *_ = astuple(stage)
    visual = model.model.visual
    if checkpoint.exists():
        visual.load_state_dict(torch.load(checkpoint, weights_only=False))
        log(f"{name}: vision tower from {checkpoint}")
        return
    head, captured, hook = attach_aux_head(visual)
    opt = torch.optim.AdamW([*visual.parameters(), *head.parameters()], lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    t0, step, ema = time.time(), 0, None
    budget = f"{steps} steps" if steps else f"{minutes:.1f} min"
    log(f"{name}: vision pretraining, {budget}, lr {lr}, batch {batch_size}")
    while (step < steps) if steps else (time.time() - t0 < minutes * 60):
        kinds = rng.choices(("describe", "shape", "chart"), (0.5, 0.25, 0.25), k=batch_size)
        examples = [make_example(rng, k) for k in kinds]
        enc = processor_inputs(
            processor, [conversation_text(processor, [e]) for e in examples], [example_media(e) for e in examples]
        )
        captured.clear()
        visual(enc["pixel_values"], grid_thw=enc["image_grid_thw"])
        labels = batch_token_labels(examples, enc["image_grid_thw"])
        loss = aux_loss(head, captured[0], labels)
        frac = step / steps if steps else (time.time() - t0) / (minutes * 60)
        for g in opt.param_groups:
            g["lr"] = lr * lr_factor(frac, step, warmup=30, hold=0.7, floor=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(visual.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 50 == 0:
            with torch.no_grad():
                logits = head(captured[0])
                shape_ok = (logits[:, : len(SHAPES)].argmax(-1) == labels[:, 0])[labels[:, 0] >= 0].float().mean()
            log(f"{name} vision step {step} aux loss {ema:.3f} token shape acc {shape_ok:.2f}")
    hook.remove()
    torch.save(visual.state_dict(), checkpoint)
    log(f"{name}: vision pretraining done, {step} steps")


def lr_factor(frac: float, step: int, warmup: int = 100, hold: float = 0.65, floor: float = 0.05) -> float:
    if step < warmup:
        return (step + 1) / warmup
    if frac < hold:
        return 1.0
    t = min((frac - hold) / (1 - hold), 1.0)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t))


#: The one-pass draft's mask: ``<|endoftext|>`` (id 0), the padding token, which no prompt or answer holds
#: with attention on (the library reads it, with the block length, from the draft's config: `ONE_PASS_KEY`).
MASK_TOKEN_ID = 0
ONE_PASS_KEY = "one_pass_draft"


def one_pass_block(ids: torch.Tensor, labels: torch.Tensor, block: int, rng: random.Random):
    """PARD's collator, one block a row: each row's answer is cut after a random real token c (the
    "\\n" after "assistant" up to the token before the last), the next ``block - 1`` tokens are replaced
    by the mask, and the loss is kept on the real prefix (depth 1) and on the block (position c + d - 1
    predicts the token d after c, d = 1 .. block); positions after the block see masks and are left out.
    Returns the draft's input ids and a [rows, length - 1] mask of the positions that count (position p
    predicts token p + 1, as the teacher, who reads the real row, does at the same index)."""
    student = ids.clone()
    keep = torch.zeros(ids.shape[0], ids.shape[1] - 1, dtype=torch.bool)
    deeper = torch.zeros_like(keep)  # the block's depths 2 .. block (a mask before them)
    for r in range(ids.shape[0]):
        answer = (labels[r] != -100).nonzero().flatten().tolist()
        if not answer:
            continue
        first, last = answer[0], answer[-1]
        cut = rng.randint(first - 1, last - 1)
        student[r, cut + 1 : cut + block] = MASK_TOKEN_ID
        for p in range(first - 1, min(cut + block, last)):
            keep[r, p] = labels[r, p + 1] != -100
            deeper[r, p] = p > cut
    return student, keep, deeper


def repeated(enc, copies: int):
    """A processor batch `copies` times over (each tensor concatenated on its first axis: rows, patches and
    grids alike, in the same order), for several cuts of one row."""
    return {k: torch.cat([v] * copies) if torch.is_tensor(v) else v for k, v in enc.items()}


@torch.no_grad()
def block_agreement(draft, teacher, processor, examples, block: int, rng: random.Random) -> list[float]:
    """Per depth d = 1 .. block: how often the one-pass draft's top token at depth d equals the
    teacher's (teacher-forced on the examples' answers, one random cut a row)."""
    hits, seen = [0] * block, [0] * block
    # a batch holds pictures or clips, not both (the processor takes one kind of media a call)
    batches = [[e for e in examples if bool(e.frames) == clips] for clips in (False, True)]
    chunks = [batch[i : i + 16] for batch in batches for i in range(0, len(batch), 16)]
    for chunk in chunks:
        enc, labels = make_batch(processor, [[e] for e in chunk])
        student, _, _ = one_pass_block(enc["input_ids"], labels, block, rng)
        teacher_top = teacher(**enc).logits.argmax(-1)
        draft_top = draft(**dict(enc, input_ids=student)).logits.argmax(-1)
        for r in range(student.shape[0]):
            masked = (student[r] == MASK_TOKEN_ID) & (enc["input_ids"][r] != MASK_TOKEN_ID)
            answer = (labels[r] != -100).nonzero().flatten().tolist()
            if not answer:
                continue
            cut = int(masked.nonzero().flatten()[0]) - 1 if masked.any() else answer[-1] - 1
            for d in range(block):
                p = cut + d
                if p + 1 > answer[-1]:
                    break
                hits[d] += int(draft_top[r, p] == teacher_top[r, p])
                seen[d] += 1
    return [h / s if s else float("nan") for h, s in zip(hits, seen, strict=True)]


def distillation_loss(model, teacher, enc, labels, block: Block, rng: random.Random) -> torch.Tensor:
    """0.5 cross-entropy on the data + 0.5 KL(teacher || model) on the answer positions; with a one-pass
    `block`, the model reads PARD's masks after a random cut (`one_pass_block`; `block.copies` cuts
    a row) and the teacher the real row, each position scored against the teacher's prediction at the same
    index, the block's deeper depths weighted `block.weight`."""
    with torch.no_grad():
        t_all = teacher(**enc).logits[:, :-1]
    if not block.size:
        tgt = labels[:, 1:]
        mask = tgt != -100
        logits = model(**enc).logits[:, :-1]
        ce = F.cross_entropy(logits[mask], tgt[mask])
        kl = F.kl_div(
            F.log_softmax(logits[mask], -1), F.log_softmax(t_all[mask], -1), log_target=True, reduction="batchmean"
        )
        return 0.5 * ce + 0.5 * kl
    copies = block.copies
    many, many_labels = repeated(enc, copies), torch.cat([labels] * copies)
    student_ids, mask, deeper = one_pass_block(many["input_ids"], many_labels, block.size, rng)
    tgt = many["input_ids"][:, 1:][mask]
    logits = model(**dict(many, input_ids=student_ids)).logits[:, :-1][mask]
    t_logits = torch.cat([t_all] * copies)[mask]
    weights = 1.0 + (block.weight - 1.0) * deeper[mask].float()
    ce = F.cross_entropy(logits, tgt, reduction="none")
    kl = F.kl_div(F.log_softmax(logits, -1), F.log_softmax(t_logits, -1), log_target=True, reduction="none").sum(-1)
    return ((0.5 * ce + 0.5 * kl) * weights).sum() / weights.sum()


def weighted_answer_loss(
    logits: torch.Tensor, labels: torch.Tensor, decisive: torch.Tensor, weight: float
) -> torch.Tensor:
    """The language-model loss (next-token cross-entropy over the labelled tokens, their mean) with the tokens
    marked in ``decisive`` (a mask shaped like ``labels``) weighted ``weight`` (run 15's probes: whether a thing is
    there, or how many of a shape, turns on a few words of a batch's five hundred tokens; at weight 1 this equals
    the model's own ``loss``)."""
    shifted = labels[:, 1:]
    ce = F.cross_entropy(logits[:, :-1].float().transpose(1, 2), shifted, ignore_index=-100, reduction="none")
    weights = torch.where(decisive[:, 1:], weight, 1.0) * (shifted != -100)
    return (ce * weights).sum() / weights.sum()


def decisive_kinds(text: str) -> tuple[str, ...]:
    """``--decisive-kinds``' value: kinds of :data:`DECISIVE_EXTRA`, comma-separated."""
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in DECISIVE_EXTRA]
    if unknown:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown)}: a kind is one of {', '.join(DECISIVE_EXTRA)}")
    return tuple(dict.fromkeys(kinds))


def decisive_tokens(
    processor, conversations, labels: torch.Tensor, kinds: tuple[str, ...] = LOOKING_KINDS
) -> torch.Tensor:
    """Where the answers of ``kinds`` (:data:`visitors.LOOKING_KINDS`; ``--decisive-kinds`` adds some of
    :data:`DECISIVE_EXTRA`: a chart's count of bars, a count of every shape) say a decision: "yes", "no" or a number
    word."""
    ids = processor.tokenizer.convert_tokens_to_ids(["yes", "no", *NUMBER_WORDS.values()])
    rows = torch.tensor([turns[0].kind in kinds for turns in conversations])
    return rows[:, None] & torch.isin(labels, torch.tensor(ids))


def answer_loss(stage: Stage, model, processor, conversations, batch, teacher, rng) -> torch.Tensor:
    """One batch's loss on its answers: the model's own (its decisive words weighted ``stage.decision_weight``),
    or, with a ``teacher``, distilled from it."""
    enc, labels = batch
    if teacher is not None:
        return distillation_loss(model, teacher, enc, labels, stage.block, rng)
    if stage.decision_weight == 1.0:
        return model(**enc, labels=labels).loss
    decisive = decisive_tokens(processor, conversations, labels, stage.decisive_kinds)
    return weighted_answer_loss(model(**enc).logits, labels, decisive, stage.decision_weight)


@dataclass
class Progress:
    """Where a model's training stands: steps taken, seconds of training, the loss's moving average, and the
    training time of the last evaluation and the last checkpoint."""

    step: int = 0
    train_time: float = 0.0
    ema: float | None = None
    last_eval: float = 0.0
    last_save: float = 0.0


def resume(stage: Stage, model, head, opt, rng: random.Random) -> Progress:
    """The progress ``stage.checkpoint`` holds (the model, its auxiliary head, the optimiser and the data stream's
    generator restored from it), or a fresh start when there is none."""
    if not stage.checkpoint.exists():
        return Progress()
    state = torch.load(stage.checkpoint, weights_only=False)
    model.load_state_dict(state["model"])
    if "aux_head" in state:
        head.load_state_dict(state["aux_head"])
    opt.load_state_dict(state["optimizer"])
    rng.setstate(state["rng"])
    done = Progress(state["step"], state["train_time"], state["ema"], state["train_time"], state["train_time"])
    log(f"{stage.name}: resumed from {stage.checkpoint} at step {done.step}, {done.train_time / 60:.1f} min")
    return done


def checkpoint(stage: Stage, model, head, opt, rng: random.Random, done: Progress) -> None:
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": rng.getstate()}
    state["aux_head"] = head.state_dict()
    torch.save(dict(state, train_time=done.train_time, step=done.step, ema=done.ema), stage.checkpoint)


def step_loss(stage: Stage, model, processor, examples, teacher, aux: tuple, cuts: random.Random) -> torch.Tensor:
    """One batch's loss: its answers' (`answer_loss`, a one-pass draft's cuts drawn from ``cuts``), plus, for a batch
    of pictures, ``aux`` = (weight, head, captured features)'s per-token loss."""
    aux_weight, head, captured = aux
    conversations = [[e] for e in examples]
    enc, labels = make_batch(processor, conversations)
    captured.clear()
    loss = answer_loss(stage, model, processor, conversations, (enc, labels), teacher, cuts)
    if aux_weight and "image_grid_thw" in enc:  # image batches (clips have no labels)
        labels_per_token = batch_token_labels(examples, enc["image_grid_thw"])
        copies = captured[0].shape[0] // max(labels_per_token.shape[0], 1)  # a one-pass draft's cuts
        labels_per_token = torch.cat([labels_per_token] * max(copies, 1))
        loss = loss + aux_weight * aux_loss(head, captured[0], labels_per_token)
    return loss


def train(stage: Stage, model, processor, rng, eval_examples, teacher=None, aux_weight=0.0, mix: DataMix | None = None):
    """Train ``model`` for ``stage.minutes`` of training time (or ``stage.steps``), checkpointing to
    ``stage.checkpoint`` every CHECKPOINT_EVERY_S and resuming from it when it exists (same data stream:
    the rng is saved). Each step draws its examples from ``rng`` (`mixing.batch_examples`: a seed each) and
    one seed more for a one-pass draft's cuts, so that the stream's seeds do not depend on what the examples are.

    ``aux_weight``: weight of the auxiliary per-token loss (a linear head on the vision tower's
    merged tokens predicts the shape, cell, colour and size drawn there; the head is discarded):
    dense labels that teach the vision tower shapes and places far faster than the answer tokens
    alone."""
    head, captured, hook = attach_aux_head(model.model.visual)
    opt = torch.optim.AdamW(
        [*model.parameters(), *head.parameters()], lr=stage.lr, betas=(0.9, 0.98), weight_decay=0.01
    )
    done = resume(stage, model, head, opt, rng)
    length = f"{stage.steps} steps" if stage.steps else f"{stage.minutes:.1f} min"
    log(f"{stage.name}: training, {length}, lr {stage.lr}, batch {stage.batch_size}")
    while (frac := done.step / stage.steps if stage.steps else done.train_time / (stage.minutes * 60.0)) < 1.0:
        t0 = time.time()
        model.train()
        for g in opt.param_groups:
            g["lr"] = stage.lr * lr_factor(frac, done.step)
        examples = batch_examples(rng, done.step, stage.batch_size, mix or DataMix())
        cuts = random.Random(rng.getrandbits(64))
        loss = step_loss(stage, model, processor, examples, teacher, (aux_weight, head, captured), cuts)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        done.step, done.train_time = done.step + 1, done.train_time + time.time() - t0
        done.ema = loss.item() if done.ema is None else 0.98 * done.ema + 0.02 * loss.item()
        report(stage, model, processor, opt, eval_examples, done)
        if done.train_time - done.last_save >= CHECKPOINT_EVERY_S:
            done.last_save = done.train_time
            checkpoint(stage, model, head, opt, rng, done)
    checkpoint(stage, model, head, opt, rng, done)
    hook.remove()
    log(f"{stage.name}: done, {done.step} steps, {done.train_time / 60:.2f} min of training")
    model.eval()
    return done.step, done.train_time


def report(stage: Stage, model, processor, opt, eval_examples, done: Progress) -> None:
    """The loss every 50 steps, and a progress evaluation (on the first third of ``eval_examples``) every
    EVAL_EVERY_S of training."""
    if done.step % 50 == 0:
        log(
            f"{stage.name} step {done.step} loss {done.ema:.4f} lr {opt.param_groups[0]['lr']:.2e} "
            f"train {done.train_time / 60:.1f} min ({done.train_time / done.step:.3f} s/step)"
        )
    if done.train_time - done.last_eval >= EVAL_EVERY_S:
        done.last_eval = done.train_time
        res = evaluate(model, processor, eval_examples[: len(eval_examples) // 3])
        log(
            f"{stage.name} eval @ step {done.step}: facts {res['accuracy']:.3f} "
            + " ".join(f"{k} {v:.2f}" for k, v in res["per_kind"].items())
        )


def idle_setting(args: argparse.Namespace) -> str:
    """Why a setting given would change nothing ("" when none would): an answer form with no visitors' questions
    drawn, kinds to weigh with no weight."""
    if args.decisive_kinds and args.decision_weight == 1.0:
        return "--decisive-kinds names answers --decision-weight weights: give --decision-weight a weight besides 1"
    if args.looking and not (args.visitors or args.counts):
        return "--checking changes the answers --visitors and --counts draw: give one of them a share above 0"
    return ""


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "assets" / "builtin"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--target-vision-minutes", type=float, default=10.0, help="stage 0 for the target")
    ap.add_argument("--draft-vision-minutes", type=float, default=3.0, help="stage 0 for the draft")
    ap.add_argument("--target-vision-steps", type=int, default=0, help="fixed step count (overrides minutes)")
    ap.add_argument("--draft-vision-steps", type=int, default=0, help="fixed step count (overrides minutes)")
    ap.add_argument("--vision-lr", type=float, default=1e-3)
    ap.add_argument("--aux-weight", type=float, default=0.5, help="auxiliary per-token loss while training")
    ap.add_argument("--target-minutes", type=float, default=54.0)
    ap.add_argument("--draft-minutes", type=float, default=13.0)
    ap.add_argument("--target-steps", type=int, default=0, help="fixed step count (overrides minutes)")
    ap.add_argument("--draft-steps", type=int, default=0, help="fixed step count (overrides minutes)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--checkpoints", help="checkpoint folder (default OUT/../builtin-checkpoints); a rerun resumes")
    ap.add_argument("--target-lr", type=float, default=3e-4)
    ap.add_argument("--draft-lr", type=float, default=8e-4)
    ap.add_argument("--eval-n", type=int, default=140, help="examples for the final evaluations (half for progress)")
    ap.add_argument(
        "--eval-tokens", type=int, default=128, help="longest answer the final evaluations generate (tests: a few)"
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save-dtype", choices=("float16", "float32"), default="float16")
    ap.add_argument("--init-target", help="continue from this saved target instead of a fresh one")
    ap.add_argument("--init-draft", help="continue from this saved draft instead of a fresh one")
    ap.add_argument("--draft-layers", type=int, default=0, help="keep only the first N text layers of --init-draft")
    ap.add_argument("--draft-name", default="draft", help="the draft's folder under OUT (e.g. hesitant-draft)")
    ap.add_argument(
        "--decision-weight",
        type=float,
        default=1.0,
        help="the weight, in the target's loss, of the yes, no and number words that answer a count of a shape or "
        "whether a thing is there (run 15; 1: every token alike)",
    )
    ap.add_argument(
        "--decisive-kinds",
        type=decisive_kinds,
        default=(),
        metavar="KIND,KIND",
        help=f"--decision-weight also weights the number words of these kinds' answers (of {', '.join(DECISIVE_EXTRA)}"
        "; run 17: chart,bar, how many bars a chart has; run 18 adds count, how many shapes there are)",
    )
    ap.add_argument("--block-copies", type=int, default=1, help="a one-pass draft's cuts a row (each a copy)")
    ap.add_argument("--block-weight", type=float, default=1.0, help="a one-pass draft's depths 2 .. K against 1")
    ap.add_argument(
        "--one-pass",
        type=int,
        default=0,
        metavar="K",
        help="distil the draft as a one-pass draft of block K (PARD: K - 1 masks after a random cut); saved "
        "with its mask token and K in its config",
    )
    ap.add_argument(
        "--visitor-words",
        action="store_true",
        help="the tokenizer with vocabulary.VISITOR_WORDS appended (run 10 on); a smaller loaded model grows to it",
    )
    ap.add_argument(
        "--more-visitor-words",
        action="store_true",
        help="the tokenizer with vocabulary.MORE_VISITOR_WORDS appended after those (run 13 on); a model grows to it",
    )
    ap.add_argument(
        "--checking",
        action="store_const",
        const="checked",
        default="",
        dest="looking",
        help="a count of a shape and whether a thing is there answered after naming what was asked about and every "
        "shape, each checked yes or no (run 15 on)",
    )
    shares = (
        ("lone", "scenes of one object"),
        ("hand-drawn", "shapes drawn as by hand"),
        ("shifted", "the shifted drawing ranges"),
        ("reworded", "questions in other words"),
        ("rows", "two rows of shapes to read (run 8)"),
        ("jpeg", "the picture saved as a JPEG of quality 70-98 (run 8)"),
        ("free", "a shape question in a free wording, about one object 60 %% of the time (run 10)"),
        ("visitors", "a question visitors ask (sage_world.visitors), or a word typed wrong (run 13)"),
        ("counts", "a visitor's count of a shape or whether a thing is there (run 13b)"),
        ("graphs", "a visitor's question about a chart asked as a graph (run 17)"),
        ("totals", "a count of every shape, 'how many shapes are there?' (run 18)"),
    )
    for share, what in shares:
        ap.add_argument(f"--{share}", type=float, default=0.0, help=f"share of image examples with {what}")
    args = ap.parse_args(argv)
    for flag in (
        "target_vision_minutes",
        "draft_vision_minutes",
        "target_vision_steps",
        "draft_vision_steps",
        "aux_weight",
    ):
        if getattr(args, flag) < 0:
            ap.error(f"--{flag.replace('_', '-')} must be >= 0")
    if args.vision_lr <= 0:
        ap.error("--vision-lr must be > 0")
    if not args.decision_weight > 0:  # NaN too
        ap.error("--decision-weight must be above 0")
    if args.block_copies < 1 or args.block_weight <= 0:
        ap.error("--block-copies must be at least 1 and --block-weight above 0")
    if args.one_pass < 0 or args.one_pass == 1:
        ap.error("--one-pass must be 0 (a sequential draft) or a block of at least 2")
    if args.eval_tokens < 1:
        ap.error("--eval-tokens must be >= 1")
    for share, _ in shares:
        if not 0.0 <= getattr(args, share.replace("-", "_")) <= 1.0:
            ap.error(f"--{share} must be between 0 and 1")
    if idle := idle_setting(args):
        ap.error(idle)
    return args


def main(argv=None):
    args = parse_args(argv)
    shares = {field: getattr(args, form.replace("-", "_")) for form, field in FORMS.items()}  # --hand-drawn: hand
    mix = DataMix(**shares, looking=args.looking)

    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    t_start = time.time()
    out = Path(args.out)
    checkpoints = Path(args.checkpoints or out.parent / f"{out.name}-checkpoints")
    checkpoints.mkdir(parents=True, exist_ok=True)
    processor = build_processor(args.visitor_words, args.more_visitor_words)
    tok = processor.tokenizer
    log(f"vocabulary {len(tok)} tokens; eos <|im_end|> = {tok.eos_token_id}, pad = {tok.pad_token_id}")
    eval_examples = evaluation_examples(args.seed, args.eval_n, mix)

    target = load_model(args.init_target) if args.init_target else build_model(TARGET_CFG, tok, args.seed)
    draft = load_model(args.init_draft) if args.init_draft else build_model(DRAFT_CFG, tok, args.seed + 1)
    for model in (target, draft):
        grow_vocabulary(model, tok)
    if args.draft_layers:
        keep_layers(draft, args.draft_layers)
    n_t = sum(p.numel() for p in target.parameters())
    n_d = sum(p.numel() for p in draft.parameters())
    log(f"target {n_t / 1e6:.3f} M params, draft {n_d / 1e6:.3f} M params ({n_t / n_d:.1f}x smaller)")

    t_steps, t_time = train_side(args, "target", target, processor, checkpoints, eval_examples, mix)
    for p in target.parameters():
        p.requires_grad_(False)
    save(target, processor, out / "target", args.save_dtype)
    res_t = evaluate(target, processor, eval_examples, args.eval_tokens)
    log(f"target final: acc {res_t['accuracy']:.3f} " + " ".join(f"{k} {v:.2f}" for k, v in res_t["per_kind"].items()))

    d_steps, d_time = train_side(args, "draft", draft, processor, checkpoints, eval_examples, mix, teacher=target)
    if args.one_pass:
        setattr(draft.config, ONE_PASS_KEY, {"mask_token_id": MASK_TOKEN_ID, "block_size": args.one_pass})
    save(draft, processor, out / args.draft_name, args.save_dtype)
    if args.one_pass:
        depths = block_agreement(draft, target, processor, eval_examples, args.one_pass, random.Random(args.seed))
        log("one-pass agreement per depth: " + " ".join(f"{d + 1}:{a:.3f}" for d, a in enumerate(depths)))
    res_d = evaluate(draft, processor, eval_examples, args.eval_tokens)
    log(f"draft final: acc {res_d['accuracy']:.3f} " + " ".join(f"{k} {v:.2f}" for k, v in res_d["per_kind"].items()))
    agr = agreement(target, draft, processor, eval_examples, res_t["answer_ids"])
    log("agreement: " + " ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in agr.items()))
    log(
        f"summary: target {t_steps} steps / {t_time / 60:.1f} min, draft {d_steps} steps / {d_time / 60:.1f} min, "
        f"total wall {(time.time() - t_start) / 60:.1f} min"
    )


def evaluation_examples(seed: int, n: int, mix: DataMix) -> list:
    """The held-out examples (training uses seed-derived rngs); with --rows, row pictures among them too,
    spread so that the progress evaluations' first third has some; with --visitors, visitors' questions in
    held-out wordings likewise."""
    eval_examples = make_examples(seed + 999_983, n)
    if mix.rows:
        for i, example in enumerate(make_examples(seed + 999_979, max(n // 6, 3), kinds=(ROW_KIND,))):
            eval_examples.insert(7 * i, example)
    if mix.visitors:
        rng = random.Random(seed + 999_961)
        for i in range(max(n // 6, 3)):
            eval_examples.insert(5 * i + 3, visitor_example(rng, held_out=True, looking=mix.looking))
    return eval_examples


#: Per side: the offset of its vision stage's and its training's rng seeds from --seed.
SEED_OFFSETS = {"target": (7, 0), "draft": (8, 1)}


def train_side(args, side: str, model, processor, checkpoints: Path, eval_examples, mix: DataMix, teacher=None):
    """The target's or the draft's stages (each skipped at zero minutes and zero steps): the vision tower
    alone, then the whole model (the draft distilled from `teacher`); (steps, minutes of training)."""
    vision_seed, seed = (args.seed + offset for offset in SEED_OFFSETS[side])
    vision_minutes, vision_steps = getattr(args, f"{side}_vision_minutes"), getattr(args, f"{side}_vision_steps")
    minutes, steps = getattr(args, f"{side}_minutes"), getattr(args, f"{side}_steps")
    if vision_minutes > 0 or vision_steps > 0:
        vision = Stage(side, args.vision_lr, vision_minutes, vision_steps, 32, checkpoints / f"{side}-vision.pt")
        pretrain_vision(vision, model, processor, random.Random(vision_seed))
    if not (minutes > 0 or steps > 0):
        return 0, 0
    block = Block(args.one_pass, args.block_copies, args.block_weight) if side == "draft" else Block()
    checkpoint = checkpoints / f"{side}.pt"
    weight = args.decision_weight if side == "target" else 1.0
    kinds = LOOKING_KINDS + args.decisive_kinds
    stage = Stage(side, getattr(args, f"{side}_lr"), minutes, steps, args.batch_size, checkpoint, block, weight, kinds)
    return train(stage, model, processor, random.Random(seed), eval_examples, teacher, args.aux_weight, mix)


def keep_layers(model, n: int) -> None:
    """Keep the first ``n`` text layers of ``model`` (a smaller draft that starts from a trained one)."""
    text = model.model.language_model
    if not 0 < n <= len(text.layers):
        raise SystemExit(f"--draft-layers must be between 1 and {len(text.layers)}")
    text.layers = text.layers[:n]
    config = model.config.text_config
    config.num_hidden_layers = n
    if getattr(config, "layer_types", None):
        config.layer_types = config.layer_types[:n]
    log(f"draft: first {n} text layers kept")


def grow_vocabulary(model, tokenizer) -> None:
    """Grow ``model``'s embeddings and head to ``tokenizer`` (a pair trained before --visitor-words): each
    new word's embedding starts as its `vocabulary.SYNONYMS` entry's (else the mean of the known words'), and its head
    row as the image pad's (a token no answer has), so that the grown model answers as before."""
    old = model.get_input_embeddings().weight.shape[0]
    if old >= len(tokenizer):
        return
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    embed, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    with torch.no_grad():
        mean = embed[:old].mean(0)
        for new_id in range(old, len(tokenizer)):
            known = SYNONYMS.get(tokenizer.convert_ids_to_tokens(new_id), "")
            known_id = tokenizer.convert_tokens_to_ids(known) if known else None
            embed[new_id] = embed[known_id] if known_id is not None and known_id < old else mean
            head[new_id] = head[pad]
    log(f"vocabulary grown from {old} to {len(tokenizer)} tokens")


def load_model(path):
    from transformers import AutoModelForImageTextToText

    log(f"loading {path}")
    return AutoModelForImageTextToText.from_pretrained(path, attn_implementation="sdpa", dtype=torch.float32)


def save(model, processor, path: Path, dtype: str) -> None:
    """Save the model in ``dtype`` with the processor; the model in memory keeps the rounded weights."""
    path.mkdir(parents=True, exist_ok=True)
    # shards of at most 8 MB: a Hugging Face Space takes files under 10 MB without LFS
    model.to(getattr(torch, dtype)).save_pretrained(path, max_shard_size="8MB")
    model.to(torch.float32)
    processor.tokenizer.backend_tokenizer.no_padding()  # drop batch-padding state left by earlier calls
    processor.save_pretrained(path)
    write_asking_note(path)  # what a prompt with words it was not taught is told (the library reads it)
    size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
    log(f"saved {path} ({size / 1e6:.2f} MB, {dtype})")


if __name__ == "__main__":
    main()
