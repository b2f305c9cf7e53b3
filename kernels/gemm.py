"""GEMMs of the forward pass: C[M, N] = act(A[M, K] @ W[N, K]^T (+ bias)), and the fused GeGLU up-projection.

M (tokens) is dynamic; N and K are fixed by the model. A tile configuration is a list of tiers, each
admitting M up to `max_m` (None: any M): small M uses narrow N tiles so that every SM gets a tile,
large M uses wide wgmma tiles with a deep TMA pipeline.
"""

import tilelang.language as T

from kernels.common import (
    ACTIVATIONS,
    FAST_MATH,
    MAX_SLICES,
    accum_dtype,
    activate,
    dtype,
    let_next_kernel_start,
    wait_for_previous_kernel,
)

PASS_CONFIGS = FAST_MATH
WARP_POLICIES = {"square": T.GemmWarpPolicy.Square, "rows": T.GemmWarpPolicy.FullRow}

# entry name -> what it computes, in terms of the model's hidden size D, MLP width F (ModernBERT) and
# the decision head's FFN width 4D: (N, K, bias, act, accumulate) or ("geglu", F, K). The *_acc_f32 entries add
# into the fp32 residual stream (the executor runs them on cuBLAS but where gemm_routes says ours is faster).
SHAPES = {
    "gemm_qkv_bf16": lambda D, F: dict(N=3 * D, K=D),
    "gemm_attn_out_bf16": lambda D, F: dict(N=D, K=D),
    "gemm_geglu_bf16": lambda D, F: dict(N=F, K=D, geglu=True),
    "gemm_mlp_out_bf16": lambda D, F: dict(N=D, K=F),
    "gemm_head_qkv_bias_bf16": lambda D, F: dict(N=3 * D, K=D, bias=True),
    "gemm_head_out_bias_bf16": lambda D, F: dict(N=D, K=D, bias=True),
    "gemm_head_ffn1_bias_relu_bf16": lambda D, F: dict(N=4 * D, K=D, bias=True, act="relu"),
    "gemm_head_ffn2_bias_bf16": lambda D, F: dict(N=D, K=4 * D, bias=True),
    "gemm_attn_out_acc_f32": lambda D, F: dict(N=D, K=D, accumulate=True),
    "gemm_mlp_out_acc_f32": lambda D, F: dict(N=D, K=F, accumulate=True),
    "gemm_head_out_bias_acc_f32": lambda D, F: dict(N=D, K=D, bias=True, accumulate=True),
    "gemm_head_ffn2_bias_acc_f32": lambda D, F: dict(N=D, K=4 * D, bias=True, accumulate=True),
    # split-K partial products for small M (fp32, one slab per slice of K), summed into the stream by norm.py's
    # split_add_norm_bias_bf16: the encoder's two GEMMs whose output joins the stream
    "gemm_attn_out_split_f32": lambda D, F: dict(N=D, K=D, split=True),
    "gemm_mlp_out_split_f32": lambda D, F: dict(N=D, K=F, split=True),
}

_ORIGINAL_GEMM = dict(max_m=None, block_M=64, block_N=128, block_K=64, num_stages=3, threads=128)
_ORIGINAL_GEGLU = dict(max_m=None, block_M=64, block_N=64, block_K=64, num_stages=3, threads=128)

