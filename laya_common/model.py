"""Model configuration: read from a checkpoint's `encoder/config.json` and `rl_agent_config.json`.

Every size, budget and temperature the engine uses comes from here, never from constants, so a
checkpoint with other dimensions (3 layers, global attention every 2nd) works unchanged. `ModelDims` is
the part of it the bundle's kernels are compiled for.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path

from laya_common.checkpoint import AGENT_CONFIG, ENCODER_CONFIG
from laya_common.presets import MODEL_PRESETS

GLOBAL, LOCAL = "full_attention", "sliding_attention"
# A question's type by name (the wire's "type") -> its qtype, the row of the model's type embedding.
QTYPES = {"choice": 0, "score": 1, "noul": 2}
QTYPE_NAMES = {v: k for k, v in QTYPES.items()}

# Fitted temperatures are only applied inside this range (the reference refuses to sharpen logits
# more than 2x or soften them more than 5x); anything that is not a finite number becomes 1.0.
TEMPERATURE_RANGE = (0.5, 5.0)


def clamp_temperature(value: object) -> float:
    try:
        t = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 1.0
    if not math.isfinite(t):
        return 1.0
    low, high = TEMPERATURE_RANGE
    return min(high, max(low, t))


@dataclass(frozen=True)
class ModelConfig:
    # encoder (ModernBERT)
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    layer_types: tuple[str, ...]
    global_theta: float
    local_theta: float
    local_attention: int  # total window; a token sees keys with |i - j| <= local_attention // 2
    norm_eps: float = 1e-5
    norm_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    hidden_activation: str = "gelu"
    # decision head and agent
    head_layers: int = 2
    n_act: int = 2
    max_len: int = 512
    head_max_len: int = 192
    temperature: tuple[float, float, float] = (1.0, 1.0, 1.0)
    temperature_by_options: dict[str, float] = field(default_factory=dict)
    # derived
    head_dim: int = field(init=False)
    window: int = field(init=False)
    head_heads: int = field(init=False)

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}")
        object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        object.__setattr__(self, "window", self.local_attention // 2)
        object.__setattr__(self, "head_heads", max(1, self.hidden_size // 64))

    @property
    def global_every(self) -> int | None:
        """The period of global layers when they fall at 0, n, 2n, ...; None for another pattern."""
        for n in range(1, self.num_layers + 1):
            if all((lt == GLOBAL) == (i % n == 0) for i, lt in enumerate(self.layer_types)):
                return n
        return None

    def temperature_for(self, qtype: int, n_options: int) -> float:
        return self.temperature_by_options.get(temperature_bucket(qtype, n_options), self.temperature[qtype])

    @classmethod
    def from_checkpoint(cls, checkpoint: Path | str) -> ModelConfig:
        checkpoint = Path(checkpoint)
        enc = _read_json(checkpoint / ENCODER_CONFIG)
        agent = _read_json(checkpoint / AGENT_CONFIG)
        return cls.from_dicts(enc, agent)

    @classmethod
    def from_preset(cls, name: str) -> ModelConfig:
        """The configuration a checkpoint synthesized from the preset `name` carries."""
        if name not in MODEL_PRESETS:
            raise ValueError(f"unknown model preset {name!r}; known: {', '.join(MODEL_PRESETS)}")
        preset = MODEL_PRESETS[name]
        return cls.from_dicts(preset.encoder_config(), preset.agent_config())

    @classmethod
    def from_dicts(cls, enc: dict, agent: dict) -> ModelConfig:
        n_layers = int(enc["num_hidden_layers"])
        layer_types = enc.get("layer_types")
        if layer_types is None:
            every = int(enc.get("global_attn_every_n_layers", 3))
            layer_types = [GLOBAL if i % every == 0 else LOCAL for i in range(n_layers)]
        rope = enc.get("rope_parameters") or {}
        flat = rope.get("rope_theta")

        def theta(kind: str, legacy_key: str, default: float) -> float:
            params = rope.get(kind)
            if isinstance(params, dict) and params.get("rope_theta") is not None:
                return float(params["rope_theta"])
            if flat is not None:
                return float(flat)
            return float(enc.get(legacy_key, default))

        temps = agent.get("temperature", [1.0, 1.0, 1.0])
        return cls(
            vocab_size=int(enc["vocab_size"]),
            hidden_size=int(enc["hidden_size"]),
            intermediate_size=int(enc["intermediate_size"]),
            num_layers=n_layers,
            num_heads=int(enc["num_attention_heads"]),
            layer_types=tuple(layer_types),
            global_theta=theta(GLOBAL, "global_rope_theta", 160000.0),
            local_theta=theta(LOCAL, "local_rope_theta", 10000.0),
            local_attention=int(enc.get("local_attention", 128)),
            norm_eps=float(enc.get("norm_eps", 1e-5)),
            norm_bias=bool(enc.get("norm_bias", False)),
            attention_bias=bool(enc.get("attention_bias", False)),
            mlp_bias=bool(enc.get("mlp_bias", False)),
            hidden_activation=str(enc.get("hidden_activation", "gelu")),
            head_layers=int(agent.get("head_layers", 2)),
            n_act=len(agent.get("act_costs", {})) + 1,
            max_len=int(agent.get("max_len", 512)),
            head_max_len=int(agent.get("head_max_len", 192)),
            temperature=tuple(clamp_temperature(t) for t in temps),  # type: ignore[arg-type]
            temperature_by_options={
                k: clamp_temperature(v) for k, v in agent.get("temperature_by_options", {}).items()
            },
        )


@dataclass(frozen=True)
class ModelDims:
    """The model dimensions every kernel of a bundle is compiled for: a part of a ModelConfig."""

    hidden_size: int
    intermediate_size: int
    num_heads: int
    head_dim: int
    vocab_size: int
    window: int
    norm_eps: float
    max_len: int
    head_heads: int

    @classmethod
    def of(cls, config: ModelConfig) -> ModelDims:
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})


def temperature_bucket(qtype: int, n_options: int) -> str:
    size = "2" if n_options <= 2 else "3-5" if n_options <= 5 else "6-10" if n_options <= 10 else "11+"
    return f"{QTYPE_NAMES[qtype]}:{size}"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"checkpoint file missing: {path}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"checkpoint file is not valid JSON: {path} ({e})") from None
