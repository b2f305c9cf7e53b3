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
SQRT1_2 = 0.7071067811865476


@T.macro
def after_previous_kernel():
    """The first statement of every kernel. The bundle's host stubs launch each kernel as a programmatic dependent
    launch, so its blocks may start while the previous kernel in the stream still runs: wait for that kernel's
    writes before reading anything, then let the next kernel's blocks start as this one's finish
    (bundle/tl_source.check_dependent_launches refuses a kernel without the wait)."""
    T.pdl_sync()
    T.pdl_trigger()


def activate(x, act: str):
    """The GEMM epilogue: erf GELU (what the checkpoints' "gelu" means), ReLU, or nothing."""
    if act == "gelu":
        return 0.5 * x * (1.0 + T.erf(x * SQRT1_2))
    if act == "relu":
        return T.max(x, 0.0)
    return x
