"""Attention entry points (global and ±window sliding) with a padding mask, against fp32 torch (GPU)."""

import pytest
import torch

from kernels import reference
from kernels.shapes import SHAPES
from laya_common.rope import inv_freq, rope_tables

pytestmark = pytest.mark.gpu


def _lens(R, L, gen):
    """Row lengths: the first row full, the others random; with 3+ rows the last is empty (a padding row)."""
    lens = torch.randint(1, L + 1, (R,), device="cuda", generator=gen, dtype=torch.int32)
    lens[0] = L
    if R >= 3:
        lens[-1] = 0
    return lens


@pytest.mark.parametrize("kind", ["global", "local"])
@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_attention(kernels, gen, poisoned, R, L, kind):
    model = kernels.manifest.model
    H, Dh = model.num_heads, model.head_dim
    window = model.window if kind == "local" else 0
    M = R * L
    qkv = torch.randn(M, 3 * H * Dh, device="cuda", generator=gen).to(torch.bfloat16)
    lens = _lens(R, L, gen)
    O = poisoned(M, H * Dh, dtype=torch.bfloat16)
    getattr(kernels, f"attn_fwd_{kind}_bf16")(qkv, lens, L, O)
    torch.cuda.synchronize()
    assert torch.isfinite(O).all(), "unwritten or non-finite outputs (padding queries included)"
    real = (torch.arange(L, device="cuda")[None, :] < lens[:, None]).reshape(M)
    ref = reference.attention(qkv, lens, L, H, Dh, window)
    err = reference.rel_error(O[real], ref[real])
    assert err < reference.REL_BF16, f"relative error {err:.2e}"


@pytest.mark.parametrize("tables", ["cos-sin-kernel", "exported"])
@pytest.mark.parametrize("kind", ["global", "local"])
@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_rope_inside_attention_is_rope_then_attention(kernels, gen, poisoned, R, L, kind, tables):
    """attn_rope_fwd_* with a table pair writes, bit for bit, what rope_table_bf16 with that pair and then the plain
    entry write, and leaves QKV as it was."""
    model = kernels.manifest.model
    H, Dh = model.num_heads, model.head_dim
    theta = 160000.0 if kind == "global" else 10000.0
    if tables == "exported":
        cos, sin = rope_tables(theta, Dh, model.max_len, torch.device("cuda"))
    else:
        cos, sin = (torch.empty(model.max_len, Dh, device="cuda") for _ in range(2))
        kernels.rope_cos_sin_f32(inv_freq(theta, Dh).cuda(), cos, sin)
    M = R * L
    qkv = torch.randn(M, 3 * H * Dh, device="cuda", generator=gen).to(torch.bfloat16)
    lens = _lens(R, L, gen)
    fused, plain = poisoned(M, H * Dh, dtype=torch.bfloat16), poisoned(M, H * Dh, dtype=torch.bfloat16)
    rotated, original = qkv.clone(), qkv.clone()
    getattr(kernels, f"attn_rope_fwd_{kind}_bf16")(qkv, lens, cos, sin, L, fused)
    kernels.rope_table_bf16(rotated, cos, sin, L)
    getattr(kernels, f"attn_fwd_{kind}_bf16")(rotated, lens, L, plain)
    torch.cuda.synchronize()
    assert torch.isfinite(fused).all(), "unwritten or non-finite outputs (padding queries included)"
    differ = (fused != plain).sum().item()
    assert differ == 0, f"{differ} of {fused.numel()} outputs differ from RoPE then attention"
    assert torch.equal(qkv, original), "the fused entry wrote QKV"
