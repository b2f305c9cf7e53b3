"""Synthesized checkpoints: the real layout (five artifacts) with random weights and a trained BPE tokenizer.

The model hub cannot be reached from the machines tests run on, so tests and demos use these. The
same preset and seed give the same bytes. Weights are scaled so that context moves the hidden
state at each option marker: with the usual 0.02 initialisation every option would score the same
and parity tests could not tell a right answer from a wrong one.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from worker.checkpoint import TOKENIZER, TOKENIZER_CONFIG, WEIGHTS
from worker.config import AGENT_CONFIG, ENCODER_CONFIG

SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]")


@dataclass(frozen=True)
class Preset:
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    vocab_size: int  # rows of the embedding matrix (the tokenizer's vocabulary is at most this)
    tokenizer_vocab: int
    corpus_lines: int
    global_attn_every_n_layers: int = 3
    local_attention: int = 128
    global_theta: float = 160000.0
    local_theta: float = 10000.0
    head_layers: int = 2
    agent: dict = field(default_factory=dict)


# Fitted temperatures like a shipped checkpoint's, including values outside the usable range
# (0.1006 and 7.5 are clamped to 0.5 and 5.0) and one that is not a number, so decoding exercises
# every clamping rule.
_AGENT = {
    "act_costs": {"ask": 0.1},
    "max_len": 512,
    "head_max_len": 192,
    "temperature": [1.3, 0.9, 1.1],
    "temperature_by_options": {
        "noul:2": 1.2,
        "choice:2": 0.8,
        "choice:3-5": 1.7,
        "choice:11+": 0.1006,
        "score:3-5": 7.5,
        "score:6-10": "n/a",
    },
    "amp_dtype": "bf16",
}

MODEL_PRESETS = {
    "tiny": Preset(hidden_size=128, intermediate_size=192, num_layers=4, num_heads=2, vocab_size=1280,
                   tokenizer_vocab=1200, corpus_lines=3000),
    # another depth and attention period, other thetas and window: configuration must come from the files
    "tiny-alt": Preset(hidden_size=128, intermediate_size=160, num_layers=3, num_heads=2, vocab_size=1280,
                       tokenizer_vocab=1200, corpus_lines=3000, global_attn_every_n_layers=2,
                       local_attention=64, global_theta=80000.0, local_theta=5000.0),
    # a second model for multi-model tests: its own width, depth and heads, and typed-decisions' 1024-token budget
    "tiny-typed": Preset(hidden_size=96, intermediate_size=160, num_layers=2, num_heads=3, vocab_size=1280,
                         tokenizer_vocab=1100, corpus_lines=3000, agent={"max_len": 1024}),
    # ModernBERT-large's dimensions
    "large": Preset(hidden_size=1024, intermediate_size=2624, num_layers=28, num_heads=16, vocab_size=50368,
                    tokenizer_vocab=8000, corpus_lines=20000),
}

_WORDS = (
    "the", "a", "an", "and", "or", "but", "if", "then", "refund", "charge", "order", "account", "customer",
    "payment", "card", "bank", "invoice", "delivery", "package", "late", "broken", "damaged", "return",
    "replace", "cancel", "subscription", "plan", "upgrade", "price", "discount", "coupon", "email", "phone",
    "address", "password", "login", "error", "crash", "bug", "feature", "request", "support", "agent",
    "manager", "ticket", "urgent", "please", "thanks", "sorry", "hello", "yes", "no", "maybe", "never",
    "always", "today", "tomorrow", "yesterday", "week", "month", "year", "contract", "policy", "privacy",
    "security", "fraud", "suspicious", "transfer", "balance", "question", "answer", "statement", "holds",
    "true", "false", "level", "score", "choice", "option", "rating", "good", "bad", "neutral", "angry", "happy",
    "sad", "confused", "satisfied", "wants", "needs", "asks", "says", "writes", "reports", "complains",
    "describes", "product", "service", "quality", "shipping", "store", "online", "app", "website", "update",
    "version", "install", "device", "laptop", "screen", "battery", "network", "slow", "fast", "expensive",
    "cheap", "free", "trial", "member", "premium", "basic",
)
_EXTRA = ["café", "naïve", "Zürich", "straße", "日本語", "中文", "привет", "مرحبا", "🙂", "👍", "€", "£", "—"]


def synthesize(out: Path | str, *, size: str = "tiny", seed: int = 0) -> Path:
    """Write a checkpoint with `size`'s dimensions and random weights into `out`; return `out`."""
    if size not in MODEL_PRESETS:
        raise ValueError(f"unknown size {size!r}; known: {', '.join(MODEL_PRESETS)}")
    preset = MODEL_PRESETS[size]
    out = Path(out)
    (out / "encoder").mkdir(parents=True, exist_ok=True)
    (out / "tokenizer").mkdir(parents=True, exist_ok=True)
    ids = _write_tokenizer(out, preset, seed)
    _write_json(out / ENCODER_CONFIG, _encoder_config(preset, ids))
    _write_json(out / AGENT_CONFIG, {"encoder": "answerdotai/ModernBERT-large", "head_layers": preset.head_layers,
                                     **_AGENT, **preset.agent})
    _write_weights(out / WEIGHTS, preset, seed)
    return out


