"""The readout after the encoder and decision head, in fp32: two launches where torch needs about twenty.

  readout_scores_f32  two kinds of block in one grid, each a few dot products over the hidden size:
                      for every option marker n (row At[n] of the stream X): LayerNorm, the scorer's
                      first linear and GELU, and its second linear as partial sums, one per block of
                      hidden columns: P[n, b] = sum over j in block b of gelu(x_n . W1[j] + b1[j]) * w2[j];
                      and for every request row r, the act head's first linear on its [CLS] row:
                      U[r, o] = A1[o, :D] . X[r * L]
  readout_heads_f32   one block per request row: the option logits (P summed over blocks in a fixed
                      order, + b2; MASKED_LOGIT past the row's options), their softmax's features and the
                      act head (U, plus those features' columns of A1); Out[r] = logits | softmax(act logits)

The arithmetic is `worker/engine/executors/reference.py`'s `score_markers` and `act_logits`; sums run in a
fixed order, so a pass's answers repeat bit for bit. Exact math: exp, log and erf reach the answers.
It runs after the CUDA graph, outside capture, as the spec has it for the scorer and the act head.
"""

import tilelang.language as T

from kernels.common import EXACT_MATH, accum_dtype, activate, after_previous_kernel, row_statistics

PASS_CONFIGS = EXACT_MATH

SHAPES = {"readout_scores_f32": dict(stage="scores"), "readout_heads_f32": dict(stage="heads")}

# scores: 4 markers (or 4 [CLS] rows) by 8 hidden columns (or D / 8 of the act head's units) a block, so one short
# row's markers already make D / 8 blocks; heads: one block per request row, 4 option logits and 8 act logits a trip
SCORE_TILES = dict(block_N=4, block_J=8, threads=128)
HEAD_TILES = dict(block_K=4, block_O=8, threads=256)
TILE_CONFIGS = {
    config: {"readout_scores_f32": SCORE_TILES, "readout_heads_f32": HEAD_TILES} for config in ("original", "optimized")
}

ACT_HIDDEN = 256  # the act head's hidden width (reference.readout_modules)
SCORER_EPS = 1e-5  # the scorer's LayerNorm: torch's default eps, not the encoder's
ENTROPY_FLOOR = 1e-9  # p is clamped to this inside the entropy's log, as the reference does


@T.macro
def softmax_statistics(values, n, stat):
    """stat[0] = the largest of values[:n], stat[1] = the sum of exp(values[k] - stat[0]); in every thread."""
    stat[0] = -T.infinity(accum_dtype)
    for k in T.serial(n):
        stat[0] = T.max(stat[0], values[k])
    stat[1] = 0.0
    for k in T.serial(n):
        stat[1] = stat[1] + T.exp(values[k] - stat[0])


