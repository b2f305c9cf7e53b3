"""A GEMM or attention tile sweep: candidate bundles built here, timed on the GPU beside a baseline bundle.

    python -m recipe.tile_sweep build recipe/sweeps/geglu-2026-12-03.json bundles/sweep      # TileLang, no GPU
    python -m recipe.tile_sweep time bundles/sweep --baseline bundles/optimized --output OUT   # the GPU, no TileLang

A sweep file is {candidate name: {GEMM or attention entry: [tier, ...]}}; `build` writes one bundle per candidate
(`laya-bundle build --candidates`), each holding only the entries it names. `time` runs
recipe.kernel_bench over the baseline and every candidate, each in a process of its own with a time limit
(OUT/kernel_timings.csv; a candidate that fails or runs past it is named in OUT/failed.txt), and writes
OUT/sweep.csv: per entry and M, each bundle's median in us, the fastest, and its gain on the baseline.
Correctness is the kernel tests' job: LAYA_TEST_BUNDLES=<candidate dirs> pytest tests/kernels.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path


def build(sweep: Path, out: Path, *, jobs: int) -> int:
    from bundle.build import main as build_bundle

    out.mkdir(parents=True, exist_ok=True)
    for name, tiers in json.loads(sweep.read_text()).items():
        if build_bundle(out=out / name, jobs=jobs, candidates=tiers) != 0:
            return 1
    return 0


# A bundle's timings take seconds; a kernel that never finishes (three attention blocks an SM did: docs/kernels.md)
# costs that bundle's column, not the sweep's output.
BUNDLE_LIMIT_S = 60


def time_candidates(sweep_dir: Path, *, baseline: Path, output: Path, limit_s: float = BUNDLE_LIMIT_S) -> int:
    candidates = sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").is_file())
    entries = sorted({e for p in candidates for e in json.loads((p / "manifest.json").read_text())["entries"]})
    rows, failed = [], []
    for bundle in [baseline, *candidates]:
        timings = time_bundle(bundle, entries, output / "bundles" / bundle.name, limit_s=limit_s)
        if isinstance(timings, str):
            print(f"tile_sweep: {bundle.name}: {timings}", file=sys.stderr)
            if bundle == baseline:
                return 1
            failed.append(f"{bundle.name}: {timings}")
            continue
        with open(timings) as f:
            rows += list(csv.DictReader(f))
    with open(output / "kernel_timings.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (output / "failed.txt").write_text("".join(f"{line}\n" for line in failed))
    summary = summarize(rows, baseline=baseline.name)
    write_summary(summary, output / "sweep.csv")
    for row in summary:
        print(
            f"{row['entry']:18} M {row['M']:>5}: baseline {row['baseline_us']:>8} us, best {row['best']} "
            f"{row['best_us']} us ({row['gain']}x)"
        )
    return 0


def time_bundle(bundle: Path, entries: list[str], output: Path, *, limit_s: float) -> Path | str:
    """recipe.kernel_bench over one bundle's `entries` in a process of its own: the path of its kernel_timings.csv,
    or why there is none."""
    cmd = [sys.executable, "-m", "recipe.kernel_bench", "--bundle", str(bundle), "--output", str(output)]
    cmd += [f"--entry={e}" for e in entries]
    try:
        status = subprocess.run(cmd, timeout=limit_s).returncode
    except subprocess.TimeoutExpired:
        return f"no timings after {limit_s:g} s (a kernel that never finishes?)"
    return output / "kernel_timings.csv" if status == 0 else f"kernel_bench exited {status}"


def summarize(rows: list[dict], *, baseline: str) -> list[dict]:
    """Per (entry, M): every bundle's median, the fastest bundle and its speedup over the baseline."""
    by_shape: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for r in rows:
        by_shape[r["entry"], int(r["M"])][r["bundle"]] = float(r["median_us"])
    summary = []
    for (entry, m), times in sorted(by_shape.items()):
        best = min(times, key=times.get)
        base = times.get(baseline)
        summary.append(
            {
                "entry": entry,
                "M": m,
                "baseline_us": base,
                "best": best,
                "best_us": times[best],
                "gain": round(base / times[best], 3) if base else "",
                **{f"{name}_us": t for name, t in sorted(times.items())},
            }
        )
    return summary


def write_summary(summary: list[dict], path: Path) -> None:
    """`summarize`'s rows as CSV. A candidate that holds another entry than the rest has no column in their
    rows: the header is the union of every row's, and a missing cell is empty."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in summary for k in row)), restval="")
        w.writeheader()
        w.writerows(summary)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m recipe.tile_sweep", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    b = sub.add_parser("build", help="one candidate bundle per entry of a sweep file (needs TileLang and nvcc)")
    b.add_argument("sweep", type=Path, help="sweep file: {candidate: {GEMM or attention entry: [tier, ...]}}")
    b.add_argument("out", type=Path, help="directory for the candidate bundles")
    b.add_argument("--jobs", type=int, default=0, help="parallel compiles (default: CPU count)")
    t = sub.add_parser("time", help="time the candidates beside a baseline bundle (needs a CUDA GPU)")
    t.add_argument("sweep_dir", type=Path, help="directory `build` wrote")
    t.add_argument("--baseline", type=Path, required=True, help="the bundle the candidates would replace tiers of")
    t.add_argument("--output", type=Path, required=True, help="directory for kernel_timings.csv and sweep.csv")
    t.add_argument("--limit", type=float, default=BUNDLE_LIMIT_S, help="seconds for one bundle's timings (%(default)s)")
    return p


if __name__ == "__main__":
    args = parser().parse_args()
    if args.command == "build":
        sys.exit(build(args.sweep, args.out, jobs=args.jobs))
    sys.exit(time_candidates(args.sweep_dir, baseline=args.baseline, output=args.output, limit_s=args.limit))