def _write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def _corpus(preset: Preset, seed: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(preset.corpus_lines):
        n = rng.randint(4, 24)
        words = [rng.choice(_WORDS) if rng.random() < 0.9 else rng.choice(_EXTRA) for _ in range(n)]
        if rng.random() < 0.2:
            words.append(str(rng.randint(0, 99999)))
        line = " ".join(words)
        if rng.random() < 0.15:
            line = json.dumps({"text": line, "n": rng.randint(0, 9)}, ensure_ascii=False)
        lines.append(line.capitalize() + rng.choice([".", "?", "!", ""]))
    return lines


def _write_tokenizer(out: Path, preset: Preset, seed: int) -> dict[str, int]:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=preset.tokenizer_vocab,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(preset, seed), trainer=trainer)
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    tok.save(str(out / TOKENIZER))
    _write_json(out / TOKENIZER_CONFIG, {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "mask_token": "[MASK]",
        "unk_token": "[UNK]", "model_max_length": 8192, "clean_up_tokenization_spaces": True,
        "model_input_names": ["input_ids", "attention_mask"],
    })
    return ids


def _encoder_config(preset: Preset, ids: dict[str, int]) -> dict:
    # the transformers 4.x layout of ModernBERT's config.json, as the published checkpoints ship it
    return {
        "architectures": ["ModernBertModel"], "model_type": "modernbert",
        "vocab_size": preset.vocab_size, "hidden_size": preset.hidden_size,
        "intermediate_size": preset.intermediate_size, "num_hidden_layers": preset.num_layers,
        "num_attention_heads": preset.num_heads, "hidden_activation": "gelu",
        "max_position_embeddings": 8192, "norm_eps": 1e-5, "norm_bias": False,
        "attention_bias": False, "mlp_bias": False, "attention_dropout": 0.0, "embedding_dropout": 0.0,
        "mlp_dropout": 0.0, "global_attn_every_n_layers": preset.global_attn_every_n_layers,
        "local_attention": preset.local_attention, "global_rope_theta": preset.global_theta,
        "local_rope_theta": preset.local_theta, "pad_token_id": ids["[PAD]"], "cls_token_id": ids["[CLS]"],
        "sep_token_id": ids["[SEP]"], "bos_token_id": ids["[CLS]"], "eos_token_id": ids["[SEP]"],
        "initializer_range": 0.02, "tie_word_embeddings": True,
    }


def weight_shapes(preset: Preset) -> dict[str, tuple[int, ...]]:
    """Every tensor of the checkpoint, by name: the encoder, the decision head, scorer and act head."""
    d, f, n_act = preset.hidden_size, preset.intermediate_size, len(_AGENT["act_costs"]) + 1
    shapes: dict[str, tuple[int, ...]] = {
        "encoder.embeddings.tok_embeddings.weight": (preset.vocab_size, d),
        "encoder.embeddings.norm.weight": (d,),
    }
    for i in range(preset.num_layers):
        p = f"encoder.layers.{i}."
        if i > 0:
            shapes[p + "attn_norm.weight"] = (d,)
        shapes |= {p + "attn.Wqkv.weight": (3 * d, d), p + "attn.Wo.weight": (d, d),
                   p + "mlp_norm.weight": (d,), p + "mlp.Wi.weight": (2 * f, d), p + "mlp.Wo.weight": (d, f)}
    shapes["encoder.final_norm.weight"] = (d,)
    for j in range(preset.head_layers):
        p = f"head.layers.{j}."
        shapes |= {p + "self_attn.in_proj_weight": (3 * d, d), p + "self_attn.in_proj_bias": (3 * d,),
                   p + "self_attn.out_proj.weight": (d, d), p + "self_attn.out_proj.bias": (d,),
                   p + "linear1.weight": (4 * d, d), p + "linear1.bias": (4 * d,),
                   p + "linear2.weight": (d, 4 * d), p + "linear2.bias": (d,),
                   p + "norm1.weight": (d,), p + "norm1.bias": (d,), p + "norm2.weight": (d,), p + "norm2.bias": (d,)}
    shapes |= {
        "type_emb.weight": (3, d),
        "scorer.0.weight": (d,), "scorer.0.bias": (d,), "scorer.1.weight": (d, d), "scorer.1.bias": (d,),
        "scorer.3.weight": (1, d), "scorer.3.bias": (1,),
        "act_head.0.weight": (256, d + 4), "act_head.0.bias": (256,),
        "act_head.2.weight": (n_act, 256), "act_head.2.bias": (n_act,),
        "temperature": (3,),
    }
    return shapes


def _init_tensor(name: str, shape: tuple[int, ...], gen):
    import torch

    if name == "temperature":
        return torch.ones(shape)
    if len(shape) == 1:
        is_norm_weight = name.endswith("weight")  # 1-D weights are LayerNorm scales
        noise = torch.randn(shape, generator=gen)
        return 1.0 + 0.1 * noise if is_norm_weight else 0.05 * noise
    if name.endswith("tok_embeddings.weight") or name == "type_emb.weight":
        return torch.randn(shape, generator=gen)
    # fan-in scaling keeps every layer's output O(1): context, not just the [MASK] token, shapes a marker;
    # the scorer's last layer is 32x wider so that options differ by logits, not hundredths of one
    gain = 32.0 if name == "scorer.3.weight" else 1.0
    return torch.randn(shape, generator=gen) * (gain / math.sqrt(shape[1]))


def _write_weights(path: Path, preset: Preset, seed: int) -> None:
    import torch
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(seed)
    tensors = {name: _init_tensor(name, shape, gen).float().contiguous()
               for name, shape in weight_shapes(preset).items()}
    save_file(tensors, str(path), metadata={"format": "pt"})