# H200 has 132 SMs. Three tiers (first timed on the H200: docs/records/kernel-timings-h200-2026-12-02.csv):
# - M <= 128 (one-question inputs, weight-read bound): a 64-row tile, N tiles narrow enough for about one
#   tile per SM, and 128-deep K steps so that each SM keeps more weight bytes in flight;
# - M <= 1024: 64 x 64/128 tiles, still enough tiles to fill the SMs;
# - larger M: 128 x 256, 4-stage pipeline, two consumer warpgroups.
_SMALL = dict(max_m=128, block_M=64, block_K=128, num_stages=4, threads=128)
_MID = dict(max_m=1024, block_M=64, block_K=64, num_stages=4, threads=128)
_LARGE = dict(max_m=None, block_M=128, block_N=256, block_K=64, num_stages=4, threads=256)
# The accumulating entries' M <= 128 tier fetches each block's weight slice before waiting for the previous kernel
# (`prefetch`; not yet timed on the H200: docs/kernels.md, "Weights fetched before the wait").
_SMALL_PREFETCH = dict(_SMALL, num_stages=3, prefetch=True)
# GeGLU: both halves' weight slices in one shared tile and one accumulator ("joint"), each warpgroup taking whole
# rows, so that a K step is one wgmma as wide as both halves; the output tile staged in shared memory for TMA.
# 128 x 64 tiles up to M = 384, where ceil(M / 128) x 41 tiles still fit the 132 SMs in one wave. The fastest of
# the H200 tile sweeps: docs/records/wide-wgmma-sweep-h200-2026-12-04.csv, geglu-boundary-h200-2026-12-04.csv.
# Above M = 1024, 256 x 64 tiles: 41 column tiles cover F = 2624 exactly (128-wide ones leave the 21st half empty),
# and at M = 8192 1,312 tiles fill 9.94 waves of 132 SMs where 1,344 took 11 (H100: 143.0 against 164.5 us,
# docs/records/geglu-waves-h100-2026-12-06.json).
_JOINT = dict(block_K=64, store="shared", joint=True)
_GEGLU = [
    dict(_JOINT, max_m=128, block_M=64, block_N=64, num_stages=4, threads=128, swizzle=10),
    dict(_JOINT, max_m=384, block_M=128, block_N=64, num_stages=4, threads=256, swizzle=10, warps="rows"),
    dict(_JOINT, max_m=1024, block_M=128, block_N=128, num_stages=3, threads=256, warps="rows"),
    dict(_JOINT, max_m=None, block_M=256, block_N=64, num_stages=3, threads=256, warps="rows"),
]

# Split-K at small M: 64 weight rows a block (the wgmma's M side), the tokens as its N side (block_T >= M: the
# tiers end at 128 rows), K cut into up to 8 slices, so that a 1024-wide layer is 16 x 8 = 128 blocks, each
# fetching its 64 x K/8 weight slice before the wait for the previous kernel.
_SPLIT = [dict(max_m=64, block_T=64), dict(max_m=128, block_T=128)]
_SPLIT_TILES = {
    "gemm_attn_out_split_f32": [dict(t, block_W=64, block_K=64, splits=8) for t in _SPLIT],
    "gemm_mlp_out_split_f32": [dict(t, block_W=64, block_K=64, splits=8) for t in _SPLIT],  # 41 steps: 7 x 6
}

TILE_CONFIGS = {
    "original": {
        name: [_ORIGINAL_GEGLU if "geglu" in name else _ORIGINAL_GEMM] for name in SHAPES if "split" not in name
    },
    "optimized": {  # small-M tile counts: N / block_N
        "gemm_qkv_bf16": [dict(_SMALL, block_N=24), dict(_MID, block_N=128), _LARGE],  # 128
        "gemm_attn_out_bf16": [dict(_SMALL, block_N=8), dict(_MID, block_N=64), _LARGE],  # 128
        "gemm_geglu_bf16": _GEGLU,
        "gemm_mlp_out_bf16": [dict(_SMALL, block_N=8), dict(_MID, block_N=64), _LARGE],  # 128
        "gemm_head_qkv_bias_bf16": [dict(_SMALL, block_N=24), dict(_MID, block_N=128), _LARGE],  # 128
        "gemm_head_out_bias_bf16": [dict(_SMALL, block_N=8), dict(_MID, block_N=64), _LARGE],  # 128
        "gemm_head_ffn1_bias_relu_bf16": [dict(_SMALL, block_N=32), dict(_MID, block_N=128), _LARGE],  # 128
        "gemm_head_ffn2_bias_bf16": [dict(_SMALL, block_N=8), dict(_MID, block_N=64), _LARGE],  # 128
        **{
            name: [dict(_SMALL_PREFETCH, block_N=8), dict(_MID, block_N=64), _LARGE]  # 128
            for name in SHAPES
            if name.endswith("_acc_f32")
        },
        **_SPLIT_TILES,
    },
}


