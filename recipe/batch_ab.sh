#!/usr/bin/env bash
# An A/B of batch scoring end to end in one call on one machine: recipe.batch_throughput (5 batches of the
# benchmark's 1,000 states) on a fresh recipe.stack with the cuda executor (LAYA_EXECUTOR overrides it),
# alternately with an older tree of the service first on PYTHONPATH (base) and with this checkout (new), ROUNDS
# times (default 2). BASE holds the older app/, worker/ and laya_common/:
#   git archive COMMIT app worker laya_common | tar -x -C BASE
# On the GPU machine, after `source .gpu-site/env.sh` (recipe/gpu_steps.sh does it) and with PYTHONPATH holding
# this checkout:
#   recipe/batch_ab.sh BASE CHECKPOINT BUNDLE OUT [ROUNDS]
# Writes OUT/<variant>-<round>/ (result/batch_throughput.json, the stack's logs) and OUT/ab.json: each run's
# batches (states/s and phases) in the order run, and per variant the median over all its batches.
set -uo pipefail
[ "${1:-}" = "--help" ] && { sed -n 2,11p "$0"; exit 0; }
source "$(dirname "$0")/ab_stacks.sh"
alternate "${1:?usage: recipe/batch_ab.sh BASE CHECKPOINT BUNDLE OUT [ROUNDS]}" "${2:?checkpoint}" "${3:?bundle}" \
  "${4:?output directory}" "${5:-2}" python3 -m recipe.batch_throughput --batches 5 --output
python3 - "$4" <<'PY'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
runs, rates = {}, {}
for report in sorted(out.glob("*/result/batch_throughput.json"), key=lambda p: p.stat().st_mtime):
    batches = json.loads(report.read_text())["batches"]
    run = report.parent.parent.name
    runs[run] = [{"states_per_s": b["states_per_s"], "phases_ms": b["phases_ms"]} for b in batches]
    rates.setdefault(run.split("-")[0], []).extend(b["states_per_s"] for b in batches)
medians = {variant: statistics.median(r) for variant, r in rates.items()}
(out / "ab.json").write_text(json.dumps({"median_states_per_s": medians, "runs": runs}, indent=1) + "\n")
print("batch_ab: median states/s " + ", ".join(f"{v} {m:.0f}" for v, m in medians.items()))
PY
