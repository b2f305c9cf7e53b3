"""Attention entry points (global and ±window sliding) with a padding mask, against fp32 torch (GPU)."""

import pytest
import torch

from kernels import reference
from kernels.shapes import SHAPES

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
def test_attention(kernels, entry, gen, poisoned, R, L, kind):
    name = f"attn_fwd_{kind}_bf16"
    entry(name)  # a sweep's candidate bundle without it: skipped
    model = kernels.manifest.model
    H, Dh = model.num_heads, model.head_dim
    window = model.window if kind == "local" else 0
    M = R * L
    qkv = torch.randn(M, 3 * H * Dh, device="cuda", generator=gen).to(torch.bfloat16)
    lens = _lens(R, L, gen)
    O = poisoned(M, H * Dh, dtype=torch.bfloat16)
    getattr(kernels, name)(qkv, lens, L, O)
    torch.cuda.synchronize()
    assert torch.isfinite(O).all(), "unwritten or non-finite outputs (padding queries included)"
    real = (torch.arange(L, device="cuda")[None, :] < lens[:, None]).reshape(M)
    ref = reference.attention(qkv, lens, L, H, Dh, window)
    err = reference.rel_error(O[real], ref[real])
    assert err < reference.REL_BF16, f"relative error {err:.2e}"
