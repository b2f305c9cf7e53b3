"""What every kernel family shares: dtypes, compiler switches, the GELU epilogue, tile tiers.

Imported only by `kernels/*` (and so only where TileLang is installed: the bundle build).
"""

from __future__ import annotations

import tilelang
import tilelang.language as T

dtype = "bfloat16"  # activations and weights
accum_dtype = "float"  # accumulators, residual stream, norm weights, tables

FAST_MATH = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True}
EXACT_MATH: dict = {}  # for kernels whose sin/cos/exp must not become the approximate intrinsics

ACTIVATIONS = ("none", "relu", "gelu")
MAX_SLICES = 8  # slices of K a split-K GEMM may write: the summing norm unrolls its loop over them
SQRT1_2 = 0.7071067811865476


@T.macro
def wait_for_previous_kernel():
    """The first statement of every kernel. The bundle's host stubs launch each kernel as a programmatic dependent
    launch, so its blocks may start while the previous kernel in the stream still runs: wait for that kernel's
    writes before reading anything (bundle/tl_source.check_dependent_launches refuses a kernel without the wait)."""
    T.pdl_sync()


@T.macro
def let_next_kernel_start():
    """Let the next kernel's blocks be scheduled beside this one's, each waiting for all of this kernel's writes.
    Warp-specialized kernels (GEMMs, attention) do this only after their main loop: right after the wait, the pass
    hung with our accumulating GEMMs in it, why not shown (docs/kernels.md)."""
    T.pdl_trigger()


@T.macro
def after_previous_kernel():
    """The first statements of a kernel without warp roles: wait for the previous kernel, then let the next start."""
    wait_for_previous_kernel()
    let_next_kernel_start()


REGISTER_FILE = 65536  # 32-bit registers an SM holds
WARPGROUP = 128  # threads of the producer warpgroup that TileLang's warp specialization adds to a kernel's
PRODUCER_REGS = 24


@T.macro
def share_sm(threads: int, blocks: int):
    """`blocks` blocks of a warp-specialized kernel (`threads` consumer threads) on each SM, so that one's epilogue
    or softmax runs beside another's wgmmas. TileLang's default register split (producer 24, consumers 240) claims
    the whole register file for one block; here each block's registers are capped at its share of it, and the
    consumers take what the producer warpgroup gives back of its own."""
    T.annotate_min_blocks_per_sm(blocks)
    T.annotate_producer_reg_dealloc(PRODUCER_REGS)
    T.annotate_consumer_reg_alloc(consumer_registers(threads, blocks))


def consumer_registers(threads: int, blocks: int) -> int:
    """Registers a consumer thread may take (setmaxnreg) when `blocks` blocks of `threads` consumer threads and one
    producer warpgroup each share an SM: each block holds its launch share (a multiple of 8 a thread), and what the
    producer releases going down to PRODUCER_REGS is all its consumers can gain; asking more waits forever."""
    block_threads = threads + WARPGROUP
    at_launch = REGISTER_FILE // (blocks * block_threads) // 8 * 8
    return (at_launch * block_threads - WARPGROUP * PRODUCER_REGS) // threads // 8 * 8


@T.macro
def row_statistics(x, mean, rstd, scratch, eps):
    """LayerNorm's statistics of each row of the fp32 fragment x ([rows, D]): mean and 1 / sqrt(variance + eps),
    the variance as the mean of squared deviations (two passes, as torch's LayerNorm); scratch: x's shape."""
    D = x.shape[1]
    T.reduce_sum(x, mean, dim=1)
    for i in T.Parallel(x.shape[0]):
        mean[i] = mean[i] / D
    for i, j in T.Parallel(x.shape[0], D):
        scratch[i, j] = (x[i, j] - mean[i]) * (x[i, j] - mean[i])
    T.reduce_sum(scratch, rstd, dim=1)
    for i in T.Parallel(x.shape[0]):
        rstd[i] = T.rsqrt(rstd[i] / D + eps)


def activate(x, act: str):
    """The GEMM epilogue: erf GELU (what the checkpoints' "gelu" means), ReLU, or nothing."""
    if act == "gelu":
        return 0.5 * x * (1.0 + T.erf(x * SQRT1_2))
    if act == "relu":
        return T.max(x, 0.0)
    return x
