"""Which GEMMs the cuda executor hands to cuBLAS (through torch, inside the CUDA graph) instead of the bundle.

Data, keyed by the bundle's tile configuration: per GEMM entry point, the M ranges (token rows of a
forward pass) that run on cuBLAS; every other (entry, M) runs the bundle's own kernel. A range goes to
cuBLAS only where it was measured faster there; the measurement is named beside each table.

`original` routes nothing: it is laya 0.3.20's kernel shapes, all TileLang, the baseline of the ABBA runs.
"""

from __future__ import annotations

from dataclasses import dataclass

CUBLAS, TILELANG = "cublas", "tilelang"
# The four GEMMs whose output joins a residual stream (attention out, MLP out, the head's out_proj and FFN2) are
# not routed: they always run on cuBLAS, adding A @ W^T into the fp32 stream in the GEMM's epilogue (the bundle's
# kernels write bf16, and that rounding was the largest part of the distance to fp32: docs/cuda-executor.md).
CUBLAS_ACCUMULATE = "cublas-fp32-accumulate"

# (lowest M, highest M or None for no bound) per entry point.
Ranges = tuple[tuple[int, int | None], ...]

ROUTES: dict[str, dict[str, Ranges]] = {
    "original": {},
    # cuBLAS where it was faster, each GEMM timed as the executor runs it: every plain and bias GEMM at every M, but
    # ReLU-FFN1 at M = 16 (docs/records/gemm-routes-h200-2026-12-03.csv; a measured M wins the range down to the
    # previous measured M). GeGLU stays on the bundle at every M: cuBLAS needs an extra elementwise pass over
    # [M, 2F], and the fused tiers beat it everywhere (docs/records/gemm-routes-h200-2026-12-03b.csv).
    "optimized": {
        "gemm_qkv_bf16": ((1, None),),
        "gemm_head_qkv_bias_bf16": ((1, None),),
        "gemm_head_ffn1_bias_relu_bf16": ((17, None),),
    },
}


@dataclass(frozen=True)
class GemmRoutes:
    name: str  # the tile configuration whose table this is, or "tilelang" for none
    ranges: dict[str, Ranges]

    @classmethod
    def for_bundle(cls, tile_config: str, *, use_cublas: bool = True) -> GemmRoutes:
        if not use_cublas:
            return cls("tilelang", {})
        if tile_config not in ROUTES:
            raise ValueError(f"no GEMM routing table for tile configuration {tile_config!r}; known: {sorted(ROUTES)}")
        return cls(tile_config, ROUTES[tile_config])

    def route(self, entry: str, m: int) -> str:
        """CUBLAS or TILELANG for `entry` at M token rows."""
        for low, high in self.ranges.get(entry, ()):
            if low <= m and (high is None or m <= high):
                return CUBLAS
        return TILELANG

    def summary(self) -> str:
        """One line for the startup log: the table's name and what goes to cuBLAS."""
        if not self.ranges:
            return f"{self.name}: every GEMM on the bundle's kernels"
        parts = [
            f"{entry} M {low}-{high if high is not None else 'any'}"
            for entry, ranges in self.ranges.items()
            for low, high in ranges
        ]
        return f"{self.name}: cuBLAS for " + ", ".join(parts)
