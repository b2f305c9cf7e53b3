"""The reference executor: the whole model in plain torch, fp32, CPU or CUDA, read top-down.

ModernBERT encoder (embeddings + LayerNorm; layers of pre-norm attention with dual-theta RoPE,
global or +-window sliding attention; GeGLU MLP; final norm), then the decision head (type
embedding + pre-norm transformer layers with a ReLU FFN), the scorer at the option markers and the
act head. Module names are the checkpoint's, so weights load 1:1. Every op is the one the
reference model runs, in the same order and shapes: on CPU its fp32 answers are bit-identical.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from laya_common.contract import LIMITS
from laya_common.model import GLOBAL, ModelConfig
from laya_common.rope import rope_cos_sin
from worker.engine.batch import Admits, Batch, Executor, Outputs

DROPPED_WEIGHTS = ("temperature",)  # a calibration buffer the decoder reads from the config instead
MASKED_LOGIT = -1e4
MAX_ROWS = LIMITS["max_questions"]  # rows per forward pass: a request's rows (one per question) fit one


class Embeddings(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps, bias=cfg.norm_bias)

    def forward(self, input_ids: Tensor) -> Tensor:  # [R, L] -> [R, L, D]
        return self.norm(self.tok_embeddings(input_ids))


def rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:  # x: [R, H, L, Dh]; cos, sin: [L, Dh]
    cos, sin = cos[None, None], sin[None, None]
    return (x.float() * cos) + (rotate_half(x.float()) * sin)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads, self.head_dim = cfg.num_heads, cfg.head_dim
        self.Wqkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size, bias=cfg.attention_bias)
        self.Wo = nn.Linear(cfg.hidden_size, cfg.hidden_size, bias=cfg.attention_bias)

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], keep: Tensor | None) -> Tensor:
        # x: [R, L, D]; keep: [R, 1, L, L] bool (True = attend) or None for "attend everywhere"
        n_rows, n_tokens, _ = x.shape
        qkv = self.Wqkv(x).view(n_rows, n_tokens, 3, self.n_heads, self.head_dim)
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(dim=-3))  # [R, H, L, Dh]
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=0.0, scale=self.head_dim**-0.5)
        out = out.transpose(1, 2).contiguous().reshape(n_rows, n_tokens, -1).contiguous()
        return self.Wo(out)


class MLP(nn.Module):
    """GeGLU: Wo(gelu(x Wi[:F]^T) * (x Wi[F:]^T))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.hidden_activation != "gelu":
            raise ValueError(f"hidden_activation {cfg.hidden_activation!r} is not supported; expected 'gelu'")
        self.Wi = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=cfg.mlp_bias)
        self.Wo = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=cfg.mlp_bias)

    def forward(self, x: Tensor) -> Tensor:
        up, gate = self.Wi(x).chunk(2, dim=-1)
        return self.Wo(F.gelu(up) * gate)


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int) -> None:
        super().__init__()
        # layer 0 attends to the normalized embeddings directly
        self.attn_norm = (
            nn.Identity() if index == 0 else nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps, bias=cfg.norm_bias)
        )
        self.attn = Attention(cfg)
        self.mlp_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps, bias=cfg.norm_bias)
        self.mlp = MLP(cfg)
        self.is_global = cfg.layer_types[index] == GLOBAL

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], keep: Tensor | None) -> Tensor:
        x = x + self.attn(self.attn_norm(x), rope, keep)
        return x + self.mlp(self.mlp_norm(x))


class Encoder(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embeddings = Embeddings(cfg)
        self.layers = nn.ModuleList(EncoderLayer(cfg, i) for i in range(cfg.num_layers))
        self.final_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps, bias=cfg.norm_bias)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:  # [R, L] -> [R, L, D]
        cfg, n_tokens = self.cfg, input_ids.shape[1]
        x = self.embeddings(input_ids)
        rope = {
            True: rope_cos_sin(cfg.global_theta, cfg.head_dim, n_tokens, x.device),
            False: rope_cos_sin(cfg.local_theta, cfg.head_dim, n_tokens, x.device),
        }
        keep = {True: global_keep(attention_mask), False: sliding_keep(attention_mask, cfg.window)}
        for layer in self.layers:
            x = layer(x, rope[layer.is_global], keep[layer.is_global])
        return self.final_norm(x)


def global_keep(attention_mask: Tensor) -> Tensor | None:
    """[R, 1, L, L]: every query sees every real key; None when no row is padded (plain attention)."""
    real = attention_mask.bool()
    if real.all():
        return None
    n_tokens = real.shape[1]
    queries = torch.arange(n_tokens, device=real.device)[None, None, :, None] >= 0
    return queries & real[:, None, None, :]


def sliding_keep(attention_mask: Tensor, window: int) -> Tensor | None:
    """[R, 1, L, L]: keys within +-window of the query; None when nothing is padded and L < window."""
    real = attention_mask.bool()
    n_tokens = real.shape[1]
    if real.all() and n_tokens < window:
        return None
    q = torch.arange(n_tokens, device=real.device)[None, None, :, None]
    k = torch.arange(n_tokens, device=real.device)[None, None, None, :]
    return ((q - k).abs() <= window) & (q >= 0) & real[:, None, None, :]