def gemm(
    N,
    K,
    *,
    bias=False,
    act="none",
    block_M=64,
    block_N=128,
    block_K=64,
    num_stages=3,
    threads=128,
    warps="square",
    prefetch=False,
    accumulate=False,
):
    """C[M, N] = act(A[M, K] @ W[N, K]^T (+ Bias[N])); the Bias argument exists only when `bias`.

    `accumulate`: C is the fp32 residual stream and the product is added into it, C += A @ W^T (+ Bias), with no
    bf16 rounding of the layer's output (what cuBLAS does for the executor with an fp32 output and beta = 1).
    `warps`, `prefetch`: as gemm_geglu's."""
    assert act in ACTIVATIONS, act
    assert act == "none" or not accumulate, "an activation applies to a layer's output, not to the stream"
    policy = WARP_POLICIES[warps]
    M = T.dynamic("M")
    k_steps = -(-K // block_K)

    @T.macro
    def tile(A, W, Bias, C):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            # bx: tile of output columns, by: tile of rows
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            if prefetch:  # K padded to whole steps: the copy past K reads zeros (TMA fills outside the tensor)
                W_slice = T.alloc_shared((block_N, k_steps * block_K), dtype)
                T.copy(W[bx * block_N, 0], W_slice)  # no kernel writes weights: fetched before the wait
            else:
                W_shared = T.alloc_shared((block_N, block_K), dtype)
            wait_for_previous_kernel()
            T.clear(C_local)
            for k in T.Pipelined(k_steps, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                if prefetch:
                    T.gemm(
                        A_shared, W_slice[:, k * block_K : (k + 1) * block_K], C_local, transpose_B=True, policy=policy
                    )
                else:
                    T.copy(W[bx * block_N, k * block_K], W_shared)
                    T.gemm(A_shared, W_shared, C_local, transpose_B=True, policy=policy)
            let_next_kernel_start()
            if bias or act != "none":
                for i, j in T.Parallel(block_M, block_N):
                    v = C_local[i, j] + Bias[bx * block_N + j] if bias else C_local[i, j]
                    C_local[i, j] = activate(v, act)
            if accumulate:
                for i, j in T.Parallel(block_M, block_N):
                    if by * block_M + i < M:
                        C[by * block_M + i, bx * block_N + j] = C[by * block_M + i, bx * block_N + j] + C_local[i, j]
            else:
                T.copy(C_local, C[by * block_M, bx * block_N])

    return _entry(tile, M, N, K, bias=bias, out_dtype=accum_dtype if accumulate else dtype)


def _entry(tile, M, N, K, *, bias: bool, out_dtype: str):
    """A GEMM entry's prim_func, C[M, N] from A[M, K] and W[N, K] (and Bias[N] when `bias`), around `tile`."""
    if bias:

        @T.prim_func
        def main(
            A: T.Tensor((M, K), dtype),
            W: T.Tensor((N, K), dtype),
            Bias: T.Tensor((N,), accum_dtype),
            C: T.Tensor((M, N), out_dtype),
        ):
            tile(A, W, Bias, C)

    else:

        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K), dtype), C: T.Tensor((M, N), out_dtype)):
            tile(A, W, None, C)

    return main


