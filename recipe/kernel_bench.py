"""Kernel timings per entry point and shape, for each bundle given: the start of the speed work.

    python -m recipe.kernel_bench --bundle bundles/original --bundle bundles/optimized --output OUT

Each (entry, shape) is launched `reps` times inside one CUDA graph (GEMMs cycle through copies of
their weight totalling more than the L2 cache, as 28 layers of distinct weights would), the graph is
replayed 3 times to warm up and then 20 times, timed with CUDA events; a sample is one replay's
time divided by `reps`. Writes OUT/kernel_timings.csv (median and p90 per row, TFLOP/s for GEMMs
and attention) and OUT/kernel_timings.json (machine, versions and git commit, bundles, command line).
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import math
import statistics
import sys
from pathlib import Path

import torch

from bundle.loader import TORCH_DTYPES, Kernels
from kernels.shapes import TIMED_SHAPES
from laya_common.rope import inv_freq, rope_tables
from recipe.provenance import versions

WARMUP_REPLAYS = 3
TIMED_REPLAYS = 20
MIN_REPS = 10
COLD_BYTES = 256 << 20  # weight copies per GEMM graph: well past the H200's 50 MB L2
READOUT_MARKERS, READOUT_ACTS = 4, 3  # the readout kernels' option markers per row and acts
SPLIT_SLICES = 8  # the slices of K a split-K GEMM writes, for the norm that sums them


def main(*, bundles: list[Path], output: Path, entries: list[str] | None = None) -> int:
    if not torch.cuda.is_available():
        print("kernel_bench: needs a CUDA GPU", file=sys.stderr)
        return 1
    output.mkdir(parents=True, exist_ok=True)
    rows = []
    meta = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": _driver(),
        "command": sys.argv,
        "versions": versions(("laya-service",)),
        "bundles": {},
        "warmup_replays": WARMUP_REPLAYS,
        "timed_replays": TIMED_REPLAYS,
    }
    for path in bundles:
        kernels = Kernels(path)
        kernels.init()
        m = kernels.manifest
        meta["bundles"][str(path)] = {
            "tile_config": m.tile_config,
            "library_sha256": m.library["sha256"],
            "versions": m.versions,
        }
        for name in [e for e in m.entries if not entries or e in entries]:
            for R, L in TIMED_SHAPES:
                if not m.entries[name].admits(R * L):
                    continue
                samples, symbol = time_entry(kernels, name, R, L)
                rows.append({"bundle": path.name, **_row(m, name, symbol, R, L, samples)})
                print(f"{m.tile_config:9} {name:30} {R:2}x{L:<3} {rows[-1]['median_us']:9.2f} us", flush=True)
    fields = list(rows[0])
    with open(output / "kernel_timings.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    (output / "kernel_timings.json").write_text(json.dumps(meta, indent=2) + "\n")
    return 0


def time_entry(kernels: Kernels, name: str, R: int, L: int) -> tuple[list[float], str]:
    """Per-launch times (us) of `name` at R rows of L tokens, and the tier symbol that ran."""
    entry = kernels.manifest.entries[name]
    arg_sets = [make_args(kernels, name, R, L, copy) for copy in range(weight_copies(kernels, name))]
    launch = getattr(kernels, name)
    launches = [launch.bind(*arg_sets[i % len(arg_sets)]) for i in range(max(MIN_REPS, len(arg_sets)))]
    return graph_launch_times_us(launches), entry.tier_for(R * L).symbol  # arg_sets alive until timed


def graph_launch_times_us(launches: list) -> list[float]:
    """Per-launch microseconds of `launches` (each launching on the current stream), run in turn inside one
    CUDA graph: once outside capture (first touch; cuBLAS's workspace for the stream), captured, replayed
    WARMUP_REPLAYS times, then TIMED_REPLAYS times with CUDA events: one sample per timed replay."""
    stream = _capture_stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for launch in launches:
            launch()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for launch in launches:
            launch()
    for _ in range(WARMUP_REPLAYS):
        graph.replay()
    samples = []
    for _ in range(TIMED_REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / len(launches))
    return samples


@functools.cache
def _capture_stream() -> torch.cuda.Stream:
    return torch.cuda.Stream()  # one for every capture: torch keeps a cuBLAS workspace per stream


def weight_copies(kernels: Kernels, name: str) -> int:
    """How many copies of the entry's weight to cycle through so that the timed launches read it cold."""
    weight = _weight_arg(kernels.manifest.entries[name])
    if weight is None:
        return 1
    n, k = weight.shape
    return min(64, math.ceil(COLD_BYTES / (n * k * 2)))


def _weight_arg(entry):
    """A GEMM's weight matrix, or None for other families."""
    if entry.family != "gemm":
        return None
    return next(a for a in entry.args if a.name in ("W", "Wi"))


def make_args(kernels: Kernels, name: str, R: int, L: int, seed: int) -> list:
    """Plausible arguments for any entry, by argument name: full-length rows, random values."""
    m = kernels.manifest.model
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    M = R * L
    sizes = {"M": M, "R": R, "N": R * READOUT_MARKERS, "A": READOUT_ACTS, "C": READOUT_MARKERS + READOUT_ACTS}
    sizes["S"] = SPLIT_SLICES
    args = []
    for a in kernels.manifest.entries[name].args:
        if not a.is_tensor:
            args.append(L)
            continue
        shape = [sizes[d] if isinstance(d, str) else d for d in a.shape]
        if a.name == "Ids":
            t = torch.randint(0, m.vocab_size, shape, device="cuda", generator=gen, dtype=torch.int32)
        elif a.name == "Q":
            t = torch.randint(0, 3, shape, device="cuda", generator=gen, dtype=torch.int32)
        elif a.name == "At":  # the readout's option markers: rows of the stream
            t = torch.randint(0, M, shape, device="cuda", generator=gen, dtype=torch.int32)
        elif a.name == "Lens":
            t = torch.full(shape, L, device="cuda", dtype=torch.int32)
        elif a.name in ("Cos", "Sin"):
            t = rope_tables(10000.0, m.head_dim, m.max_len, torch.device("cuda"))[a.name == "Sin"]
        elif a.name == "InvFreq":
            t = inv_freq(10000.0, m.head_dim).cuda()
        else:
            t = torch.randn(shape, device="cuda", generator=gen).to(TORCH_DTYPES[a.dtype])
            if len(shape) == 2 and a.name in ("W", "Wi"):
                t /= shape[1] ** 0.5
        args.append(t)
    return args


def _row(manifest, name: str, symbol: str, R: int, L: int, samples: list[float]) -> dict:
    m = manifest.model
    entry = manifest.entries[name]
    M = R * L
    flop = None
    weight = _weight_arg(entry)
    if weight is not None:
        flop = 2 * M * weight.shape[0] * weight.shape[1]
    elif entry.family == "attention":
        keys = L if "global" in name else min(L, 2 * m.window + 1)
        flop = 4 * R * m.num_heads * L * keys * m.head_dim
    median = statistics.median(samples)
    p90 = sorted(samples)[int(0.9 * (len(samples) - 1))]
    return {
        "tile_config": manifest.tile_config,
        "entry": name,
        "tier": symbol,
        "rows": R,
        "tokens": L,
        "M": M,
        "median_us": round(median, 3),
        "p90_us": round(p90, 3),
        "tflops": round(flop / (median * 1e-6) / 1e12, 2) if flop else "",
    }


def _driver() -> str:
    import subprocess

    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m recipe.kernel_bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--bundle", type=Path, action="append", required=True, help="bundle directory (repeatable)")
    p.add_argument("--output", type=Path, required=True, help="directory for kernel_timings.csv/.json")
    p.add_argument("--entry", action="append", help="time only this entry point (repeatable; default: all)")
    return p


if __name__ == "__main__":
    args = parser().parse_args()
    sys.exit(main(bundles=args.bundle, output=args.output, entries=args.entry))