class DecisionModel(nn.Module):
    """Encoder + typed decision head; returns option logits and act-head logits."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.encoder = Encoder(cfg)
        self.head = nn.Module()
        self.head.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, cfg.head_heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(cfg.head_layers)
        )
        self.type_emb = nn.Embedding(3, d)
        self.scorer, self.act_head = readout_modules(cfg)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, marker_pos: Tensor, marker_mask: Tensor, qtype: Tensor
    ) -> tuple[Tensor, Tensor]:
        h = self.encoder(input_ids, attention_mask) + self.type_emb(qtype)[:, None, :]  # [R, L, D]
        padding = ~attention_mask.bool()
        for layer in self.head.layers:
            h = layer(h, src_key_padding_mask=padding)
        logits = self.score(h, marker_pos, marker_mask)  # [R, K]
        return logits, self.act(h, logits, marker_mask)

    def score(self, h: Tensor, marker_pos: Tensor, marker_mask: Tensor) -> Tensor:
        return score_markers(self.scorer, h, marker_pos, marker_mask)

    def act(self, h: Tensor, logits: Tensor, marker_mask: Tensor) -> Tensor:
        return act_logits(self.act_head, h, logits, marker_mask)


def readout_modules(cfg: ModelConfig) -> tuple[nn.Sequential, nn.Sequential]:
    """The scorer (applied at each option marker) and the act head, named as in the checkpoint."""
    d = cfg.hidden_size
    scorer = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))
    act_head = nn.Sequential(nn.Linear(d + 4, 256), nn.GELU(), nn.Linear(256, cfg.n_act))
    return scorer, act_head


def score_markers(scorer: nn.Module, h: Tensor, marker_pos: Tensor, marker_mask: Tensor) -> Tensor:
    """[R, K] option logits: the scorer at each row's option markers, MASKED_LOGIT past its options."""
    at_markers = torch.gather(h, 1, marker_pos.clamp(min=0)[:, :, None].expand(-1, -1, h.size(-1)))
    logits = scorer(at_markers).squeeze(-1).float()
    return logits.masked_fill(~marker_mask, MASKED_LOGIT)


def act_logits(act_head: nn.Module, h: Tensor, logits: Tensor, marker_mask: Tensor) -> Tensor:
    """Act-head logits from the [CLS] state and four features of the option distribution."""
    p = torch.softmax(logits, -1)
    k = marker_mask.sum(-1).clamp(min=2).float()
    entropy = -(p * torch.log(p.clamp_min(1e-9))).sum(-1) / torch.log(k)
    # with one option in every row the runner-up probability is 0
    top2 = p.topk(2, -1).values if p.size(-1) >= 2 else torch.cat([p, torch.zeros_like(p)], dim=-1)
    features = torch.stack([top2[:, 0], top2[:, 0] - top2[:, 1], entropy, k / 255.0], -1)
    return act_head(torch.cat([h[:, 0].float(), features], -1))


def load_model(cfg: ModelConfig, weights: dict[str, Tensor], device: torch.device) -> DecisionModel:
    """Build on `meta`, take every checkpoint tensor by name (each used or listed as dropped), move once."""
    with torch.device("meta"):
        model = DecisionModel(cfg)
    expected = set(model.state_dict())
    unknown = set(weights) - expected - set(DROPPED_WEIGHTS)
    missing = expected - set(weights)
    if unknown or missing:
        raise ValueError(
            f"checkpoint weights do not match the model: missing {sorted(missing)[:5]}, unknown {sorted(unknown)[:5]}"
        )
    # clone: safetensors hands out views at arbitrary byte offsets, and a GEMM over unaligned weights takes
    # another code path whose float32 rounding differs from the reference's in the last bit
    model.load_state_dict({k: v.clone() for k, v in weights.items() if k in expected}, strict=True, assign=True)
    return model.to(device=device, dtype=torch.float32).eval()


class ReferenceExecutor(Executor):
    name = "reference"

    def __init__(self, cfg: ModelConfig, weights: dict[str, Tensor], device: str | None = None) -> None:
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = load_model(cfg, weights, self.device)
        # rows at the longest row's exact length: what the reference pads to, so answers stay bit-identical
        self.admits = Admits(max_rows=MAX_ROWS, max_tokens=cfg.max_len)

    def describe(self) -> dict:
        return {"executor": self.name, "device": str(self.device), "precision": "float32"}

    @torch.no_grad()
    def forward(self, batch: Batch) -> Outputs:
        def tensor(a, dtype=torch.int64):
            return torch.from_numpy(a).to(device=self.device, dtype=dtype)

        lengths = tensor(batch.lengths)
        attention_mask = (torch.arange(batch.width, device=self.device)[None, :] < lengths[:, None]).long()
        logits, act = self.model(
            tensor(batch.ids),
            attention_mask,
            tensor(batch.marker_pos),
            tensor(batch.marker_mask, torch.bool),
            tensor(batch.qtype),
        )
        return Outputs(logits.float().cpu().numpy(), torch.softmax(act.float(), -1).cpu().numpy())
