"""What each bundle kernel must compute, in plain torch at fp32 or better: the tests' one definition.

Torch only (the GPU machine has no TileLang). Every function takes the kernel's own tensors
(bf16 inputs as the kernel sees them) and returns fp32, or bf16 where the reference itself rounds.
"""

import torch
import torch.nn.functional as F

# ||out - ref|| / ||ref|| allowed for a bf16 result of fp32 math: bf16 keeps 8 bits of mantissa, so
# one rounding of the output is ~2e-3 relative; products of bf16 operands, P rounded to bf16 before
# P @ V in attention, and the reduction order stay under 1e-2.
REL_BF16 = 1e-2
# fp32 results (the residual stream) differ from the reference only by summation order.
REL_F32 = 1e-5
# an fp32 LayerNorm output: summation order, and rsqrt's approximation under fast math (2 ulp).
REL_NORM_F32 = 1e-5


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def gemm(A, W, bias=None, act="none"):
    """act(A @ W^T + bias), fp32."""
    y = A.float() @ W.float().T
    if bias is not None:
        y = y + bias.float()
    if act == "relu":
        return torch.relu(y)
    if act == "gelu":
        return F.gelu(y)
    return y


def gemm_geglu(A, Wi):
    """gelu(A @ Wi[:F]^T) * (A @ Wi[F:]^T), GELU on the first half (erf form), fp32."""
    a, g = (A.float() @ Wi.float().T).chunk(2, dim=-1)
    return F.gelu(a) * g


def layer_norm(x, weight, bias, eps):
    return F.layer_norm(x.float(), (x.shape[-1],), weight.float(), None if bias is None else bias.float(), eps)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_table(qkv, cos, sin, L, heads, head_dim):
    """transformers' ModernBERT apply_rotary_pos_emb on bf16 q/k with the bf16-rounded tables: bf16 out."""
    M = qkv.shape[0]
    pos = torch.arange(M, device=qkv.device) % L
    c, s = cos[pos][:, None, :], sin[pos][:, None, :]  # [M, 1, Dh]
    out = qkv.clone()
    for part in (0, 1):  # q, k
        cols = slice(part * heads * head_dim, (part + 1) * heads * head_dim)
        x = qkv[:, cols].view(M, heads, head_dim)
        out[:, cols] = ((x.float() * c) + (rotate_half(x.float()) * s)).to(qkv.dtype).view(M, -1)
    return out


def rope_exact(qkv, inv_freq, L, heads, head_dim):
    """RoPE in float64 from the fp32 angles position * inv_freq (what the fused kernel approximates)."""
    M = qkv.shape[0]
    pos = (torch.arange(M, device=qkv.device) % L).float()
    angle = (pos[:, None] * inv_freq[None, :]).double()  # [M, Dh/2], the fp32 products
    angle = torch.cat((angle, angle), dim=-1)[:, None, :]
    out = qkv.double().clone()
    for part in (0, 1):
        cols = slice(part * heads * head_dim, (part + 1) * heads * head_dim)
        x = qkv[:, cols].view(M, heads, head_dim).double()
        out[:, cols] = (x * angle.cos() + rotate_half(x) * angle.sin()).view(M, -1)
    return out


def attention(qkv, lens, L, heads, head_dim, window):
    """Softmax attention per padded row: query i sees key j < lens[row] (and |i - j| <= window if > 0).

    Returns [M, heads * head_dim] fp32; rows of padding queries (i >= lens[row]) are not meaningful.
    """
    M = qkv.shape[0]
    R = M // L
    q, k, v = qkv.float().view(R, L, 3, heads, head_dim).permute(2, 0, 3, 1, 4)  # each [R, H, L, Dh]
    i = torch.arange(L, device=qkv.device)
    visible = i[None, None, :] < lens[:, None, None]  # [R, 1(query), L(key)]
    if window > 0:
        visible = visible & ((i[:, None] - i[None, :]).abs() <= window)[None]
    scores = (q @ k.transpose(-1, -2)) * head_dim**-0.5
    scores = scores.masked_fill(~visible[:, None], float("-inf"))
    p = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return (p @ v).permute(0, 2, 1, 3).reshape(M, heads * head_dim)


def readout_partials(X, At, NormW, NormB, W1, B1, W2, n_blocks, eps):
    """readout_scores_f32's P: P[n, b] = sum over block b's hidden columns j of
    gelu(LN(X[At[n]]) . W1[j] + B1[j]) * W2[j]."""
    hidden = F.gelu(layer_norm(X[At.long()], NormW, NormB, eps) @ W1.float().T + B1.float()) * W2.float()
    return hidden.view(len(At), n_blocks, -1).sum(-1)


def readout_act_units(X, L, R, A1):
    """readout_scores_f32's U: the act head's first linear on each of R rows' [CLS] (X[r * L]), without the
    features' last four columns of A1; [R, A1 rows]."""
    return X[::L][:R] @ A1[:, : X.shape[1]].T


def readout_heads(P, B2, Keep, Bias, LogK, KFeature, U, A1, AB1, A2, AB2, entropy_floor=1e-9):
    """readout_heads_f32: per row r of R = len(LogK), its K = len(Keep) / R option logits and the act head's
    softmax on [CLS] (its part U: readout_act_units) and four features of the options' softmax; [R, K + n_act]."""
    R = LogK.numel()
    logits = Bias.view(R, -1) + (P.sum(-1).view(R, -1) + B2) * Keep.view(R, -1)
    p = torch.softmax(logits, -1)
    entropy = -(p * torch.log(p.clamp_min(entropy_floor))).sum(-1) / LogK
    top2 = p.topk(2, -1).values if p.shape[-1] >= 2 else F.pad(p, (0, 1))
    features = torch.stack([top2[:, 0], top2[:, 0] - top2[:, 1], entropy, KFeature], -1)
    act = F.gelu(U + features @ A1[:, -4:].T + AB1) @ A2.T + AB2
    return torch.cat([logits, torch.softmax(act, -1)], -1)
