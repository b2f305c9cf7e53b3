"""Named model layouts: what `laya-bundle synthesize --size NAME` writes and `laya-bundle build --model NAME`
compiles for.

A preset is the two configuration files a checkpoint of that layout carries (`encoder_config`,
`agent_config`); `ModelConfig.from_preset` reads them as it reads a checkpoint's, so a bundle built for a
preset and a checkpoint synthesized from it agree by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Fitted temperatures like a shipped checkpoint's, including values outside the usable range
# (0.1006 and 7.5 are clamped to 0.5 and 5.0) and one that is not a number, so decoding exercises
# every clamping rule.
SYNTHESIZED_AGENT = {
    "encoder": "answerdotai/ModernBERT-large",
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


@dataclass(frozen=True)
class Preset:
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    vocab_size: int  # rows of the embedding matrix (the tokenizer's vocabulary is at most this)
    tokenizer_vocab: int  # BPE vocabulary trained for a synthesized checkpoint
    corpus_lines: int  # lines of the corpus it is trained on
    global_attn_every_n_layers: int = 3
    local_attention: int = 128
    global_theta: float = 160000.0
    local_theta: float = 10000.0
    head_layers: int = 2
    agent: dict = field(default_factory=dict)  # rl_agent_config.json keys that differ from SYNTHESIZED_AGENT

    def encoder_config(self) -> dict:
        """`encoder/config.json` in the transformers 4.x layout the published checkpoints ship, less the special
        token ids (those come from the tokenizer a checkpoint is synthesized with)."""
        return {
            "architectures": ["ModernBertModel"],
            "model_type": "modernbert",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "hidden_activation": "gelu",
            "max_position_embeddings": 8192,
            "norm_eps": 1e-5,
            "norm_bias": False,
            "attention_bias": False,
            "mlp_bias": False,
            "attention_dropout": 0.0,
            "embedding_dropout": 0.0,
            "mlp_dropout": 0.0,
            "global_attn_every_n_layers": self.global_attn_every_n_layers,
            "local_attention": self.local_attention,
            "global_rope_theta": self.global_theta,
            "local_rope_theta": self.local_theta,
            "initializer_range": 0.02,
            "tie_word_embeddings": True,
        }

    def agent_config(self) -> dict:
        """`rl_agent_config.json`."""
        return {"head_layers": self.head_layers, **SYNTHESIZED_AGENT, **self.agent}


MODEL_PRESETS = {
    "tiny": Preset(
        hidden_size=128,
        intermediate_size=192,
        num_layers=4,
        num_heads=2,
        vocab_size=1280,
        tokenizer_vocab=1200,
        corpus_lines=3000,
    ),
    # another depth and attention period, other thetas and window: configuration must come from the files
    "tiny-alt": Preset(
        hidden_size=128,
        intermediate_size=160,
        num_layers=3,
        num_heads=2,
        vocab_size=1280,
        tokenizer_vocab=1200,
        corpus_lines=3000,
        global_attn_every_n_layers=2,
        local_attention=64,
        global_theta=80000.0,
        local_theta=5000.0,
    ),
    # a second model for multi-model tests: its own width, depth and heads, and typed-decisions' 1024-token budget
    "tiny-typed": Preset(
        hidden_size=96,
        intermediate_size=160,
        num_layers=2,
        num_heads=3,
        vocab_size=1280,
        tokenizer_vocab=1100,
        corpus_lines=3000,
        agent={"max_len": 1024},
    ),
    # ModernBERT-large's dimensions
    "large": Preset(
        hidden_size=1024,
        intermediate_size=2624,
        num_layers=28,
        num_heads=16,
        vocab_size=50368,
        tokenizer_vocab=8000,
        corpus_lines=20000,
    ),
}