def gemm_geglu(
    F,
    K,
    *,
    block_M=64,
    block_N=64,
    block_K=64,
    num_stages=3,
    threads=128,
    store="fragment",
    swizzle=0,
    warps="square",
    joint=False,
    prefetch=False,
):
    """ModernBERT's GLU up-projection: C[M, F] = gelu(A @ Wi[:F]^T) * (A @ Wi[F:]^T), GELU on the first half.

    `store`: "fragment" writes each thread's accumulator elements straight to C; "shared" stages the bf16
    tile in shared memory first, so that C is written in whole rows. `swizzle`: a panel size for TileLang's
    block rasterization (tiles that share operands run close in time), 0 for the launch order.
    `warps`: how the warpgroups split the tile, "square" (TileLang's default) or "rows" (each warpgroup takes
    whole rows, so its wgmma spans every column of the tile). `joint`: the two halves' weight slices share one
    shared-memory tile and one accumulator [block_M, 2 * block_N], so that each K step is one GEMM (one wgmma as
    wide as both halves, one wait) instead of two GEMMs that each wait for their own.
    `prefetch` (with `joint`; for small M, where a pass streams weights): the block's whole weight slice [2 *
    block_N, K] is fetched into shared memory before the wait for the previous kernel, which no weight depends
    on, so the fetch overlaps that kernel's tail; only A is pipelined.
    """
    assert store in ("fragment", "shared"), store
    assert joint or not prefetch, "prefetch keeps the joint weight tile"
    # the rasterization renumbers the blocks after the prefetch has used their numbers
    assert not (prefetch and swizzle), "prefetch fetches by the launch order's block numbers: no swizzle"
    policy = WARP_POLICIES[warps]
    M = T.dynamic("M")

    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        Wi: T.Tensor((2 * F, K), dtype),
        C: T.Tensor((M, F), dtype),
    ):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            if prefetch:
                W_slice = T.alloc_shared((2 * block_N, K), dtype)  # as W_shared below, every K step at once
                for kk in T.unroll(T.ceildiv(K, block_K)):  # K step by K step, as the pipelined copies below
                    cols = slice(kk * block_K, (kk + 1) * block_K)
                    T.copy(Wi[bx * block_N : (bx + 1) * block_N, cols], W_slice[0:block_N, cols])
                    T.copy(Wi[F + bx * block_N : F + (bx + 1) * block_N, cols], W_slice[block_N : 2 * block_N, cols])
                acc = T.alloc_fragment((block_M, 2 * block_N), accum_dtype)
            elif joint:  # rows [0, block_N): the activated half's slice, [block_N, 2 * block_N): the gate's
                W_shared = T.alloc_shared((2 * block_N, block_K), dtype)
                acc = T.alloc_fragment((block_M, 2 * block_N), accum_dtype)
            else:
                Wa_shared = T.alloc_shared((block_N, block_K), dtype)  # rows of the activated half
                Wg_shared = T.alloc_shared((block_N, block_K), dtype)  # rows of the gate half
                acc = T.alloc_fragment((block_M, block_N), accum_dtype)  # the activated half
            acc_g = T.alloc_fragment((block_M, block_N), accum_dtype)  # the gate half (joint: copied out of acc)
            C_shared = T.alloc_shared((block_M, block_N), dtype) if store == "shared" else None
            wait_for_previous_kernel()
            if swizzle:
                T.use_swizzle(panel_size=swizzle)
            T.clear(acc)
            if not joint:
                T.clear(acc_g)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                if prefetch:
                    T.gemm(A_shared, W_slice[:, k * block_K : (k + 1) * block_K], acc, transpose_B=True, policy=policy)
                elif joint:
                    T.copy(
                        Wi[bx * block_N : (bx + 1) * block_N, k * block_K : (k + 1) * block_K], W_shared[0:block_N, :]
                    )
                    T.copy(
                        Wi[F + bx * block_N : F + (bx + 1) * block_N, k * block_K : (k + 1) * block_K],
                        W_shared[block_N : 2 * block_N, :],
                    )
                    T.gemm(A_shared, W_shared, acc, transpose_B=True, policy=policy)
                else:
                    T.copy(Wi[bx * block_N, k * block_K], Wa_shared)
                    T.copy(Wi[F + bx * block_N, k * block_K], Wg_shared)
                    T.gemm(A_shared, Wa_shared, acc, transpose_B=True, policy=policy)
                    T.gemm(A_shared, Wg_shared, acc_g, transpose_B=True, policy=policy)
            let_next_kernel_start()
            if joint:  # a parallel loop reads one index of a fragment: the gate half is moved out first
                for i, j in T.Parallel(block_M, block_N):
                    acc_g[i, j] = acc[i, block_N + j]
            for i, j in T.Parallel(block_M, block_N):
                acc_g[i, j] = activate(acc[i, j], "gelu") * acc_g[i, j]
            if store == "shared":
                T.copy(acc_g, C_shared)
                T.copy(C_shared, C[by * block_M, bx * block_N])
            else:
                T.copy(acc_g, C[by * block_M, bx * block_N])

    return main


