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

from kernels.common import EXACT_MATH, accum_dtype, dtype

PASS_CONFIGS = EXACT_MATH  # cos/sin of angles up to max_len radians need the accurate functions

SHAPES = {
    "rope_fp32_bf16": dict(tables=False),
    "rope_table_bf16": dict(tables=True),
}

TILE_CONFIGS = {
    "original": {name: dict(block_M=32, threads=128) for name in SHAPES},
    # 8 tokens per block: 16 tokens already make 2 blocks, 8192 tokens 1024 blocks.
    "optimized": {name: dict(block_M=8, threads=256) for name in SHAPES},
}


def rope(H, Dh, max_len, *, tables, block_M=32, threads=128):
    """Rotate q and k of every token in place; see the module docstring for the two variants."""
    M = T.dynamic("M")
    half = Dh // 2
    n_pairs = 2 * H * half  # (q|k, head, d < half) triples, one per rotated pair

    @T.macro
    def rotate(QKV, L, Cos, Sin, InvFreq):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:  # bx: block of tokens
            for i, p in T.Parallel(block_M, n_pairs):
                m = bx * block_M + i
                d = p % half
                c0 = (p // half) * Dh + d  # column of the first element of the pair; its partner is + half
                if m < M:
                    x0 = T.cast(QKV[m, c0], accum_dtype)
                    x1 = T.cast(QKV[m, c0 + half], accum_dtype)
                    if tables:
                        QKV[m, c0] = T.cast(x0 * Cos[m % L, d] - x1 * Sin[m % L, d], dtype)
                        QKV[m, c0 + half] = T.cast(x1 * Cos[m % L, d + half] + x0 * Sin[m % L, d + half], dtype)
                    else:
                        angle = T.cast(m % L, accum_dtype) * InvFreq[d]
                        QKV[m, c0] = T.cast(x0 * T.cos(angle) - x1 * T.sin(angle), dtype)
                        QKV[m, c0 + half] = T.cast(x1 * T.cos(angle) + x0 * T.sin(angle), dtype)

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
