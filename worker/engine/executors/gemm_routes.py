"""Which GEMMs the cuda executor hands to cuBLAS (through torch, inside the CUDA graph) instead of the bundle.

Data, keyed by the bundle's tile configuration: per GEMM entry point, the M ranges (token rows of a
forward pass) that run on cuBLAS; every other (entry, M) runs the bundle's own kernel. A range goes to
cuBLAS only where it was measured faster there; the measurement is named beside each table.

`original` routes nothing: it is laya 0.3.20's kernel shapes, all TileLang, the baseline of the ABBA runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CUBLAS, TILELANG = "cublas", "tilelang"
# The four GEMMs whose output joins a residual stream (attention out, MLP out, the head's out_proj and FFN2) add
# A @ W^T into the fp32 stream in the GEMM's epilogue, never rounding the layer's output to bf16 (that rounding was
# the largest part of the distance to fp32: docs/cuda-executor.md). They run on cuBLAS but in the ranges of
# ACCUMULATE_ON_BUNDLE, where the bundle's *_acc_f32 kernel does the same.
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


# Per accumulating GEMM, the M ranges where the bundle's kernel runs it instead of cuBLAS: none. Below M = 1024
# cuBLAS was faster (docs/records/gemm-routes-h100-2026-12-05.csv, gemm-routes-h200-2026-12-06.csv); above, a
# persistent tier beat it alone, but the pass was slower with it (acc-routed-h100-2026-12-07.json), so that tier is
# gone. `--tilelang-only` runs them everywhere.
ACCUMULATE_ON_BUNDLE: dict[str, dict[str, Ranges]] = {"original": {}, "optimized": {}}
ACCUMULATING = (
    "gemm_attn_out_acc_f32",
    "gemm_mlp_out_acc_f32",
    "gemm_head_out_bias_acc_f32",
    "gemm_head_ffn2_bias_acc_f32",
)
EVERY_M: Ranges = ((1, None),)
# At small M the encoder's two GEMMs that join the stream run as split-K kernels of the bundle (the weights streamed
# by every SM), writing fp32 slices that the next norm sums into the stream in a fixed order (chain.py); the kernels
# admit M <= 128. SPLIT_K is where `split_k=True` runs them, SPLIT_ON_BUNDLE where a table runs them by default. With
# the norm's loads issued at once, 1x77 ran 0.4-3.2% faster with them on four H100s and 4.4-4.8% on an H200, base and
# new alternating (load-profile-h100-2026-12-06.json, gpu-h100-2026-12-06b.json, split-default-h100-2026-12-07.json,
# split-default-h200-2026-12-07.json).
SMALL_M: Ranges = ((1, 128),)
SPLIT_K: dict[str, Ranges] = {"gemm_attn_out_split_f32": SMALL_M, "gemm_mlp_out_split_f32": SMALL_M}
SPLIT_ON_BUNDLE: dict[str, dict[str, Ranges]] = {"original": {}, "optimized": SPLIT_K}


@dataclass(frozen=True)
class GemmRoutes:
    name: str  # the tile configuration whose table this is, or "tilelang" for none
    ranges: dict[str, Ranges]  # to cuBLAS
    accumulate_ranges: dict[str, Ranges] = field(default_factory=dict)  # accumulating GEMMs to the bundle
    split_ranges: dict[str, Ranges] = field(default_factory=dict)  # split-K entries, where they replace the above

    @classmethod
    def for_bundle(cls, tile_config: str, *, use_cublas: bool = True, split_k: bool | None = None) -> GemmRoutes:
        """The table of a bundle's tile configuration; without cuBLAS, every GEMM on the bundle's kernels. `split_k`:
        the split-K GEMMs where the table says (None), at every M they admit (True) or nowhere (False)."""
        if tile_config not in ROUTES:
            raise ValueError(f"no GEMM routing table for tile configuration {tile_config!r}; known: {sorted(ROUTES)}")
        split = SPLIT_ON_BUNDLE[tile_config] if split_k is None else SPLIT_K if split_k else {}
        if not use_cublas:
            return cls("tilelang", {}, dict.fromkeys(ACCUMULATING, EVERY_M), split)
        return cls(tile_config, ROUTES[tile_config], ACCUMULATE_ON_BUNDLE[tile_config], split)

    def route(self, entry: str, m: int) -> str:
        """CUBLAS or TILELANG for `entry` at M token rows."""
        return CUBLAS if _within(self.ranges.get(entry, ()), m) else TILELANG

    def route_accumulate(self, entry: str, m: int) -> str:
        """CUBLAS_ACCUMULATE or TILELANG for the accumulating GEMM `entry` at M token rows."""
        return TILELANG if _within(self.accumulate_ranges.get(entry, ()), m) else CUBLAS_ACCUMULATE

    def split(self, entry: str, m: int) -> bool:
        """Whether the split-K entry `entry` runs at M token rows."""
        return _within(self.split_ranges.get(entry, ()), m)

    def summary(self) -> str:
        """One line for the startup log: the table's name, what goes to cuBLAS and what accumulates on the bundle."""
        if not self.ranges:
            line = f"{self.name}: every GEMM on the bundle's kernels"
        else:
            line = f"{self.name}: cuBLAS for " + _ranges_text(self.ranges)
        if self.accumulate_ranges:
            line += "; the stream accumulated by the bundle's kernels for " + _ranges_text(self.accumulate_ranges)
        if self.split_ranges:
            line += "; split over K for " + _ranges_text(self.split_ranges)
        return line


def _within(ranges: Ranges, m: int) -> bool:
    return any(low <= m and (high is None or m <= high) for low, high in ranges)


def _ranges_text(table: dict[str, Ranges]) -> str:
    return ", ".join(
        f"{entry} M {low}-{high if high is not None else 'any'}"
        for entry, ranges in table.items()
        for low, high in ranges
    )
