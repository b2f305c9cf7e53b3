"""Rotary position embedding, in place on the packed QKV buffer ([M, 3 * H * Dh] bf16, q | k | v, heads
major, then head dim), rotate-half convention. Rows are padded to L tokens: token m sits at position
m % L. Only q and k rotate.

  rope_fp32_bf16   the default: cos/sin of position * inv_freq computed in the kernel in fp32, one
                   rounding to bf16 at the end.
  rope_table_bf16  `--original-rope`: cos/sin read from the exported tables, whose values were rounded
                   through bf16 as the reference's autocast path rounds them; fp32 math, one rounding
                   at the end, as transformers' ModernBERT `apply_rotary_pos_emb` does.
"""

import tilelang.language as T

from kernels.common import EXACT_MATH, accum_dtype, after_previous_kernel, dtype

PASS_CONFIGS = EXACT_MATH  # cos/sin of angles up to max_len radians need the accurate functions

SHAPES = {
    "rope_fp32_bf16": dict(tables=False),
    "rope_table_bf16": dict(tables=True),
}

TILE_CONFIGS = {
    "original": {name: dict(block_M=32, threads=128) for name in SHAPES},
    # 2 tokens per block (8 KB of q|k in shared memory): 16 tokens already make 8 blocks.
    "optimized": {name: dict(block_M=2, threads=256) for name in SHAPES},
}


def rope(H, Dh, max_len, *, tables, block_M=32, threads=128):
    """Rotate q and k of every token in place; see the module docstring for the two variants.

    A block stages its rows' q|k columns in shared memory, so that every global load is issued
    before any store to the same buffer, and computes each row's cos/sin once for all heads.
    """
    M = T.dynamic("M")
    half = Dh // 2
    n_pairs = 2 * H * half  # (q|k, head, d < half) triples, one per rotated pair

    @T.macro
    def rotate(QKV, L, Cos, Sin, InvFreq):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:  # bx: block of tokens
            after_previous_kernel()
            QK_shared = T.alloc_shared((block_M, 2 * H * Dh), dtype)
            cos_shared = T.alloc_shared((block_M, Dh), accum_dtype)
            sin_shared = T.alloc_shared((block_M, Dh), accum_dtype)
            T.copy(QKV[bx * block_M, 0], QK_shared)
            for i, d in T.Parallel(block_M, Dh):
                pos = (bx * block_M + i) % L
                if tables:
                    cos_shared[i, d] = Cos[pos, d]
                    sin_shared[i, d] = Sin[pos, d]
                else:
                    angle = T.cast(pos, accum_dtype) * InvFreq[d % half]
                    cos_shared[i, d] = T.cos(angle)
                    sin_shared[i, d] = T.sin(angle)
            for i, p in T.Parallel(block_M, n_pairs):
                d = p % half
                c0 = (p // half) * Dh + d  # column of the first element of the pair; its partner is + half
                x0 = T.cast(QK_shared[i, c0], accum_dtype)
                x1 = T.cast(QK_shared[i, c0 + half], accum_dtype)
                QK_shared[i, c0] = T.cast(x0 * cos_shared[i, d] - x1 * sin_shared[i, d], dtype)
                QK_shared[i, c0 + half] = T.cast(x1 * cos_shared[i, d + half] + x0 * sin_shared[i, d + half], dtype)
            T.copy(QK_shared, QKV[bx * block_M, 0])

    if tables:

        @T.prim_func
        def main(
            QKV: T.Tensor((M, 3 * H * Dh), dtype),
            Cos: T.Tensor((max_len, Dh), accum_dtype),
            Sin: T.Tensor((max_len, Dh), accum_dtype),
            L: T.int32,
        ):
            rotate(QKV, L, Cos, Sin, None)

    else:

        @T.prim_func
        def main(QKV: T.Tensor((M, 3 * H * Dh), dtype), InvFreq: T.Tensor((half,), accum_dtype), L: T.int32):
            rotate(QKV, L, None, None, InvFreq)

    return main


def build(name: str, H: int, Dh: int, *, max_len: int, tiles: dict):
    return rope(H, Dh, max_len, **SHAPES[name], **tiles)
