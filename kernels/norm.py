"""LayerNorms on the fp32 residual stream, each fused with what feeds it.

Every entry reads a block of rows of the stream x (fp32), writes them back where the entry changes
the stream, and writes Y = LayerNorm(x) * W (+ Bias) in bf16 for the next GEMM:

  embed_norm_bf16          x = E[Ids[m]]; X = LayerNorm(x) * W, Y = X in bf16
                           (ModernBERT's embedding norm: the stream starts normalized)
  add_norm_bf16            x = X + R                         (encoder residual add; X written)
  add_norm_bias_bf16       x = X + R, LayerNorm with bias    (decision-head residual add)
  norm_bias_bf16           x = X                             (decision head, first layer's norm1)
  type_add_norm_bias_bf16  x = Y + Temb[Q[m // L]]           (final encoder output + question-type embedding)
  residual_add_f32         X = X + R, no norm                (the decision head's last residual add)
  split_add_norm_bias_bf16 x = X + (P[0] + ... + P[S-1])      (a split-K GEMM's fp32 slices, summed in order,
                                                               so that answers repeat; gemm.gemm_split_k)

The residual stream stays in fp32, as under the reference's autocast: its values reach ~1e4, where a
bf16 stream would lose whole units at every add.
"""

import tilelang.language as T

from kernels.common import FAST_MATH, MAX_SLICES, accum_dtype, after_previous_kernel, dtype, row_statistics

PASS_CONFIGS = FAST_MATH

# entry name -> (source of x, LayerNorm bias)
SHAPES = {
    "embed_norm_bf16": dict(source="embedding", bias=False),
    "add_norm_bf16": dict(source="residual", bias=False),
    "add_norm_bias_bf16": dict(source="residual", bias=True),
    "norm_bias_bf16": dict(source="stream", bias=True),
    "type_add_norm_bias_bf16": dict(source="type", bias=True),
    "residual_add_f32": dict(source="residual", bias=False, normalize=False),
    "split_add_norm_bias_bf16": dict(source="split", bias=True),
}

TILE_CONFIGS = {
    "original": {name: dict(block_M=4, threads=32) for name in SHAPES},
    # one row per 128-thread block: 8 consecutive elements (16 bytes of bf16) per thread, and a block
    # per token, so a 16-token input still spreads over 16 SMs.
    "optimized": {name: dict(block_M=1, threads=128) for name in SHAPES},
}


