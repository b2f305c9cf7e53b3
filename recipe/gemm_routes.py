"""Every GEMM entry point as the cuda executor can run it, the bundle's kernel against cuBLAS, per M (GPU).

    python -m recipe.gemm_routes --bundle bundles/optimized --output OUT

For each GEMM entry point and M (token rows of a forward pass), times the bundle's kernel (the tier the
loader picks for M) and the cuBLAS launch the executor would use instead (`worker.engine.executors.chain`:
torch.mm / addmm with the bias and ReLU, for GeGLU the GEMM into [M, 2F] and the elementwise gelu(a) * g, for
the *_acc_f32 entries the fp32-output addmm into the stream and the bias), both as `recipe.kernel_bench` times
kernels: inside one CUDA graph, weights cycling through copies past the L2, 3 warm-up replays and 20 timed
ones, a sample per launch. Writes OUT/gemm_routes.csv (every median) and OUT/gemm_routes.json: the M ranges
where cuBLAS was faster, per entry (what `gemm_routes.ROUTES` takes), and for the accumulating entries the
ranges where the bundle's kernel was faster (what `gemm_routes.ACCUMULATE_ON_BUNDLE` takes).

The split-K entries (`*_split_f32`) are timed as the chain runs them, with the norm that sums their slices into the
stream, against cuBLAS's accumulating GEMM and the plain norm they replace, at every M their tiers admit:
OUT/split_k.csv (per GEMM and norm pair; what `gemm_routes.SPLIT_ON_BUNDLE` takes).

With `--l2 hot` every launch reads one copy of its weight, which stays in L2 after the first: set beside a cold
run, the difference is what weights already in L2 (a prefetch) could take off each GEMM. The ranges it writes
are then not a routing table.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

import torch

from bundle.loader import Kernels
from recipe.kernel_bench import graph_launch_times_us, make_args, weight_copies
from worker.engine.executors.chain import cublas_accumulate, cublas_geglu, cublas_gemm
from worker.engine.executors.gemm_routes import ACCUMULATING

# (rows, tokens) per timed shape; M = rows x tokens runs from one short row to 16 full ones
SHAPES = ((1, 16), (1, 80), (1, 128), (1, 256), (3, 192), (2, 512), (5, 512), (8, 512), (16, 512))
M_VALUES = tuple(r * t for r, t in SHAPES)


def ranges(ms: list[int]) -> list[list[int | None]]:
    """Contiguous runs of the measured M values as [low, high] ranges; the last measured M runs unbounded."""
    out: list[list[int | None]] = []
    for m in ms:
        index = M_VALUES.index(m)
        low = M_VALUES[index - 1] + 1 if index else 1
        if out and out[-1][1] == low - 1:
            out[-1][1] = m
        else:
            out.append([low, m])
    if out and out[-1][1] == M_VALUES[-1]:
        out[-1][1] = None
    return out


def main(*, bundle: Path, output: Path, l2: str = "cold") -> int:
    """`l2`: "cold" (weights cycled past L2, as 28 layers of distinct weights are) or "hot" (one copy)."""
    copies = weight_copies if l2 == "cold" else _one_copy
    output.mkdir(parents=True)
    kernels = Kernels(bundle)
    kernels.init()
    rows, faster = [], {}
    splits = [name for name in kernels.manifest.entries if name.endswith("_split_f32")]
    if splits:
        time_split_k(kernels, splits, output / "split_k.csv", copies)
    gemms = [name for name, e in kernels.manifest.entries.items() if e.family == "gemm" and name not in splits]
    for name in gemms:
        faster[name] = []
        for (R, L), m in zip(SHAPES, M_VALUES, strict=True):
            timed = {}
            for route in ("tilelang", "cublas"):
                launches, arguments = launches_for(kernels, name, R, L, route, copies(kernels, name))
                timed[route] = statistics.median(graph_launch_times_us(launches))
                del arguments  # the tensors the launches were bound to, alive until here
            symbol = kernels.manifest.entries[name].tier_for(m).symbol
            rows.append(
                {
                    "entry": name,
                    "M": m,
                    "tilelang_symbol": symbol,
                    "tilelang_us": round(timed["tilelang"], 3),
                    "cublas_us": round(timed["cublas"], 3),
                    "ratio": round(timed["tilelang"] / timed["cublas"], 3),
                }
            )
            if (timed["cublas"] < timed["tilelang"]) != (name in ACCUMULATING):
                faster[name].append(m)
            print(
                f"{name:30} M={m:5} tilelang {timed['tilelang']:8.2f} us  cublas {timed['cublas']:8.2f} us", flush=True
            )
    with open(output / "gemm_routes.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    table = {name: ranges(ms) for name, ms in faster.items() if ms and name not in ACCUMULATING}
    bundle_accumulates = {name: ranges(ms) for name, ms in faster.items() if ms and name in ACCUMULATING}
    meta = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "bundle": kernels.describe(),
        "command": sys.argv,
        "l2": l2,
        "m_values": M_VALUES,
        "cublas_faster": table,
        "bundle_accumulates_faster": bundle_accumulates,
    }
    (output / "gemm_routes.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps({"cublas_faster": table, "bundle_accumulates_faster": bundle_accumulates}, indent=1))
    return 0


def time_split_k(kernels: Kernels, splits: list[str], path: Path, copies) -> None:
    """Each split-K GEMM and the norm summing its slices into the stream, against cuBLAS's accumulating GEMM and
    the plain norm, per M its tiers admit: microseconds a pair, into `path` (CSV). `copies(kernels, name)`: how
    many copies of a weight to cycle through."""
    rows = []
    for name in splits:
        for (R, L), m in zip(SHAPES, M_VALUES, strict=True):
            if not kernels.manifest.entries[name].admits(m):
                continue
            timed = {}
            for route in ("split", "cublas"):
                pairs, held = [], []
                for copy in range(copies(kernels, name)):
                    A, W, P = make_args(kernels, name, R, L, copy)
                    X, _, Wn, Bn, Y = make_args(kernels, "split_add_norm_bias_bf16", R, L, copy)
                    held.append((A, W, P, X, Wn, Bn, Y))
                    if route == "split":
                        pairs += [
                            getattr(kernels, name).bind(A, W, P),
                            kernels.split_add_norm_bias_bf16.bind(X, P, Wn, Bn, Y),
                        ]
                    else:
                        pairs += [cublas_accumulate(A, W, X), kernels.norm_bias_bf16.bind(X, Wn, Bn, Y)]
                while len(pairs) < 20:
                    pairs += pairs[:2]
                timed[route] = 2 * statistics.median(graph_launch_times_us(pairs))
                del held  # the tensors the launches were bound to, alive until here
            rows.append(
                {
                    "entry": name,
                    "M": m,
                    "split_us": round(timed["split"], 3),
                    "cublas_and_norm_us": round(timed["cublas"], 3),
                    "ratio": round(timed["split"] / timed["cublas"], 3),
                }
            )
            print(f"{name:30} M={m:5} split+norm {timed['split']:8.2f} us  cublas+norm {timed['cublas']:8.2f} us")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def launches_for(kernels: Kernels, name: str, R: int, L: int, route: str, copies: int) -> tuple[list, list]:
    """Launches of entry `name` at R rows of L tokens, cycling `copies` weight copies (the bundle's kernel or
    cuBLAS), and the argument tensors they are bound to (a bound launch holds their addresses, not the tensors)."""
    entry = kernels.manifest.entries[name]
    arg_sets = [make_args(kernels, name, R, L, copy) for copy in range(copies)]
    made = []
    for i in range(max(10, len(arg_sets))):
        args = arg_sets[i % len(arg_sets)]
        if route == "tilelang":
            made.append(getattr(kernels, name).bind(*args))
        elif name == "gemm_geglu_bf16":
            A, Wi, G = args
            G2 = torch.empty(A.shape[0], Wi.shape[0], dtype=torch.bfloat16, device="cuda")
            made.append(cublas_geglu(A, Wi, G, G2))
        else:
            names = [a.name for a in entry.args]
            bias = args[names.index("Bias")] if "Bias" in names else None
            if name in ACCUMULATING:
                made.append(cublas_accumulate(args[0], args[1], args[-1], bias=bias))
            else:
                made.append(cublas_gemm(args[0], args[1], args[-1], bias=bias, relu="relu" in name))
    return made, arg_sets


def _one_copy(kernels: Kernels, name: str) -> int:
    return 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(
        prog="python -m recipe.gemm_routes", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--bundle", type=Path, required=True, help="bundle directory (tables not needed)")
    p.add_argument("--output", type=Path, required=True, help="a directory that does not exist yet")
    p.add_argument(
        "--l2",
        choices=("cold", "hot"),
        default="cold",
        help="weights cycled past L2 (cold, the default: as a pass reads them) or one copy kept in L2 (hot)",
    )
    a = p.parse_args()
    if a.output.exists():
        p.error(f"{a.output} exists; give a fresh directory")
    sys.exit(main(bundle=a.bundle, output=a.output, l2=a.l2))