def scores(D, *, eps, block_N, block_J, threads):
    M, N, R = T.dynamic("M"), T.dynamic("N"), T.dynamic("R")
    H = ACT_HIDDEN
    n_blocks = D // block_J
    block_U = -(-H // n_blocks)  # the act head's units a block

    @T.prim_func
    def main(
        X: T.Tensor((M, D), accum_dtype),
        At: T.Tensor((N,), "int32"),
        NormW: T.Tensor((D,), accum_dtype),
        NormB: T.Tensor((D,), accum_dtype),
        W1: T.Tensor((D, D), accum_dtype),
        B1: T.Tensor((D,), accum_dtype),
        W2: T.Tensor((D,), accum_dtype),
        P: T.Tensor((N, n_blocks), accum_dtype),
        L: T.int32,
        A1: T.Tensor((H, D + 4), accum_dtype),
        U: T.Tensor((R, H), accum_dtype),
    ):
        marker_blocks = T.ceildiv(N, block_N)
        # bx: a block of columns (of W1, or of A1's units); by: markers, then [CLS] rows past marker_blocks
        with T.Kernel(n_blocks, marker_blocks + T.ceildiv(R, block_N), threads=threads) as (bx, by):
            after_previous_kernel()
            x = T.alloc_fragment((block_N, D), accum_dtype)
            centered = T.alloc_fragment((block_N, D), accum_dtype)
            mean = T.alloc_fragment((block_N,), accum_dtype)
            rstd = T.alloc_fragment((block_N,), accum_dtype)
            column = T.alloc_fragment((block_N,), accum_dtype)
            partial = T.alloc_fragment((block_N,), accum_dtype)
            if by < marker_blocks:
                for i, k in T.Parallel(block_N, D):
                    x[i, k] = X[At[T.min(by * block_N + i, N - 1)], k]
                row_statistics(x, mean, rstd, centered, eps)
                for i in T.Parallel(block_N):
                    partial[i] = 0.0
                for i, k in T.Parallel(block_N, D):
                    x[i, k] = (x[i, k] - mean[i]) * rstd[i] * NormW[k] + NormB[k]
                for jj in T.serial(block_J):
                    j = bx * block_J + jj
                    for i, k in T.Parallel(block_N, D):
                        centered[i, k] = x[i, k] * W1[j, k]
                    T.reduce_sum(centered, column, dim=1)
                    for i in T.Parallel(block_N):
                        partial[i] = partial[i] + activate(column[i] + B1[j], "gelu") * W2[j]
                for i in T.Parallel(block_N):
                    if by * block_N + i < N:
                        P[by * block_N + i, bx] = partial[i]
            else:  # the act head's first linear on [CLS]; its four feature columns wait for the option logits
                rows = (by - marker_blocks) * block_N
                for i, k in T.Parallel(block_N, D):
                    x[i, k] = X[T.min(rows + i, R - 1) * L, k]
                for uu in T.serial(block_U):
                    o = T.min(bx * block_U + uu, H - 1)
                    for i, k in T.Parallel(block_N, D):
                        centered[i, k] = x[i, k] * A1[o, k]
                    T.reduce_sum(centered, column, dim=1)
                    for i in T.Parallel(block_N):
                        if rows + i < R and bx * block_U + uu < H:
                            U[rows + i, o] = column[i]

    return main


def heads(D, *, n_blocks, max_len, block_K, block_O, threads):
    N, R, C, A = T.dynamic("N"), T.dynamic("R"), T.dynamic("C"), T.dynamic("A")
    H = ACT_HIDDEN

    @T.prim_func
    def main(
        P: T.Tensor((N, n_blocks), accum_dtype),
        B2: T.Tensor((1,), accum_dtype),
        Keep: T.Tensor((N,), accum_dtype),
        Bias: T.Tensor((N,), accum_dtype),
        LogK: T.Tensor((R,), accum_dtype),
        KFeature: T.Tensor((R,), accum_dtype),
        U: T.Tensor((R, H), accum_dtype),
        A1: T.Tensor((H, D + 4), accum_dtype),
        AB1: T.Tensor((H,), accum_dtype),
        A2: T.Tensor((A, H), accum_dtype),
        AB2: T.Tensor((A,), accum_dtype),
        Out: T.Tensor((R, C), accum_dtype),
    ):
        with T.Kernel(R, threads=threads) as r:
            after_previous_kernel()
            K = C - A  # option slots per row; N = R * K
            logits = T.alloc_shared((max_len,), accum_dtype)  # a row's option logits, then its act logits
            hidden = T.alloc_shared((H,), accum_dtype)
            parts = T.alloc_fragment((block_K, n_blocks), accum_dtype)
            sums = T.alloc_fragment((block_K,), accum_dtype)
            acts = T.alloc_fragment((block_O, H), accum_dtype)
            act_units = T.alloc_fragment((block_O,), accum_dtype)
            stat = T.alloc_local((6,), accum_dtype)  # max, sum of exp, entropy, top1, top2, p

            # the option logits: the scorer's partial sums over column blocks, in block order
            for kc in T.serial(T.ceildiv(K, block_K)):
                for i, b in T.Parallel(block_K, n_blocks):
                    parts[i, b] = P[r * K + T.min(kc * block_K + i, K - 1), b]
                T.reduce_sum(parts, sums, dim=1)
                for i in T.Parallel(block_K):
                    k = kc * block_K + i
                    if k < K:
                        logits[k] = Bias[r * K + k] + (sums[i] + B2[0]) * Keep[r * K + k]
                        Out[r, k] = Bias[r * K + k] + (sums[i] + B2[0]) * Keep[r * K + k]

            # their softmax's features: top probability, its lead over the runner-up, normalized entropy
            softmax_statistics(logits, K, stat)
            stat[2] = 0.0
            stat[3] = -1.0
            stat[4] = -1.0
            for k in T.serial(K):
                stat[5] = T.exp(logits[k] - stat[0]) / stat[1]
                stat[2] = stat[2] - stat[5] * T.log(T.max(stat[5], ENTROPY_FLOOR))
                if stat[5] > stat[3]:
                    stat[4] = stat[3]
                    stat[3] = stat[5]
                elif stat[5] > stat[4]:
                    stat[4] = stat[5]
            stat[4] = T.max(stat[4], 0.0)  # one option: the runner-up is 0
            stat[2] = stat[2] / LogK[r]

            # the act head: gelu(A1 . [CLS | top1, top1 - top2, entropy, k / 255] + b1), its [CLS] part U, then A2
            for o in T.Parallel(H):
                hidden[o] = activate(
                    U[r, o]
                    + A1[o, D] * stat[3]
                    + A1[o, D + 1] * (stat[3] - stat[4])
                    + A1[o, D + 2] * stat[2]
                    + A1[o, D + 3] * KFeature[r]
                    + AB1[o],
                    "gelu",
                )
            T.sync_threads()  # every thread has read the option logits: the act logits take their place
            for ac in T.serial(T.ceildiv(A, block_O)):
                for i, o in T.Parallel(block_O, H):
                    acts[i, o] = A2[T.min(ac * block_O + i, A - 1), o] * hidden[o]
                T.reduce_sum(acts, act_units, dim=1)
                for i in T.Parallel(block_O):
                    if ac * block_O + i < A:
                        logits[ac * block_O + i] = act_units[i] + AB2[ac * block_O + i]

            # the act head's softmax
            softmax_statistics(logits, C - K, stat)  # A acts; passed bare, A would take the parameter's name
            for ac in T.serial(T.ceildiv(A, block_O)):
                for i in T.Parallel(block_O):
                    if ac * block_O + i < A:
                        Out[r, K + ac * block_O + i] = T.exp(logits[ac * block_O + i] - stat[0]) / stat[1]

    return main


def build(name: str, D: int, *, max_len: int, tiles: dict, score_tiles: dict):
    """The prim_func of entry `name` for hidden size D and rows of up to max_len tokens; `score_tiles`:
    readout_scores_f32's tiles, whose column blocks readout_heads_f32 sums."""
    if SHAPES[name]["stage"] == "scores":
        return scores(D, eps=SCORER_EPS, **tiles)
    return heads(D, n_blocks=D // score_tiles["block_J"], max_len=max_len, **tiles)
