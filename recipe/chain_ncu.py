"""Inside each kernel of two encoder layers of the chain, as Nsight Compute sees it: where a small input's time goes.

    recipe/chain_ncu.sh CKPT BUNDLE OUT 1x80 ...     (on the GPU: ncu around `run`, then `summary` of its raw page)
    python -m recipe.chain_ncu summary OUT/1x80.csv OUT/1x80.steps.json

`run` warms the bucket's graph (valid inputs in place), then launches the chain's steps eagerly up to the third
layer and, with the profiler on, the steps of layers 2 and 3 (a local and a global layer), once; it writes the
profiled steps' entries and what runs them to OUT/steps.json (`--steps`). `summary` reads ncu's raw CSV (one row a
kernel) and writes, per kernel in launch order: its duration, DRAM throughput, SM throughput, the share of the
kernel's elapsed cycles its busiest SM was active, achieved occupancy, grid and block, and its warps' top stalls.
ncu runs each kernel alone with the caches flushed, so a kernel's time here lacks the overlap the graph gives it.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

FIRST_LAYER = 2  # layers 2 (local) and 3 (global): past the first layer's cold start

COLUMNS = {  # ncu raw metric -> our column
    "gpu__time_duration.sum": "us",
    "dram__bytes.sum.per_second": "DRAM TB/s",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "DRAM %",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM %",
    "sm__cycles_active.max": "busiest SM active %",  # of the kernel's elapsed cycles: the rest is launch and drain
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy %",
    "launch__grid_size": "grid",
    "launch__block_size": "block",
    "launch__registers_per_thread": "regs",
}
# WarpStateStats: the cycles a warp waited for each reason, per issued instruction (less its "not issued" twins)
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio")


def run(checkpoint: Path, bundle: Path, bucket: str, steps_out: Path, split_k: bool) -> int:
    import torch

    from worker.engine.engine import Engine
    from worker.engine.executors import ExecutorOptions

    R, L = map(int, bucket.split("x"))
    engine = Engine(checkpoint, executor="cuda", options=ExecutorOptions(bundle=bundle, split_k=split_k or None))
    executor = engine.executor
    executor.warmup([(R, L)])
    steps = executor.plan((R, L))
    layer_starts = [i for i, step in enumerate(steps) if step.entry == "gemm_qkv_bf16"]  # each layer opens with QKV
    first, last = layer_starts[FIRST_LAYER], layer_starts[FIRST_LAYER + 2]
    for step in steps[:first]:
        step()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for step in steps[first:last]:
        step()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    steps_out.write_text(json.dumps([[s.entry, s.impl] for s in steps[first:last]], indent=1) + "\n")
    return 0


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def summary(ncu_csv: Path, steps_json: Path | None) -> str:
    lines = ncu_csv.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    reader = csv.reader(lines[start:])
    header, rows = next(reader), [row for row in reader if row]
    unit = dict(zip(header, rows.pop(0), strict=False)) if rows and not rows[0][0] else {}  # the units row
    rows = [dict(zip(header, row, strict=False)) for row in rows]
    stalls_of = {m: found[1] for m in header if (found := STALL.fullmatch(m)) and not found[1].endswith("_not_issued")}
    steps = json.loads(steps_json.read_text()) if steps_json else []
    out = [
        "| # | step | kernel | " + " | ".join(COLUMNS.values()) + " | top stalls (cycles a warp) |",
        "|" + "---|" * (len(COLUMNS) + 4),
    ]
    for i, row in enumerate(rows):
        cells = []
        for metric in COLUMNS:
            value, number = row.get(metric, ""), _number(row.get(metric, ""))
            if metric == "gpu__time_duration.sum" and number is not None:
                value = f"{number / 1e3:.2f}" if unit.get(metric) in ("nsecond", "ns") else f"{number:.2f}"
            elif metric == "dram__bytes.sum.per_second" and number is not None:
                value = f"{number / 1e3:.2f}" if unit.get(metric, "").startswith("G") else f"{number:.2f}"
            elif metric == "sm__cycles_active.max" and number is not None:
                value = f"{100 * number / (_number(row.get('gpc__cycles_elapsed.max', '')) or 1):.0f}"
            elif number is not None and "." in value:
                value = f"{number:.1f}"
            cells.append(value)
        stalls = sorted(((reason, _number(row[m]) or 0.0) for m, reason in stalls_of.items()), key=lambda kv: -kv[1])
        top = ", ".join(f"{name} {cycles:.1f}" for name, cycles in stalls[:3] if cycles > 0)
        step = " ".join(steps[i]) if len(steps) == len(rows) else ""  # a step of cuBLAS's may launch two kernels
        name = row.get("Kernel Name", "")[:48]
        out.append(f"| {i} | {step} | `{name}` | " + " | ".join(cells) + f" | {top} |")
    return "\n".join(out) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m recipe.chain_ncu",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="launch two layers of the chain under ncu (GPU)")
    r.add_argument("--checkpoint", type=Path, required=True, help="a full-size checkpoint")
    r.add_argument("--bundle", type=Path, required=True, help="a bundle verified against it")
    r.add_argument("--bucket", default="1x80", help="rows x tokens (default 1x80)")
    r.add_argument("--steps", type=Path, required=True, help="where the profiled steps' entries go (JSON)")
    r.add_argument("--split-k", action="store_true", help="the split-K GEMMs wherever the bundle has them")
    s = sub.add_parser("summary", help="a markdown table from ncu's raw CSV")
    s.add_argument("csv", type=Path, help="ncu --csv --page raw output")
    s.add_argument("steps", type=Path, nargs="?", help="run's --steps file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "run":
        return run(args.checkpoint, args.bundle, args.bucket, args.steps, args.split_k)
    sys.stdout.write(summary(args.csv, args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
