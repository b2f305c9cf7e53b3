"""Bidirectional attention over rows padded to L tokens, with a padding mask and an optional window.

QKV is the packed projection ([M, 3 * H * Dh] bf16, q | k | v, heads major; M = R * L); Lens[R]
holds each row's real length. Query i of a row sees key j of the same row when j < Lens[row] and,
for a window w > 0, |i - j| <= w. Every query of every row is written, padding queries included,
so that no later kernel reads an unwritten value. O is [M, H * Dh] bf16.

Scores that are masked start at a large finite negative, not -inf, so that a row with no real key
(Lens = 0) still produces finite output.
"""

import tilelang.language as T

from kernels.common import (
    FAST_MATH,
    accum_dtype,
    dtype,
    let_next_kernel_start,
    share_sm,
    wait_for_previous_kernel,
)

PASS_CONFIGS = FAST_MATH

LOG2E = 1.4426950408889634
MASKED = -1e9

# entry name -> window, given the model's window (local_attention // 2)
SHAPES = {
    "attn_fwd_global_bf16": lambda window: dict(window=0),
    "attn_fwd_local_bf16": lambda window: dict(window=window),
}

# Tiers by M (docs/kernels.md, "Attention blocks sharing an SM"). 64-query tiles one block an SM up to M = 512,
# where the grid is about a wave and sharing an SM has nothing to overlap; 128-query tiles with two warpgroups,
# two blocks an SM, so that one's softmax runs beside the other's wgmmas; 64-query tiles three an SM where the grid
# is a few waves (M = 1025-2560).
SMALL_TILES = dict(block_M=64, block_N=64, num_stages=2, threads=128)
LARGE_TILES = dict(block_M=128, block_N=64, num_stages=2, threads=256, blocks_per_sm=2)
THREE_AN_SM = {
    "attn_fwd_global_bf16": dict(block_M=64, block_N=64, num_stages=3, threads=128, blocks_per_sm=3),
    "attn_fwd_local_bf16": dict(block_M=64, block_N=64, num_stages=2, threads=128, blocks_per_sm=3),
}

# A list of tiers per entry, as for the GEMMs: the loader picks one by M = R * L.
TILE_CONFIGS = {
    "original": {name: [dict(max_m=None, block_M=64, block_N=64, num_stages=1, threads=128)] for name in SHAPES},
    "optimized": {
        name: [
            dict(max_m=512, **SMALL_TILES),
            dict(max_m=1024, **LARGE_TILES),
            dict(max_m=2560, **THREE_AN_SM[name]),
            dict(max_m=None, **LARGE_TILES),
        ]
        for name in SHAPES
    },
}


def attention_fwd(H, Dh, *, window, block_M=64, block_N=64, num_stages=1, threads=128, blocks_per_sm=1):
    """One (query tile, head, row) per block; online softmax over the key tiles the mask allows.

    blocks_per_sm = 2 or 3: blocks share an SM (kernels.common.share_sm), one's softmax beside another's wgmmas.
    """
    if blocks_per_sm not in (1, 2, 3):
        raise ValueError(f"blocks_per_sm must be 1, 2 or 3, not {blocks_per_sm}")
    M = T.dynamic("M")
    R = T.dynamic("R")
    width = 3 * H * Dh
    scale = Dh**-0.5 * LOG2E  # softmax in base 2

    @T.prim_func
    def main(
        QKV: T.Tensor((M, width), dtype),
        Lens: T.Tensor((R,), "int32"),
        L: T.int32,
        O: T.Tensor((M, H * Dh), dtype),
    ):
        with T.Kernel(T.ceildiv(L, block_M), H, R, threads=threads) as (bx, by, bz):
            if blocks_per_sm > 1:
                share_sm(threads, blocks_per_sm)
            wait_for_previous_kernel()
            # bx: tile of queries within the row, by: head, bz: row
            Q_shared = T.alloc_shared((block_M, Dh), dtype)
            K_shared = T.alloc_shared((block_N, Dh), dtype)
            V_shared = T.alloc_shared((block_N, Dh), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum_dtype)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, Dh), accum_dtype)
            scores_max = T.alloc_fragment((block_M,), accum_dtype)
            scores_max_prev = T.alloc_fragment((block_M,), accum_dtype)
            scores_scale = T.alloc_fragment((block_M,), accum_dtype)
            scores_sum = T.alloc_fragment((block_M,), accum_dtype)
            logsum = T.alloc_fragment((block_M,), accum_dtype)

            row0 = bz * L  # first token of this row in the packed buffer
            n = Lens[bz]
            T.copy(QKV[row0 + bx * block_M, by * Dh], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, MASKED)
            # key tiles that can hold a visible key; at least one, so that padding queries with no
            # visible key still see one fully masked tile and stay finite
            if window > 0:
                k_lo = T.max(0, bx * block_M - window) // block_N
                k_hi = T.max(k_lo + 1, T.ceildiv(T.min(n, (bx + 1) * block_M + window), block_N))
            else:
                k_lo = 0
                k_hi = T.max(1, T.ceildiv(n, block_N))

            for k in T.Pipelined(k_lo, k_hi, num_stages=num_stages):
                T.copy(QKV[row0 + k * block_N, (H + by) * Dh], K_shared)
                for i, j in T.Parallel(block_M, block_N):
                    q_pos = bx * block_M + i
                    k_pos = k * block_N + j
                    if window > 0:
                        visible = (k_pos < n) & (q_pos - k_pos <= window) & (k_pos - q_pos <= window)
                    else:
                        visible = k_pos < n
                    acc_s[i, j] = T.if_then_else(visible, 0, MASKED)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(QKV[row0 + k * block_N, (2 * H + by) * Dh], V_shared)
                # online softmax
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, Dh):
                    acc_o[i, j] = acc_o[i, j] * scores_scale[i]
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

            let_next_kernel_start()
            # queries past the row's L tokens belong to the next row: never store them
            for i, j in T.Parallel(block_M, Dh):
                if bx * block_M + i < L:
                    O[row0 + bx * block_M + i, by * Dh + j] = T.cast(acc_o[i, j] / logsum[i], dtype)

    return main


def build(name: str, H: int, Dh: int, *, window: int, tier: dict):
    """The prim_func of entry `name` with one tile tier."""
    tiles = {k: v for k, v in tier.items() if k != "max_m"}
    return attention_fwd(H, Dh, **SHAPES[name](window), **tiles)