def split_steps(K: int, block_K: int, splits: int) -> tuple[int, int]:
    """(slices, K steps a slice): `splits` slices of K at most, every one holding at least one step."""
    k_steps = -(-K // block_K)
    per_split = -(-k_steps // min(splits, k_steps))
    return -(-k_steps // per_split), per_split


def gemm_split_k(N, K, *, block_W=64, block_T=128, block_K=64, splits=8, threads=128):
    """P[s, m, n] = sum over the s-th slice of K of A[m, k] * W[n, k], fp32, for M <= block_T.

    The weights are the wgmma's M side (block_W rows of W a block) and the tokens its N side, so that a small M
    wastes no weight bytes; a block's whole weight slice is fetched before the wait for the previous kernel (no
    kernel writes weights). The slices are summed, always in the same order, by the kernel that reads P."""
    M = T.dynamic("M")
    S, per_split = split_steps(K, block_K, splits)
    assert S <= MAX_SLICES, f"{S} slices: split_add_norm_bias_bf16 sums at most {MAX_SLICES}"

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K), dtype), P: T.Tensor((S, M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_W), S, threads=threads) as (bx, bs):  # bx: weight rows, bs: slice of K
            W_slice = T.alloc_shared((block_W, per_split * block_K), dtype)
            A_shared = T.alloc_shared((block_T, block_K), dtype)
            acc = T.alloc_fragment((block_W, block_T), accum_dtype)
            out = T.alloc_shared((block_T, block_W), accum_dtype)  # transposed, so P is written in whole rows
            k0 = bs * per_split * block_K
            for kk in T.unroll(per_split):  # past K (the last slice): TMA fills zeros
                T.copy(W[bx * block_W, k0 + kk * block_K], W_slice[:, kk * block_K : (kk + 1) * block_K])
            wait_for_previous_kernel()
            T.clear(acc)
            for k in T.Pipelined(per_split, num_stages=2):
                T.copy(A[0, k0 + k * block_K], A_shared)  # rows past M: zeros
                T.gemm(W_slice[:, k * block_K : (k + 1) * block_K], A_shared, acc, transpose_B=True)
            let_next_kernel_start()
            for i, j in T.Parallel(block_W, block_T):
                out[j, i] = acc[i, j]
            for j, i in T.Parallel(block_T, block_W):
                if j < M and bx * block_W + i < N:
                    P[bs, j, bx * block_W + i] = out[j, i]

    return main


def build(name: str, D: int, F: int, tier: dict):
    """The prim_func of entry `name` for a model of hidden size D and MLP width F, with one tile tier."""
    shape = SHAPES[name](D, F)
    tiles = {k: v for k, v in tier.items() if k != "max_m"}
    if shape.pop("geglu", False):
        return gemm_geglu(shape["N"], shape["K"], **tiles)
    if shape.pop("split", False):
        return gemm_split_k(shape["N"], shape["K"], **tiles)
    return gemm(shape.pop("N"), shape.pop("K"), **shape, **tiles)
