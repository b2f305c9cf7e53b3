"""`laya-bundle build OUT`: every TileLang kernel compiled ahead of time for sm_90a into one library.

Walks `kernels.registry.kernels(tile_config, model)`; for each entry point and tile tier it takes
TileLang's generated source, checks the host stub against the declared signature, renames its
symbols, compiles it with nvcc (in parallel), links `liblaya_kernels.so` and writes
`manifest.json`. Needs nvcc and TileLang, not a GPU.
"""

from __future__ import annotations

import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from bundle import nvcc
from bundle.manifest import LIBRARY, EntryPoint, Manifest, Tier
from laya_common.checkpoint import sha256_file
from laya_common.model import ModelConfig, ModelDims

SOURCES = "src"  # generated sources, kept in the bundle for reading (each one's sha256 is in the manifest)
CANDIDATE_CONFIG = "candidate"  # the tile configuration a sweep's bundle names


def main(
    *,
    out: Path,
    tile_config: str = "optimized",
    jobs: int = 0,
    model: str = "large",
    arch: str = "sm_90a",
    candidates: dict | None = None,
) -> int:
    try:
        manifest = build(
            Path(out),
            tile_config=tile_config,
            jobs=jobs or os.cpu_count() or 1,
            model=ModelDims.of(ModelConfig.from_preset(model)),
            arch=arch,
            candidates=candidates,
        )
    except Exception as e:  # every failure ends the build with one message naming what failed
        print(f"laya-bundle build: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    n_kernels = sum(len(e.tiers) for e in manifest.entries.values())
    print(f"{out}: {len(manifest.entries)} entry points, {n_kernels} kernels, tile config {manifest.tile_config}")
    return 0


def build(
    out: Path, *, tile_config: str, jobs: int, model: ModelDims, arch: str, candidates: dict | None = None
) -> Manifest:
    """`candidates` ({GEMM or attention entry: [tier, ...]}): a tile sweep's bundle of those entries alone, named
    CANDIDATE_CONFIG, which kernel timings and the kernel tests load and the executor refuses."""
    # imported here: only the build needs TileLang
    import tilelang

    from bundle.tl_source import check_abi, check_dependent_launches, declared_signature, generate, rename
    from kernels.registry import kernels

    out.mkdir(parents=True, exist_ok=True)
    (out / SOURCES).mkdir(exist_ok=True)
    for stale in (out / SOURCES).glob("*.cu"):
        stale.unlink()
    specs = kernels(tile_config, model, candidates=candidates)
    if candidates is not None:
        tile_config = CANDIDATE_CONFIG
    entries: dict[str, EntryPoint] = {}
    jobs_to_compile = []  # (source, fast_math, nvcc flags, symbols to keep)
    work = [(spec, i, tier) for spec in specs for i, tier in enumerate(spec.tiers)]
    for spec, i, tier in tqdm(work, desc=f"generating ({tile_config})", unit="kernel"):
        prim_func = tier.make()
        args, dims = declared_signature(prim_func)
        entry = entries.get(spec.name) or EntryPoint(spec.name, spec.family, args, dims, ())
        if (entry.args, entry.dims) != (args, dims):
            raise ValueError(f"{spec.name}: tier {i} declares another signature than tier 0")
        symbol = f"laya_{spec.name}_t{i}"
        source = generate(prim_func, pass_configs=spec.pass_configs, arch=arch)
        check_abi(spec.name, source, entry.c_signature())
        check_dependent_launches(source, symbol)
        path = out / SOURCES / f"{symbol}.cu"
        path.write_text(rename(source, symbol))
        t = Tier(max_m=tier.max_m, symbol=symbol, tiles=tier.tiles, source_sha256=sha256_file(path))
        entries[spec.name] = EntryPoint(entry.name, entry.family, entry.args, entry.dims, entry.tiers + (t,))
        fast_math = bool(spec.pass_configs.get(tilelang.PassConfigKey.TL_ENABLE_FAST_MATH, False))
        jobs_to_compile.append((path, fast_math, spec.nvcc_flags, [t.init, t.call, t.last_error]))

    library = out / LIBRARY
    with tempfile.TemporaryDirectory(prefix="laya-bundle-") as tmp:
        objects = [Path(tmp) / f"{src.stem}.o" for src, *_ in jobs_to_compile]
        with (
            ThreadPoolExecutor(max_workers=jobs) as pool,
            tqdm(total=len(objects), desc=f"nvcc {arch}", unit="kernel") as bar,
        ):
            futures = [
                pool.submit(nvcc.compile_object, src, obj, arch=arch, fast_math=fm, extra=flags, keep=keep)
                for (src, fm, flags, keep), obj in zip(jobs_to_compile, objects, strict=True)
            ]
            for f in futures:
                f.result()
                bar.update()
        nvcc.link_library(objects, library, arch=arch)

    exported = nvcc.exported_symbols(library)
    missing = [
        s for e in entries.values() for t in e.tiers for s in (t.init, t.call, t.last_error) if s not in exported
    ]
    if missing:
        raise RuntimeError(f"{library} does not export {', '.join(missing)}")

    previous = _previous_manifest(out)
    manifest = Manifest(
        tile_config=tile_config,
        arch=arch,
        versions={"tilelang": tilelang.__version__, "nvcc": nvcc.nvcc_version()},
        model=model,
        library={"file": LIBRARY, "sha256": sha256_file(library)},
        entries=entries,
        # tables do not depend on the kernels: a rebuild keeps what export-tables recorded
        tables=previous.tables if previous else {},
        checkpoint=previous.checkpoint if previous else {},
    )
    manifest.write(out)
    return manifest


def _previous_manifest(out: Path) -> Manifest | None:
    try:
        return Manifest.read(out)
    except (OSError, ValueError, KeyError):
        return None
