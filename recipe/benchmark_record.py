"""The committed record of one `recipe.benchmark --compare` run: docs/records/compare-h200-<date>.json.

    python -m recipe.benchmark_record OUT/compare docs/records/compare-h200-2026-12-03.json

Reads the run's summary.json and provenance.json (the output directory itself is not committed) and writes
per input every system's median and p90, our executor time, our ratios, the floors and the matmul share, plus
batch scoring, the ceilings, the commit, versions, GPU clocks, bundle hashes and the executor's memory at
startup (from startup.log: provenance.json describes the executor after the run, when the peers' models share
the process and a batch may have captured another graph).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

METHOD = (
    "B=1 engine time (Engine.decide / each peer's predict, request dict to typed answers on the host), 20 warmups "
    "and 100 samples per input and system, one process; executor time from the cuda executor's GPU events; floors "
    "from the FLOPs the model needs on real tokens over the bf16 matmul rate, and weights + fp32 stream bytes over "
    "the copy bandwidth, both measured in this run"
)
CLOCKS = ("clocks.sm", "clocks.mem")


def record(run: Path) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    provenance = json.loads((run / "provenance.json").read_text())
    executor = provenance["executor"]
    return {
        "date": datetime.date.today().isoformat(),
        "commit": provenance["versions"]["commit"],
        "gpu": provenance["gpu_before"]["name"],
        "driver": provenance["gpu_before"]["driver_version"],
        "clocks_before": {k: provenance["gpu_before"][k] for k in CLOCKS},
        "clocks_after": {k: provenance["gpu_after"][k] for k in CLOCKS},
        "versions": provenance["versions"],
        "command": " ".join(["/".join(Path(provenance["command"][0]).parts[-2:]), *provenance["command"][1:]]),
        "method": METHOD,
        "ceilings": summary["ceilings"],
        "executor": {k: v for k, v in executor.items() if k != "memory"},
        "memory_at_startup": _startup_memory(run / "startup.log"),
        "inputs": {name: _input(v) for name, v in summary["inputs"].items()},
        "batch_scoring": summary.get("batch_scoring"),
    }


def _startup_memory(log: Path) -> dict | None:
    """The memory record in startup.log's line for our executor ("ours: ... {json} (load + warmup ...)")."""
    for line in log.read_text().splitlines():
        if line.startswith("ours:") and "{" in line:
            return json.loads(line[line.index("{") : line.rindex("}") + 1]).get("memory")
    return None


def _input(v: dict) -> dict:
    systems = v["systems"]
    return {
        "shape": v["shape"],
        "median_ms": {k: round(s["engine"]["median"], 4) for k, s in systems.items()},
        "p90_ms": {k: round(s["engine"]["p90"], 4) for k, s in systems.items()},
        "ours_executor_median_ms": round(systems["ours"]["executor"]["median"], 4),
        "speedup": v["speedup"],
        "floors_ms": {k: round(f, 4) for k, f in v["floors_ms"].items()},
        "matmul_share": round(v["matmul_share"], 4),
        "executor_over_bytes_floor": round(v["over_bytes_floor"], 3),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m recipe.benchmark_record",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", type=Path, help="the --compare run's output directory (summary.json, provenance.json)")
    p.add_argument("out", type=Path, help="the record to write, e.g. docs/records/compare-h200-2026-12-03.json")
    return p


if __name__ == "__main__":
    args = parser().parse_args()
    args.out.write_text(json.dumps(record(args.run), indent=1) + "\n")
    print(args.out)
    sys.exit(0)