def layer_norm(D, *, source, bias, eps, normalize=True, vocab=0, n_types=3, block_M=4, threads=32):
    """One kernel of the family above; see the module docstring for `source`."""
    M = T.dynamic("M")

    @T.macro
    def norm_rows(x, W, Bias, Y, row0, X_out):
        # x: [block_M, D] fp32 fragment, the stream rows row0.. ; writes Y rows (and X_out rows, fp32)
        mean = T.alloc_fragment((block_M,), accum_dtype)
        rstd = T.alloc_fragment((block_M,), accum_dtype)
        centered = T.alloc_fragment((block_M, D), accum_dtype)
        row_statistics(x, mean, rstd, centered, eps)
        for i, j in T.Parallel(block_M, D):
            v = (x[i, j] - mean[i]) * rstd[i] * W[j]
            centered[i, j] = v + Bias[j] if bias else v
        T.copy(centered, Y[row0, 0])
        if X_out is not None:
            T.copy(centered, X_out[row0, 0])

    @T.macro
    def add_residual(X, R, x, row0):
        # x = the stream rows row0.. plus the branch output R (bf16), written back to X
        r = T.alloc_fragment((block_M, D), accum_dtype)
        T.copy(X[row0, 0], x)
        T.copy(R[row0, 0], r)
        for i, j in T.Parallel(block_M, D):
            x[i, j] = x[i, j] + r[i, j]
        T.copy(x, X[row0, 0])

    if source == "embedding":

        @T.prim_func
        def main(
            Ids: T.Tensor((M,), "int32"),
            E: T.Tensor((vocab, D), accum_dtype),
            W: T.Tensor((D,), accum_dtype),
            X: T.Tensor((M, D), accum_dtype),
            Y: T.Tensor((M, D), dtype),
        ):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:  # bx: block of rows
                after_previous_kernel()
                x = T.alloc_fragment((block_M, D), accum_dtype)
                for i, j in T.Parallel(block_M, D):
                    x[i, j] = E[Ids[T.min(bx * block_M + i, M - 1)], j]
                norm_rows(x, W, None, Y, bx * block_M, X)

    elif source == "type":
        R = T.dynamic("R")

        @T.prim_func
        def main(
            Q: T.Tensor((R,), "int32"),
            L: T.int32,
            Temb: T.Tensor((n_types, D), accum_dtype),
            W: T.Tensor((D,), accum_dtype),
            Bias: T.Tensor((D,), accum_dtype),
            X: T.Tensor((M, D), accum_dtype),
            Y: T.Tensor((M, D), dtype),
        ):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                after_previous_kernel()
                x = T.alloc_fragment((block_M, D), accum_dtype)
                for i, j in T.Parallel(block_M, D):
                    row = T.min(bx * block_M + i, M - 1)
                    x[i, j] = T.cast(Y[row, j], accum_dtype) + Temb[Q[row // L], j]
                T.copy(x, X[bx * block_M, 0])
                norm_rows(x, W, Bias, Y, bx * block_M, None)

    elif source == "residual" and not normalize:

        @T.prim_func
        def main(X: T.Tensor((M, D), accum_dtype), R: T.Tensor((M, D), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                after_previous_kernel()
                x = T.alloc_fragment((block_M, D), accum_dtype)
                add_residual(X, R, x, bx * block_M)

    elif source == "residual" and bias:

        @T.prim_func
        def main(
            X: T.Tensor((M, D), accum_dtype),
            R: T.Tensor((M, D), dtype),
            W: T.Tensor((D,), accum_dtype),
            Bias: T.Tensor((D,), accum_dtype),
            Y: T.Tensor((M, D), dtype),
        ):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                after_previous_kernel()
                x = T.alloc_fragment((block_M, D), accum_dtype)
                add_residual(X, R, x, bx * block_M)
                norm_rows(x, W, Bias, Y, bx * block_M, None)

    elif source == "residual":

        @T.prim_func
        def main(
            X: T.Tensor((M, D), accum_dtype),
            R: T.Tensor((M, D), dtype),
            W: T.Tensor((D,), accum_dtype),
            Y: T.Tensor((M, D), dtype),
        ):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                after_previous_kernel()
                x = T.alloc_fragment((block_M, D), accum_dtype)
                add_residual(X, R, x, bx * block_M)
                norm_rows(x, W, None, Y, bx * block_M, None)

    elif source == "split":
        S = T.dynamic("S")  # as many slices as the GEMM before cut K into

        @T.prim_func
        def main(
            X: T.Tensor((M, D), accum_dtype),
            P: T.Tensor((S, M, D), accum_dtype),
            W: T.Tensor((D,), accum_dtype),
            Bias: T.Tensor((D,), accum_dtype),
            Y: T.Tensor((M, D), dtype),
        ):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                after_previous_kernel()
                x = T.alloc_fragment((block_M, D), accum_dtype)
                product = T.alloc_fragment((block_M, D), accum_dtype)
                row0 = bx * block_M
                T.clear(product)
                # the slices summed first, then added once: one rounding at the stream's scale. Unrolled, each load from
                # a valid slice whether or not it counts, so that every slice's loads are in flight together
                for s in T.unroll(MAX_SLICES):
                    for i, j in T.Parallel(block_M, D):
                        p = P[T.min(s, S - 1), T.min(row0 + i, M - 1), j]
                        product[i, j] = product[i, j] + T.if_then_else(s < S, p, T.float32(0))
                T.copy(X[row0, 0], x)
                for i, j in T.Parallel(block_M, D):
                    x[i, j] = x[i, j] + product[i, j]
                T.copy(x, X[row0, 0])
                norm_rows(x, W, Bias, Y, row0, None)

    else:
        assert source == "stream" and bias, (source, bias)

        @T.prim_func
        def main(
            X: T.Tensor((M, D), accum_dtype),
            W: T.Tensor((D,), accum_dtype),
            Bias: T.Tensor((D,), accum_dtype),
            Y: T.Tensor((M, D), dtype),
        ):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                after_previous_kernel()
                x = T.alloc_fragment((block_M, D), accum_dtype)
                T.copy(X[bx * block_M, 0], x)
                norm_rows(x, W, Bias, Y, bx * block_M, None)

    return main


def build(name: str, D: int, *, eps: float, vocab: int, tiles: dict):
    """The prim_func of entry `name` for hidden size D, LayerNorm eps and vocabulary size."""
    return layer_norm(D, eps=eps, vocab=vocab, **SHAPES[name], **tiles)
