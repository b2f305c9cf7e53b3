"""What the cuda executor keeps on the device: the checkpoint's weights in the precision each kernel reads, and
the workspaces, allocated once for the largest admitted shape (16 rows x max_len tokens)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from laya_common.model import GLOBAL, ModelConfig
from worker.engine.executors.reference import readout_modules


@dataclass(frozen=True)
class EncoderLayer:
    attn_norm: Tensor | None  # None for layer 0, which attends to the normalized embeddings
    wqkv: Tensor
    wo: Tensor
    mlp_norm: Tensor
    wi: Tensor
    wo2: Tensor
    is_global: bool


@dataclass(frozen=True)
class HeadLayer:
    in_w: Tensor
    in_b: Tensor
    out_w: Tensor
    out_b: Tensor
    l1_w: Tensor
    l1_b: Tensor
    l2_w: Tensor
    l2_b: Tensor
    n1_w: Tensor
    n1_b: Tensor
    n2_w: Tensor
    n2_b: Tensor


class DeviceWeights:
    """The checkpoint on the device: bf16 matrices for the GEMMs, fp32 for everything the kernels read as fp32."""

    def __init__(self, cfg: ModelConfig, weights: dict[str, Tensor], device: torch.device) -> None:
        if cfg.norm_bias or cfg.attention_bias or cfg.mlp_bias:
            raise ValueError("this checkpoint has norm, attention or MLP biases; the bundle kernels have none")

        def bf16(name: str) -> Tensor:
            return weights[name].to(device=device, dtype=torch.bfloat16).contiguous()

        def f32(name: str) -> Tensor:
            return weights[name].to(device=device, dtype=torch.float32).contiguous()

        self.embedding = f32("encoder.embeddings.tok_embeddings.weight")
        self.embedding_norm = f32("encoder.embeddings.norm.weight")
        self.layers = []
        for i in range(cfg.num_layers):
            p = f"encoder.layers.{i}."
            self.layers.append(
                EncoderLayer(
                    attn_norm=f32(p + "attn_norm.weight") if i else None,
                    wqkv=bf16(p + "attn.Wqkv.weight"),
                    wo=bf16(p + "attn.Wo.weight"),
                    mlp_norm=f32(p + "mlp_norm.weight"),
                    wi=bf16(p + "mlp.Wi.weight"),
                    wo2=bf16(p + "mlp.Wo.weight"),
                    is_global=cfg.layer_types[i] == GLOBAL,
                )
            )
        self.final_norm = f32("encoder.final_norm.weight")
        # the encoder's norms have no bias; they run on the bundle's norm-with-bias kernel with this one
        self.no_bias = torch.zeros(cfg.hidden_size, device=device, dtype=torch.float32)
        self.type_emb = f32("type_emb.weight")
        self.head = []
        for j in range(cfg.head_layers):
            p = f"head.layers.{j}."
            self.head.append(
                HeadLayer(
                    in_w=bf16(p + "self_attn.in_proj_weight"),
                    in_b=f32(p + "self_attn.in_proj_bias"),
                    out_w=bf16(p + "self_attn.out_proj.weight"),
                    out_b=f32(p + "self_attn.out_proj.bias"),
                    l1_w=bf16(p + "linear1.weight"),
                    l1_b=f32(p + "linear1.bias"),
                    l2_w=bf16(p + "linear2.weight"),
                    l2_b=f32(p + "linear2.bias"),
                    n1_w=f32(p + "norm1.weight"),
                    n1_b=f32(p + "norm1.bias"),
                    n2_w=f32(p + "norm2.weight"),
                    n2_b=f32(p + "norm2.bias"),
                )
            )
        self.scorer, self.act_head = readout_modules(cfg)
        for name, module in (("scorer", self.scorer), ("act_head", self.act_head)):
            module.load_state_dict(
                {k.removeprefix(name + "."): v for k, v in weights.items() if k.startswith(name + ".")}, strict=True
            )
            module.to(device=device, dtype=torch.float32).eval()

    def nbytes(self) -> int:
        tensors = [t for t in vars(self).values() if isinstance(t, Tensor)]
        for layer in (*self.layers, *self.head):
            tensors += [t for t in vars(layer).values() if isinstance(t, Tensor)]
        tensors += [*self.scorer.parameters(), *self.act_head.parameters()]
        return sum(t.numel() * t.element_size() for t in tensors)


class Workspaces:
    """Flat buffers sized for `max_tokens` token rows; `view(name, m, cols)` is their first m rows."""

    def __init__(
        self, cfg: ModelConfig, max_tokens: int, device: torch.device, *, geglu_on_cublas: bool, partials: int = 0
    ) -> None:
        """`partials`: fp32 elements for the split-K GEMMs' slices (chain.partials_size)."""
        d, f = cfg.hidden_size, cfg.intermediate_size
        self.columns = {"X": d, "Y": d, "QKV": 3 * d, "O": d, "G": max(f, 4 * d)}
        if geglu_on_cublas:
            self.columns["G2"] = 2 * f  # both halves of the up-projection before gelu(a) * g
        dtypes = {"X": torch.float32}
        self.buffers = {
            name: torch.empty(max_tokens * cols, dtype=dtypes.get(name, torch.bfloat16), device=device)
            for name, cols in self.columns.items()
        }
        self.buffers["P"] = torch.empty(partials, dtype=torch.float32, device=device)

    def partials(self, slices: int, m: int, n: int) -> Tensor:
        """The fp32 slices [slices, m, n] of a split-K GEMM: one buffer for every such GEMM of the chain."""
        return self.buffers["P"][: slices * m * n].view(slices, m, n)

    def view(self, name: str, m: int, cols: int | None = None) -> Tensor:
        cols = cols or self.columns[name]
        return self.buffers[name][: m * cols].view(m, cols)

    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers.values())
