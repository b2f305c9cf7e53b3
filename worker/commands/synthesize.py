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
from pathlib import Path

from laya_common.checkpoint import AGENT_CONFIG, ENCODER_CONFIG, TOKENIZER, TOKENIZER_CONFIG, WEIGHTS
from laya_common.model import ModelConfig
from laya_common.presets import MODEL_PRESETS, Preset

SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]")

_WORDS = (
    "the",
    "a",
    "an",
    "and",
    "or",
    "but",
    "if",
    "then",
    "refund",
    "charge",
    "order",
    "account",
    "customer",
    "payment",
    "card",
    "bank",
    "invoice",
    "delivery",
    "package",
    "late",
    "broken",
    "damaged",
    "return",
    "replace",
    "cancel",
    "subscription",
    "plan",
    "upgrade",
    "price",
    "discount",
    "coupon",
    "email",
    "phone",
    "address",
    "password",
    "login",
    "error",
    "crash",
    "bug",
    "feature",
    "request",
    "support",
    "agent",
    "manager",
    "ticket",
    "urgent",
    "please",
    "thanks",
    "sorry",
    "hello",
    "yes",
    "no",
    "maybe",
    "never",
    "always",
    "today",
    "tomorrow",
    "yesterday",
    "week",
    "month",
    "year",
    "contract",
    "policy",
    "privacy",
    "security",
    "fraud",
    "suspicious",
    "transfer",
    "balance",
    "question",
    "answer",
    "statement",
    "holds",
    "true",
    "false",
    "level",
    "score",
    "choice",
    "option",
    "rating",
    "good",
    "bad",
    "neutral",
    "angry",
    "happy",
    "sad",
    "confused",
    "satisfied",
    "wants",
    "needs",
    "asks",
    "says",
    "writes",
    "reports",
    "complains",
    "describes",
    "product",
    "service",
    "quality",
    "shipping",
    "store",
    "online",
    "app",
    "website",
    "update",
    "version",
    "install",
    "device",
    "laptop",
    "screen",
    "battery",
    "network",
    "slow",
    "fast",
    "expensive",
    "cheap",
    "free",
    "trial",
    "member",
    "premium",
    "basic",
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
    token_ids = {
        "pad_token_id": ids["[PAD]"],
        "cls_token_id": ids["[CLS]"],
        "sep_token_id": ids["[SEP]"],
        "bos_token_id": ids["[CLS]"],
        "eos_token_id": ids["[SEP]"],
    }
    _write_json(out / ENCODER_CONFIG, {**preset.encoder_config(), **token_ids})
    _write_json(out / AGENT_CONFIG, preset.agent_config())
    _write_weights(out / WEIGHTS, ModelConfig.from_preset(size), seed)
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
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    tok.save(str(out / TOKENIZER))
    _write_json(
        out / TOKENIZER_CONFIG,
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "cls_token": "[CLS]",
            "sep_token": "[SEP]",
            "pad_token": "[PAD]",
            "mask_token": "[MASK]",
            "unk_token": "[UNK]",
            "model_max_length": 8192,
            "clean_up_tokenization_spaces": True,
            "model_input_names": ["input_ids", "attention_mask"],
        },
    )
    return ids


def weight_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of the checkpoint, by name: the encoder, the decision head, scorer and act head."""
    d, f, n_act = config.hidden_size, config.intermediate_size, config.n_act
    shapes: dict[str, tuple[int, ...]] = {
        "encoder.embeddings.tok_embeddings.weight": (config.vocab_size, d),
        "encoder.embeddings.norm.weight": (d,),
    }
    for i in range(config.num_layers):
        p = f"encoder.layers.{i}."
        if i > 0:
            shapes[p + "attn_norm.weight"] = (d,)
        shapes |= {
            p + "attn.Wqkv.weight": (3 * d, d),
            p + "attn.Wo.weight": (d, d),
            p + "mlp_norm.weight": (d,),
            p + "mlp.Wi.weight": (2 * f, d),
            p + "mlp.Wo.weight": (d, f),
        }
    shapes["encoder.final_norm.weight"] = (d,)
    for j in range(config.head_layers):
        p = f"head.layers.{j}."
        shapes |= {
            p + "self_attn.in_proj_weight": (3 * d, d),
            p + "self_attn.in_proj_bias": (3 * d,),
            p + "self_attn.out_proj.weight": (d, d),
            p + "self_attn.out_proj.bias": (d,),
            p + "linear1.weight": (4 * d, d),
            p + "linear1.bias": (4 * d,),
            p + "linear2.weight": (d, 4 * d),
            p + "linear2.bias": (d,),
            p + "norm1.weight": (d,),
            p + "norm1.bias": (d,),
            p + "norm2.weight": (d,),
            p + "norm2.bias": (d,),
        }
    shapes |= {
        "type_emb.weight": (3, d),
        "scorer.0.weight": (d,),
        "scorer.0.bias": (d,),
        "scorer.1.weight": (d, d),
        "scorer.1.bias": (d,),
        "scorer.3.weight": (1, d),
        "scorer.3.bias": (1,),
        "act_head.0.weight": (256, d + 4),
        "act_head.0.bias": (256,),
        "act_head.2.weight": (n_act, 256),
        "act_head.2.bias": (n_act,),
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


def _write_weights(path: Path, config: ModelConfig, seed: int) -> None:
    import torch
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(seed)
    tensors = {
        name: _init_tensor(name, shape, gen).float().contiguous() for name, shape in weight_shapes(config).items()
    }
    save_file(tensors, str(path), metadata={"format": "pt"})
