"""The one list of kernels the bundle builds: every entry point, for a tile configuration and model.

Each family module (`gemm`, `norm`, `rope`, `attention`, `readout`) holds SHAPES, TILE_CONFIGS, PASS_CONFIGS
and a `build` that makes one prim_func; this module walks them in a fixed order.
"""

from collections.abc import Callable
from dataclasses import dataclass

from kernels import attention, gemm, norm, readout, rope
from laya_common.model import ModelDims

TILE_CONFIG_NAMES = ("original", "optimized")

# Extra nvcc flags per family. RoPE: no fused multiply-add, so that `x0 * cos - x1 * sin` rounds each
# product as the reference's elementwise torch ops do.
NVCC_FLAGS = {"gemm": [], "norm": [], "rope": ["-fmad=false"], "attention": [], "readout": []}


@dataclass(frozen=True)
class KernelTier:
    max_m: int | None
    tiles: dict
    make: Callable  # () -> prim_func


@dataclass(frozen=True)
class KernelSpec:
    name: str
    family: str
    pass_configs: dict
    nvcc_flags: list
    tiers: list[KernelTier]


def kernels(tile_config: str, model: ModelDims, *, candidates: dict | None = None) -> list[KernelSpec]:
    """Every entry point of the bundle, in build order.

    `candidates` ({GEMM or attention entry: [tier, ...]}, a tile sweep's): only those entries, with those tiers.
    """
    if candidates is not None:
        return _candidates(candidates, model)
    if tile_config not in TILE_CONFIG_NAMES:
        raise ValueError(f"unknown tile configuration {tile_config!r}; known: {', '.join(TILE_CONFIG_NAMES)}")
    if (model.head_heads, model.head_dim) != (model.num_heads, 64):
        # one attention kernel serves the encoder and the decision head only when their heads agree
        raise ValueError(f"attention kernels need head dim 64 and decision-head heads = encoder heads: {model}")
    D, F = model.hidden_size, model.intermediate_size
    specs = []

    def add(name, family, module, tiers):
        specs.append(KernelSpec(name, family, module.PASS_CONFIGS, NVCC_FLAGS[family], tiers))

    for name, tiers in gemm.TILE_CONFIGS[tile_config].items():
        add(name, "gemm", gemm, _gemm_tiers(name, tiers, D, F))
    for name in norm.SHAPES:
        tiles = norm.TILE_CONFIGS[tile_config][name]
        make = lambda name=name, tiles=tiles: norm.build(  # noqa: E731
            name, D, eps=model.norm_eps, vocab=model.vocab_size, tiles=tiles
        )
        add(name, "norm", norm, [KernelTier(None, tiles, make)])
    for name in rope.SHAPES:
        tiles = rope.TILE_CONFIGS[tile_config][name]
        make = lambda name=name, tiles=tiles: rope.build(  # noqa: E731
            name, model.num_heads, model.head_dim, max_len=model.max_len, tiles=tiles
        )
        add(name, "rope", rope, [KernelTier(None, tiles, make)])
    for name in attention.SHAPES:
        add(name, "attention", attention, _attention_tiers(name, attention.TILE_CONFIGS[tile_config][name], model))
    readout_tiles = readout.TILE_CONFIGS[tile_config]
    for name in readout.SHAPES:
        make = lambda name=name: readout.build(  # noqa: E731
            name, D, max_len=model.max_len, tiles=readout_tiles[name], score_tiles=readout_tiles["readout_scores_f32"]
        )
        add(name, "readout", readout, [KernelTier(None, readout_tiles[name], make)])
    return specs


def _tiers(tiers: list[dict], make: Callable[[dict], object]) -> list[KernelTier]:
    """KernelTiers from tile tiers ({"max_m", tile parameters...}); `make(tier)` builds one's prim_func."""
    return [KernelTier(t["max_m"], {k: v for k, v in t.items() if k != "max_m"}, lambda t=t: make(t)) for t in tiers]


def _gemm_tiers(name: str, tiers: list[dict], D: int, F: int) -> list[KernelTier]:
    return _tiers(tiers, lambda t: gemm.build(name, D, F, t))


def _attention_tiers(name: str, tiers: list[dict], model: ModelDims) -> list[KernelTier]:
    return _tiers(tiers, lambda t: attention.build(name, model.num_heads, model.head_dim, window=model.window, tier=t))


def _candidates(candidates: dict, model: ModelDims) -> list[KernelSpec]:
    unknown = sorted(set(candidates) - set(gemm.SHAPES) - set(attention.SHAPES))
    if unknown:
        raise ValueError(f"candidate tiers for unknown GEMM or attention entry points: {', '.join(unknown)}")
    D, F = model.hidden_size, model.intermediate_size
    return [
        KernelSpec(name, "gemm", gemm.PASS_CONFIGS, NVCC_FLAGS["gemm"], _gemm_tiers(name, tiers, D, F))
        if name in gemm.SHAPES
        else KernelSpec(
            name, "attention", attention.PASS_CONFIGS, NVCC_FLAGS["attention"], _attention_tiers(name, tiers, model)
        )
        for name, tiers in candidates.items()
    ]
