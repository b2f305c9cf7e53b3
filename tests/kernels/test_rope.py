"""RoPE entry points: the table variant rounds exactly as the reference; the fused one is fp32-accurate (GPU)."""

import pytest
import torch

from kernels import reference
from kernels.shapes import SHAPES
from laya_common.rope import inv_freq, rope_tables

pytestmark = pytest.mark.gpu

THETAS = {"global": 160000.0, "local": 10000.0}


def _qkv(kernels, M, gen):
    model = kernels.manifest.model
    width = 3 * model.num_heads * model.head_dim
    return (torch.randn(M, width, device="cuda", generator=gen) * 2).to(torch.bfloat16)


@pytest.mark.parametrize("kind", THETAS)
@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_rope_table_matches_reference_bits(kernels, gen, R, L, kind):
    model = kernels.manifest.model
    cos, sin = rope_tables(THETAS[kind], model.head_dim, model.max_len, torch.device("cuda"))
    qkv = _qkv(kernels, R * L, gen)
    ref = reference.rope_table(qkv, cos, sin, L, model.num_heads, model.head_dim)
    kernels.rope_table_bf16(qkv, cos, sin, L)
    torch.cuda.synchronize()
    differ = (qkv != ref).sum().item()
    assert differ == 0, f"{differ} of {qkv.numel()} elements differ from the reference's bf16 path"


@pytest.mark.parametrize("kind", THETAS)
@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_rope_fp32(kernels, gen, R, L, kind):
    model = kernels.manifest.model
    freq = inv_freq(THETAS[kind], model.head_dim).cuda()
    qkv = _qkv(kernels, R * L, gen)
    ref = reference.rope_exact(qkv, freq, L, model.num_heads, model.head_dim)
    v = qkv[:, 2 * model.num_heads * model.head_dim :].clone()
    kernels.rope_fp32_bf16(qkv, freq, L)
    torch.cuda.synchronize()
    assert torch.equal(qkv[:, 2 * model.num_heads * model.head_dim :], v), "v columns changed"
    err = reference.rel_error(qkv, ref)
    assert err < reference.REL_BF16, f"relative error {err:.2e}"
