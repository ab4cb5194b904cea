"""Train the built-in Qwen2-VL model pair (target + draft) from scratch on synthetic scenes.

Recipe (defaults; all on CPU, float32, ``torch.set_num_threads(2)``):

* Data: ``sage_core.builtin.scenes.make_example`` with ``random.Random(seed)`` (fresh
  examples every step, all 7 kinds mixed uniformly); 112x112 images -> 16 visual tokens.
* Tokenizer: word-level (``tokenizers`` WordPiece model whose vocabulary holds whole words,
  punctuation, digits ``0-9`` and continuation digits ``##0-##9``), lower-casing, BERT
  pre-tokenizer (whitespace + punctuation split), WordPiece decoder with cleanup so
  ``decode`` reads "the red circle is on the left." and "it says 42.". Special tokens
  ``<|endoftext|>`` (pad, id 0) ``<|im_start|>`` (1) ``<|im_end|>`` (2, eos)
  ``<|vision_start|>`` (3) ``<|vision_end|>`` (4) ``<|image_pad|>`` (5) ``<|video_pad|>`` (6),
  and ``"\\n"`` (7) as a normal added token. Saved as a ``PreTrainedTokenizerFast``.
* Processor: ``Qwen2VLProcessor`` (``Qwen2VLImageProcessor`` and ``Qwen2VLVideoProcessor`` with
  min_pixels = max_pixels = 112*112) and a chat template that renders one user turn as
  ``<|im_start|>user\\n<|vision_start|><|image_pad|><|vision_end|>QUESTION<|im_end|>\\n<|im_start|>assistant\\n``.
* Training sequence = that prompt + answer + ``<|im_end|>``; loss only on the answer and the
  final ``<|im_end|>``; batch 16, left padding (as in batched generation).
* Target: Qwen2VLForConditionalGeneration, text hidden 256, 4 layers, 4 heads (2 KV), FFN 704;
  vision embed 128, depth 3, 4 heads; AdamW(lr 1e-3, betas 0.9/0.98, wd 0.01), 100 warm-up
  steps, learning rate held until 65 % of the budget then cosine-decayed to 5 %; grad clip 1.
* Draft: text hidden 128, 2 layers, 2 heads (1 KV), FFN 352; vision embed 64, depth 1, 2 heads;
  AdamW lr 2e-3, same schedule; loss = 0.5 * cross-entropy on the data + 0.5 * KL(target || draft)
  on the answer positions (distillation from the frozen, finished target, which raises agreement).
* The budget is wall-clock minutes of training (``--target-minutes``, ``--draft-minutes``); the
  schedule follows the elapsed fraction. For an exactly repeatable run pass ``--target-steps`` /
  ``--draft-steps`` (the log prints the step counts a timed run reached).
* Both models are evaluated on freshly generated examples and saved (float32) with
  ``save_pretrained`` together with the processor to ``OUT/target`` and ``OUT/draft``.

Usage::

    python scripts/train_builtin_pair.py                       # 28 + 10 minutes of training
    python scripts/train_builtin_pair.py --target-minutes 0.3 --draft-minutes 0.2 --out /tmp/smoke
    # continue training saved models (a minutes/steps value of 0 skips that model's training):
    python scripts/train_builtin_pair.py --init-target assets/builtin/target --target-lr 3e-4 \
        --target-minutes 10 --init-draft assets/builtin/draft --draft-minutes 0
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from pathlib import Path

# Passive OpenMP waiting: on a shared 2-core machine, spinning worker threads make every
# step several times slower as soon as another process runs (measured 7-10 s vs 2.8 s).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sage_core.builtin.quality import agreement, evaluate, prompt_text  # noqa: E402
from sage_core.builtin.scenes import make_example, make_examples, vocabulary  # noqa: E402

IMAGE_PIXELS = 112 * 112
SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

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

TARGET_CFG = {"hidden": 256, "layers": 4, "heads": 4, "kv": 2, "ffn": 704, "v_embed": 128, "v_depth": 3, "v_heads": 4}
DRAFT_CFG = {"hidden": 128, "layers": 2, "heads": 2, "kv": 1, "ffn": 352, "v_embed": 64, "v_depth": 1, "v_heads": 2}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- tokenizer / processor
def build_processor():
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
    )
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    words = ["user", "assistant", "system", *vocabulary()]
    digits = [str(d) for d in range(10)]
    vocab_list = SPECIALS + ["\n"] + [w for w in words if w not in digits] + digits + [f"##{d}" for d in digits]
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
    image_processor = Qwen2VLImageProcessor(min_pixels=IMAGE_PIXELS, max_pixels=IMAGE_PIXELS)
    video_processor = Qwen2VLVideoProcessor(min_pixels=IMAGE_PIXELS, max_pixels=IMAGE_PIXELS, cap_pixels_per_frame=True)
    processor = Qwen2VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )
    return processor


def build_model(cfg: dict, tokenizer, seed: int):
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    head_dim = cfg["hidden"] // cfg["heads"]
    quarter = head_dim // 8
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": cfg["hidden"],
            "intermediate_size": cfg["ffn"],
            "num_hidden_layers": cfg["layers"],
            "num_attention_heads": cfg["heads"],
            "num_key_value_heads": cfg["kv"],
            "max_position_embeddings": 1024,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [quarter, quarter + quarter // 2, quarter + quarter // 2],
            },
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        vision_config={
            "depth": cfg["v_depth"],
            "embed_dim": cfg["v_embed"],
            "hidden_size": cfg["hidden"],
            "num_heads": cfg["v_heads"],
            "mlp_ratio": 4,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration._from_config(config, attn_implementation="sdpa", dtype=torch.float32)
    gc = model.generation_config
    gc.eos_token_id = ids["<|im_end|>"]
    gc.pad_token_id = ids["<|endoftext|>"]
    gc.bos_token_id = ids["<|endoftext|>"]
    gc.do_sample = False
    gc.max_new_tokens = 32
    return model


# --------------------------------------------------------------------------- batches
def make_batch(processor, examples):
    """Processor inputs + labels (answer tokens and the closing <|im_end|>; prompt and padding masked)."""
    texts = [prompt_text(processor, e.question) + e.answer + "<|im_end|>" for e in examples]
    enc = processor(text=texts, images=[e.image for e in examples], return_tensors="pt", padding=True)
    ids = enc["input_ids"]
    im_start = processor.tokenizer.convert_tokens_to_ids("<|im_start|>")
    labels = torch.full_like(ids, -100)
    for r in range(ids.shape[0]):
        p = (ids[r] == im_start).nonzero()[-1].item() + 3  # <|im_start|> assistant \n
        labels[r, p:] = ids[r, p:]
    return enc, labels


def lr_factor(frac: float, step: int, warmup: int = 100, hold: float = 0.65, floor: float = 0.05) -> float:
    if step < warmup:
        return (step + 1) / warmup
    if frac < hold:
        return 1.0
    t = min((frac - hold) / (1 - hold), 1.0)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t))


def train(name, model, processor, rng, lr, minutes, steps, batch_size, eval_examples, teacher=None, eval_every_s=300.0):
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    budget = minutes * 60.0
    train_time, step, t_last_eval, ema = 0.0, 0, 0.0, None
    log(f"{name}: training, {f'{steps} steps' if steps else f'{minutes:.1f} min'}, lr {lr}, batch {batch_size}")
    while True:
        frac = step / steps if steps else train_time / budget
        if frac >= 1.0:
            break
        t0 = time.time()
        model.train()
        for g in opt.param_groups:
            g["lr"] = lr * lr_factor(frac, step)
        enc, labels = make_batch(processor, [make_example(rng) for _ in range(batch_size)])
        if teacher is None:
            loss = model(**enc, labels=labels).loss
        else:
            logits = model(**enc).logits[:, :-1]
            tgt = labels[:, 1:]
            mask = tgt != -100
            ce = F.cross_entropy(logits[mask], tgt[mask])
            with torch.no_grad():
                t_logits = teacher(**enc).logits[:, :-1][mask]
            kl = F.kl_div(
                F.log_softmax(logits[mask], -1), F.log_softmax(t_logits, -1), log_target=True, reduction="batchmean"
            )
            loss = 0.5 * ce + 0.5 * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        train_time += time.time() - t0
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 50 == 0:
            log(
                f"{name} step {step} loss {ema:.4f} lr {opt.param_groups[0]['lr']:.2e} "
                f"train {train_time / 60:.1f} min ({train_time / step:.3f} s/step)"
            )
        if train_time - t_last_eval >= eval_every_s:
            t_last_eval = train_time
            res = evaluate(model, processor, eval_examples[: len(eval_examples) // 2])
            log(
                f"{name} eval @ step {step}: acc {res['accuracy']:.3f} "
                + " ".join(f"{k} {v:.2f}" for k, v in res["per_kind"].items())
            )
    log(f"{name}: done, {step} steps, {train_time / 60:.2f} min of training")
    model.eval()
    return step, train_time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "assets" / "builtin"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--target-minutes", type=float, default=28.0)
    ap.add_argument("--draft-minutes", type=float, default=10.0)
    ap.add_argument("--target-steps", type=int, default=0, help="fixed step count (overrides minutes)")
    ap.add_argument("--draft-steps", type=int, default=0, help="fixed step count (overrides minutes)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--target-lr", type=float, default=1e-3)
    ap.add_argument("--draft-lr", type=float, default=2e-3)
    ap.add_argument("--eval-n", type=int, default=140, help="examples for the final evaluations (half for progress)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--init-target", help="continue from this saved target instead of a fresh one")
    ap.add_argument("--init-draft", help="continue from this saved draft instead of a fresh one")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    t_start = time.time()
    out = Path(args.out)
    processor = build_processor()
    tok = processor.tokenizer
    log(f"vocabulary {len(tok)} tokens; eos <|im_end|> = {tok.eos_token_id}, pad = {tok.pad_token_id}")
    eval_examples = make_examples(args.seed + 999_983, args.eval_n)  # held out (training uses seed-derived rngs)

    target = load_model(args.init_target) if args.init_target else build_model(TARGET_CFG, tok, args.seed)
    draft = load_model(args.init_draft) if args.init_draft else build_model(DRAFT_CFG, tok, args.seed + 1)
    n_t = sum(p.numel() for p in target.parameters())
    n_d = sum(p.numel() for p in draft.parameters())
    log(f"target {n_t / 1e6:.3f} M params, draft {n_d / 1e6:.3f} M params ({n_t / n_d:.1f}x smaller)")

    t_steps = t_time = 0
    if args.target_minutes > 0 or args.target_steps > 0:
        t_steps, t_time = train(
            "target",
            target,
            processor,
            random.Random(args.seed),
            args.target_lr,
            args.target_minutes,
            args.target_steps,
            args.batch_size,
            eval_examples,
        )
    for p in target.parameters():
        p.requires_grad_(False)
    res_t = evaluate(target, processor, eval_examples)
    log(f"target final: acc {res_t['accuracy']:.3f} " + " ".join(f"{k} {v:.2f}" for k, v in res_t["per_kind"].items()))
    save(target, processor, out / "target")

    d_steps = d_time = 0
    if args.draft_minutes > 0 or args.draft_steps > 0:
        d_steps, d_time = train(
            "draft",
            draft,
            processor,
            random.Random(args.seed + 1),
            args.draft_lr,
            args.draft_minutes,
            args.draft_steps,
            args.batch_size,
            eval_examples,
            teacher=target,
        )
    res_d = evaluate(draft, processor, eval_examples)
    log(f"draft final: acc {res_d['accuracy']:.3f} " + " ".join(f"{k} {v:.2f}" for k, v in res_d["per_kind"].items()))
    agr = agreement(target, draft, processor, eval_examples, res_t["answer_ids"])
    log("agreement: " + " ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in agr.items()))
    save(draft, processor, out / "draft")
    log(
        f"summary: target {t_steps} steps / {t_time / 60:.1f} min, draft {d_steps} steps / {d_time / 60:.1f} min, "
        f"total wall {(time.time() - t_start) / 60:.1f} min"
    )


def load_model(path):
    from transformers import Qwen2VLForConditionalGeneration

    log(f"loading {path}")
    return Qwen2VLForConditionalGeneration.from_pretrained(path, attn_implementation="sdpa", dtype=torch.float32)


def save(model, processor, path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    processor.tokenizer.backend_tokenizer.no_padding()  # drop batch-padding state left by earlier calls
    processor.save_pretrained(path)
    size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
    log(f"saved {path} ({size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
