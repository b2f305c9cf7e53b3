"""LayerNorm entry points (fused with the residual add, embedding gather, type embedding) (GPU)."""

import pytest
import torch

from kernels import reference
from kernels.shapes import SHAPES

pytestmark = pytest.mark.gpu

BF16 = torch.bfloat16
N_TYPES = 3


def _stream(M, D, gen):
    """A residual stream like the encoder's: large values with a per-row offset."""
    return torch.randn(M, D, device="cuda", generator=gen) * 30 + torch.randn(M, 1, device="cuda", generator=gen) * 100


def _params(D, gen):
    weight = 1 + 0.1 * torch.randn(D, device="cuda", generator=gen)
    bias = 0.1 * torch.randn(D, device="cuda", generator=gen)
    return weight, bias


def _check(Y, Y_ref, X=None, X_ref=None, rel_x=reference.REL_F32):
    torch.cuda.synchronize()
    assert torch.isfinite(Y).all(), "unwritten (NaN) outputs in Y"
    err = reference.rel_error(Y, Y_ref)
    assert err < reference.REL_BF16, f"Y relative error {err:.2e}"
    if X is not None:
        assert torch.isfinite(X).all(), "unwritten (NaN) outputs in X"
        err = reference.rel_error(X, X_ref)
        assert err < rel_x, f"X relative error {err:.2e}"


@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_embed_norm(kernels, gen, poisoned, R, L):
    model = kernels.manifest.model
    M, D, V = R * L, model.hidden_size, model.vocab_size
    ids = torch.randint(0, V, (M,), device="cuda", generator=gen, dtype=torch.int32)
    E = torch.randn(V, D, device="cuda", generator=gen)
    weight, _ = _params(D, gen)
    X, Y = poisoned(M, D, dtype=torch.float32), poisoned(M, D, dtype=BF16)
    kernels.embed_norm_bf16(ids, E, weight, X, Y)
    X_ref = reference.layer_norm(E[ids.long()], weight, None, model.norm_eps)
    _check(Y, X_ref, X, X_ref, rel_x=reference.REL_NORM_F32)


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_add_norm(kernels, gen, poisoned, R, L, bias):
    model = kernels.manifest.model
    M, D = R * L, model.hidden_size
    X = _stream(M, D, gen)
    branch = (torch.randn(M, D, device="cuda", generator=gen) * 10).to(BF16)
    weight, b = _params(D, gen)
    X_ref = X + branch.float()
    Y = poisoned(M, D, dtype=BF16)
    if bias:
        kernels.add_norm_bias_bf16(X, branch, weight, b, Y)
        Y_ref = reference.layer_norm(X_ref, weight, b, 1e-5)
    else:
        kernels.add_norm_bf16(X, branch, weight, Y)
        Y_ref = reference.layer_norm(X_ref, weight, None, model.norm_eps)
    _check(Y, Y_ref, X, X_ref)


@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_add_norm_in_place(kernels, gen, R, L):
    """The executor passes the branch output and Y as one buffer, as laya's fast path does."""
    M, D = R * L, kernels.manifest.model.hidden_size
    X = _stream(M, D, gen)
    Y = (torch.randn(M, D, device="cuda", generator=gen) * 10).to(BF16)
    weight, b = _params(D, gen)
    X_ref = X + Y.float()
    kernels.add_norm_bias_bf16(X, Y, weight, b, Y)
    _check(Y, reference.layer_norm(X_ref, weight, b, 1e-5), X, X_ref)


@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_norm_bias(kernels, gen, poisoned, R, L):
    M, D = R * L, kernels.manifest.model.hidden_size
    X = _stream(M, D, gen)
    weight, b = _params(D, gen)
    Y = poisoned(M, D, dtype=BF16)
    kernels.norm_bias_bf16(X, weight, b, Y)
    _check(Y, reference.layer_norm(X, weight, b, 1e-5))


@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_type_add_norm_bias(kernels, gen, poisoned, R, L):
    M, D = R * L, kernels.manifest.model.hidden_size
    qtype = torch.randint(0, N_TYPES, (R,), device="cuda", generator=gen, dtype=torch.int32)
    type_emb = torch.randn(N_TYPES, D, device="cuda", generator=gen)
    weight, b = _params(D, gen)
    Y = (torch.randn(M, D, device="cuda", generator=gen) * 3).to(BF16)
    X_ref = Y.float() + type_emb[qtype.long().repeat_interleave(L)]
    X = poisoned(M, D, dtype=torch.float32)
    kernels.type_add_norm_bias_bf16(qtype, L, type_emb, weight, b, X, Y)
    _check(Y, reference.layer_norm(X_ref, weight, b, 1e-5), X, X_ref)


@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_residual_add(kernels, gen, R, L):
    M, D = R * L, kernels.manifest.model.hidden_size
    X = _stream(M, D, gen)
    branch = (torch.randn(M, D, device="cuda", generator=gen) * 10).to(BF16)
    X_ref = X + branch.float()
    kernels.residual_add_f32(X, branch)
    torch.cuda.synchronize()
    assert reference.rel_error(X, X_ref) < reference.REL_F32


@pytest.mark.parametrize("slices", [1, 7, 8])
@pytest.mark.parametrize(("R", "L"), SHAPES)
def test_split_add_norm(kernels, gen, poisoned, R, L, slices):
    """A split-K GEMM's fp32 slices summed into the stream, then its LayerNorm; the same bits every run."""
    M, D = R * L, kernels.manifest.model.hidden_size
    X = _stream(M, D, gen)
    P = torch.randn(slices, M, D, device="cuda", generator=gen) * 3
    weight, b = _params(D, gen)
    X_ref = X + P.double().sum(0).float()
    X_again, Y, Y_again = X.clone(), poisoned(M, D, dtype=BF16), poisoned(M, D, dtype=BF16)
    kernels.split_add_norm_bias_bf16(X, P, weight, b, Y)
    kernels.split_add_norm_bias_bf16(X_again, P, weight, b, Y_again)
    _check(Y, reference.layer_norm(X_ref, weight, b, 1e-5), X, X_ref)
    assert torch.equal(X, X_again) and torch.equal(Y, Y_again), "a second run wrote other values"
