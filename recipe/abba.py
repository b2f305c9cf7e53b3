"""ABBA: the original tile configuration against the optimized one, as original -> optimized -> optimized -> original.

    python -m recipe.abba --checkpoint CKPT --optimized BUNDLE --original BUNDLE --output OUT [--eager]

Four `recipe.benchmark` runs, each a fresh process with its own output directory under OUT (1-original,
2-optimized, 3-optimized, 4-original), the same inputs, warmups and samples; the original runs add
`--original-rope` (the configuration as laya's fast path rounds it). Both bundles must verify against the
checkpoint with the same tables (`laya-bundle export-tables` writes the same bytes for both; this checks it).
Writes OUT/abba.json and OUT/abba.md: per input, the medians of the four runs and the ratio
original / optimized (the speed-up) with its spread over the two pairs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bundle.export_tables import TABLE_FILES

ORDER = (
    ("1-original", "original"),
    ("2-optimized", "optimized"),
    ("3-optimized", "optimized"),
    ("4-original", "original"),
)


def same_tables(a: Path, b: Path) -> list[str]:
    return [name for name in TABLE_FILES.values() if (a / name).read_bytes() != (b / name).read_bytes()]


def main(*, checkpoint: Path, bundles: dict[str, Path], output: Path, eager: bool) -> int:
    differ = same_tables(bundles["optimized"], bundles["original"])
    if differ:
        print(f"abba: the two bundles' tables differ: {', '.join(differ)}", file=sys.stderr)
        return 1
    output.mkdir(parents=True)
    medians: dict[str, dict[str, float]] = {}
    for run, config in ORDER:
        cmd = [
            sys.executable,
            "-m",
            "recipe.benchmark",
            "--checkpoint",
            str(checkpoint),
            "--bundle",
            str(bundles[config]),
            "--output",
            str(output / run),
            *(["--eager"] if eager else []),
            *(["--original-rope"] if config == "original" else []),
        ]
        print("abba:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        summary = json.loads((output / run / "summary.json").read_text())
        medians[run] = {name: s["systems"]["ours"]["engine"]["median"] for name, s in summary["inputs"].items()}
    result = {}
    for name in medians[ORDER[0][0]]:
        original = [medians["1-original"][name], medians["4-original"][name]]
        optimized = [medians["2-optimized"][name], medians["3-optimized"][name]]
        ratios = [o / p for o in original for p in optimized]
        result[name] = {
            "medians_ms": {run: medians[run][name] for run, _ in ORDER},
            "speedup": sum(original) / sum(optimized),
            "speedup_min": min(ratios),
            "speedup_max": max(ratios),
        }
    mode = "eager" if eager else "graphs"
    record = {"mode": mode, "command": sys.argv, "inputs": result}
    (output / "abba.json").write_text(json.dumps(record, indent=1) + "\n")
    lines = [
        f"ABBA ({mode}): engine-time medians in ms; speed-up = original / optimized (spread over the pairs)",
        "",
        "| input | 1 original | 2 optimized | 3 optimized | 4 original | speed-up |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in result.items():
        m = r["medians_ms"]
        lines.append(
            f"| {name} | {m['1-original']:.3f} | {m['2-optimized']:.3f} | {m['3-optimized']:.3f} | "
            f"{m['4-original']:.3f} | {r['speedup']:.2f}x ({r['speedup_min']:.2f}-{r['speedup_max']:.2f}) |"
        )
    (output / "abba.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(
        prog="python -m recipe.abba", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True, help="a full-size checkpoint")
    p.add_argument("--optimized", type=Path, required=True, help="bundle of the optimized tile configuration")
    p.add_argument("--original", type=Path, required=True, help="bundle of the original tile configuration")
    p.add_argument("--output", type=Path, required=True, help="a directory that does not exist yet")
    p.add_argument("--eager", action="store_true", help="every run without CUDA graphs")
    a = p.parse_args()
    if a.output.exists():
        p.error(f"{a.output} exists; give a fresh directory")
    sys.exit(
        main(
            checkpoint=a.checkpoint,
            bundles={"optimized": a.optimized, "original": a.original},
            output=a.output,
            eager=a.eager,
        )
    )
