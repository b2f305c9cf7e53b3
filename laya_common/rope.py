"""ModernBERT's rotary position embedding, as its reference computes it: the math the fp32 reference executor
applies and the bundle's exported tables hold (bundle/export_tables.py writes them, the cuda executor reads them).

This module needs torch; the API never imports it (tests/test_layering.py).
"""

from __future__ import annotations

import torch

ROUNDING_DTYPE = torch.bfloat16  # the activation dtype the reference casts cos/sin to before applying them


def inv_freq(theta: float, head_dim: int) -> torch.Tensor:
    """[head_dim / 2] fp32 on the CPU, as ModernBERT's rotary embedding computes it at construction."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))


def rope_cos_sin(theta: float, head_dim: int, n_tokens: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin: [n_tokens, head_dim] fp32 for positions 0..n_tokens-1, as ModernBERT's rotary embedding computes
    them (the two halves of head_dim repeat the same frequencies)."""
    freq = inv_freq(theta, head_dim).to(device)[None, :, None]  # [1, Dh/2, 1]
    pos = torch.arange(n_tokens, device=device)[None, None, :].float()  # [1, 1, T]
    freqs = (freq @ pos).transpose(1, 2)[0]  # [T, Dh/2]
    angles = torch.cat((freqs, freqs), dim=-1)
    return angles.cos(), angles.sin()


def rope_tables(theta: float, head_dim: int, max_len: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin: [max_len, head_dim] fp32 holding bf16-representable values, computed on `device`."""
    cos, sin = rope_cos_sin(theta, head_dim, max_len, device)
    return cos.to(ROUNDING_DTYPE).float(), sin.to(ROUNDING_DTYPE).float()
