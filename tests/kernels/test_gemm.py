"""GEMM entry points of the bundle against fp32 torch, at every executor shape (GPU)."""

import pytest
import torch

from kernels import reference
from kernels.shapes import SHAPES
from worker.engine.executors.gemm_routes import ACCUMULATING

pytestmark = pytest.mark.gpu

GEMMS = (
    "gemm_qkv_bf16",
    "gemm_attn_out_bf16",
    "gemm_mlp_out_bf16",
    "gemm_head_qkv_bias_bf16",
    "gemm_head_out_bias_bf16",
    "gemm_head_ffn1_bias_relu_bf16",
    "gemm_head_ffn2_bias_bf16",
)


def _weights(shape, gen):
    n, k = shape
    return (torch.randn(n, k, device="cuda", generator=gen) / k**0.5).to(torch.bfloat16)


@pytest.mark.parametrize(("R", "L"), SHAPES)
@pytest.mark.parametrize("name", GEMMS)
def test_gemm(kernels, entry, gen, poisoned, name, R, L):
    shapes = {a.name: a.shape for a in entry(name).args}
    M, (N, K) = R * L, shapes["W"]
    A = torch.randn(M, K, device="cuda", generator=gen).to(torch.bfloat16)
    W = _weights((N, K), gen)
    C = poisoned(M, N, dtype=torch.bfloat16)
    act = "relu" if "relu" in name else "none"
    if "Bias" in shapes:
        bias = torch.randn(N, device="cuda", generator=gen) * 0.5
        getattr(kernels, name)(A, W, bias, C)
    else:
        bias = None
        getattr(kernels, name)(A, W, C)
    torch.cuda.synchronize()
    assert torch.isfinite(C).all(), "unwritten (NaN) outputs"
    err = reference.rel_error(C, reference.gemm(A, W, bias, act))
    assert err < reference.REL_BF16, f"relative error {err:.2e}"


@pytest.mark.parametrize(("R", "L"), SHAPES)
@pytest.mark.parametrize("name", ACCUMULATING)
def test_gemm_accumulates_into_the_stream(kernels, entry, gen, name, R, L):
    shapes = {a.name: a.shape for a in entry(name).args}
    M, (N, K) = R * L, shapes["W"]
    A = torch.randn(M, K, device="cuda", generator=gen).to(torch.bfloat16)
    W = _weights((N, K), gen)
    X = torch.randn(M, N, device="cuda", generator=gen) * 30  # the residual stream: large fp32 values
    before = X.clone()
    bias = torch.randn(N, device="cuda", generator=gen) * 0.5 if "Bias" in shapes else None
    getattr(kernels, name)(A, W, *(() if bias is None else (bias,)), X)
    torch.cuda.synchronize()
    # what was added, against fp32 products of the bf16 operands (no bf16 rounding): the stream's own rounding
    # (an ulp of 30 is 2e-6) and the summation order
    err = reference.rel_error(X - before, reference.gemm(A, W, bias))
    assert err < 1e-4, f"relative error {err:.2e}"


@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_gemm_geglu(kernels, entry, gen, poisoned, R, L):
    two_f, K = entry("gemm_geglu_bf16").args[1].shape
    M = R * L
    A = torch.randn(M, K, device="cuda", generator=gen).to(torch.bfloat16)
    Wi = _weights((two_f, K), gen)
    C = poisoned(M, two_f // 2, dtype=torch.bfloat16)
    kernels.gemm_geglu_bf16(A, Wi, C)
    torch.cuda.synchronize()
    assert torch.isfinite(C).all(), "unwritten (NaN) outputs"
    err = reference.rel_error(C, reference.gemm_geglu(A, Wi))
    assert err < reference.REL_BF16, f"relative error {err:.2e}"


SPLITS = ("gemm_attn_out_split_f32", "gemm_mlp_out_split_f32")


@pytest.mark.parametrize(("R", "L"), SHAPES)
@pytest.mark.parametrize("name", SPLITS)
def test_split_k_slices_add_up_to_the_product_the_same_every_run(kernels, gen, poisoned, name, R, L):
    if name not in kernels.manifest.entries:
        pytest.skip(f"bundle {kernels.bundle.name} has no split-K GEMMs")
    entry = kernels.manifest.entries[name]
    M = R * L
    if not entry.admits(M):
        pytest.skip(f"{name} admits M <= {entry.tiers[-1].max_m}")
    shapes = {a.name: a.shape for a in entry.args}
    (N, K), slices = shapes["W"], shapes["P"][0]
    A = torch.randn(M, K, device="cuda", generator=gen).to(torch.bfloat16)
    W = _weights((N, K), gen)
    P = poisoned(slices, M, N, dtype=torch.float32)
    getattr(kernels, name)(A, W, P)
    again = poisoned(slices, M, N, dtype=torch.float32)
    getattr(kernels, name)(A, W, again)
    torch.cuda.synchronize()
    assert torch.isfinite(P).all(), "unwritten (NaN) slices"
    # fp32 products of the bf16 operands, no bf16 rounding: the summation order only
    err = reference.rel_error(P.sum(0), reference.gemm(A, W))
    assert err < 1e-5, f"relative error {err:.2e}"
    assert torch.equal(P, again), "a second run wrote other slices"
